"""Loading a state dict into a layer: check everything first, then copy in place.

``Layer.state_dict()`` hands out the layer's own tensors; loading goes the other way and must
not replace them, because an optimizer (and its master weights) holds the very Parameter
objects. So values are *copied into* the existing arrays.

NOTE: the obvious loop (check a key, copy it, go on) leaves a half-loaded model behind when
the fifth key has the wrong shape. Every shape is checked before the first byte is written.
"""

from __future__ import annotations

import warnings

from ...autograd.tensor import Tensor
from ...backend import device as _device


def load_state_dict(layer, state_dict: dict, use_structured_name: bool = True):
    """Copy ``state_dict``'s values into ``layer``'s parameters and persistable buffers.

    Values may be Tensors or arrays (NumPy or CuPy), on any device; each is cast to the
    target's dtype and moved to its device. Keys are structured names (``fc.weight``) or,
    with ``use_structured_name=False``, the tensors' unique names (``linear_0.w_0``).

    Returns:
        ``(missing_keys, unexpected_keys)``, as Paddle's ``set_state_dict`` does; missing
        tensors keep their values and a warning lists them.

    Raises:
        ValueError: a value's shape differs from its target's; nothing was written.

    Example:
        >>> from minitorch_amp import nn
        >>> src, dst = nn.Linear(2, 2), nn.Linear(2, 2)
        >>> weight = dst.weight
        >>> dst.set_state_dict(src.state_dict())
        ([], [])
        >>> dst.weight is weight, bool((dst.weight.numpy() == src.weight.numpy()).all())
        (True, True)
    """
    plan, missing, used = [], [], set()
    for key, target in layer.state_dict().items():
        name = key if use_structured_name else (target.name or key)
        value = state_dict.get(name)
        if value is None:
            missing.append(name)
            continue
        used.add(name)
        array = value._data if isinstance(value, Tensor) else value
        if not _device.is_array(array):
            array = _device.asnumpy(array)  # lists and numbers
        if list(array.shape) != target.shape:
            raise ValueError(
                f"set_state_dict: {name!r} has shape {list(array.shape)} in the state dict but "
                f"the layer expects {target.shape}; nothing was loaded"
            )
        plan.append((target, array))
    for target, array in plan:  # all checks passed: now write
        array = _device.to_place(array, target.place)
        target._data[...] = array.astype(target.dtype, copy=False)
    if missing:
        warnings.warn(
            f"set_state_dict: no value for {missing}; those tensors keep their values",
            stacklevel=3,
        )
    return missing, [k for k in state_dict if k not in used]
