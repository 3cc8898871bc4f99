"""Dtype casts: the raw float32 <-> float16/bfloat16 kernels (``cuda/cast.cu``) and their twin.

:func:`cast` is ``x.astype(dtype)`` with the rounding spelled out, plus an optional device
flag that records whether the result holds an inf or a NaN (a float32 activation above
65504 becomes inf in float16: that is exactly the overflow AMP watches for).

* NumPy arrays: ``astype``, which rounds to nearest even. This is the specification.
* CuPy float32 <-> float16 and float32 <-> bfloat16: the raw kernels, 16 bytes per load
  and store, with the flag set on the device (no host sync). (CuPy's own ``astype`` to
  bfloat16 exists only from CuPy 14; these kernels use ``__nv_bfloat16`` on its bytes.)
* Any other pair, or ``MINITORCH_AMP_RAW_KERNELS=0``: CuPy's ``astype``, same rounding.

:func:`cast_pair` casts two float32 arrays (a white-list op's activation and weight) to
float16 or bfloat16 in one launch on a GPU, with :func:`cast`'s bits.

Example:
    >>> import numpy as np
    >>> found_inf = np.zeros(1, dtype=bool)
    >>> out = cast(np.array([1 + 2**-11, 65504.0, 65520.0], "float32"), "float16", found_inf)
    >>> out.tolist(), found_inf  # a tie rounds to the even 1.0; 65520 overflows
    ([1.0, 65504.0, inf], array([ True]))
"""

from __future__ import annotations

import numpy as np

from . import kernels
from .blocks import BLOCK, blocks
from .device import get_array_module
from .dtypes import FP8, bfloat16, bool_, float16, float32
from .fp8 import from_fp8, to_fp8

__all__ = ["cast", "cast_pair", "convert", "to_bfloat16"]

# name in cast.cu for (source dtype, target dtype, with found_inf check)
_KERNELS = {
    (float32, float16, False): "cast_f32_to_f16",
    (float32, float16, True): "cast_f32_to_f16_check",
    (float16, float32, False): "cast_f16_to_f32",
    (float16, float32, True): "cast_f16_to_f32_check",
    (float32, bfloat16, False): "cast_f32_to_bf16",
    (float32, bfloat16, True): "cast_f32_to_bf16_check",
    (bfloat16, float32, False): "cast_bf16_to_f32",
    (bfloat16, float32, True): "cast_bf16_to_f32_check",
}
# name in cast.cu of the two-array kernel for a float32 pair cast to (target dtype)
_PAIR_KERNELS = {float16: "cast_pair_f32_to_f16", bfloat16: "cast_pair_f32_to_bf16"}
CAST = kernels.register("cast.cu", names=(*_KERNELS.values(), *_PAIR_KERNELS.values()))

# (source, target) pairs whose NumPy cast is ``convert`` itself: no flag, FP8 or bfloat16 step
_PLAIN = frozenset({(float32, float16), (float16, float32)})

_THREADS = 256
_PER_THREAD = 8  # elements per vector step in cast.cu
_MAX_BLOCKS = 4096  # a few waves on an H100 (132 SMs x 8 blocks); the kernel grid-strides


def cast(x, dtype, found_inf=None, out=None):
    """``x`` converted to ``dtype`` (round to nearest even); ``found_inf |= any(!isfinite(out))``.

    float32 -> float16 is IEEE round-to-nearest-even: values at or above 65520 in magnitude
    become +-inf (65504 is the largest float16, 65520 is halfway to the next power of two),
    NaN stays NaN (payload not specified), subnormals down to 2**-24 are exact, and a tie
    goes to the neighbour with an even last bit. float16 -> float32 is exact.

    Args:
        x: a NumPy or CuPy array. A non-contiguous CuPy input is first copied with
            ``ascontiguousarray`` (the raw kernel sees only bytes); the result is always a
            new C-contiguous array, also when ``dtype`` is ``x``'s own dtype.
        dtype: the target dtype (anything ``numpy.dtype`` accepts).
        found_inf: optional bool array of shape [1] on ``x``'s device; set (never cleared)
            when the result holds an inf or a NaN.
        out: optional C-contiguous array of ``dtype`` and ``x``'s shape, of ``x``'s kind
            (NumPy or CuPy), that receives the result: on the GPU the kernel writes it there
            (a parameter's gradient cast straight into its ``.grad`` buffer: no copy after).

    Returns:
        A new array of ``dtype`` and ``x``'s shape (``out`` itself when given).

    Raises:
        ValueError: ``found_inf`` is not a bool array of shape [1], or ``out`` does not fit;
            nothing is written then.
        TypeError: ``x`` is a CuPy array and ``found_inf`` or ``out`` is not.

    Example:
        >>> import numpy as np
        >>> out = cast(np.array([2.0**-24, 2.0**-25, 3 * 2.0**-25], "float32"), "float16")
        >>> (out.astype("float64") / 2.0**-24).tolist()  # in units of the smallest subnormal
        [1.0, 0.0, 2.0]
    """
    dtype = np.dtype(dtype)
    if out is not None:
        _check_out(out, x, dtype)
    elif found_inf is None and x.__class__ is np.ndarray and (x.dtype, dtype) in _PLAIN:
        return _convert_quietly(x, dtype)  # the common case on the CPU: nothing to decide
    if found_inf is not None and (found_inf.shape != (1,) or found_inf.dtype != bool_):
        raise ValueError(
            f"found_inf must be a bool array of shape [1], got {found_inf.dtype} of shape "
            f"{list(found_inf.shape)}"
        )
    xp = get_array_module(x)
    check = found_inf is not None
    name = _KERNELS.get((x.dtype, dtype, check))
    if xp is np or name is None or not kernels.enabled():
        result = _cast_twin(xp, x, dtype, found_inf)
        if out is None:
            return result
        copy_into(out, result)
        return out

    if check and get_array_module(found_inf) is not xp:
        raise TypeError("found_inf must be a CuPy array on x's device, like x")
    with x.device:  # allocate and launch on x's GPU, whichever is current
        if not x.flags.c_contiguous:  # the kernel sees bytes, not strides (0-d is contiguous)
            x = xp.ascontiguousarray(x)
        out = xp.empty(x.shape, dtype=dtype) if out is None else out
        n = x.size
        if n:
            blocks = min(-(-n // (_THREADS * _PER_THREAD)), _MAX_BLOCKS)
            args = (x, out, np.int64(n))  # int64: a count above 2**31 still fits
            args += (found_inf,) if check else ()
            kernels.launch("cast.cu", name, (blocks,), (_THREADS,), args)
    return out


def _check_out(out, x, dtype) -> None:
    if get_array_module(out) is not get_array_module(x):
        raise TypeError("cast: out must be an array of x's kind (both NumPy or both CuPy)")
    if out.dtype != dtype or out.shape != x.shape or not out.flags.c_contiguous:
        raise ValueError(
            f"cast: out ({out.dtype} {list(out.shape)}, C-contiguous: "
            f"{out.flags.c_contiguous}) must be a C-contiguous {dtype} array of x's shape "
            f"{list(x.shape)}"
        )


@np.errstate(over="ignore", invalid="ignore")  # as _cast_twin (a decorator: half a with's cost)
def _convert_quietly(x, dtype):
    return convert(x, dtype)


def cast_pair(a, b, dtype):
    """``(cast(a, dtype), cast(b, dtype))``, bit for bit, in one launch on a GPU.

    Under AMP a white-list op such as Linear casts two float32 inputs, the activation and
    the weight, to float16 or bfloat16: here that is one launch of ``cast_pair_f32_to_f16``
    (or ``_bf16``) instead of two. Its grid is split between the two arrays: each gets the
    blocks its own cast would launch (``ceil(n / 2048)``) while the two fit in 4096; past
    that the 4096 are shared in proportion to the sizes, at least one each.

    Any other case is the two casts themselves: NumPy arrays (the specification, ``astype``
    twice), a source that is not float32, another target dtype, raw kernels disabled, arrays
    on two different GPUs, or an empty array (the other one's cast is one plain launch).

    Args:
        a: a NumPy or CuPy array.
        b: an array of the same kind as ``a`` (both NumPy or both CuPy).
        dtype: the target dtype (anything ``numpy.dtype`` accepts).

    Returns:
        ``(a_cast, b_cast)``: new C-contiguous arrays of ``dtype``, of ``a``'s and ``b``'s
        shapes, on their devices.

    Raises:
        TypeError: one of ``a`` and ``b`` is a CuPy array and the other is not; nothing is
            allocated (move both to one device first, e.g. with ``cupy.asarray``).

    Example:
        >>> import numpy as np
        >>> x = np.array([1 + 2**-11, 65520.0], "float32")
        >>> w = np.array([[2.0**-25, 3 * 2.0**-25]], "float32")
        >>> x16, w16 = cast_pair(x, w, "float16")  # ties to even; 65520 overflows
        >>> x16.tolist(), (w16.astype("float64") / 2.0**-24).tolist()
        ([1.0, inf], [[0.0, 2.0]])
    """
    dtype = np.dtype(dtype)
    xp, xp_b = get_array_module(a), get_array_module(b)
    if xp is not xp_b:
        raise TypeError(
            "cast_pair needs a and b on one device, got a NumPy array and a CuPy array: "
            "move both to the GPU (cupy.asarray) or both to the host (cupy.asnumpy)"
        )
    name = _PAIR_KERNELS.get(dtype)
    if (
        xp is np
        or name is None
        or (a.dtype, b.dtype) != (float32, float32)
        or not kernels.enabled()
        or a.device.id != b.device.id
        or a.size == 0
        or b.size == 0
    ):
        return cast(a, dtype), cast(b, dtype)

    with a.device:  # allocate and launch on the arrays' GPU, whichever is current
        if not a.flags.c_contiguous:  # the kernel sees bytes, not strides
            a = xp.ascontiguousarray(a)
        if not b.flags.c_contiguous:
            b = xp.ascontiguousarray(b)
        out_a, out_b = xp.empty(a.shape, dtype=dtype), xp.empty(b.shape, dtype=dtype)
        blocks_a, blocks_b = _split_blocks(a.size, b.size)
        args = (a, out_a, np.int64(a.size), b, out_b, np.int64(b.size), np.int32(blocks_a))
        kernels.launch("cast.cu", name, (blocks_a + blocks_b,), (_THREADS,), args)
    return out_a, out_b


def _split_blocks(n0: int, n1: int) -> tuple[int, int]:
    """The pair kernel's grid for two non-empty arrays, as (blocks for 0, blocks for 1):
    each array's own grid while the two fit in ``_MAX_BLOCKS``, else ``_MAX_BLOCKS`` split
    in proportion to the sizes (rounded to nearest), at least one block each."""
    per_block = _THREADS * _PER_THREAD
    own0, own1 = -(-n0 // per_block), -(-n1 // per_block)
    if own0 + own1 <= _MAX_BLOCKS:
        return own0, own1
    blocks0 = (2 * _MAX_BLOCKS * n0 + (n0 + n1)) // (2 * (n0 + n1))
    blocks0 = min(max(blocks0, 1), _MAX_BLOCKS - 1)
    return blocks0, _MAX_BLOCKS - blocks0


def _cast_twin(xp, x, dtype, found_inf):
    """The specification: ``astype`` (round to nearest even), then OR the inf/NaN check."""
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf is the point here
        if dtype in FP8:  # plain: E4M3 overflows to NaN, E5M2 to inf (rounded once)
            out = to_fp8(x, dtype)
        elif x.dtype in FP8:
            out = from_fp8(x, dtype)
        elif dtype == bfloat16 and x.dtype != float32 and x.dtype not in (float16, bfloat16):
            out = to_bfloat16(x)
        else:
            out = convert(x, dtype)  # a new C-contiguous array, as from the kernel
    if found_inf is not None and (out.dtype.kind in "fc" or out.dtype in (bfloat16, *FP8)):
        xp.logical_or(found_inf, ~xp.isfinite(out).all(), out=found_inf)
    return out


def to_bfloat16(x):
    """``x`` (float64, an integer or any dtype) rounded ONCE to nearest-even bfloat16.

    float32, float16 and bfloat16 sources convert with ``astype`` (float16 is exact in
    float32, and ``ml_dtypes`` rounds float32 correctly). Wider sources need care.

    NOTE: ``ml_dtypes`` converts float64 through float32, rounding twice: 1 + 2**-8 + 2**-30
    becomes 1 + 2**-8 in float32 (a tie for bfloat16), then the even 1.0, where the correct
    answer is 1 + 2**-7. So the rounding happens in float64, where nothing is lost: a normal
    result keeps 8 significant bits (``frexp`` gives ``|x| = m * 2**e``, ``rint(m * 256)``
    rounds to nearest even), a subnormal one is a whole multiple of 2**-133. Only the exact
    result goes to float32 (for its top 16 bits), never a float32 subnormal: the GPU would
    flush it to zero (CuPy compiles every kernel with ``-ftz=true``), losing bfloat16's
    subnormals 2**-133 .. 2**-126. Overflow becomes inf and NaN stays NaN.

    Example:
        >>> import numpy as np
        >>> float(to_bfloat16(np.array(1 + 2**-8 + 2**-30)))
        1.0078125
    """
    xp = get_array_module(x)
    if x.dtype in (float32, float16, bfloat16):
        return x.astype(bfloat16, order="C")
    wide = x.astype(np.float64)  # integers: exact below 2**53
    a = xp.abs(wide)
    with np.errstate(over="ignore", invalid="ignore"):
        m, e = xp.frexp(a)  # a = m * 2**e with m in [0.5, 1) (inf and NaN pass through)
        exact = xp.ldexp(xp.rint(m * 256.0), e - 8)  # 8 significant bits, nearest even
        top = (exact.astype(float32).view(xp.uint32) >> 16).astype(xp.uint16)  # >= 2**128: inf
        small = a < 2.0**-126
        # below 2**-126: k * 2**-133, k in 0..128, and the bit pattern of k * 2**-133 is k
        k = xp.rint(xp.where(small, a, 0.0) * 2.0**133).astype(xp.uint16)
        bits = xp.where(small, k, top)
        bits = xp.where(xp.isnan(wide), xp.uint16(0x7FC0), bits)
        bits = xp.where(xp.signbit(wide), bits | xp.uint16(0x8000), bits)  # (where: an array)
    return bits.view(bfloat16)


def convert(x, dtype):
    """``x.astype(dtype)`` as a new C-contiguous array, the same bits; on NumPy the float16
    conversions of large arrays take whole-array paths that cost the same for every value.

    NOTE: NumPy converts float16 one element at a time, and a value in float16's subnormal
    range (below 2**-14, where unscaled gradients often land) takes a slow path: about
    100 ns an element from float32 and 7 ns to it, against 2-4 ns for a normal value
    (2-core CPU, ``tests/test_float16_rounding.py`` checks the bits). So from 8192 elements
    on:

    * to float32, :func:`float32_from_float16` (a table lookup) always: as fast as NumPy on
      normal values, 7x faster on subnormal ones, and no sample to pay for;
    * to float16, :func:`float16_from_float32` (integer operations: ~20 us, then 2-3 ns an
      element) once a 256-element sample finds 4 or more values that NumPy converts slowly:
      it pays from about 1% of them, and a 64-element sample could not see that.
    """
    if get_array_module(x) is np and x.size >= _WHOLE_ARRAY_FROM:
        if x.dtype == float16 and np.dtype(dtype) == float32:
            return float32_from_float16(x)
        if x.dtype == float32 and np.dtype(dtype) == float16 and _slow_to_float16(x):
            return float16_from_float32(x)
    return x.astype(dtype, order="C")


_WHOLE_ARRAY_FROM = 8192  # below this NumPy's own conversion costs about what a sample does


def _slow_to_float16(x: np.ndarray) -> bool:
    """Whether 4 or more of an even 256-element sample of float32 ``x`` have magnitudes in
    (0, 2**-14): values NumPy rounds into float16's subnormals slowly."""
    flat = x.reshape(-1)
    sample = flat[:: max(1, flat.size // 256)]
    # magnitude - 1 wraps 0 to the top of the range: only nonzero ones below the bound count
    magnitude = (sample.view(np.uint32) & np.uint32(0x7FFFFFFF)) - np.uint32(1)
    return int(np.count_nonzero(magnitude < np.uint32(0x387FFFFF))) >= 4


_FLOAT16_TO_FLOAT32: list = []  # the table, made at first use


def float32_from_float16(x: np.ndarray, out=None) -> np.ndarray:
    """NumPy's ``x.astype(float32)`` for a float16 ``x``, bit for bit, by table lookup (into
    ``out``, a float32 array of ``x``'s size, when given: a gather's flat buffer)."""
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


def copy_into(out, x) -> None:
    """``out[...] = x`` (``copyto``: ``x`` cast to ``out``'s dtype, of ``out``'s shape); a
    NumPy float16 ``x`` into a C-contiguous float32 ``out`` by :func:`float32_from_float16`:
    NumPy widens float16 one element at a time (``[1024, 1024]``: 1.4 ms against 2.7)."""
    if (
        x.__class__ is np.ndarray
        and x.dtype == float16
        and out.dtype == float32
        and out.flags.c_contiguous
        and out.shape == x.shape
    ):
        float32_from_float16(x, out=out)
    else:
        get_array_module(out).copyto(out, x)


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
