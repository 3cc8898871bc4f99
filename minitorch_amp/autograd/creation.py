"""Functions that make new tensors: from data, filled, ranges and random.

Every random function draws from ``backend.random``, so ``seed(n)`` makes them reproducible.
``shape`` may be a list/tuple of ints, an int, or a 1-D integer Tensor (Paddle). PyTorch's
spread-out shape, ``randn(32, 16)``, puts 16 in the dtype slot: the error says
``randn([32, 16])``.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..backend import device as _device
from ..backend import device_errors as _errors
from ..backend import dtypes as _dtypes
from ..backend import memory as _memory
from ..backend import random as _random
from .tensor import Tensor
from .tensor_args import _shape_arg
from .tensor_input import as_array as _as_array


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
    # NOTE: the value is converted once, as to_tensor does (bfloat16/FP8 rounded once, from
    # float64; float16 overflow silently inf); xp.full would round through float32 first.
    # The converted value is exact in dt, so filling with it rounds no more.
    if isinstance(fill_value, Tensor):
        fill_value = fill_value._to_host("full's fill_value given as a Tensor")
    value = _as_array(fill_value, dt, _device.parse_device("cpu")).item()
    return Tensor._wrap(_device.xp_for(p).full(_checked_shape(shape), value, dtype=dt))


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
    """Values from ``start`` up to (not including) ``end`` by ``step``; ``arange(5)`` = 0..4.

    Without ``dtype``: int64 when every bound is an integer (a Python or NumPy int, or an
    integer Tensor of one element), else the default float dtype. As in Paddle, a step whose
    sign does not lead from ``start`` to ``end`` is an error (``arange(5, 0)``, ``arange(-3)``;
    NumPy returns an empty array); ``start == end`` gives an empty tensor.
    """
    if end is None:
        start, end = 0, start
    start, end, step = (_bound(v) for v in (start, end, step))
    if step == 0:
        raise ValueError("arange: step must not be 0")
    if (start < end and step < 0) or (start > end and step > 0):
        raise ValueError(
            f"arange({start}, {end}, {step}): the step must be "
            f"{'greater' if start < end else 'less'} than 0 while start "
            f"{'<' if start < end else '>'} end (Paddle); for a descending range pass a "
            "negative step, e.g. arange(5, 0, -1)"
        )
    if dtype is None:
        is_int = all(_is_count(v) for v in (start, end, step))
        dtype = _dtypes.int64 if is_int else _dtypes.default_float()
    p = _place(place)
    return Tensor._wrap(
        _device.xp_for(p).arange(start, end, step, dtype=_dtypes.convert_dtype(dtype))
    )


def _bound(value):
    """An arange bound as a Python number (a one-element Tensor is read to the host)."""
    if isinstance(value, Tensor):
        if value.size != 1:
            raise ValueError(f"arange: a Tensor bound needs one element, not shape {value.shape}")
        return value._to_host("an arange bound given as a Tensor").item()
    return value


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
    return uniform(shape, dtype, 0.0, 1.0, place=place)


def uniform(
    shape,
    dtype=None,
    min: float = -1.0,  # noqa: A002
    max: float = 1.0,  # noqa: A002
    seed: int = 0,
    name=None,
    *,
    place=None,
) -> Tensor:
    """Uniform samples in ``[min, max)`` (Paddle's ``paddle.uniform``).

    ``seed=0`` draws from the global generator (``mt.seed``); another ``seed`` draws from a
    generator of its own seeded with it, so the same call gives the same values. ``place``
    is keyword-only (Paddle's 5th argument is ``seed``).

    NOTE: the draw is made in float32 (float64 for float64) and then cast; a value within
    half an ulp of ``max`` would round up to ``max`` itself. Draws are clamped to the
    largest value of ``dtype`` below ``max`` before the cast, so every value is < ``max``.
    """
    _no_spread_shape("uniform", (), (shape, dtype, min))
    if min > max:
        raise ValueError(f"uniform: min ({min}) must not be greater than max ({max})")
    dt = _float_dtype(dtype)
    p = _place(place)
    xp = _device.xp_for(p)
    rng = _random.generator(xp) if seed == 0 else xp.random.default_rng(int(seed))
    draw_dtype = "float64" if dt == _dtypes.float64 else "float32"
    values = rng.random(_checked_shape(shape), dtype=draw_dtype) * (max - min) + min
    if max > min:
        xp.minimum(values, _largest_below(max, dt), out=values)
    return Tensor._wrap(values.astype(dt, copy=False))


def _largest_below(value: float, dt) -> float:
    """The largest number of dtype ``dt`` below ``value`` (exact in float32 for 16-bit dt)."""
    near = np.asarray(value, np.float64).astype(dt)  # a neighbour of value in dt
    if float(near) >= value:
        near = np.nextafter(near, dt.type(-np.inf))  # (ml_dtypes has it for bfloat16)
    return float(near)


def normal(mean=0.0, std=1.0, shape=(1,), dtype=None, place=None) -> Tensor:
    """Normal samples with the given mean and standard deviation (Paddle's ``paddle.normal``).

    ``mean`` and ``std`` may be Tensors of per-element values. As in Paddle, the output then
    has the shape, dtype and place of ``mean`` if it is a Tensor, else of ``std``, and
    ``shape``/``dtype``/``place`` are not used; a ``std`` Tensor must have as many elements
    as a ``mean`` Tensor (it is read in ``mean``'s shape). A float ``std`` must be >= 0.
    """
    _no_spread_shape("normal", (mean, std), (shape, dtype, place))
    if not isinstance(std, Tensor) and std < 0:
        raise ValueError(f"normal: std must be >= 0, got {std}")
    like = mean if isinstance(mean, Tensor) else std if isinstance(std, Tensor) else None
    if like is None:
        t = randn(shape, dtype, place)
        t._data *= std
        t._data += mean
        return t
    if isinstance(mean, Tensor) and isinstance(std, Tensor):
        if mean.size != std.size:
            raise ValueError(
                f"normal: mean has {mean.size} elements and std {std.size}; Paddle needs "
                "equal counts (std is read in mean's shape)"
            )
        std = std.reshape(mean.shape)
    return randn(like.shape, like.dtype, like.place) * std + mean


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
