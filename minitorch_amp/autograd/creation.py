"""Functions that make new tensors: from data, filled, ranges and random.

Every random function draws from ``backend.random``, so ``seed(n)`` makes them reproducible.
``shape`` may be a list/tuple of ints, an int, or a 1-D integer Tensor (Paddle). PyTorch's
spread-out shape, ``randn(32, 16)``, puts 16 in the dtype slot: the error says
``randn([32, 16])``.
"""

from __future__ import annotations

import numbers

from ..backend import device as _device
from ..backend import device_errors as _errors
from ..backend import dtypes as _dtypes
from ..backend import memory as _memory
from ..backend import random as _random
from .tensor import Tensor, _shape_arg


def _place(place=None):
    return _device.current_place() if place is None else _device.parse_device(place)


def _float_dtype(dtype):
    dt = _dtypes.default_float() if dtype is None else _dtypes.convert_dtype(dtype)
    if not _dtypes.is_floating(dt):
        raise TypeError(f"random values need a floating dtype, got {dt}")
    return dt


def _is_count(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _no_spread_shape(function: str, head: tuple, values: tuple, tail: int = 0) -> None:
    """Refuse PyTorch's spread-out shape: ``randn(32, 16)`` lands 16 in the dtype slot.

    ``values`` are the arguments from the shape to the dtype slot, then the place; the last
    ``tail`` of the numbers belong after the shape (``full``'s fill value).
    """
    *before, dtype, place = values
    if _is_count(dtype):
        numbers_given = (*before, dtype, *((place,) if _is_count(place) else ()))
        cut = len(numbers_given) - tail
        raise _errors.spread_shape(function, head, numbers_given[:cut], numbers_given[cut:], dtype)


def _checked_shape(shape):
    shape = _shape_arg(shape)
    if any(n < 0 for n in shape):
        raise ValueError(f"shape {list(shape)} has a negative dimension")
    return shape


def to_tensor(data, dtype=None, place=None, stop_gradient: bool = True) -> Tensor:
    """A new tensor holding a copy of ``data`` (Paddle's ``paddle.to_tensor``).

    Example:
        >>> import minitorch_amp as mt
        >>> mt.to_tensor([[1, 2], [3, 4]]).dtype
        dtype('int64')
    """
    if isinstance(data, Tensor):
        data = data._data
    t = Tensor(data, dtype=dtype, place=place, stop_gradient=stop_gradient)
    if t._data is data:  # Tensor() avoids copies; to_tensor promises one
        t._data = t._data.copy()
        _memory.track(t._data)
    return t


def full(shape, fill_value, dtype=None, place=None) -> Tensor:
    """A tensor of ``shape`` filled with ``fill_value``, of ``dtype``; without one, of the
    default float dtype (float32) whatever the value, as in Paddle (PyTorch's ``full(.., 3)``
    infers int64; pass ``dtype="int64"`` here).

    Example:
        >>> import minitorch_amp as mt
        >>> mt.full([2], 3).numpy(), mt.full([2], 3, "int64").numpy()
        (array([3., 3.], dtype=float32), array([3, 3]))
    """
    _no_spread_shape("full", (), (shape, fill_value, dtype, place), tail=1)
    dt = _dtypes.default_float() if dtype is None else _dtypes.convert_dtype(dtype)
    p = _place(place)
    return Tensor._wrap(_device.xp_for(p).full(_checked_shape(shape), fill_value, dtype=dt))


def empty(shape, dtype=None) -> Tensor:
    """A tensor of ``shape`` whose values are whatever the memory held (Paddle's
    ``paddle.empty``; ``dtype`` defaults to the default float dtype). Write it before
    reading it.

    Example:
        >>> import minitorch_amp as mt
        >>> mt.empty([2, 3]).shape
        [2, 3]
    """
    _no_spread_shape("empty", (), (shape, dtype, None))
    dt = _dtypes.default_float() if dtype is None else _dtypes.convert_dtype(dtype)
    xp = _device.xp_for(_place())
    return Tensor._wrap(xp.empty(_checked_shape(shape), dtype=dt))


def empty_like(x: Tensor, dtype=None) -> Tensor:
    """An uninitialised tensor of ``x``'s shape, dtype (or ``dtype``) and place."""
    dt = x.dtype if dtype is None else _dtypes.convert_dtype(dtype)
    return Tensor._wrap(_device.xp_for(x.place).empty(x._data.shape, dtype=dt))


def zeros(shape, dtype=None, place=None) -> Tensor:
    _no_spread_shape("zeros", (), (shape, dtype, place))
    return full(shape, 0.0, _dtypes.default_float() if dtype is None else dtype, place)


def ones(shape, dtype=None, place=None) -> Tensor:
    _no_spread_shape("ones", (), (shape, dtype, place))
    return full(shape, 1.0, _dtypes.default_float() if dtype is None else dtype, place)


def zeros_like(x: Tensor, dtype=None) -> Tensor:
    return full(x.shape, 0, dtype or x.dtype, x.place)


def ones_like(x: Tensor, dtype=None) -> Tensor:
    return full(x.shape, 1, dtype or x.dtype, x.place)


def full_like(x: Tensor, fill_value, dtype=None) -> Tensor:
    """A tensor of ``x``'s shape and place filled with ``fill_value``, of ``x``'s dtype unless
    ``dtype`` is given (Paddle and PyTorch alike)."""
    return full(x.shape, fill_value, dtype or x.dtype, x.place)


def arange(start=0, end=None, step=1, dtype=None, place=None) -> Tensor:
    """Values from ``start`` up to (not including) ``end`` by ``step``; ``arange(5)`` = 0..4."""
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ValueError("arange: step must not be 0")
    if dtype is None:
        is_int = all(isinstance(v, int) for v in (start, end, step))
        dtype = _dtypes.int64 if is_int else _dtypes.default_float()
    p = _place(place)
    return Tensor._wrap(
        _device.xp_for(p).arange(start, end, step, dtype=_dtypes.convert_dtype(dtype))
    )


def randn(shape, dtype=None, place=None) -> Tensor:
    """Standard normal samples (drawn in float32/64, then cast)."""
    _no_spread_shape("randn", (), (shape, dtype, place))
    dt = _float_dtype(dtype)
    p = _place(place)
    rng = _random.generator(_device.xp_for(p))
    draw_dtype = "float64" if dt == _dtypes.float64 else "float32"
    return Tensor._wrap(
        rng.standard_normal(_checked_shape(shape), dtype=draw_dtype).astype(dt, copy=False)
    )


def rand(shape, dtype=None, place=None) -> Tensor:
    """Uniform samples in ``[0, 1)``."""
    _no_spread_shape("rand", (), (shape, dtype, place))
    return uniform(shape, dtype, 0.0, 1.0, place)


def uniform(shape, dtype=None, min: float = -1.0, max: float = 1.0, place=None) -> Tensor:  # noqa: A002
    """Uniform samples in ``[min, max)`` (Paddle's ``paddle.uniform``)."""
    _no_spread_shape("uniform", (), (shape, dtype, min))
    dt = _float_dtype(dtype)
    p = _place(place)
    rng = _random.generator(_device.xp_for(p))
    draw_dtype = "float64" if dt == _dtypes.float64 else "float32"
    values = rng.random(_checked_shape(shape), dtype=draw_dtype) * (max - min) + min
    return Tensor._wrap(values.astype(dt, copy=False))


def normal(mean: float = 0.0, std: float = 1.0, shape=(1,), dtype=None, place=None) -> Tensor:
    """Normal samples with the given mean and standard deviation."""
    _no_spread_shape("normal", (mean, std), (shape, dtype, place))
    t = randn(shape, dtype, place)
    t._data *= std
    t._data += mean
    return t


def randint(low: int = 0, high=None, shape=(1,), dtype=None, place=None) -> Tensor:
    """Integers in ``[low, high)`` (``randint(n)`` draws from ``[0, n)``)."""
    if high is None:
        low, high = 0, low
    _no_spread_shape("randint", (low, high), (shape, dtype, place))
    if high <= low:
        raise ValueError(f"randint: high ({high}) must be greater than low ({low})")
    dt = _dtypes.convert_dtype(dtype or "int64")
    p = _place(place)
    rng = _random.generator(_device.xp_for(p))
    return Tensor._wrap(rng.integers(low, high, size=_checked_shape(shape)).astype(dt, copy=False))


seed = _random.seed
