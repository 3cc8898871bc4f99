"""Hypothesis strategies for float16 edge values, shapes and minitorch_amp Tensors.

This is the one module of :mod:`minitorch_amp.testing` that needs Hypothesis
(``pip install hypothesis``). Edge values come from two sources mixed together: a list of
named landmarks (so every run meets them early) and raw bit patterns (so everything else in
the format is reachable, NaN payloads included). Shrinking goes towards the first landmark,
``+0.0``, and towards small bit patterns.

Example:
    >>> import numpy as np
    >>> from hypothesis import given, settings
    >>> @given(fp16_values(allow_nan=False))
    ... @settings(max_examples=50)
    ... def test_float16_to_float32_is_exact(h):
    ...     assert np.float32(h).astype(np.float16) == h
    >>> test_float16_to_float32_is_exact()
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

try:
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp
except ImportError as exc:  # the rest of minitorch_amp.testing works without it
    raise ImportError(
        "minitorch_amp.testing.strategies needs Hypothesis: pip install hypothesis "
        "(or install minitorch_amp with the 'test' extra). The assertions in "
        "minitorch_amp.testing work without it."
    ) from exc

from ..autograd.tensor import Tensor
from ..backend.dtypes import FP8, bfloat16, convert_dtype
from . import fp16
from .bf16_strategies import BF16_EDGE_VALUES, bf16_values, fp32_values_near_bf16_edges
from .fp8_strategies import fp8_values

__all__ = [
    "BF16_EDGE_VALUES",
    "bf16_values",
    "fp32_values_near_bf16_edges",
    "FP16_EDGE_VALUES",
    "broadcastable_shapes",
    "fp16_values",
    "fp32_values_near_fp16_edges",
    "gradient_magnitudes",
    "shapes",
    "tensors",
]

_POSITIVE_EDGES = (
    fp16.SMALLEST_SUBNORMAL,
    2 * fp16.SMALLEST_SUBNORMAL,
    fp16.LARGEST_SUBNORMAL,
    fp16.SMALLEST_NORMAL,
    fp16.SMALLEST_NORMAL + 2.0**-24,  # the first normal spacing equals the subnormal one
    1.0 - 2.0**-11,  # the largest value below 1
    1.0,
    1.0 + fp16.EPSILON,
    2048.0,  # from here on the spacing is 2: 2049 is not a float16
    2050.0,
    32768.0,  # the largest power of two
    65472.0,  # the neighbour below MAX
    fp16.MAX,
)
FP16_EDGE_VALUES: tuple[np.float16, ...] = tuple(
    np.float16(v) for v in (0.0, -0.0, *_POSITIVE_EDGES, *(-v for v in _POSITIVE_EDGES))
) + (np.float16(np.inf), np.float16(-np.inf), np.float16(np.nan))
"""The float16 landmarks :func:`fp16_values` draws first (all exactly representable)."""


def _allowed(h: np.float16, allow_nan: bool, allow_infinity: bool, allow_subnormal: bool) -> bool:
    if np.isnan(h):
        return allow_nan
    if np.isinf(h):
        return allow_infinity
    return allow_subnormal or h == 0 or abs(h) >= fp16.SMALLEST_NORMAL


def fp16_values(
    allow_nan: bool = True, allow_infinity: bool = True, allow_subnormal: bool = True
) -> st.SearchStrategy[np.float16]:
    """``numpy.float16`` scalars: the landmarks first, then any bit pattern.

    The landmarks (:data:`FP16_EDGE_VALUES`) are +-0, the smallest subnormal ``2**-24`` and
    its double, the largest subnormal, the smallest normal ``2**-14`` and its neighbour,
    1 and its neighbours, 2048 and 2050 (where the spacing becomes 2), 32768, 65472, the
    largest value 65504, +-inf and NaN. The other half of the draws are raw ``uint16``
    patterns viewed as float16: every value, including NaNs with any payload and sign.
    (The rounding edges that are *not* float16 values, such as 65520 and the halfway points,
    are float32 inputs: see :func:`fp32_values_near_fp16_edges`.)

    Args:
        allow_nan: also NaNs (the canonical one, and any payload from the bit patterns).
        allow_infinity: also +-inf.
        allow_subnormal: also the nonzero values below ``2**-14`` (+-0 are always allowed).

    Example:
        >>> from hypothesis import find
        >>> h = find(fp16_values(allow_subnormal=False), lambda h: 0 < h < 1e-4)
        >>> float(h)  # shrinks to the smallest such value: 2**-14, subnormals excluded
        6.103515625e-05
    """
    flags = (allow_nan, allow_infinity, allow_subnormal)
    edges = [h for h in FP16_EDGE_VALUES if _allowed(h, *flags)]
    bits = st.integers(0, 0xFFFF).map(lambda b: np.uint16(b).view(np.float16))
    return st.sampled_from(edges) | bits.filter(lambda h: _allowed(h, *flags))


# The float32 inputs whose float16 rounding is decided at a boundary.
_FP32_EDGE_CENTERS = (
    fp16.OVERFLOW_THRESHOLD,  # >= rounds to inf
    fp16.MAX,
    fp16.UNDERFLOW_THRESHOLD,  # <= rounds to 0 (the tie goes to the even 0)
    3 * fp16.UNDERFLOW_THRESHOLD,  # the tie between 2**-24 and 2**-23 goes to the even 2**-23
    fp16.SMALLEST_SUBNORMAL,
    fp16.SMALLEST_NORMAL - fp16.UNDERFLOW_THRESHOLD,  # between the subnormals and the normals
    fp16.SMALLEST_NORMAL,
    1.0 + fp16.UNIT_ROUNDOFF,  # the tie above 1 goes to the even 1.0
    2049.0,  # the first odd integer that is not a float16: rounds to 2048
)


@st.composite
def fp32_values_near_fp16_edges(draw, max_ulps: int = 2) -> np.float32:
    """``numpy.float32`` scalars where float32 -> float16 rounding is decided.

    Each draw is a centre moved by up to ``max_ulps`` float32 ulps (``np.nextafter``) and
    given a random sign. The centre is one of:

    * a halfway point between two adjacent float16 values (exact in float32), where round
      to nearest even picks the neighbour with the even last bit;
    * a float16 value itself (exact, so its ulp neighbours round back to it);
    * a named edge: the overflow threshold 65520, 65504, ``2**-25`` (rounds to 0),
      ``3 * 2**-25``, ``2**-24``, the subnormal/normal boundary, ``1 + 2**-11``, 2049.

    Args:
        max_ulps: how far (in float32 ulps) from the centre a value may lie.

    Example:
        >>> from hypothesis import find
        >>> import numpy as np
        >>> def overflows(x):
        ...     with np.errstate(over="ignore"):
        ...         return np.isinf(x.astype(np.float16))
        >>> float(find(fp32_values_near_fp16_edges(), lambda x: x > 0 and overflows(x)))
        65520.0
    """
    kind = draw(st.sampled_from(("named", "halfway", "float16")))
    if kind == "named":
        center = draw(st.sampled_from(_FP32_EDGE_CENTERS))
    else:
        bits = draw(st.integers(0, 0x7BFF))  # a finite, non-negative float16
        low = float(np.uint16(bits).view(np.float16))
        high = 2.0**16 if bits == 0x7BFF else float(np.uint16(bits + 1).view(np.float16))
        center = (low + high) / 2 if kind == "halfway" else low
    x = np.float32(center)
    steps = draw(st.integers(-max_ulps, max_ulps))
    for _ in range(abs(steps)):
        x = np.nextafter(x, np.float32(np.inf if steps > 0 else -np.inf))
    return -x if draw(st.booleans()) else x


_FLOAT64_EXPONENTS = (-1022, 1023)  # where m * 2**e (m in [1, 2)) is a normal float64


def gradient_magnitudes(
    low_exp: int = -40, high_exp: int = 16, signed: bool = True
) -> st.SearchStrategy[float]:
    """Floats ``+-m * 2**e``: ``e`` uniform in ``[low_exp, high_exp]``, ``m`` in ``[1, 2)``.

    Spread evenly over binades rather than over the real line, as gradients are: use it to
    study which values a loss scale rescues from float16 underflow. The mantissa has 24 bits,
    so every value is exact in float32 when ``-126 <= e <= 127``.

    Args:
        low_exp, high_exp: the range of binary exponents (inclusive), within float64's normal
            exponents ``[-1022, 1023]`` (the values are Python floats).
        signed: also negative values.

    Raises:
        ValueError: ``low_exp > high_exp``, or an exponent outside ``[-1022, 1023]`` (past it
            ``m * 2**e`` would lose bits, round to 0.0, or overflow).

    Example:
        >>> from hypothesis import given, settings
        >>> import math
        >>> @given(gradient_magnitudes(-30, -20))
        ... @settings(max_examples=30)
        ... def test_exponent_range(g):
        ...     assert -30 <= math.frexp(abs(g))[1] - 1 <= -20
        >>> test_exponent_range()
    """
    if low_exp > high_exp:
        raise ValueError(f"low_exp {low_exp} must not exceed high_exp {high_exp}")
    if not _FLOAT64_EXPONENTS[0] <= low_exp <= high_exp <= _FLOAT64_EXPONENTS[1]:
        raise ValueError(
            f"low_exp and high_exp must lie in [{_FLOAT64_EXPONENTS[0]}, "
            f"{_FLOAT64_EXPONENTS[1]}], float64's normal exponents (the values are Python "
            f"floats); got ({low_exp}, {high_exp})"
        )

    @st.composite
    def draw_one(draw):
        exponent = draw(st.integers(low_exp, high_exp))
        mantissa = 1.0 + draw(st.integers(0, 2**23 - 1)) * 2.0**-23
        negative = signed and draw(st.booleans())
        return (-1.0 if negative else 1.0) * mantissa * 2.0**exponent

    return draw_one()


def shapes(
    min_dims: int = 0, max_dims: int = 4, min_side: int = 1, max_side: int = 8
) -> st.SearchStrategy[tuple[int, ...]]:
    """Array shapes (tuples) with ``min_dims..max_dims`` dims of ``min_side..max_side`` each.

    Sides start at 1, as in Hypothesis's ``array_shapes`` and :func:`broadcastable_shapes`, so
    a first property test reaches what it tests before it meets an empty tensor. Pass
    ``min_side=0`` to include empty tensors (a side of 0), an edge case worth its own test.

    Example:
        >>> from hypothesis import find
        >>> find(shapes(min_dims=2), lambda s: True)  # the simplest shape: no empty sides
        (1, 1)
        >>> find(shapes(min_dims=2, min_side=0), lambda s: 0 in s)  # empty tensors: opt in
        (0, 0)
    """
    return hnp.array_shapes(
        min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side
    )


def broadcastable_shapes(
    num_shapes: int = 2,
    min_dims: int = 0,
    max_dims: int = 4,
    min_side: int = 1,
    max_side: int = 8,
) -> st.SearchStrategy[tuple[tuple[int, ...], ...]]:
    """``num_shapes`` shapes that broadcast together (dims of 1, missing leading dims).

    Built on ``hypothesis.extra.numpy.mutually_broadcastable_shapes``; the broadcast result
    is ``numpy.broadcast_shapes(*shapes)``.

    Example:
        >>> from hypothesis import find
        >>> import numpy as np
        >>> a, b = find(broadcastable_shapes(min_dims=1), lambda p: len(p[0]) != len(p[1]))
        >>> np.broadcast_shapes(a, b) in (a, b)
        True
    """
    return hnp.mutually_broadcastable_shapes(
        num_shapes=num_shapes,
        min_dims=min_dims,
        max_dims=max_dims,
        min_side=min_side,
        max_side=max_side,
    ).map(lambda bs: bs.input_shapes)


def _default_elements(dtype: np.dtype) -> st.SearchStrategy:
    """Finite values over the dtype's whole range (edges included); all ints; both bools."""
    if dtype == np.float16:
        return fp16_values(allow_nan=False, allow_infinity=False)
    if dtype == bfloat16:
        return bf16_values(allow_nan=False, allow_infinity=False)
    if dtype in FP8:  # NOTE: ml_dtypes' FP8 kinds differ (E4M3 'V', E5M2 'f'): test first
        return fp8_values(dtype, allow_nan=False, allow_infinity=False)
    if dtype.kind == "f":
        return st.floats(width=8 * dtype.itemsize, allow_nan=False, allow_infinity=False)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return st.integers(int(info.min), int(info.max))
    if dtype == np.bool_:
        return st.booleans()
    raise TypeError(f"tensors() cannot draw {dtype}; use one of: {', '.join(_DRAWN)}")


_DRAWN = ("float16", "bfloat16", "float32", "float64", "int32", "int64", "bool")
_DRAWN += tuple(str(d) for d in FP8)
# Hypothesis has no bfloat16 or FP8 arrays: each value's bits are drawn, then viewed
_BITS = {bfloat16: np.uint16, **{d: np.uint8 for d in FP8}}


def _bits_of(dtype):
    """``value -> its bits as dtype`` (an int): a value of ``dtype`` its own, anything else
    rounded through float32 as ``astype`` rounds it (FP8: plain, E4M3's overflow is NaN).

    NOTE: not through float32 for a value of ``dtype``: a signalling NaN widened to float32
    and narrowed back comes out quieted (other bits), with NumPy's "invalid value encountered
    in cast" warning, an error in tests that turn warnings into errors."""
    uint = _BITS[dtype]

    def bits(value) -> int:
        if getattr(value, "dtype", None) == dtype:
            return int(np.asarray(value).view(uint))
        with np.errstate(invalid="ignore", over="ignore"):  # a NaN quieted; overflow as cast
            return int(np.asarray(np.float32(value)).astype(dtype).view(uint))

    return bits


def tensors(
    shape: Sequence[int] | st.SearchStrategy = shapes(),  # noqa: B008 - a strategy, immutable
    dtype="float32",
    elements: st.SearchStrategy | None = None,
    place=None,
    stop_gradient: bool = True,
) -> st.SearchStrategy[Tensor]:
    """minitorch_amp Tensors of a given (or drawn) shape and dtype.

    Args:
        shape: a shape (int or tuple) or a strategy of shapes (default: :func:`shapes`).
        dtype: float16, bfloat16, float32, float64, int32, int64, bool, float8_e4m3fn or
            float8_e5m2, or a strategy of them (any other dtype is refused: ``TypeError``).
        elements: a strategy for the values. Default, by dtype: float16 ->
            ``fp16_values(allow_nan=False, allow_infinity=False)``; bfloat16 -> the same
            with ``bf16_values``; FP8 -> the same with ``fp8_values(dtype)``;
            float32/float64 ->
            any finite value of the dtype (subnormals and the largest values included);
            integers -> the dtype's whole range; bool -> both. Narrow it for ops that would
            overflow, e.g. ``st.floats(-10, 10, width=32)``. For bfloat16 and FP8 a value of
            the dtype lands bit for bit (NaN payloads included); a float is rounded through
            float32, as ``astype`` rounds it.
        place: where the tensor lives (default: the current device).
        stop_gradient: False for tensors that ``backward()`` should reach.

    Example:
        >>> from hypothesis import given, settings
        >>> @given(tensors(shape=(2, 3), dtype="float16"))
        ... @settings(max_examples=10)
        ... def test_shape_and_dtype(x):
        ...     assert x.shape == [2, 3] and x.dtype == "float16"
        >>> test_shape_and_dtype()
    """
    if not isinstance(dtype, st.SearchStrategy):  # refused here, not at the first draw
        dtype = convert_dtype(dtype)
        elements = _default_elements(dtype) if elements is None else elements
    return _tensors(shape, dtype, elements, place, stop_gradient)


@st.composite
def _tensors(draw, shape, dtype, elements, place, stop_gradient) -> Tensor:
    if isinstance(shape, st.SearchStrategy):
        shape = draw(shape)
    if isinstance(dtype, st.SearchStrategy):
        dtype = convert_dtype(draw(dtype))
        elements = _default_elements(dtype) if elements is None else elements
    # Filling with one drawn value and overwriting a few keeps big arrays fast; the values
    # are copied into the array, so reusing a drawn one is safe for these dtypes.
    if dtype in _BITS:
        bits = elements.map(_bits_of(dtype))
        array = draw(hnp.arrays(_BITS[dtype], shape, elements=bits, fill=bits)).view(dtype)
    else:
        array = draw(hnp.arrays(dtype, shape, elements=elements, fill=elements))
    return Tensor(array, dtype=dtype, place=place, stop_gradient=stop_gradient)
