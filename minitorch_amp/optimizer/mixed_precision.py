"""What AMP adds to an optimizer: fp32 master weights, and skipping a step on overflow.

Master weights (``multi_precision=True``, Paddle's ``_create_master_weight``): a float16
parameter cannot take small steps, since ``p + lr * g`` rounds back to ``p`` whenever the step
is below half of float16's spacing at ``p`` (about ``p / 2048``). So the optimizer keeps an
fp32 copy, the master, updates *that*, and writes the float16 parameter from it::

    master = float32(p16)                  # once, at the first update (exact)
    master = update(master, float32(g))    # every step, in fp32, accumulators fp32
    p16 = round_to_nearest_even(master)    # every step: the optimize-cast

Many steps too small for float16 add up on the master until they move ``p16``.

Example (each step is 1e-4, a tenth of float16's spacing at 1.0):
    >>> import numpy as np
    >>> from minitorch_amp.nn.parameter import Parameter
    >>> from minitorch_amp.optimizer import SGD
    >>> w = Parameter(np.array([1.0], dtype="float16"))
    >>> opt = SGD(learning_rate=1e-4, parameters=[w], multi_precision=True)
    >>> for _ in range(20):
    ...     w.grad = np.array([-1.0], dtype="float16")
    ...     opt.step()
    >>> opt._master_weights[w.name].numpy(), w.numpy()
    (array([1.0020003], dtype=float32), array([1.002], dtype=float16))

Skipping (``found_inf``): GradScaler hands the optimizer a flag saying the scaled gradients
overflowed; that step must change nothing at all, so training resumes from exactly the
state before it.
"""

from __future__ import annotations

import numpy as np

from ..autograd.ops.cast import report_cast
from ..autograd.tensor import Tensor
from ..backend import device as _device
from ..backend import dtypes as _dtypes


def check_master_name(param: Tensor, owners: dict) -> None:
    """Refuse a float16 parameter whose master cannot be keyed by its name; ``owners`` maps
    each name that has (or is getting) a master to ``id()`` of its parameter.

    Raises:
        ValueError: ``param`` has no name, or another parameter with its name owns a master.
    """
    name = param.name
    if not name:
        raise ValueError(
            "multi_precision keys master weights by parameter name; this float16 Tensor has "
            "no name (use Parameter, which names itself, or set tensor.name)"
        )
    if owners.get(name, id(param)) != id(param):
        raise ValueError(
            f"two parameters are both named {name!r}; master weights are keyed by parameter "
            "name (as in Paddle), so give each parameter a unique name"
        )


def seed_master(view, param: Tensor, master: Tensor | None, seen: tuple | None) -> str | None:
    """Write ``param``'s master weight into ``view`` (a float32 array of its shape): the
    current master's values, or an exact cast of ``param`` when it has none (or one of
    another shape). Returns a warning to give, or None.

    ``seen`` is ``(param._version, weakref to param._data)`` as the optimizer last left the
    parameter: a newer version (``set_value``, ``Layer.set_state_dict``) or another array
    (``Layer.to``, ``float()`` then ``float16()``) means it was changed behind the
    optimizer's back.

    NOTE: without this, rolling a model back to a checkpoint would be undone by the next step:
    the update starts from the master, and the optimize-cast writes the old weights back.
    Where a master no longer rounds to its parameter it is re-seeded from it (exact), element
    by element on the device (no host read): elements the outside write left alone keep their
    fp32 digits, so ``float()`` then ``float16()`` loses nothing.
    """
    data = param._data
    if master is None or master._data.shape != data.shape:
        view[...] = data  # float16 -> float32: exact
        report_cast(data.dtype)  # operator statistics: Paddle casts its master weight too
        return None
    view[...] = master._data
    if seen is None or (seen[0] == param._version and seen[1]() is data):
        return None
    xp = _device.get_array_module(data)
    stale = view.astype(data.dtype) != data
    xp.copyto(view, data.astype(_dtypes.float32), where=stale)
    return (
        f"parameter {param.name!r} was written outside the optimizer since its last update "
        "(set_value, set_state_dict, Layer.to, ...): its fp32 master weight follows it, "
        "re-seeded where the two differ"
    )


def low_precision_warning(optimizer_name: str) -> str:
    """Paddle's warning for float16 parameters updated without master weights."""
    return (
        "Accumulating with FP16/BF16 in optimizer can lead to poor accuracy or slow "
        "convergence. Consider using multi_precision=True option of the "
        f"{optimizer_name} optimizer."
    )


def as_found_inf(flag):
    """The one form of found_inf the step uses: None, or a bool array of shape [1].

    Paddle's ``_set_auxiliary_var('found_inf', ...)`` may hand over a Python bool, a Tensor or
    an array; a device array stays on the device (anything but a bool [1] is reduced there).
    """
    if flag is None:
        return None
    if isinstance(flag, Tensor):
        flag = flag._data
    if not _device.is_array(flag):
        return np.array([bool(flag)])
    if flag.dtype == np.bool_ and flag.shape == (1,):
        return flag
    return (flag != 0).any().reshape(1)
