"""The 16-bit tensor-core GEMM with a fused epilogue: ``cuda/gemm_fp16.cu`` and its NumPy twin.

:func:`gemm` computes, for float16 ``a`` and ``b`` (or bfloat16 ``a`` and ``b``)::

    out = relu?(alpha * op(a) @ op(b) + beta * c + bias)        op(x) = x or x.T

with one definition of the numerics on both backends (the kernel's semantics):

1. products of float16 values are exact in float32 and are summed in float32 (bfloat16
   values too: two 8-bit significands multiply exactly);
2. the epilogue runs in float32, each step rounded to nearest, in this order:
   ``v = alpha * acc``; ``v = v + beta * c`` (only when ``beta != 0``: ``c`` is not read
   otherwise, so NaN in an output buffer does not leak in); with a bias, ``v`` is rounded
   to ``out_dtype`` (the product as a GEMM would store it) and ``v = v + bias``; with a
   ``product_dtype`` (16 bits in a float32 result), ``v`` is rounded to it instead, with
   or without a bias (a 16-bit matmul that an add or a cast widens);
   ``v = v < 0 ? 0 : v`` (NaN stays NaN);
3. ``v`` is rounded to ``out_dtype`` (the input dtype or float32), round-to-nearest-even;
   values beyond float16's range become inf, which is what the loss scaler looks for.

Kernels: float16 runs ``gemm_f16`` (``mma.sync`` m16n8k16 f16) and bfloat16 ``gemm_bf16``
(the same body with the bf16 ``mma.sync``); on compute capability 9.0 both go to the Hopper
kernel instead (``gemm_sm90.py``, and ``gemm_bf16_sm90.py`` for its bfloat16 instantiation).
``gemm_gpu.py`` is the GPU side: the kernel's names and tiles, the batch, which kernel runs,
and each kind of call's launch, kept so that a step's repeated calls skip the checks.

NOTE: the bias is added to the rounded product, not before the rounding: that is what a
matmul followed by an add gives, and Paddle's ``F.linear`` is exactly those two ops. One
launch, the two-op result.

On NumPy arrays this module *is* the twin: ``backend.primitives.matmul``'s float32
accumulation followed by the epilogue above. On CuPy arrays it launches the kernel. The only
difference is the order of the float32 additions inside the sum, so results agree to a few
float32 ulps of ``sum(|a||b|)`` before the final rounding.

Shapes: ``op(a)`` is ``(..., M, K)``, ``op(b)`` is ``(..., K, N)``; batch axes broadcast;
``bias`` is ``(N,)``; ``c`` and the result are ``(..., M, N)``. When ``c`` is given the result
is written into it (as in BLAS) and ``c`` is returned. On the GPU a batch runs as one launch:
when ``b`` is 2-D and ``a`` is not transposed the batch folds into M; else, when each operand
has the whole batch or none of it, ``gemm_fp16.cu`` takes the entry from ``blockIdx.y``
(attention's scores: one launch, not one per batch row and head); only a batch broadcast
inside (``(2, 1)`` with ``(1, 3)``) launches per entry. ``transpose_a`` together with
``transpose_b`` (no backward pass needs it) copies ``a`` transposed first.

Both backends check arguments the same way: float16 (or bfloat16) inputs, C-contiguous
arrays (the kernel sees only bytes), ``bias`` and ``c`` in ``out_dtype``, so a call that
works on the CPU works on the GPU.

Example:
    >>> import numpy as np
    >>> a = np.array([[1.0, 2.0]], dtype=np.float16)
    >>> b = np.array([[3.0], [4.0]], dtype=np.float16)
    >>> gemm(a, b, bias=np.array([-20.0], dtype=np.float16), relu=True)
    array([[0.]], dtype=float16)
    >>> gemm(a, b, alpha=0.5, out_dtype="float32")
    array([[5.5]], dtype=float32)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import gemm_gpu as _gpu
from .cast import convert, copy_into
from .device import get_array_module
from .dtypes import bfloat16, float16, float32
from .gemm_gpu import (  # noqa: F401 (the kernel file's tiles and names, read here by many)
    BF16_NAMES,
    BLOCK_K,
    BLOCK_M,
    BLOCK_N,
    FILE,
    KERNELS,
    NAMES,
    SHARED_MEM_BYTES,
    STAGES,
    THREADS,
    kernel_name,
    rows_cols,
)
from .kernels import check_array

EPILOGUE_BIAS = 1
EPILOGUE_RELU = 2
EPILOGUE_PRODUCT_F16 = 4  # the product rounded to float16 in a float32 result, ...
EPILOGUE_PRODUCT_BF16 = 8  # ... or to bfloat16 (a 16-bit matmul, then a float32 add or cast)
INPUT_DTYPES = (float16, bfloat16)


def gemm(
    a,
    b,
    transpose_a: bool = False,
    transpose_b: bool = False,
    bias=None,
    relu: bool = False,
    alpha: float = 1.0,
    beta: float = 0.0,
    c=None,
    out_dtype=None,
    product_dtype=None,
):
    """``relu?(alpha * op(a) @ op(b) + beta * c + bias)`` with float32 accumulation.

    Args:
        a, b: float16 arrays (or both bfloat16), ``op(a)`` of shape ``(..., M, K)`` and
            ``op(b)`` ``(..., K, N)``.
        transpose_a, transpose_b: use the transpose of the last two axes.
        bias: ``(N,)`` array in ``out_dtype``, added to every row.
        relu: replace negative results by 0 (NaN is kept).
        alpha, beta: float32 scale factors; ``beta != 0`` needs ``c``.
        c: ``(..., M, N)`` array in ``out_dtype``; the result is written into it.
        out_dtype: the input dtype or float32; defaults to ``c``'s dtype, else the input
            dtype.
        product_dtype: the dtype the product is stored in before the epilogue widens it:
            ``out_dtype`` (the default: with a bias, the product is rounded to it before
            the add), or the input dtype when ``out_dtype`` is float32. The latter is a
            16-bit matmul followed by an add that widens it to a float32 bias (Paddle's O1
            ``F.linear`` with a float32 bias: one launch instead of three, matmul, cast and
            add) or, without a bias, by a cast to float32 (an AMP cast's backward: one
            launch instead of two).

    Returns:
        The result (``c`` itself when given).

    Raises:
        TypeError: the inputs are not both float16 or both bfloat16, ``bias``/``c`` are not
            in ``out_dtype``, ``product_dtype`` is neither ``out_dtype`` nor the input dtype,
            or the arrays are on different devices.
        ValueError: shapes do not fit, an array is not C-contiguous, or ``beta`` without
            ``c``.
    """
    xp = get_array_module(a)
    key = None  # the call's signature (gemm_gpu.py): a call made before is launched as it was
    if xp is not np:
        key = _gpu.signature(
            a, b, transpose_a, transpose_b, bias, relu, alpha, beta, c, out_dtype, product_dtype
        )
        kept = _gpu.KEPT.get(key)
        if kept is not None:
            return kept(a, b, bias, c)
    for x in (b, bias, c):
        if x is not None and get_array_module(x) is not xp:
            raise TypeError("gemm's arrays are on different devices; move them to one first")
    out_dtype = _output_dtype(out_dtype, c, a.dtype if a.dtype == bfloat16 else float16)
    batch, m, n, _ = _check(a, b, transpose_a, transpose_b, bias, c, beta, out_dtype)
    product_dtype = _product_dtype(product_dtype, out_dtype, a.dtype)
    epilogue = _Epilogue(bias, relu, np.float32(alpha), np.float32(beta), product_dtype)
    if xp is np:
        return twin(a, b, transpose_a, transpose_b, *epilogue[:4], c, out_dtype, product_dtype)
    return _gpu.launch(a, b, transpose_a, transpose_b, epilogue, c, (*batch, m, n), out_dtype, key)


class _Epilogue(NamedTuple):
    bias: object  # (N,) array in the output dtype, or None
    relu: bool
    alpha: np.float32
    beta: np.float32
    product_dtype: object = None  # a 16-bit product's dtype in a float32 result, else None

    def flags(self) -> int:
        """The kernels' ``flags`` argument for this epilogue."""
        flags = (EPILOGUE_BIAS if self.bias is not None else 0) | (
            EPILOGUE_RELU if self.relu else 0
        )
        if self.product_dtype is not None:  # rounded to 16 bits, then widened
            narrow = self.product_dtype == bfloat16
            flags |= EPILOGUE_PRODUCT_BF16 if narrow else EPILOGUE_PRODUCT_F16
        return flags


def _output_dtype(out_dtype, c, in_dtype):
    if out_dtype is None:
        out_dtype = c.dtype if c is not None else in_dtype
    out_dtype = np.dtype(out_dtype)
    if out_dtype not in (in_dtype, float32):
        raise TypeError(f"out_dtype must be {in_dtype} or float32, got {out_dtype}")
    return out_dtype


def _product_dtype(product_dtype, out_dtype, in_dtype):
    """None when the product is stored in ``out_dtype``, else the 16-bit ``in_dtype``."""
    if product_dtype is None or np.dtype(product_dtype) == out_dtype:
        return None
    product_dtype = np.dtype(product_dtype)
    if product_dtype != in_dtype:
        raise TypeError(
            f"product_dtype must be out_dtype ({out_dtype}) or the inputs' dtype "
            f"({in_dtype}), got {product_dtype}"
        )
    return product_dtype


def _check(a, b, transpose_a, transpose_b, bias, c, beta, out_dtype):
    """Validate the arguments; return ``(batch_shape, M, N, K)``."""
    in_dtype = a.dtype if a.dtype in INPUT_DTYPES else float16
    for name, x in (("a", a), ("b", b)):
        if x.dtype != in_dtype:
            raise TypeError(
                f"gemm takes float16 inputs (or bfloat16 ones, both), {name} is {x.dtype}; "
                f"cast it with .astype('{in_dtype}') or use backend.primitives.matmul for "
                f"other dtypes"
            )
        if x.ndim < 2:
            raise ValueError(f"{name} must have at least 2 dimensions, got shape {x.shape}")
        check_array(x, in_dtype, name)
    m, k = rows_cols(a.shape, transpose_a)
    k_b, n = rows_cols(b.shape, transpose_b)
    if k_b != k:
        raise ValueError(
            f"op(a) is {m}x{k} but op(b) is {k_b}x{n}: the inner dimensions must agree "
            f"(shapes {a.shape} and {b.shape}, transpose_a={transpose_a}, "
            f"transpose_b={transpose_b})"
        )
    try:  # (most calls have the same batch axes, or none: NumPy's rule costs µs)
        same = a.shape[:-2] == b.shape[:-2]
        batch = a.shape[:-2] if same else np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(
            f"the batch axes of a {a.shape[:-2]} and b {b.shape[:-2]} do not broadcast"
        ) from None
    if bias is not None:
        if bias.shape != (n,):
            raise ValueError(f"bias must have shape ({n},), got {bias.shape}")
        check_array(bias, out_dtype, "bias")
    if c is not None:
        if c.shape != (*batch, m, n):
            raise ValueError(f"c must have shape {(*batch, m, n)}, got {c.shape}")
        check_array(c, out_dtype, "c")
    elif beta != 0:
        raise ValueError("beta != 0 adds beta * c: pass c (the array to accumulate into)")
    return batch, m, n, k


# NOTE: overflow to inf is the specified result (the loss scaler looks for it), not an error;
# the whole function is quiet (a decorator costs half of a ``with`` each call).
@np.errstate(over="ignore", invalid="ignore")
def twin(
    a, b, transpose_a=False, transpose_b=False, bias=None, relu=False, alpha=1.0, beta=0.0,
    c=None, out_dtype=float16, product_dtype=None,
):  # fmt: skip
    """The NumPy definition: float32 products and sums, float32 epilogue, then the rounding.

    The arguments are :func:`gemm`'s. The CPU backend's float16 ``matmul`` and ``linear``
    (``backend.primitives``) are this function too, so they round exactly as the kernel does:
    a bias is added in float32 to the product rounded to ``out_dtype``, then rounded again
    (a matmul, then an add); a ``product_dtype`` rounds the product to 16 bits instead,
    with or without a bias, and the float32 result holds it widened. It takes any strides,
    and 1-D operands as ``numpy.matmul`` does.

    Example:
        >>> a = np.array([[1.0, 2.0]], np.float16)
        >>> b = np.array([[3.0], [4.0]], np.float16)
        >>> twin(a, b, bias=np.array([0.25], np.float16))
        array([[11.25]], dtype=float16)
    """
    a32 = _wide(a)  # float16 is exact in float32 (host_float16.to_float32)
    b32 = _wide(b)
    if transpose_a and a.ndim >= 2:
        a32 = a32.swapaxes(-1, -2)
    if transpose_b and b.ndim >= 2:
        b32 = b32.swapaxes(-1, -2)
    alpha, beta = np.float32(alpha), np.float32(beta)
    v = np.matmul(a32, b32)
    if alpha != 1:  # (times 1 changes no bits: skipped)
        v = alpha * v
    if beta != 0:
        v = v + beta * c.astype(float32)
    stored = product_dtype if product_dtype is not None or bias is None else out_dtype
    if stored is not None and stored != float32:  # the product as stored, then widened
        if c is not None and bias is None and not relu:  # (widened as it is written)
            copy_into(c, convert(v, stored))
            return c
        v = _wide(convert(v, stored))
    if bias is not None:  # (the add)
        v = v + _wide(bias)
    if relu:
        v = np.where(v < 0, np.float32(0), v)
    result = v if v.dtype == out_dtype else convert(v, out_dtype)  # (v is new: no copy)
    if c is None:
        return result
    c[...] = result
    return c


def _wide(x):
    """``x`` in float32 for reading: itself when it is float32 already (no copy)."""
    return x if x.dtype == float32 else convert(x, float32)
