"""Hypothesis strategies for bfloat16 edge values, beside the float16 ones in :mod:`.strategies`.

Imported by (and re-exported from) :mod:`minitorch_amp.testing.strategies`; needs Hypothesis.

Example:
    >>> import numpy as np
    >>> from hypothesis import given, settings
    >>> @given(bf16_values(allow_nan=False))
    ... @settings(max_examples=50)
    ... def test_bfloat16_to_float32_is_exact(b):
    ...     assert np.float32(b).astype(b.dtype) == b
    >>> test_bfloat16_to_float32_is_exact()
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

from . import bf16

__all__ = ["BF16_EDGE_VALUES", "bf16_values", "fp32_values_near_bf16_edges"]

_BF16 = ml_dtypes.bfloat16

_POSITIVE_EDGES = (
    bf16.SMALLEST_SUBNORMAL,
    2 * bf16.SMALLEST_SUBNORMAL,
    bf16.LARGEST_SUBNORMAL,
    bf16.SMALLEST_NORMAL,
    bf16.SMALLEST_NORMAL + bf16.SMALLEST_SUBNORMAL,
    2.0**-24,  # float16's smallest subnormal: a plain normal bfloat16
    2.0**-14,
    0.5,
    1.0,
    1.0 + bf16.EPSILON,
    2.0 - bf16.EPSILON,
    256.0,  # from here on the spacing is 2: 257 is not a bfloat16
    65504.0 + 32.0,  # float16's overflow region: 65536 is a bfloat16
    bf16.MAX,
)
BF16_EDGE_VALUES: tuple = tuple(
    _BF16(v) for v in (0.0, -0.0, *_POSITIVE_EDGES, *(-v for v in _POSITIVE_EDGES))
) + (_BF16(np.inf), _BF16(-np.inf), _BF16(np.nan))
"""The bfloat16 landmarks :func:`bf16_values` draws first (all exactly representable)."""


def _allowed(b, allow_nan: bool, allow_infinity: bool, allow_subnormal: bool) -> bool:
    value = float(b)
    if np.isnan(value):
        return allow_nan
    if np.isinf(value):
        return allow_infinity
    return allow_subnormal or value == 0 or abs(value) >= bf16.SMALLEST_NORMAL


def bf16_values(
    allow_nan: bool = True, allow_infinity: bool = True, allow_subnormal: bool = True
) -> st.SearchStrategy:
    """``ml_dtypes.bfloat16`` scalars: the landmarks first, then any of the 65536 patterns.

    Example:
        >>> from hypothesis import find
        >>> b = find(bf16_values(allow_nan=False, allow_subnormal=False), lambda b: 0 < b < 1e-37)
        >>> float(b)  # (allow_nan=False: comparing a signalling NaN warns "invalid value")
        1.1754943508222875e-38
    """
    flags = (allow_nan, allow_infinity, allow_subnormal)
    edges = [b for b in BF16_EDGE_VALUES if _allowed(b, *flags)]
    bits = st.integers(0, 0xFFFF).map(lambda n: np.uint16(n).view(_BF16))
    return st.sampled_from(edges) | bits.filter(lambda b: _allowed(b, *flags))


# The float32 inputs whose bfloat16 rounding is decided at a boundary.
_FP32_EDGE_CENTERS = (
    bf16.OVERFLOW_THRESHOLD,  # >= rounds to inf
    bf16.MAX,
    bf16.UNDERFLOW_THRESHOLD,  # <= rounds to 0 (the tie goes to the even 0)
    3 * bf16.UNDERFLOW_THRESHOLD,  # the tie between 2**-133 and 2**-132 goes to 2**-132
    bf16.SMALLEST_SUBNORMAL,
    bf16.SMALLEST_NORMAL,
    1.0 + bf16.UNIT_ROUNDOFF,  # the tie above 1 goes to the even 1.0
    257.0,  # the first odd integer that is not a bfloat16: rounds to 256
    65504.0,  # float16's largest: bfloat16 rounds it to 65536
)


@st.composite
def fp32_values_near_bf16_edges(draw, max_ulps: int = 2) -> np.float32:
    """``numpy.float32`` scalars where float32 -> bfloat16 rounding is decided.

    A centre moved by up to ``max_ulps`` float32 ulps, with a random sign. The centre is a
    halfway point between adjacent bfloat16 values, a bfloat16 value, or a named edge (the
    overflow threshold, ``MAX``, ``2**-134``, ``3 * 2**-134``, ``2**-133``, ``2**-126``,
    ``1 + 2**-8``, 257, 65504).

    Example:
        >>> from hypothesis import find
        >>> import ml_dtypes, numpy as np
        >>> from minitorch_amp.testing import bf16
        >>> def overflows(x):
        ...     return np.isinf(x.astype(ml_dtypes.bfloat16))
        >>> x = find(fp32_values_near_bf16_edges(), lambda x: x > 0 and overflows(x))
        >>> float(x) == bf16.OVERFLOW_THRESHOLD
        True
    """
    kind = draw(st.sampled_from(("named", "halfway", "bfloat16")))
    if kind == "named":
        center = draw(st.sampled_from(_FP32_EDGE_CENTERS))
    else:
        bits = draw(st.integers(0, 0x7F7F))  # a finite, non-negative bfloat16
        low = float(np.uint16(bits).view(_BF16))
        high = 2.0**128 if bits == 0x7F7F else float(np.uint16(bits + 1).view(_BF16))
        center = (low + high) / 2 if kind == "halfway" else low
    with np.errstate(over="ignore"):
        x = np.float32(center)  # every centre is exact in float32 (2**128 is never one)
    steps = draw(st.integers(-max_ulps, max_ulps))
    for _ in range(abs(steps)):
        x = np.nextafter(x, np.float32(np.inf if steps > 0 else -np.inf))
    return -x if draw(st.booleans()) else x
