"""FP8 casts and the FP8 GEMM: the NumPy specification, and the calls the GPU makes instead.

Two kinds of cast, as in PyTorch and Transformer Engine:

* :func:`to_fp8`, the plain conversion behind ``astype``/``cast``: round to nearest even,
  NaN kept, subnormals kept; past the largest finite value float8_e4m3fn gives NaN (it has
  no inf) and float8_e5m2 gives inf, as ``ml_dtypes`` and PyTorch's ``.to()`` do.
* :func:`cast_to_fp8`, the scaled cast inside the FP8 path: ``x * scale``, saturated to the
  largest finite value (CUDA's ``__NV_SATFINITE``), and the amax of ``x`` for the scaling
  recipe, both on ``x``'s device. :func:`fp8_matmul` multiplies two such casts and undoes
  their scales.

On CuPy both call the kernels' launchers (``backend.fp8_kernels``' fused cast+amax kernel,
``backend.fp8_gemm``'s sm_90a FP8 GEMM); with the casts' module missing they fall back to
CuPy array operations with the same results (FP8 data is 8-bit storage there, read through a
256-entry table).

Example:
    >>> import numpy as np
    >>> x = np.array([1.0, 500.0, -1000.0, np.nan], np.float32)
    >>> to_fp8(x, float8_e4m3fn).tolist(), to_fp8(x, float8_e5m2).tolist()  # plain
    ([1.0, nan, nan, nan], [1.0, 512.0, -1024.0, nan])
    >>> out, amax = cast_to_fp8(x[:3], float8_e4m3fn, np.ones(1, np.float32))  # saturating
    >>> out.tolist(), amax.tolist()
    ([1.0, 448.0, -448.0], [1000.0])
"""

from __future__ import annotations

import importlib

import numpy as np

from .constants import device_constant
from .device import get_array_module
from .dtypes import FP8, FP8_MAX, bfloat16, float8_e4m3fn, float8_e5m2, float16, float32

__all__ = ["FP8_DTYPE_CODE", "cast_to_fp8", "fp8_matmul", "from_fp8", "to_fp8"]

FP8_DTYPE_CODE = {float8_e4m3fn: 0, float8_e5m2: 1}  # out_dtype_code of the kernels

# significant bits (the hidden one included), smallest normal exponent, smallest subnormal
_FORMAT = {float8_e4m3fn: (4, -6, 2.0**-9), float8_e5m2: (3, -14, 2.0**-16)}
_EXACT_IN_FLOAT32 = (float32, float16, bfloat16, *FP8)  # astype rounds these once


def _fp8_dtype(dtype) -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in FP8:
        raise TypeError(f"not an FP8 dtype: {dt}; use float8_e4m3fn or float8_e5m2")
    return dt


def to_fp8(x, dtype, saturate: bool = False):
    """``x`` rounded ONCE to nearest-even FP8 (a new array); overflow as ``saturate`` says.

    float32, float16 and bfloat16 sources convert with ``astype`` (``ml_dtypes`` rounds a
    float32 correctly). NOTE: from float64 ``ml_dtypes`` rounds twice (1 + 2**-4 + 2**-30 is a
    tie in float32 and becomes 1.0, where the answer is 1.125), so wider sources are rounded
    here in float64, where nothing is lost, and only the exact result is converted.

    Args:
        x: a NumPy or CuPy array of any real dtype.
        dtype: float8_e4m3fn or float8_e5m2.
        saturate: False (the default, ``astype``'s behaviour): past the largest finite value
            E4M3 gives NaN and E5M2 inf. True: +-448 / +-57344 instead (inf too); NaN stays.
    """
    dtype = _fp8_dtype(dtype)
    xp = get_array_module(x)
    if xp is not np:
        if x.dtype in FP8:  # the kernel reads float32, float16 or bfloat16
            x = from_fp8(x)
        elif x.dtype not in _EXACT_IN_FLOAT32:  # exact in float32 after this
            x = round_in_float64(x, dtype).astype(float32)
        return _gpu_cast(x, dtype, xp.ones(1, float32), saturate)[0]
    with np.errstate(over="ignore", invalid="ignore"):
        if x.dtype not in _EXACT_IN_FLOAT32:
            x = round_in_float64(x, dtype)  # exact in dtype; astype below only stores it
        if saturate:
            top = FP8_MAX[dtype]
            x = np.clip(x, -top, top)  # clipped before rounding: (448, 464) rounds to 448
        return x.astype(dtype, order="C")


def round_in_float64(x, dtype):
    """``x`` rounded to the values of FP8 ``dtype`` (nearest even), in float64: the
    reference the bit-exact tests hold ``ml_dtypes`` to. Beyond the largest finite value the
    result is the next power of two (E4M3 would need more), which ``astype`` then turns
    into NaN (E4M3) or inf (E5M2).

    A normal result keeps ``p`` significant bits (``frexp``: ``|x| = m * 2**e``, then
    ``rint(m * 2**p)``); a subnormal one is a whole number of the smallest subnormals.
    """
    p, min_exp, tiny = _FORMAT[_fp8_dtype(dtype)]
    xp = get_array_module(x)
    wide = x.astype(np.float64)
    a = xp.abs(wide)
    with np.errstate(over="ignore", invalid="ignore"):
        m, e = xp.frexp(a)
        normal = xp.ldexp(xp.rint(m * 2.0**p), e - p)
        small = a < 2.0**min_exp
        rounded = xp.where(small, xp.rint(a / tiny) * tiny, normal)
        rounded = xp.where(xp.isfinite(a), rounded, a)  # inf, NaN as they came
    return xp.copysign(rounded, wide)


def from_fp8(x, dtype=float32):
    """An FP8 array widened to ``dtype`` (exact for float16, bfloat16, float32, float64)."""
    xp = get_array_module(x)
    if xp is np:
        return x.astype(dtype, order="C")
    table = device_constant(
        x,
        ("fp8 decoding table", x.dtype.str),
        lambda: np.arange(256, dtype=np.uint8).view(x.dtype).astype(np.float32),
        f"the {x.dtype} decoding table",
    )
    return table[x.view(xp.uint8)].astype(dtype)


def cast_to_fp8(x, fp8_dtype, scale, saturate: bool = True):
    """``(x * scale rounded to fp8_dtype, amax(|x|))``: the scaled cast of the FP8 path.

    The product is taken in float32 and rounded once to nearest even; with ``saturate``
    (the default, as in Transformer Engine) values past the format's largest finite value
    become +-448 (E4M3) or +-57344 (E5M2), inf too; NaN stays NaN. ``saturate=False`` is the
    plain conversion (NaN for E4M3, inf for E5M2).

    Args:
        x: float32, float16 or bfloat16 array (NumPy or CuPy).
        fp8_dtype: float8_e4m3fn or float8_e5m2.
        scale: float32 array of shape [1] on ``x``'s device (never read on the host).
        saturate: clamp to the largest finite value (True) or convert plainly.

    Returns:
        ``(out, amax)``: ``out`` of ``fp8_dtype`` and ``x``'s shape; ``amax``, float32 of shape
        [1]: the largest ``|x|`` of the *unscaled* input (0 for an empty one; NaN if ``x``
        holds one), what the recipe records for the next step.
    """
    fp8_dtype = _fp8_dtype(fp8_dtype)
    xp = get_array_module(x)
    if xp is not np:
        return _gpu_cast(x, fp8_dtype, scale, saturate)
    x32 = x.astype(float32, copy=False)
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = x32 * scale  # float32 [1] broadcast: float32 products
        out = to_fp8(scaled, fp8_dtype, saturate)
        amax = np.abs(x32).max(initial=0.0, keepdims=False).reshape(1).astype(float32)
    if np.isnan(x32).any():  # max(initial=0) skips nothing, but say it: NaN wins
        amax[0] = np.nan
    return out, amax


def fp8_matmul(a, b, scale_inv_a, scale_inv_b, out_dtype=float32, out=None, bias=None):
    """``(a @ b) * scale_inv_a * scale_inv_b`` for FP8 ``a`` [M, K] and ``b`` [K, N].

    The products are exact in float32 and accumulate in float32, as an FP8 tensor core's
    do; the two dequantization factors (the inverse scales, float32 [1]) are applied once,
    to the float32 result (the GEMM's epilogue), which is then rounded to ``out_dtype``.
    With ``out`` (a C-contiguous ``out_dtype`` [M, N] array of the operands' kind) the
    result is written there and returned: on a GPU the kernel writes it, no copy. With
    ``bias`` (an ``out_dtype`` [N] array) the epilogue adds it to the product as stored
    (``fp8_gemm.add_bias``: a Linear's matmul and add, the add's bits, one launch).
    """
    gemm = _fp8_gemm()
    if get_array_module(a) is not np:
        dtype = np.dtype(out_dtype)
        return gemm.fp8_gemm(a, b, scale_inv_a, scale_inv_b, dtype, out=out, bias=bias)
    gemm.check_gemm_out(out, a, (a.shape[0], b.shape[1]), out_dtype)  # before any write
    gemm.check_gemm_bias(bias, a, b.shape[1], out_dtype)
    acc = from_fp8(a) @ from_fp8(b)  # NOTE: float32 accumulation, as on the tensor core
    acc *= scale_inv_a * scale_inv_b
    result = gemm.add_bias(acc if np.dtype(out_dtype) == float32 else acc.astype(out_dtype), bias)
    if out is None:
        return result
    out[...] = result
    return out


def _fp8_gemm():
    """``minitorch_amp.backend.fp8_gemm`` (the FP8 GEMM's launcher), imported at first use:
    cast.py imports this module, and importing the GEMM's launcher with it would register
    its kernels before cast.cu's (the kernel report's order)."""
    return importlib.import_module(".fp8_gemm", __package__)


def _fp8_kernels():
    """``minitorch_amp.backend.fp8_kernels`` (the CUDA kernels), or None without it."""
    try:
        return importlib.import_module(".fp8_kernels", __package__)
    except ImportError:
        return None


def _gpu_cast(x, dtype, scale, saturate):
    """CuPy: the fused kernel, or array operations with the same rounding."""
    xp = get_array_module(x)
    kernels = _fp8_kernels()
    if kernels is not None:
        out, amax = kernels.cast_fp8_with_amax(x, scale, FP8_DTYPE_CODE[dtype], saturate)
        return (out if out.dtype == dtype else out.view(dtype)), amax
    # NOTE: without the kernel the rounding happens on the host copy (correct, not fast).
    host = xp.asnumpy(x)
    out, amax = cast_to_fp8(host, dtype, xp.asnumpy(scale), saturate)
    with x.device:
        return xp.asarray(out.view(np.uint8)).view(dtype), xp.asarray(amax)
