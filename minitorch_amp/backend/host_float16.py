"""float16 <-> float32 on NumPy arrays: NumPy's ``astype`` bits, at a cost that suits AMP.

NumPy converts float16 one element at a time in a scalar loop: 2.5 ns an element to float32,
4.7 from it, and about 100 ns for a float32 value that rounds into float16's subnormals (where
unscaled gradients land). An eager AMP step on the CPU converts 35 to 40 times (the float16
GEMM twin widens its operands and rounds its product), and at the tiny step's sizes those
conversions were a fifth of its host time. So, in order of preference:

1. ``csrc/float16.c``, compiled at first use (``backend/host_c.py``): a few integer operations
   an element with no branch, vectorized by the compiler, the same cost for every value;
2. without a C compiler (or with ``MINITORCH_AMP_HOST_C=0``), whole-array NumPy paths where
   they pay: a table lookup to float32 from 8192 elements on, and integer passes to float16
   (:func:`float16_from_float32`) when a sample finds values NumPy converts slowly;
3. else NumPy's own ``astype``.

Every path gives ``astype``'s bits, NaN payloads included (``tests/test_float16_rounding.py``,
``tests/test_host_float16.py``).

Example:
    >>> x = np.array([1 + 2**-11, 3 * 2**-26, 65520.0], np.float32)
    >>> to_float16(x).tolist(), to_float32(to_float16(x)).dtype.name
    ([1.0, 5.960464477539063e-08, inf], 'float32')
"""

from __future__ import annotations

import numpy as np

from . import host_c
from .blocks import BLOCK, blocks
from .dtypes import float16, float32

__all__ = ["float16_from_float32", "float32_from_float16", "to_float16", "to_float32"]


def compiled():
    """The compiled ``csrc/float16.c`` module, or None (``host_c.status('float16')``: why)."""
    return host_c.load("float16")


def to_float16(x: np.ndarray) -> np.ndarray:
    """``x.astype(float16)`` for a float32 NumPy ``x``: a new C-contiguous array."""
    c = compiled()
    if c is not None:
        out = np.empty(x.shape, float16)
        c.from_float32(x if x.flags.c_contiguous else np.ascontiguousarray(x), out)
        return out
    if x.size >= _WHOLE_ARRAY_FROM and _slow_to_float16(x):
        return float16_from_float32(x)
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(float16, order="C")


def to_float32(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``x.astype(float32)`` for a float16 NumPy ``x``: a new C-contiguous array, or ``out``
    (a C-contiguous float32 array of ``x``'s size) written and returned."""
    c = compiled()
    if c is not None:
        if out is None:
            out = np.empty(x.shape, float32)
        c.to_float32(x if x.flags.c_contiguous else np.ascontiguousarray(x), out)
        return out
    if out is not None or x.size >= _WHOLE_ARRAY_FROM:
        return float32_from_float16(x, out=out)
    return x.astype(float32, order="C")


# --- the NumPy paths (no C compiler) ----------------------------------------------------

_WHOLE_ARRAY_FROM = 8192  # below this NumPy's own conversion costs about what a sample does


def _slow_to_float16(x: np.ndarray) -> bool:
    """Whether 4 or more of an even 256-element sample of float32 ``x`` have magnitudes in
    (0, 2**-14): values NumPy rounds into float16's subnormals slowly (integer passes pay
    from about 1% of them; a 64-element sample could not see that)."""
    flat = x.reshape(-1)
    sample = flat[:: max(1, flat.size // 256)]
    # magnitude - 1 wraps 0 to the top of the range: only nonzero ones below the bound count
    magnitude = (sample.view(np.uint32) & np.uint32(0x7FFFFFFF)) - np.uint32(1)
    return int(np.count_nonzero(magnitude < np.uint32(0x387FFFFF))) >= 4


_FLOAT16_TO_FLOAT32: list = []  # the table, made at first use


def float32_from_float16(x: np.ndarray, out=None) -> np.ndarray:
    """NumPy's ``x.astype(float32)`` for a float16 ``x``, bit for bit, by table lookup (into
    ``out``, a float32 array of ``x``'s size, when given: a gather's flat buffer): as fast
    as NumPy on normal values, 7x faster on subnormal ones."""
    if not _FLOAT16_TO_FLOAT32:
        every = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(float16)
        _FLOAT16_TO_FLOAT32.append(every.astype(float32))
    bits = x.view(np.uint16) if x.flags.c_contiguous else x.copy(order="C").view(np.uint16)
    if out is None:
        if x.ndim == 0:  # take() would return a NumPy scalar
            return x.astype(float32)
        out = np.empty(x.shape, dtype=float32)
    # NOTE: mode="wrap" changes no index (every uint16 is one of the table's 2**16 rows) and
    # lets take() write into out directly; the default "raise" goes through a temporary
    # (a [1024, 1024] array: 1.4 ms against 2.6 with out, 2.1 without, 2-core CPU)
    np.take(_FLOAT16_TO_FLOAT32[0], bits.reshape(-1), out=out.reshape(-1), mode="wrap")
    return out


def float16_from_float32(x: np.ndarray) -> np.ndarray:
    """NumPy's ``x.astype(float16)``, bit for bit (NaN payloads included), computed on the
    float32 bits: round to nearest even, subnormals, overflow to inf.

    Every value takes both lanes, and the magnitude picks one:

    * a normal result: the float32 bits re-biased (exponent 127 -> 15) and the 13 low bits
      of the significand rounded off, ties to even; a carry runs into the exponent, so
      65520 and above become inf (larger magnitudes, inf and NaN are clamped, or given
      their NaN payload, in a pass that runs only when one is there);
    * below 2**-14, a subnormal one: ``|x| + 0.5`` in float32 rounds ``|x|`` to a multiple
      of 2**-24 (0.5's ulp, float16's subnormal step), ties to even in the FPU itself, and
      the sum's low bits are the result's.

    About fifteen integer passes, no branch per element: about as fast as NumPy's ``astype``
    on normal values from ~10k elements, and 25x faster on subnormal ones (2-core CPU).

    Example:
        >>> x = np.array([1 + 2**-11, 3 * 2**-26, 65520.0, -2**-25], np.float32)
        >>> float16_from_float32(x).tolist()  # a tie to even, a subnormal, inf, -0
        [1.0, 5.960464477539063e-08, inf, -0.0]
    """
    flat = x.reshape(-1)  # 1-D (a copy if strided): NumPy turns 0-d results into scalars
    if flat.size <= BLOCK:
        return _float16_bits(flat.view(np.uint32)).view(float16).reshape(x.shape)
    out = np.empty(flat.size, np.uint16)  # block by block: the passes' temporaries in cache
    for block in blocks(flat.size):
        out[block] = _float16_bits(flat[block].view(np.uint32))
    return out.view(float16).reshape(x.shape)


def _float16_bits(u: np.ndarray) -> np.ndarray:
    """:func:`float16_from_float32` of the 1-D float32 bits ``u``, as uint16 bits."""
    a = u & np.uint32(0x7FFFFFFF)
    with np.errstate(invalid="ignore"):  # a signalling NaN's lane: replaced below
        sub = (a.view(np.float32) + np.float32(0.5)).view(np.uint32)
    sub -= np.uint32(0x3F000000)  # 0.5's bits: what is left counts units of 2**-24
    h = a >> np.uint32(13)
    h &= np.uint32(1)  # the last kept bit: a tie rounds to even
    h += a
    h += np.uint32(0xC8000FFF)  # + 0x0FFF, and the exponent re-biased: - 0x38000000 mod 2**32
    h >>= np.uint32(13)
    # NOTE: a select by bit mask, not copyto(where=): the two lanes mix unpredictably in real
    # gradients, and the masked copy's branch per element took 74 us on 12,480 of them,
    # against 13 us for the mask. (a - 2**-14's bits) is negative in int32 exactly below
    # 2**-14; >> 31 spreads its sign bit: all ones there.
    small = a.view(np.int32) - np.int32(0x38800000)
    small >>= np.int32(31)
    sub ^= h
    sub &= small.view(np.uint32)
    h ^= sub  # h where small is 0, sub where it is all ones
    if h.size and h.max() > np.uint32(0x7BFF):  # inf, NaN, or a finite value that rounds to inf
        np.minimum(h, np.uint32(0x7C00), out=h)
        nan = a > np.uint32(0x7F800000)
        if nan.any():  # NaN keeps the top of its payload (and stays a NaN)
            payload = (a >> np.uint32(13)) & np.uint32(0x3FF)
            payload[payload == 0] = 1  # a NaN whose kept payload is 0 must not become inf
            np.copyto(h, np.uint32(0x7C00) | payload, where=nan)
    half = h.astype(np.uint16)
    half |= (u >> np.uint32(16)).astype(np.uint16) & np.uint16(0x8000)
    return half
