"""The arguments Tensor's methods and the creation functions take, made plain: an axis, a
shape (sizes checked to be integers, as Paddle checks them) and an index (Tensors inside it
replaced by their arrays)."""

from __future__ import annotations

import numpy as np

from .tensor import Tensor


def _axis_arg(axis):
    if axis is None or isinstance(axis, int):
        return axis
    if isinstance(axis, Tensor):
        return tuple(int(a) for a in axis._to_host("an axis given as a Tensor").reshape(-1))
    return tuple(int(a) for a in axis)


def _shape_arg(shape):
    """A shape as a tuple of ints: from an int, a list or tuple of ints (or of one-element
    integer Tensors), or an integer Tensor; a float or a string is a TypeError (Paddle)."""
    if isinstance(shape, Tensor):
        _check_size(shape, f"a {shape.dtype} Tensor")
        return tuple(int(n) for n in shape._to_host("a shape given as a Tensor").reshape(-1))
    if type(shape) is int or isinstance(shape, np.integer):
        return (int(shape),)
    if not isinstance(shape, (list, tuple)):
        raise TypeError(f"a shape is an int, a list or tuple of ints, or a Tensor; got {shape!r}")
    for n in shape:
        if type(n) is not int:  # (the common case costs one comparison)
            _check_size(n, f"{shape!r:.80}")
    return tuple(int(n) for n in shape)


def _check_size(n, shown: str) -> None:
    """Raise unless ``n`` is an integer or an integer Tensor (a bool is not a size)."""
    dtype = n._data.dtype if isinstance(n, Tensor) else np.dtype(type(n))
    if dtype.kind not in "iu":
        raise TypeError(f"a shape's sizes must be integers, got {shown}")


def _unwrap_index(index):
    """Replace Tensors inside an index by their arrays."""
    if isinstance(index, Tensor):
        return index._data
    if isinstance(index, tuple):
        return tuple(i._data if isinstance(i, Tensor) else i for i in index)
    if isinstance(index, list):
        return [i._data if isinstance(i, Tensor) else i for i in index]
    return index
