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

import warnings
import weakref

import numpy as np

from ..autograd.tensor import Tensor
from ..backend import device as _device
from ..backend import dtypes as _dtypes
from ..backend import graphs as _graphs
from ..backend import sync as _sync


def get_master_weight(masters: dict, owners: dict, param: Tensor, seen: dict) -> Tensor:
    """``masters[param.name]``, created as an exact fp32 cast of ``param`` when missing, and
    made to follow ``param`` if something else wrote it since the optimizer last did.

    Args:
        masters: ``param.name -> Tensor(float32)``, the optimizer's ``_master_weights``.
        owners: ``param.name -> id(param)``, to catch two parameters sharing a name.
        param: a float16 parameter.
        seen: ``param.name -> (param._version, weakref to param._data)`` as the optimizer last
            left them: a newer version (``set_value``, ``Layer.set_state_dict``) or another
            array (``Layer.to``, ``float()`` then ``float16()``) means the parameter was
            changed behind the optimizer's back.

    NOTE: without this, rolling a model back to a checkpoint would be undone by the next step:
    the update starts from the master, and the optimize-cast writes the old weights back.
    Where a master no longer rounds to its parameter it is re-seeded from it (exact), element
    by element on the device (no host read): elements the outside write left alone keep their
    fp32 digits, so ``float()`` then ``float16()`` loses nothing. One warning says so.

    Raises:
        ValueError: ``param`` has no name, or another parameter with its name owns the master.
    """
    name = param.name
    if not name:
        raise ValueError(
            "multi_precision keys master weights by parameter name; this float16 Tensor has "
            "no name (use Parameter, which names itself, or set tensor.name)"
        )
    master = masters.get(name)
    if master is not None and owners.get(name, id(param)) != id(param):
        raise ValueError(
            f"two parameters are both named {name!r}; master weights are keyed by parameter "
            "name (as in Paddle), so give each parameter a unique name"
        )
    data = param._data
    if master is not None and master._data.shape != data.shape:
        master = None  # a different tensor now: start over from it
    if master is None:
        _graphs.refuse_in_capture(
            "creating a master weight", "run the step eagerly once before capturing it"
        )
        master = Tensor._wrap(data.astype(_dtypes.float32))  # float16 -> float32: exact
        master.name = f"{name}_fp32_master_0"
        master.persistable = True
        masters[name] = master
    else:
        last = seen.get(name)
        if last is not None and (last[0] != param._version or last[1]() is not data):
            _follow(master._data, data, name)
    owners[name] = id(param)
    seen[name] = (param._version, weakref.ref(data))
    return master


def _follow(master, data, name: str) -> None:
    """Re-seed ``master`` from ``data`` where it no longer rounds to it (on the device)."""
    xp = _device.get_array_module(data)
    stale = master.astype(data.dtype) != data
    xp.copyto(master, data.astype(_dtypes.float32), where=stale)
    warnings.warn(
        f"parameter {name!r} was written outside the optimizer since its last update "
        "(set_value, set_state_dict, Layer.to, ...): its fp32 master weight follows it, "
        "re-seeded where the two differ",
        stacklevel=5,
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


def found_inf_is_set(flag, reader: str | None = None) -> bool:
    """Whether ``flag`` (a bool array of shape [1], see :func:`as_found_inf`) is set.

    NOTE: a flag on the GPU is read with one host sync here, which stalls the training step
    until the GPU catches up. So the optimizers do not call this for a device flag: their
    fused update (``fused_step.py``, ``cuda/optim.cu``) takes ``found_inf`` as an input and
    leaves parameters and state untouched on the device when it is set (as Paddle's adam
    kernel does with ``SkipUpdate``). Only an optimizer without a fused update reads it
    here, and ``reader`` names it for the sync debug mode (None: the NumPy twin of a device
    skip, whose flag is on the host on every machine it runs on).
    """
    if reader is not None:
        _sync.host_read(reader)
    return bool(_device.asnumpy(flag).any())
