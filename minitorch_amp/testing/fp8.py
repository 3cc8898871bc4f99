"""FP8 landmarks, as Python floats, beside the float16 (:mod:`.fp16`) and bfloat16 (:mod:`.bf16`)
ones: :data:`E4M3` (``float8_e4m3fn``) and :data:`E5M2` (``float8_e5m2``).

A byte ``s eeee mmm`` (E4M3, bias 7) or ``s eeeee mm`` (E5M2, bias 15) is
``(-1)**s * 2**(e - bias) * (1 + m / 2**M)`` for ``e >= 1`` and
``(-1)**s * 2**(1 - bias) * (m / 2**M)`` for ``e == 0``; then the formats part::

    E4M3   0x01  2**-9   SMALLEST_SUBNORMAL     0x08  2**-6  SMALLEST_NORMAL
           0x7E  448     MAX                    0x7F  NaN (so is 0xFF; there is no inf)
    E5M2   0x01  2**-16  SMALLEST_SUBNORMAL     0x04  2**-14 SMALLEST_NORMAL
           0x7B  57344   MAX                    0x7C  +inf   0x7D..0x7F  NaN (and 0xFD..0xFF)

======================  ==============  ================  ==============
                        E4M3            E5M2              float16
======================  ==============  ================  ==============
exponent / fraction     4 / 3 bits      5 / 2 bits        5 / 10 bits
largest finite          448             57344             65504
a plain cast overflows  above 464 (NaN) from 61440 (inf)  from 65520 (inf)
smallest normal         2**-6           2**-14            2**-14
smallest subnormal      2**-9           2**-16            2**-24
spacing in [1, 2)       2**-3           2**-2             2**-10
======================  ==============  ================  ==============

NOTE: the two formats overflow differently at their halfway point. 464 lies halfway between
E4M3's 448 (fraction 110, even) and the next step, 480 (fraction 111, which E4M3 spends on
NaN): the tie goes to the even 448, so only values *above* 464 overflow. E5M2's halfway
point 61440 lies between 57344 (fraction 11, odd) and 65536 = inf (fraction 00, even): the
tie goes to inf, so 61440 itself overflows. :attr:`Fp8Format.overflows` knows which.

Scaled casts (Transformer Engine's, and ``fp8_cast.cu``'s with ``saturate``) clamp instead:
anything beyond ``MAX``, inf included, becomes ``+-MAX``; NaN stays NaN.

Example:
    >>> import ml_dtypes, numpy as np
    >>> from minitorch_amp.testing.fp8 import E4M3, E5M2
    >>> E4M3.MAX == float(ml_dtypes.finfo(ml_dtypes.float8_e4m3fn).max), E5M2.MAX
    (True, 57344.0)
    >>> np.float32([464, 465]).astype(E4M3.dtype).tolist(), E4M3.overflows(465.0)
    ([448.0, nan], True)
    >>> np.float32([61439.9, 61440]).astype(E5M2.dtype).tolist(), E5M2.overflows(61440.0)
    ([57344.0, inf], True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

__all__ = ["E4M3", "E5M2", "FORMATS", "Fp8Format", "format_of"]


@dataclass(frozen=True)
class Fp8Format:
    """One FP8 format's landmarks and rounding rules (all values are Python floats)."""

    name: str
    dtype: np.dtype
    exponent_bits: int
    mantissa_bits: int
    bias: int
    MAX: float
    """The largest finite value: 448 (E4M3) or 57344 (E5M2)."""
    OVERFLOW_THRESHOLD: float
    """``MAX`` plus half its spacing (464 or 61440): where a plain cast starts to overflow
    (above it for E4M3, from it on for E5M2: see the module's NOTE)."""
    NAN_BITS: tuple[int, ...]
    """Every byte that decodes to NaN: 0x7F and 0xFF (E4M3); 0x7D-0x7F and 0xFD-0xFF (E5M2)."""
    INF_BITS: tuple[int, ...]
    """The bytes of +inf and -inf (none for E4M3)."""

    @property
    def SMALLEST_SUBNORMAL(self) -> float:  # noqa: N802 - a constant, named like fp16's
        """``2**(1 - bias - mantissa_bits)``: 2**-9 or 2**-16, the spacing of subnormals."""
        return 2.0 ** (1 - self.bias - self.mantissa_bits)

    @property
    def SMALLEST_NORMAL(self) -> float:  # noqa: N802
        """``2**(1 - bias)``: 2**-6 or 2**-14."""
        return 2.0 ** (1 - self.bias)

    @property
    def UNDERFLOW_THRESHOLD(self) -> float:  # noqa: N802
        """Half the smallest subnormal: ``|x| <=`` it rounds to zero (the tie goes to 0)."""
        return self.SMALLEST_SUBNORMAL / 2

    @property
    def EPSILON(self) -> float:  # noqa: N802
        """The spacing in [1, 2): 2**-3 or 2**-2."""
        return 2.0**-self.mantissa_bits

    @property
    def UNIT_ROUNDOFF(self) -> float:  # noqa: N802
        """Half of ``EPSILON``: the largest relative error of rounding into the normal range."""
        return self.EPSILON / 2

    def overflows(self, x: float) -> bool:
        """Whether a plain (non-saturating) cast of the real number ``x`` gives NaN or inf."""
        magnitude = abs(float(x))
        if self.INF_BITS:  # E5M2: the tie at the threshold rounds to the even inf
            return magnitude >= self.OVERFLOW_THRESHOLD
        return magnitude > self.OVERFLOW_THRESHOLD

    def spacing(self, x: float) -> float:
        """The distance from ``|x|`` to the next larger value of this format (``MAX``'s own
        spacing at ``MAX``): ``2**(e - mantissa_bits)`` in binade ``e``.

        Example:
            >>> E4M3.spacing(1.0), E4M3.spacing(300.0), E5M2.spacing(1e-6) == 2.0**-16
            (0.125, 32.0, True)
        """
        magnitude = abs(float(x))
        if not magnitude <= self.MAX:
            raise ValueError(f"spacing needs a finite |x| <= {self.MAX}, got {x!r}")
        if magnitude < self.SMALLEST_NORMAL:
            return self.SMALLEST_SUBNORMAL
        return 2.0 ** (math.frexp(magnitude)[1] - 1 - self.mantissa_bits)

    def half_ulp(self, x: float) -> float:
        """The worst error of rounding the real number ``x`` into this format (no overflow):
        half the spacing at ``|x|``.

        Example:
            >>> E4M3.half_ulp(1.0), E5M2.half_ulp(448.0)
            (0.0625, 32.0)
        """
        magnitude = abs(float(x))
        if not magnitude <= self.OVERFLOW_THRESHOLD:
            raise ValueError(f"half_ulp needs |x| <= {self.OVERFLOW_THRESHOLD}, got {x!r}")
        return self.spacing(min(magnitude, self.MAX)) / 2

    def values(self) -> np.ndarray:
        """All 256 bytes decoded, as float64 (NaN where the byte is a NaN), index = byte."""
        return np.arange(256, dtype=np.uint8).view(self.dtype).astype(np.float64)


E4M3 = Fp8Format(
    name="E4M3",
    dtype=np.dtype(ml_dtypes.float8_e4m3fn),
    exponent_bits=4,
    mantissa_bits=3,
    bias=7,
    MAX=448.0,
    OVERFLOW_THRESHOLD=464.0,
    NAN_BITS=(0x7F, 0xFF),
    INF_BITS=(),
)
"""``float8_e4m3fn``: 4 exponent bits, 3 fraction bits, no inf."""

E5M2 = Fp8Format(
    name="E5M2",
    dtype=np.dtype(ml_dtypes.float8_e5m2),
    exponent_bits=5,
    mantissa_bits=2,
    bias=15,
    MAX=57344.0,
    OVERFLOW_THRESHOLD=61440.0,
    NAN_BITS=(0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF),
    INF_BITS=(0x7C, 0xFC),
)
"""``float8_e5m2``: 5 exponent bits, 2 fraction bits, with inf (the top byte of a float16)."""

FORMATS = {E4M3.dtype: E4M3, E5M2.dtype: E5M2}


def format_of(dtype) -> Fp8Format:
    """:data:`E4M3` or :data:`E5M2` for an FP8 dtype (or its name).

    Example:
        >>> format_of("float8_e5m2").MAX
        57344.0
    """
    try:
        return FORMATS[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise TypeError(f"not an FP8 dtype: {dtype!r}; use float8_e4m3fn or float8_e5m2") from None
