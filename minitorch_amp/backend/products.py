"""The 16-bit matrix products: ``matmul``, ``linear`` and their float32-result forms.

float16 (and bfloat16) inputs are multiplied as a tensor core does: exact float32 products,
float32 sums, one rounding at the end. On the GPU each is one launch of the GEMM kernel
(``backend.gemm``: ``gemm_fp16.cu``, or the Hopper kernel), its epilogue taking what would
be an op of its own after the product (a bias, the rounding to 16 bits before a widening);
on the CPU the kernel's twin. Other dtypes use the array library's matmul (BLAS, cuBLAS).
``backend.primitives`` lists them with the other hot paths and exports them.
"""

from __future__ import annotations

import numpy as np

from . import gemm as _gemm
from . import graphs, kernels
from .device import get_array_module
from .dtypes import bfloat16, float16, float32

__all__ = ["gemm_ready", "linear", "matmul", "matmul_float32", "matmul_widened"]


def matmul(a, b, transpose_a: bool = False, transpose_b: bool = False, out=None):
    """``op(a) @ op(b)`` where ``op`` transposes the last two axes when asked.

    float16 inputs follow what a tensor core does: products are exact in float32 (a float16
    times a float16 always fits), sums are float32, and the result is rounded to nearest even
    float16 once; bfloat16 inputs the same, rounded to bfloat16. Other dtypes use the
    library's matmul directly.

    ``out`` (an array of the result's shape and dtype) receives the result: on the GPU in
    float16 the GEMM writes it there directly (a gradient into its buffer, no copy after).
    """
    if out is not None:
        if out.flags.c_contiguous and _same_16bit(a, b):
            xp = get_array_module(a, b)
            if xp is not np and kernels.enabled() and a.ndim == b.ndim == 2:
                a, b = xp.ascontiguousarray(a), xp.ascontiguousarray(b)
                return _gemm.gemm(a, b, transpose_a, transpose_b, c=out)
        elif not _same_16bit(a, b) and out.dtype == np.result_type(a, b):
            # NOTE: BLAS (cuBLAS) writes the product into out itself (the same call, the
            # same bits): no temporary the size of a weight's gradient, no copy of it after
            xp = get_array_module(a, b, out)
            a = a.swapaxes(-1, -2) if transpose_a and a.ndim >= 2 else a
            b = b.swapaxes(-1, -2) if transpose_b and b.ndim >= 2 else b
            if xp is not np:
                _refuse_cublas_in_capture(a.dtype)
            return xp.matmul(a, b, out=out)
        get_array_module(out).copyto(out, matmul(a, b, transpose_a, transpose_b))
        return out
    if _same_16bit(a, b):  # float16, or bfloat16 (two 8-bit significands: exact products too)
        xp = get_array_module(a, b)
        if xp is not np and kernels.enabled() and a.ndim >= 2 and b.ndim >= 2:
            # the GEMM kernel reads op(a), op(b) from the untransposed, contiguous operands
            a, b = xp.ascontiguousarray(a), xp.ascontiguousarray(b)
            return _gemm.gemm(a, b, transpose_a, transpose_b)
        if xp is np:  # the GEMM's twin: fp32 products and sums, one rounding
            return _gemm.twin(a, b, transpose_a, transpose_b, out_dtype=a.dtype)
        if a.dtype == bfloat16:
            # NOTE: CuPy 14 multiplies 2-D bfloat16 (cuBLAS, float32 compute) but not batched
            # or broadcast bfloat16 operands. The float32 copies give the same result (exact
            # products, float32 sums) with the one rounding at the end.
            wide = matmul(a.astype(float32), b.astype(float32), transpose_a, transpose_b)
            return wide.astype(bfloat16)
    if transpose_a and a.ndim >= 2:
        a = a.swapaxes(-1, -2)
    if transpose_b and b.ndim >= 2:
        b = b.swapaxes(-1, -2)
    if get_array_module(a, b) is not np:
        _refuse_cublas_in_capture(a.dtype)
    return a @ b  # cuBLAS computes half GEMMs with float32 accumulation too


def _refuse_cublas_in_capture(dtype) -> None:
    graphs.refuse_in_capture(
        f"a {dtype} matmul",
        "it runs on cuBLAS, which CuPy refuses to call while a stream is captured; "
        "capture an AMP step (O1 or O2: its float16 matmuls run on minitorch_amp's own "
        "GEMM kernel), or run this step eagerly",
    )


def matmul_float32(a, b, transpose_a: bool = False, transpose_b: bool = False):
    """``op(a) @ op(b)`` for float16 (or bfloat16) inputs, returned in float32: the GEMM's
    accumulator, not yet rounded to 16 bits (other dtypes: :func:`matmul`).

    For sums that go on after the product, so the result is rounded once at the very end: a
    convolution's input gradient adds up overlapping windows (col2im) after its GEMM. The GPU
    runs ``gemm_fp16.cu`` with a float32 output, the CPU its twin.
    """
    if not _same_16bit(a, b):
        return matmul(a, b, transpose_a, transpose_b)
    xp = get_array_module(a, b)
    if xp is np:
        return _gemm.twin(a, b, transpose_a, transpose_b, out_dtype=float32)
    if kernels.enabled() and a.ndim >= 2 and b.ndim >= 2:
        a, b = xp.ascontiguousarray(a), xp.ascontiguousarray(b)
        return _gemm.gemm(a, b, transpose_a, transpose_b, out_dtype=float32)
    return matmul(a.astype(float32), b.astype(float32), transpose_a, transpose_b)


def matmul_widened(a, b, transpose_a: bool = False, transpose_b: bool = False, out=None):
    """:func:`matmul`'s 16-bit result, widened to float32: a 16-bit matmul, then a cast.

    For a product whose only reader casts it to float32: an AMP cast's backward (the
    gradient of an activation or a weight that ``auto_cast`` cast to 16 bits,
    ``autograd.widen_fold``). On the GPU one launch, not two: the GEMM's epilogue rounds
    to 16 bits and stores the value in float32 (``product_dtype``); the CPU runs its twin.
    ``out``, a C-contiguous float32 array of the result's shape (a weight's ``.grad``
    buffer), receives it. Other dtypes: :func:`matmul` (nothing to widen).
    """
    if not _same_16bit(a, b):
        return matmul(a, b, transpose_a, transpose_b, out=out)
    if out is not None and (out.dtype != float32 or not out.flags.c_contiguous):
        raise TypeError(f"matmul_widened: out must be C-contiguous float32, got {out.dtype}")
    xp = get_array_module(a, b)
    wide = {"out_dtype": float32, "product_dtype": a.dtype, "c": out}
    if xp is np:
        return _gemm.twin(a, b, transpose_a, transpose_b, **wide)
    if kernels.enabled() and a.ndim >= 2 and b.ndim >= 2:
        a, b = xp.ascontiguousarray(a), xp.ascontiguousarray(b)
        return _gemm.gemm(a, b, transpose_a, transpose_b, **wide)
    result = matmul(a, b, transpose_a, transpose_b).astype(float32)
    if out is None:
        return result
    out[...] = result
    return out


def linear(x, weight, bias=None):
    """``x @ weight``, then ``+ bias`` in the bias's dtype (Paddle's layout: ``weight`` is
    ``[in, out]``).

    What Paddle's ``F.linear`` computes with its two ops: the product in the inputs' dtype
    (float16 or bfloat16: float32 sums, rounded once, as :func:`matmul`), then an add in
    ``bias.dtype``, to which the product is cast (a 16-bit one to float32 exactly). A 16-bit
    product with a bias of its dtype, or with a float32 one (AMP's O1), is one launch of the
    GEMM kernel on the GPU, the bias in its epilogue added to the rounded product (the two
    ops' result, where the float32 bias took three launches: matmul, cast, add), and the
    kernel's twin on the CPU.
    """
    xp = get_array_module(x, weight)
    half = _same_16bit(x, weight) and (bias is None or bias.dtype in (x.dtype, float32))
    # A float32 bias after a 16-bit product (O1, OD): the product is stored in 16 bits, then
    # widened by the add; the epilogue does both (product_dtype), so the result is float32.
    out_dtype = x.dtype if bias is None else bias.dtype
    if half and xp is np:
        return _gemm.twin(x, weight, bias=bias, out_dtype=out_dtype, product_dtype=x.dtype)
    if half and kernels.enabled():
        rows = x.reshape(-1, x.shape[-1]) if x.ndim != 2 else x
        rows, weight = xp.ascontiguousarray(rows), xp.ascontiguousarray(weight)
        out = _gemm.gemm(rows, weight, bias=bias, out_dtype=out_dtype, product_dtype=x.dtype)
        return out if x.ndim == 2 else out.reshape((*x.shape[:-1], weight.shape[1]))
    out = matmul(x, weight)
    if bias is None:
        return out
    if out.dtype != bias.dtype:
        with np.errstate(over="ignore"):  # a float32 product past 65504 is inf in float16
            out = out.astype(bias.dtype)
    out += bias  # in place: the product (or its cast) is a fresh array
    return out


def gemm_ready(*arrays) -> tuple:
    """``arrays`` as the GEMM kernel reads them: C-contiguous when they are float16 or
    bfloat16 arrays of two or more dimensions on the GPU (raw kernels on), as they are
    otherwise (NumPy and cuBLAS take strides).

    :func:`matmul` makes these copies itself; an op that saves its operands for backward
    calls this first and saves the copies, so that each of its backward products does not
    copy the same transposed view again (attention's heads-first ``q``, ``k`` and ``v``).
    """
    xp = get_array_module(*arrays)
    if xp is np or not kernels.enabled():
        return arrays
    return tuple(
        xp.ascontiguousarray(a) if a.ndim >= 2 and a.dtype in (float16, bfloat16) else a
        for a in arrays
    )


def _same_16bit(a, b) -> bool:
    """Both float16, or both bfloat16: the dtypes the GEMM kernels take."""
    return a.dtype == b.dtype and a.dtype in (float16, bfloat16)
