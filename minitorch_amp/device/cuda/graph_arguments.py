"""The arguments of a graphed step (``graphs.graphed``, ``graphs.wrap_cuda_graph``): which
Tensors are used as they are and which are fed through static copies, a warm-up call's
outputs returned as an eager call returns them, and what ``wrap_cuda_graph`` compares.

A Tensor that requires grad (a Parameter, a weight made by hand, an input whose gradient the
step wants) is used as it is: the step updates it, and its gradient reaches it and what it
was computed from. Every other Tensor is copied into a static copy per signature, which the
graph reads at its fixed address.
"""

from __future__ import annotations

import copy

from ...autograd.functions_index import clone
from ...autograd.tensor import Tensor
from ...backend import device as _device

__all__ = [
    "arguments_seen",
    "as_eager",
    "check_counts",
    "is_grad_input",
    "pending_backward",
    "rebuild",
    "same_argument",
    "used_as_it_is",
]


def used_as_it_is(t: Tensor) -> bool:
    """A Tensor that requires grad: never copied (a copy would cut it off from its gradient)."""
    return not t.stop_gradient


def is_grad_input(t: Tensor) -> bool:
    """A Tensor that requires grad and is not a Parameter: it may be new at each call."""
    return not t.stop_gradient and not t.persistable


def pending_backward(outputs) -> bool:
    """Whether an output still holds a recorded graph that no backward has run through."""
    return any(t._node is not None and not t._node.freed for t in _tensors_in(outputs))


def as_eager(outputs, statics, leaves):
    """A warm-up call's outputs as an eager call returns them: a static copy that comes
    back is the caller's own tensor, a view of one is copied (the next call rewrites it)."""
    if not any(s is not t for s, t in zip(statics, leaves)):
        return outputs  # (nothing was copied)
    caller = {id(s): t for s, t in zip(statics, leaves) if s is not t}
    arrays = {id(s._data) for s in statics if id(s) in caller}

    def fix(value):
        if isinstance(value, Tensor):
            if id(value) in caller:
                return caller[id(value)]
            return clone(value) if _views(value._data, arrays) else value
        if isinstance(value, (list, tuple)):
            items = [fix(v) for v in value]
            kind = type(value)
            return kind._make(items) if hasattr(kind, "_make") else kind(items)
        if isinstance(value, dict):
            fixed = copy.copy(value)
            for k, v in value.items():
                fixed[k] = fix(v)
            return fixed
        return value

    return fix(outputs)


def _views(array, arrays: set) -> bool:
    base = getattr(array, "base", None)
    while base is not None:
        if id(base) in arrays:
            return True
        base = getattr(base, "base", None)
    return False


def _tensors_in(value):
    if isinstance(value, Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors_in(v)


def check_counts(warmup, cache_size) -> None:
    """Refuse a ``warmup`` or ``cache_size`` that is not an int >= 1 (ValueError)."""
    for name, value in (("warmup", warmup), ("cache_size", cache_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")


def rebuild(value, tensors):
    """``value`` with each Tensor replaced by the next of ``tensors`` (as _describe found them)."""
    if isinstance(value, Tensor):
        return next(tensors)
    if isinstance(value, (list, tuple)):
        items = [rebuild(v, tensors) for v in value]
        kind = type(value)
        return kind._make(items) if hasattr(kind, "_make") else kind(items)  # a namedtuple
    if isinstance(value, dict):
        rebuilt = copy.copy(value)
        for k, v in value.items():
            rebuilt[k] = rebuild(v, tensors)
        return rebuilt
    return value


def arguments_seen(args, kwargs) -> list:
    """``wrap_cuda_graph``'s view of a call's arguments, in order (kept alive with its graph): each
    Tensor, also inside lists, tuples and dicts, with the array it holds; dict keys and
    keyword names; every other value."""
    found: list = []

    def walk(value):
        if isinstance(value, Tensor):
            found.extend((value, value._data))
        elif isinstance(value, (list, tuple)):
            found.append(type(value))
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            found.append(type(value))
            for key, item in value.items():
                found.append(key)
                walk(item)
        else:
            found.append(value)

    walk(args)
    walk(dict(sorted(kwargs.items())))
    return found


def same_argument(a, b) -> bool:
    """An argument the graph can replay for: the very Tensor or array captured, or another
    value equal to the captured one (a float by its bits: -0.0 is not 0.0, NaN is NaN)."""
    if a is b:
        return True
    if isinstance(a, Tensor) or _device.is_array(a) or type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a.hex() == b.hex()
    try:
        return bool(a == b)
    except Exception:  # (an object whose == does not give one truth value)
        return False
