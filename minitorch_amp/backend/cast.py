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
from .device import get_array_module
from .dtypes import FP8, bfloat16, bool_, float16, float32
from .fp8 import from_fp8, to_fp8
from .host_float16 import to_float16, to_float32

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
    """``x.astype(dtype)`` as a new C-contiguous array, the same bits; on NumPy, float16 <->
    float32 by ``backend/host_float16.py`` (compiled C, or NumPy's whole-array paths):
    NumPy's own conversion goes one element at a time and is slowest on subnormals."""
    if get_array_module(x) is np:
        if x.dtype == float16 and np.dtype(dtype) == float32:
            return to_float32(x)
        if x.dtype == float32 and np.dtype(dtype) == float16:
            return to_float16(x)
    return x.astype(dtype, order="C")


def copy_into(out, x) -> None:
    """``out[...] = x`` (``copyto``: ``x`` cast to ``out``'s dtype, of ``out``'s shape); a
    NumPy float16 ``x`` into a C-contiguous float32 ``out`` by ``host_float16.to_float32``:
    NumPy widens float16 one element at a time."""
    if (
        x.__class__ is np.ndarray
        and x.dtype == float16
        and out.dtype == float32
        and out.flags.c_contiguous
        and out.shape == x.shape
    ):
        to_float32(x, out=out)
    else:
        get_array_module(out).copyto(out, x)
