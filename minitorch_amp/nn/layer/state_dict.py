"""A layer's state dict: collecting it (with hooks), and loading one by copying in place.

``Layer.state_dict()`` hands out the layer's own tensors, then runs each layer's state-dict
hooks on the result (``decorate(save_dtype=...)`` casts the entries there). Loading goes the
other way and must not replace the tensors, because an optimizer (and its master weights)
holds the very Parameter objects. So values are *copied into* the existing arrays, found
through ``state_dict(use_hook=False)``: a hook's cast copies are not the layer's tensors.

NOTE: the obvious loop (check a key, copy it, go on) leaves a half-loaded model behind when
the fifth key has the wrong shape. Every shape is checked before the first byte is written.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict

from ...autograd.tensor import Tensor
from ...backend import device as _device


def collect_state_dict(
    layer, destination, include_sublayers: bool, prefix: str, use_hook: bool
) -> OrderedDict:
    """What ``Layer.state_dict`` returns: parameters, persistable buffers, then sublayers.

    After a layer's entries and its sublayers' are in, its hooks run on the whole dict so far
    (Paddle's order); a hook returning a value replaces the dict.
    """
    out = OrderedDict() if destination is None else destination
    for name, value in layer._parameters.items():
        if value is not None:
            out[prefix + name] = value
    for name, value in layer._buffers.items():
        if value is not None and name not in layer._non_persistable_buffer_names_set:
            out[prefix + name] = value
    if include_sublayers:
        for name, sub in layer._sub_layers.items():
            if sub is not None:
                out = collect_state_dict(sub, out, True, f"{prefix}{name}.", use_hook)
    if use_hook:
        for hook in list(layer._state_dict_hooks.values()):
            result = hook(out)
            if result is not None:
                out = result
    return out


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
    for key, target in layer.state_dict(use_hook=False).items():
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
        target._version += 1  # an optimizer's fp32 master of it must follow
    if missing:
        warnings.warn(
            f"set_state_dict: no value for {missing}; those tensors keep their values",
            stacklevel=3,
        )
    return missing, [k for k in state_dict if k not in used]
