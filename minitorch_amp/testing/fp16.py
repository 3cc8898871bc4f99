"""IEEE 754 binary16 (float16) landmarks, as Python floats, for tests and for reasoning.

float16 has 1 sign bit, 5 exponent bits (bias 15) and 10 fraction bits. A finite value is
``(-1)**s * 2**(e - 15) * (1 + f / 1024)`` for exponents ``e`` in 1..30 (normal numbers) and
``(-1)**s * 2**-14 * (f / 1024)`` for ``e == 0`` (zero and the subnormals)::

    0x0000  +0.0                      0x0001  2**-24   SMALLEST_SUBNORMAL
    0x03FF  2**-14 - 2**-24           0x0400  2**-14   SMALLEST_NORMAL
            LARGEST_SUBNORMAL
    0x3C00  1.0                       0x3C01  1 + 2**-10  (EPSILON above 1)
    0x7BFF  65504                     0x7C00  +inf     0x7C01..0x7FFF  NaNs
            MAX

What float32 -> float16 rounding (round to nearest, ties to even) does at the edges:

* ``|x| >= OVERFLOW_THRESHOLD`` (65520, halfway between 65504 and 2**16) becomes +-inf;
  anything below it rounds to at most 65504.
* ``|x| <= UNDERFLOW_THRESHOLD`` (2**-25, halfway between 0 and 2**-24) becomes +-0: the
  tie at 2**-25 itself goes to the even neighbour, zero. Just above 2**-25 rounds up to 2**-24.
* Between, the error is at most half a spacing: ``UNIT_ROUNDOFF * |x|`` (2**-11 relative)
  for normal results, ``SMALLEST_SUBNORMAL / 2`` (absolute) for subnormal ones.

Example:
    >>> import numpy as np
    >>> from minitorch_amp.testing import fp16
    >>> fp16.MAX == float(np.finfo(np.float16).max)
    True
    >>> with np.errstate(over="ignore"):  # overflow to inf is the point here
    ...     np.float32([fp16.OVERFLOW_THRESHOLD, fp16.UNDERFLOW_THRESHOLD]).astype(np.float16)
    array([inf,  0.], dtype=float16)
"""

from __future__ import annotations

import math

__all__ = [
    "EPSILON",
    "LARGEST_SUBNORMAL",
    "MAX",
    "MAX_EXPONENT",
    "MIN_EXPONENT",
    "OVERFLOW_THRESHOLD",
    "SMALLEST_NORMAL",
    "SMALLEST_SUBNORMAL",
    "UNDERFLOW_THRESHOLD",
    "UNIT_ROUNDOFF",
    "half_ulp",
]

SMALLEST_SUBNORMAL = 2.0**-24
"""0x0001, 5.96e-08: the smallest positive float16; the spacing of all subnormals."""

LARGEST_SUBNORMAL = 2.0**-14 - 2.0**-24
"""0x03FF, 6.0976e-05: the largest float16 with a zero exponent field."""

SMALLEST_NORMAL = 2.0**-14
"""0x0400, 6.1035e-05: the smallest positive normal float16 (``np.finfo('f2').tiny``)."""

MAX = 65504.0
"""0x7BFF: the largest finite float16, ``(2 - 2**-10) * 2**15``."""

OVERFLOW_THRESHOLD = 65520.0
"""Not a float16: ``MAX`` plus half its spacing (32 / 2). Rounding sends ``|x| >= 65520`` to inf."""

UNDERFLOW_THRESHOLD = 2.0**-25
"""Not a float16: half of ``SMALLEST_SUBNORMAL``. Rounding sends ``|x| <= 2**-25`` to zero."""

EPSILON = 2.0**-10
"""0.000977: the spacing of float16 values in [1, 2) (``np.finfo('f2').eps``)."""

UNIT_ROUNDOFF = 2.0**-11
"""Half of ``EPSILON``: the largest relative error of rounding into the normal range."""

MIN_EXPONENT = -14
"""The exponent of ``SMALLEST_NORMAL``; subnormals reach down to ``2**(MIN_EXPONENT - 10)``."""

MAX_EXPONENT = 15
"""The exponent of ``MAX``: the largest power of two in float16 is ``2**15 = 32768``."""


def half_ulp(x: float) -> float:
    """The worst error of rounding the real number ``x`` to float16 (without overflow).

    Half the float16 spacing at ``|x|``: ``2**(floor(log2|x|) - 11)`` for ``|x|`` in the
    normal range, ``2**-25`` for ``|x| < 2**-14`` (subnormals are evenly spaced).

    Args:
        x: a finite number with ``|x| < OVERFLOW_THRESHOLD``.

    Example:
        >>> half_ulp(1.0), half_ulp(1.5), half_ulp(65504.0), half_ulp(1e-6) == 2.0**-25
        (0.00048828125, 0.00048828125, 16.0, True)
    """
    magnitude = abs(float(x))
    if not magnitude < OVERFLOW_THRESHOLD:
        raise ValueError(f"half_ulp needs a finite |x| < {OVERFLOW_THRESHOLD}, got {x!r}")
    if magnitude < SMALLEST_NORMAL:
        return UNDERFLOW_THRESHOLD
    exponent = min(math.frexp(magnitude)[1] - 1, MAX_EXPONENT)  # 2**exponent <= |x|
    return 2.0 ** (exponent - 11)
