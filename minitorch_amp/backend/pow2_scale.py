"""float16 values times ``2**-k``, computed on their bits: the CPU's fast loss unscale.

Dynamic loss scaling keeps the scale a power of two (Paddle's defaults start at ``2**16``
and move it by ``x2`` and ``x0.5``), so unscaling a float16 gradient is a multiplication by
``2**-k``. The general path widens every value to float32, multiplies, and rounds back to
float16; on NumPy that rounding is the expensive part, and most expensive exactly where
unscaled gradients land, in float16's subnormal range (see ``backend.cast.convert``). On the
bits the product is mostly exact integer work:

* a value whose exponent field ``e`` is above ``k`` stays normal: the result is the same
  significand with the exponent field lowered by ``k``, ``bits - (k << 10)``, exactly;
* a value with ``e <= k`` (zero and subnormals included) lands at or below the smallest
  normal: its significand ``m`` (with the implicit bit when ``e >= 1``) counts units of
  ``2**(max(e, 1) - 25)``, and the result counts float16's subnormal units ``2**-24``, so
  the result is ``m >> s`` with ``s = k + 1 - max(e, 1)``, rounded to nearest even on the
  bits shifted out. A carry out of 1023 units gives ``0x0400``, the smallest normal, which
  is what the bits of the rounded value are.

Only finite values and ``k >= 1``: an inf or NaN (then :func:`times_power_of_two` returns
None), or a scale of 1 or more (whose product may overflow), takes the general path. The
result is the general path's, bit for bit, for every finite float16 and every ``k``
(``tests/test_pow2_scale.py`` checks all 63,488 finite values for ``k`` from 1 to 40, and
64, 100 and 126).

Example:
    >>> import numpy as np
    >>> g = np.array([6.0, 2.0**-14, -3 * 2.0**-24, 0.0], np.float16)
    >>> times_power_of_two(g.view(np.uint16), 2).view(np.float16).tolist()  # x 1/4
    [1.5, 1.52587890625e-05, -5.960464477539063e-08, 0.0]
"""

from __future__ import annotations

import numpy as np

__all__ = ["power_of_two_exponent", "times_power_of_two"]

_MAGNITUDE = np.uint16(0x7FFF)
_SIGN = np.uint16(0x8000)
_INF = 0x7C00  # float16's exponent field all ones: inf and NaN at or above this magnitude
_MAX_SHIFT = np.uint32(13)  # an 11-bit significand shifted by 13 is 0, and rounds to 0


def power_of_two_exponent(inv_scale: np.ndarray) -> int | None:
    """``k`` when the float32 ``[1]`` array ``inv_scale`` holds exactly ``2**-k`` with ``k``
    from 1 to 126 (a normal float32 below 1), else None."""
    bits = int(inv_scale.view(np.uint32)[0])
    exponent = bits >> 23  # the sign bit too: a negative value is refused with it
    if bits & 0x7FFFFF or not 1 <= exponent <= 126:
        return None
    return 127 - exponent


def times_power_of_two(bits: np.ndarray, k: int) -> np.ndarray:
    """The bits of ``float16(bits) * 2**-k``, rounded to nearest even, as a new uint16
    array; None when an inf or a NaN is among them (the general path takes those).

    Args:
        bits: 1-D uint16, the bits of float16 values.
        k: 1 or more.
    """
    lowered = np.uint16(min(k, 31) << 10)
    magnitude = bits & _MAGNITUDE
    if magnitude.size and magnitude.max() >= _INF:
        return None
    out = bits - lowered  # wraps where e <= k: those are replaced below
    zero = magnitude == 0  # (often a fifth of a gradient, behind a ReLU): kept as they are
    out += zero.astype(np.uint16) * lowered
    # the nonzero values with e <= k (minus 1 wraps zero to the top, out of the range)
    magnitude -= np.uint16(1)
    low = np.flatnonzero(magnitude < np.uint16(min(k + 1, 31) << 10) - np.uint16(1))
    if low.size:
        below = magnitude[low].astype(np.uint32) + np.uint32(1)
        out[low] = (bits[low] & _SIGN) | _subnormal_units(below, k)
    return out


def _subnormal_units(magnitude: np.ndarray, k: int) -> np.ndarray:
    """Round ``magnitude`` (float16 bits without the sign, exponent field at most ``k``)
    times ``2**-k`` to float16's subnormal units, ties to even, as uint16."""
    e = magnitude >> np.uint32(10)
    normal = e > 0
    m = magnitude & np.uint32(0x3FF)
    m |= normal.astype(np.uint32) << np.uint32(10)  # the implicit bit
    np.maximum(e, np.uint32(1), out=e)
    shift = np.uint32(k + 1) - e  # at least 1, as e <= k
    np.minimum(shift, _MAX_SHIFT, out=shift)
    q = m >> shift
    rest = m - (q << shift)  # the bits shifted out
    half = np.uint32(1) << (shift - np.uint32(1))
    up = rest > half
    up |= (rest == half) & (q & np.uint32(1)).astype(bool)  # a tie goes to the even one
    q += up
    return q.astype(np.uint16)
