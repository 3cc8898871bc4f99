"""float16 values times ``2**-k``, computed on their bits: the CPU's fast loss unscale.

Dynamic loss scaling keeps the scale a power of two (Paddle's defaults start at ``2**16``
and move it by ``x2`` and ``x0.5``), so unscaling a float16 gradient is a multiplication by
``2**-k``. The general path widens every value to float32, multiplies, and rounds back to
float16; on NumPy that rounding is the expensive part, and most expensive exactly where
unscaled gradients land, in float16's subnormal range (see ``backend.cast.convert``). Here
each value takes both of two exact lanes, and its exponent field ``e`` picks one:

* ``e > k``: the result stays normal, the same significand with the exponent field lowered
  by ``k``: ``bits - (k << 10)``, integer work on the float16 bits;
* ``e <= k`` (zero and subnormals included): the result is at most the smallest normal. In
  float32, ``|x| * 2**-k`` is exact (a normal float32 for ``k <= 100``), and adding 0.5,
  whose ulp is float16's subnormal step ``2**-24``, rounds it to that step, ties to even,
  in the FPU: the sum's low bits count the result's units (1024 of them carry into
  ``0x0400``, the smallest normal, which is what the bits of that value are).

No branch per element, one float32 widening (``host_float16.to_float32``), about fifteen
NumPy passes: the same cost however many gradients are subnormal, where the general path's
rounding slows down with them. Only finite values and ``1 <= k <= 100``: an inf or NaN (then
:func:`times_power_of_two` returns None), or a scale of 1 or more (whose product may
overflow), takes the general path. The result is the general path's, bit for bit, for every
finite float16 and every such ``k`` (``tests/test_pow2_scale.py`` checks all 63,488 finite
values for each).

Example:
    >>> import numpy as np
    >>> g = np.array([6.0, 2.0**-14, -3 * 2.0**-24, 0.0], np.float16)
    >>> times_power_of_two(g.view(np.uint16), 2).view(np.float16).tolist()  # x 1/4
    [1.5, 1.52587890625e-05, -5.960464477539063e-08, 0.0]
"""

from __future__ import annotations

import numpy as np

from .dtypes import float16
from .host_float16 import to_float32

__all__ = ["power_of_two_exponent", "times_power_of_two"]

_MAGNITUDE = np.uint16(0x7FFF)
_SIGN = np.uint16(0x8000)
_INF = 0x7C00  # float16's exponent field all ones: inf and NaN at or above this magnitude
_HALF_BITS = np.uint32(0x3F000000)  # 0.5 in float32; its ulp is 2**-24
MAX_K = 100  # 2**-24 * 2**-k is a normal float32 up to k = 102


def power_of_two_exponent(inv_scale: np.ndarray) -> int | None:
    """``k`` when the float32 ``[1]`` array ``inv_scale`` holds exactly ``2**-k`` with ``k``
    from 1 to :data:`MAX_K`, else None."""
    bits = int(inv_scale.view(np.uint32)[0])
    exponent = bits >> 23  # the sign bit too: a negative value is refused with it
    if bits & 0x7FFFFF or not 127 - MAX_K <= exponent <= 126:
        return None
    return 127 - exponent


def times_power_of_two(bits: np.ndarray, k: int) -> np.ndarray | None:
    """The bits of ``float16(bits) * 2**-k``, rounded to nearest even, as a new uint16
    array; None when an inf or a NaN is among them (the general path takes those).

    Args:
        bits: 1-D C-contiguous uint16, the bits of float16 values.
        k: from 1 to :data:`MAX_K`.
    """
    if not 1 <= k <= MAX_K:
        raise ValueError(f"times_power_of_two: k must be from 1 to {MAX_K}, got {k}")
    magnitude = bits & _MAGNITUDE
    if magnitude.size and magnitude.max() >= _INF:
        return None
    # e <= k: |x| * 2**-k + 0.5 in float32, whose low bits count units of 2**-24
    wide = to_float32(magnitude.view(float16))
    wide *= np.float32(2.0**-k)
    wide += np.float32(0.5)
    units = wide.view(np.uint32)
    units -= _HALF_BITS
    low = units.astype(np.uint16)
    if k < 30:  # (from k = 30 on every finite value has e <= k)
        # e > k: the exponent field lowered by k (where e <= k this wraps: not selected)
        out = magnitude - np.uint16(k << 10)
        # all ones where e <= k: magnitude - bound is negative there, and >> 15 spreads it
        below = magnitude.view(np.int16) - np.int16((k + 1) << 10)
        below >>= 15
        low ^= out
        low &= below.view(np.uint16)
        out ^= low  # out where below is 0, low where it is all ones
    else:
        out = low
    out |= bits & _SIGN
    return out
