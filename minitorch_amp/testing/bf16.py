"""bfloat16 landmarks, as Python floats, beside the float16 ones in :mod:`.fp16`.

bfloat16 is the upper half of a float32: 1 sign bit, 8 exponent bits (bias 127, float32's) and
7 fraction bits. A finite value is ``(-1)**s * 2**(e - 127) * (1 + f / 128)`` for exponents
``e`` in 1..254 and ``(-1)**s * 2**-126 * (f / 128)`` for ``e == 0``::

    0x0000  +0.0                      0x0001  2**-133  SMALLEST_SUBNORMAL
    0x007F  2**-126 - 2**-133         0x0080  2**-126  SMALLEST_NORMAL
            LARGEST_SUBNORMAL
    0x3F80  1.0                       0x3F81  1 + 2**-7  (EPSILON above 1)
    0x7F7F  3.3895e38                 0x7F80  +inf     0x7F81..0x7FFF  NaNs
            MAX

Side by side with float16 and float32:

======================  ==============  ================  ==============
                        float16         bfloat16          float32
======================  ==============  ================  ==============
exponent / fraction     5 / 10 bits     8 / 7 bits        8 / 23 bits
largest finite          65504           3.3895e38         3.4028e38
rounds to inf from      65520           3.3962e38         3.4028e38 + ...
smallest normal         2**-14          2**-126           2**-126
smallest subnormal      2**-24          2**-133           2**-149
spacing in [1, 2)       2**-10          2**-7             2**-23
======================  ==============  ================  ==============

What float32 -> bfloat16 rounding (round to nearest, ties to even) does at the edges:

* ``|x| >= OVERFLOW_THRESHOLD`` (``(2 - 2**-8) * 2**127``, halfway between ``MAX`` and
  ``2**128``) becomes +-inf; anything below rounds to at most ``MAX``.
* ``|x| <= UNDERFLOW_THRESHOLD`` (``2**-134``) becomes +-0.
* Between, the error is at most half a spacing: ``UNIT_ROUNDOFF * |x|`` (``2**-8``
  relative, 8x float16's) for normal results.

Example:
    >>> import ml_dtypes, numpy as np
    >>> from minitorch_amp.testing import bf16
    >>> bf16.MAX == float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    True
    >>> np.float32([bf16.OVERFLOW_THRESHOLD, bf16.UNDERFLOW_THRESHOLD]).astype(ml_dtypes.bfloat16)
    array([inf, 0], dtype=bfloat16)
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
    "spacing",
]

SMALLEST_SUBNORMAL = 2.0**-133
"""0x0001, 9.18e-41: the smallest positive bfloat16; the spacing of all subnormals."""

LARGEST_SUBNORMAL = 2.0**-126 - 2.0**-133
"""0x007F: the largest bfloat16 with a zero exponent field."""

SMALLEST_NORMAL = 2.0**-126
"""0x0080, 1.1755e-38: the smallest positive normal bfloat16 (float32's too)."""

MAX = (2 - 2.0**-7) * 2.0**127
"""0x7F7F, 3.3895e38: the largest finite bfloat16."""

OVERFLOW_THRESHOLD = (2 - 2.0**-8) * 2.0**127
"""Not a bfloat16 (but a float32): ``MAX`` plus half its spacing. ``|x| >=`` it rounds to inf."""

UNDERFLOW_THRESHOLD = 2.0**-134
"""Not a bfloat16: half of ``SMALLEST_SUBNORMAL``. Rounding sends ``|x| <= 2**-134`` to zero."""

EPSILON = 2.0**-7
"""0.0078125: the spacing of bfloat16 values in [1, 2)."""

UNIT_ROUNDOFF = 2.0**-8
"""Half of ``EPSILON``: the largest relative error of rounding into the normal range."""

MIN_EXPONENT = -126
"""The exponent of ``SMALLEST_NORMAL``; subnormals reach down to ``2**(MIN_EXPONENT - 7)``."""

MAX_EXPONENT = 127
"""The exponent of ``MAX``: the largest power of two in bfloat16 is ``2**127``."""


def spacing(x: float) -> float:
    """The distance from ``|x|`` to the next larger bfloat16: ``2**(e - 7)`` in binade ``e``.

    Constant within a binade, doubling from one binade to the next; ``2**-133`` for the
    subnormals (and for ``[2**-126, 2**-125)``, the first normal binade).

    Args:
        x: a finite number with ``|x| <= MAX``.

    Example:
        >>> spacing(1.0), spacing(1.99), spacing(256.0), spacing(1e-40) == 2.0**-133
        (0.0078125, 0.0078125, 2.0, True)
    """
    magnitude = abs(float(x))
    if not magnitude <= MAX:
        raise ValueError(f"spacing needs a finite |x| <= {MAX}, got {x!r}")
    if magnitude < SMALLEST_NORMAL:
        return SMALLEST_SUBNORMAL
    return 2.0 ** (math.frexp(magnitude)[1] - 1 - 7)


def half_ulp(x: float) -> float:
    """The worst error of rounding the real number ``x`` to bfloat16 (without overflow).

    Half the spacing at ``|x|``: ``2**(floor(log2|x|) - 8)`` in the normal range, ``2**-134``
    below ``2**-126``.

    Args:
        x: a finite number with ``|x| < OVERFLOW_THRESHOLD``.

    Example:
        >>> half_ulp(1.0), half_ulp(300.0), half_ulp(1e-40) == 2.0**-134
        (0.00390625, 1.0, True)
    """
    magnitude = abs(float(x))
    if not magnitude < OVERFLOW_THRESHOLD:
        raise ValueError(f"half_ulp needs a finite |x| < {OVERFLOW_THRESHOLD}, got {x!r}")
    if magnitude < SMALLEST_NORMAL:
        return UNDERFLOW_THRESHOLD
    exponent = min(math.frexp(magnitude)[1] - 1, MAX_EXPONENT)
    return 2.0 ** (exponent - 8)
