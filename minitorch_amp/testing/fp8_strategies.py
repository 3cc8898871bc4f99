"""Hypothesis strategies for FP8 values and the float32 inputs whose FP8 rounding is decided at
an edge, beside the float16 and bfloat16 ones in :mod:`.strategies`. Needs Hypothesis.

* :func:`fp8_values`: FP8 scalars of one format, the landmarks first (``MAX``, the smallest
  subnormals, every NaN encoding, E5M2's infinities), then any of the 256 bytes;
* :func:`fp32_values_near_fp8_edges`: float32 scalars a few ulps from where the cast to FP8
  is decided: the overflow threshold (the values that round up into overflow), ``MAX``, the
  underflow threshold, halfway points between neighbours, the values themselves.

Example:
    >>> import numpy as np
    >>> from hypothesis import given, settings
    >>> @given(fp8_values("float8_e4m3fn", allow_nan=False))
    ... @settings(max_examples=50)
    ... def test_fp8_to_float32_is_exact(v):
    ...     assert np.float32(v).astype(v.dtype) == v
    >>> test_fp8_to_float32_is_exact()
"""

from __future__ import annotations

import numpy as np

try:
    from hypothesis import strategies as st
except ImportError as exc:  # the rest of minitorch_amp.testing works without it
    raise ImportError(
        "minitorch_amp.testing.fp8_strategies needs Hypothesis: pip install hypothesis "
        "(or install minitorch_amp with the 'test' extra). The FP8 assertions in "
        "minitorch_amp.testing work without it."
    ) from exc

from .fp8 import E4M3, E5M2, Fp8Format, format_of

__all__ = ["FP8_EDGE_VALUES", "fp32_values_near_fp8_edges", "fp8_values"]


def _edges(fmt: Fp8Format) -> tuple:
    positive = (
        fmt.SMALLEST_SUBNORMAL,
        2 * fmt.SMALLEST_SUBNORMAL,
        fmt.SMALLEST_NORMAL - fmt.SMALLEST_SUBNORMAL,  # the largest subnormal
        fmt.SMALLEST_NORMAL,
        fmt.SMALLEST_NORMAL + fmt.SMALLEST_SUBNORMAL,
        1.0,
        1.0 + fmt.EPSILON,
        2.0 - fmt.EPSILON,
        fmt.MAX - fmt.spacing(fmt.MAX - 1),  # MAX's neighbour below (the same binade)
        fmt.MAX,
    )
    values = [fmt.dtype.type(v) for v in (0.0, -0.0, *positive, *(-v for v in positive))]
    specials = (*fmt.NAN_BITS, *fmt.INF_BITS)  # every NaN encoding, and E5M2's +-inf
    values += [np.uint8(b).view(fmt.dtype) for b in specials]
    return tuple(values)


FP8_EDGE_VALUES: dict = {E4M3.dtype: _edges(E4M3), E5M2.dtype: _edges(E5M2)}
"""FP8 dtype -> the landmarks :func:`fp8_values` draws first (all exactly representable)."""


def _allowed(v, fmt: Fp8Format, allow_nan: bool, allow_infinity: bool, allow_subnormal: bool):
    value = float(v)
    if np.isnan(value):
        return allow_nan
    if np.isinf(value):
        return allow_infinity
    return allow_subnormal or value == 0 or abs(value) >= fmt.SMALLEST_NORMAL


def fp8_values(
    dtype, allow_nan: bool = True, allow_infinity: bool = True, allow_subnormal: bool = True
) -> st.SearchStrategy:
    """Scalars of FP8 ``dtype``: the landmarks first, then any of the 256 bytes.

    Example:
        >>> from hypothesis import find
        >>> float(find(fp8_values("float8_e5m2"), lambda v: 50000 < v < float("inf")))
        57344.0
        >>> byte = find(fp8_values("float8_e4m3fn"), lambda v: np.isnan(v) and np.signbit(v))
        >>> hex(int(byte.view(np.uint8)))  # E4M3's negative NaN
        '0xff'
    """
    fmt = format_of(dtype)
    flags = (allow_nan, allow_infinity, allow_subnormal)
    edges = [v for v in FP8_EDGE_VALUES[fmt.dtype] if _allowed(v, fmt, *flags)]
    everything = st.integers(0, 255).map(lambda b: np.uint8(b).view(fmt.dtype))
    return st.sampled_from(edges) | everything.filter(lambda v: _allowed(v, fmt, *flags))


def _centers(fmt: Fp8Format) -> tuple:
    """The float32 inputs whose FP8 rounding is decided at a named boundary."""
    return (
        fmt.OVERFLOW_THRESHOLD,  # E4M3: above it NaN (the tie goes to 448); E5M2: from it inf
        fmt.MAX,
        fmt.UNDERFLOW_THRESHOLD,  # <= rounds to 0 (the tie goes to the even 0)
        3 * fmt.UNDERFLOW_THRESHOLD,  # the tie between 1 and 2 subnormal units goes to 2
        fmt.SMALLEST_SUBNORMAL,
        fmt.SMALLEST_NORMAL,
        1.0 + fmt.UNIT_ROUNDOFF,  # the tie above 1 goes to the even 1.0
    )


@st.composite
def fp32_values_near_fp8_edges(draw, dtype, max_ulps: int = 2) -> np.float32:
    """``numpy.float32`` scalars where float32 -> FP8 rounding is decided.

    A centre moved by up to ``max_ulps`` float32 ulps, with a random sign. The centre is a
    named edge (the overflow threshold 464 / 61440, ``MAX``, the underflow threshold and
    three times it, the smallest subnormal and normal, ``1 + UNIT_ROUNDOFF``), a halfway
    point between two neighbouring finite FP8 values, or an FP8 value.

    Example:
        >>> from hypothesis import find
        >>> from minitorch_amp.testing.fp8 import E4M3
        >>> def overflows(x):
        ...     return np.isnan(x.astype(E4M3.dtype))  # a plain cast: E4M3 has no inf
        >>> x = find(fp32_values_near_fp8_edges(E4M3.dtype), lambda x: x > 0 and overflows(x))
        >>> float(x) == float(np.nextafter(np.float32(464), np.float32(np.inf)))
        True
    """
    fmt = format_of(dtype)
    finite = fmt.values()[:128]  # the non-negative bytes 0x00..0x7F, in increasing order
    finite = finite[np.isfinite(finite)]
    kind = draw(st.sampled_from(("named", "halfway", "fp8")))
    if kind == "named":
        center = draw(st.sampled_from(_centers(fmt)))
    else:
        i = draw(st.integers(0, finite.size - 2 if kind == "halfway" else finite.size - 1))
        center = (finite[i] + finite[i + 1]) / 2 if kind == "halfway" else finite[i]
    x = np.float32(center)  # every centre is exact in float32
    steps = draw(st.integers(-max_ulps, max_ulps))
    for _ in range(abs(steps)):
        x = np.nextafter(x, np.float32(np.inf if steps > 0 else -np.inf))
    return -x if draw(st.booleans()) else x
