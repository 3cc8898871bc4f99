"""Array primitives whose NumPy and CuPy spellings differ, or whose numerics need care,
and the one place that says which raw CUDA kernel runs each AMP hot path.

The autograd ops call these instead of spelling the numerics out each time:

* :func:`matmul` and :func:`linear`: float16 (and bfloat16) inputs are multiplied as exact
  float32 products, accumulated in float32, and rounded once at the end (a tensor core).
* :func:`reduce_sum`, :func:`sum_squares` and :func:`unbroadcast` accumulate float16 and
  bfloat16 in float32.
* :func:`scatter_add` is ``numpy.add.at`` / ``cupyx.scatter_add`` (bfloat16: in float32);
  on the CPU an embedding's rows are sorted and summed per index first, ``add.at`` being slow.
* :func:`column_sums` (a bias's gradient) is a BLAS ``ones @ rows`` on the CPU.

Dispatch of the AMP hot paths (``MINITORCH_AMP_RAW_KERNELS=0`` selects the CuPy fallback):

=========================  =====================  ===================  ======================
hot path                   NumPy (the twin)       CuPy, raw kernel     CuPy fallback
=========================  =====================  ===================  ======================
fp16/bf16 matmul           :func:`matmul`          ``gemm_fp16.cu``     ``cupy.matmul`` (cuBLAS;
                                                  (``gemm_bf16_sm90``  bf16: of float32
                                                  on Hopper)           copies, then rounded)
fp16/bf16 linear (+bias)   :func:`linear`          the same, bias in    ``cupy.matmul`` + add
                                                  the epilogue
fp32 <-> fp16/bf16 cast    ``backend.cast``       ``cast.cu``          ``astype``
unscale + found_inf,       ``backend.             ``amp.cu``           the same xp code
loss-scale update          loss_scaling``
optimizer step with        per-parameter          ``optim.cu``         ``backend.fused_optim``
fp32 master weights        ``_update``                                 twin, on the device
ReLU backward              ``grad * (y > 0)``     ``elementwise.cu``   ``grad * (y > 0)``
sum of squares (the        ``np.dot`` in          ``reduction.cu``     ``x.astype(acc)``
clipping norm)             float32 or float64     (deterministic)      squared, ``.sum()``
=========================  =====================  ===================  ======================

bfloat16 on CuPy. CuPy 14 is the first with a bfloat16 dtype (``ml_dtypes.bfloat16``, the
one the CPU backend uses); earlier CuPy cannot hold a bfloat16 array at all, and
``device.bfloat16_unsupported`` says so. What CuPy 14 does with it, and what runs instead:

* **CuPy's own, used as is**: creating and copying arrays, ``astype`` to and from every
  float type (round to nearest even through float32: float64 is rounded *once* by
  ``cast.to_bfloat16`` instead), the arithmetic, comparison and math ufuncs (``exp``,
  ``log``, ``tanh``, ``sqrt``, ``maximum``, ``where`` ...: each computes in float and rounds
  its result), reductions (``sum``, ``mean``, ``max``; ours ask for float32 accumulation),
  indexing, and 2-D ``matmul``.
* **Raw kernels with ``__nv_bfloat16``**, for speed or because CuPy has no such operation:
  the casts (``cast.cu``), unscale-and-check (``amp.cu``), the fused optimizers
  (``optim.cu``), every GEMM (``gemm_fp16.cu``'s ``gemm_bf16``, ``gemm_bf16_sm90.cu``), the
  ReLU gradient (``elementwise.cu``) and the sum of squares (``reduction.cu``).
* **Worked around**, because CuPy 14 does not take bfloat16 there: batched or broadcast
  ``matmul`` (float32 copies, when raw kernels are off), ``cupyx.scatter_add`` (refuses it:
  :func:`scatter_add` sums in float32) and ``cupyx.scipy.special.erf`` (``gelu`` widens to
  float32 first, as it does for float16).

NOTE: CuPy compiles every kernel with ``-ftz=true``, so its elementwise ops, which compute
bfloat16 in float32, flush bfloat16's subnormals (below 2**-126) to zero on the GPU; the CPU
keeps them. Casts to bfloat16 are exact on both (``cast.cu`` rounds with ``cvt.rn.bf16.f32``;
``cast.to_bfloat16`` never passes through a float32 subnormal).
"""

from __future__ import annotations

import numpy as np

from . import kernels
from .device import get_array_module
from .dtypes import accumulation_dtype, bfloat16, float16, float32, float64
from .products import (  # noqa: F401 (primitives' API: the ops import them from here)
    gemm_ready,
    linear,
    matmul,
    matmul_float32,
    matmul_widened,
)


def reduce_sum(x, axis=None, keepdims: bool = False, out=None):
    """Sum in the accumulation dtype (float32 for float16), returned in ``x``'s dtype (written
    into ``out`` when given)."""
    acc = accumulation_dtype(x.dtype)
    if acc == x.dtype:
        return x.sum(axis=axis, keepdims=keepdims, out=out)
    total = x.sum(axis=axis, dtype=acc, keepdims=keepdims)
    with np.errstate(over="ignore"):  # past 65504 is inf, silently, as on the GPU
        if out is None:
            return total.astype(x.dtype)
        get_array_module(out).copyto(out, total, casting="unsafe")
        return out


def column_sums(rows, out=None):
    """The sum over axis 0 of the 2-D ``rows`` (a bias's gradient), as :func:`reduce_sum`.

    On the CPU a float32 or float64 array goes through BLAS as ``ones @ rows``: 2 to 3 times
    faster than NumPy's sum over rows (48 against 140 us for ``[1024, 512]`` float32), summed
    in BLAS's order rather than pairwise.
    """
    if get_array_module(rows) is np and rows.dtype in (float32, np.float64) and rows.ndim == 2:
        ones = np.ones(rows.shape[0], dtype=rows.dtype)
        return np.matmul(ones, rows, out=out) if out is not None else ones @ rows
    return reduce_sum(rows, axis=0, out=out)


def relu_backward(y, grad):
    """``grad * (y > 0)`` for ``y = relu(x)``, in one pass (one kernel on the GPU).

    NOTE: a multiply, not a select: an inf or NaN gradient where the unit is off stays NaN,
    so the loss scaler still sees the overflow (Paddle's relu_grad does the same).

    The NumPy expression is the twin. On the GPU, ``relu_backward<T, G>`` of
    ``cuda/elementwise.cu`` computes it for C-contiguous ``y`` and ``grad`` of one shape and
    any two float dtypes, with the twin's bits: ``grad`` itself where ``y > 0``, ``grad * 0``
    elsewhere (a zero of grad's sign; NaN for inf or NaN), ``y > 0`` judged exactly, with
    subnormals, which CuPy's -ftz would flush; only a NaN's payload may differ. Other
    arrays, and ``MINITORCH_AMP_RAW_KERNELS=0``, take CuPy's own ``grad * (y > 0)``.

    Example:
        >>> import numpy as np
        >>> relu_backward(np.array([0.0, 2.0, 0.0, -0.0]), np.array([np.nan, 3.0, -1.0, 1.0]))
        array([nan,  3., -0.,  0.])
    """
    xp = get_array_module(y, grad)
    if xp is np:
        return grad * (y > 0)
    name = _RELU_BACKWARD.get((y.dtype, grad.dtype))
    contiguous = y.flags.c_contiguous and grad.flags.c_contiguous
    if name is None or not kernels.enabled() or y.shape != grad.shape or not contiguous:
        return grad * (y > 0)
    with grad.device:
        out = xp.empty_like(grad)
        if out.size:
            blocks = min(-(-out.size // _RELU_BLOCK), _RELU_MAX_BLOCKS)
            args = (y, grad, out, np.int64(out.size))
            kernels.launch("elementwise.cu", name, (blocks,), (_RELU_BLOCK,), args)
    return out


_CUDA_TYPE = {float16: "__half", bfloat16: "__nv_bfloat16", float32: "float", float64: "double"}
_RELU_BACKWARD = {
    (t, g): f"relu_backward<{_CUDA_TYPE[t]}, {_CUDA_TYPE[g]}>"
    for t in _CUDA_TYPE
    for g in _CUDA_TYPE
}
ELEMENTWISE = kernels.register("elementwise.cu", names=tuple(_RELU_BACKWARD.values()))
_RELU_BLOCK = 256  # kBlock in cuda/elementwise.cu
_RELU_MAX_BLOCKS = 8192  # 2M threads; past that each thread strides over more elements


def sum_squares(x, dtype):
    """``sum(x * x)`` accumulated in ``dtype`` (float32 or float64), a 0-d array on x's device.

    The twin, on NumPy arrays, is ``np.dot`` of ``x`` in ``dtype`` with itself (BLAS adds in
    its own order). On the GPU ``cuda/reduction.cu`` computes it with no cuBLAS call, no
    temporary and no host read, so a gradient-clipping step can be captured in a CUDA graph:
    partial sums of 4096-element tiles, then their sum, each in a fixed order, so the result
    has the same bits on every run and every GPU, and lies within ``(33 + n / 2**20) * u``
    times the sum of the exact sum of squares (``u`` = 2**-24 in float32, 2**-53 in
    float64; float32 squares below 2**-126 count as 0 under CuPy's -ftz). The result is the
    first element of the one array a call allocates (the result, then ``n / 4096``
    partials), which it keeps alive. Other dtypes and strided arrays, and
    ``MINITORCH_AMP_RAW_KERNELS=0``, take CuPy's own ``(x.astype(dtype) ** 2).sum()``.

    Raises:
        TypeError: on the GPU, a ``dtype`` other than float32 or float64.

    Example:
        >>> import numpy as np
        >>> print(sum_squares(np.array([3.0, 4.0], "float16"), "float32"))
        25.0
    """
    flat = x.reshape(-1)
    xp = get_array_module(x)
    if xp is np:
        flat = flat.astype(dtype, copy=False)
        return np.dot(flat, flat)
    acc = np.dtype(dtype)
    if acc not in _SUM_PARTIALS:
        raise TypeError(f"sum_squares accumulates in float32 or float64, not {acc}")
    name = _SUM_SQUARES.get((flat.dtype, acc))
    if name is None or not kernels.enabled() or not flat.flags.c_contiguous:
        return (flat.astype(acc) ** 2).sum()
    tiles = -(-flat.size // _TILE)
    blocks = 1 if tiles <= _ONE_BLOCK_TILES else min(tiles, _MAX_BLOCKS)
    with x.device:
        buffer = xp.empty(1 + tiles, acc)
        out, partials = buffer[:1], buffer[1:]
        args = (flat, np.int64(flat.size), partials, out)
        kernels.launch("reduction.cu", name, (blocks,), (_REDUCE_THREADS,), args)
        if blocks > 1:  # a one-block grid sums its partials itself
            args = (partials, np.int64(tiles), out)
            kernels.launch("reduction.cu", _SUM_PARTIALS[acc], (1,), (_REDUCE_THREADS,), args)
    return out.reshape(())


_SUM_SQUARES = {
    (t, acc): f"sum_squares<{_CUDA_TYPE[t]}, {_CUDA_TYPE[acc]}>"
    for acc in (float32, float64)
    for t in _CUDA_TYPE
}
_SUM_PARTIALS = {acc: f"sum_partials<{_CUDA_TYPE[acc]}>" for acc in (float32, float64)}
REDUCTION = kernels.register(
    "reduction.cu", names=(*_SUM_SQUARES.values(), *_SUM_PARTIALS.values())
)
_TILE = 4096  # kTile in cuda/reduction.cu: elements per partial sum
_REDUCE_THREADS = 256  # kThreads in cuda/reduction.cu
_ONE_BLOCK_TILES = 16  # up to 64Ki elements one block does both steps: one launch, not two
_MAX_BLOCKS = 1024  # about 8 blocks per SM on an H100; past that blocks stride over tiles


def unbroadcast(grad, shape):
    """Sum ``grad`` down to ``shape``, undoing NumPy broadcasting.

    Leading axes that broadcasting added are summed away, and axes where ``shape`` has 1 are
    summed with keepdims. Called only when the shapes differ.
    """
    shape = tuple(shape)
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and grad.shape[lead + i] != 1
    )
    if axes:
        grad = reduce_sum(grad, axis=axes, keepdims=True)
    return grad.reshape(shape)


def _rows_by_index(target, index, values) -> bool:
    """Whether ``values`` holds one row of ``target`` per entry of the 1-D integer ``index``
    (an embedding's or ``index_select``'s backward), enough of them to sort."""
    return (
        isinstance(index, np.ndarray)
        and index.ndim == 1
        and index.dtype.kind in "iu"
        and index.size >= 64
        and target.ndim >= 1
        and getattr(values, "shape", None) == (index.size, *target.shape[1:])
        and index.min() >= 0
        and index.max() < target.shape[0]  # others (negative, out of range): add.at's rules
    )


def _scatter_add_rows(target, index, values) -> None:
    """:func:`scatter_add` by sorting: each index's rows summed (``add.reduceat``, pairwise),
    then added to ``target`` once. ``np.add.at`` adds row by row through a slow generic loop
    (1.1 ms for an embedding's 1024 rows of 128, 0.27 ms this way); the sums are the same up
    to their rounding order."""
    order = np.argsort(index, kind="stable")
    ordered = index[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    sums = np.add.reduceat(values[order], starts, axis=0)
    target[ordered[starts]] += sums


def scatter_add(target, index, values) -> None:
    """``target[index] += values`` in place, adding every repeated index (unbuffered).

    A bfloat16 ``target`` is summed in float32 and rounded once, on both backends: CuPy's
    ``scatter_add`` (``add.at``) refuses bfloat16, and one rounding is what a reduction owes
    its inputs anyway (``accumulation_dtype``).
    """
    xp = get_array_module(target)
    if target.dtype == bfloat16:
        wide = target.astype(float32)
        scatter_add(wide, index, values.astype(float32))
        target[...] = wide.astype(bfloat16)
    elif xp is np and _rows_by_index(target, index, values):
        _scatter_add_rows(target, index, values)
    elif xp is np:
        np.add.at(target, index, values)
    else:
        import cupyx

        cupyx.scatter_add(target, index, values)
