"""Array primitives whose NumPy and CuPy spellings differ, or whose numerics need care.

The autograd ops call these instead of spelling the numerics out each time:

* :func:`matmul` is the NumPy twin of the tensor-core GEMM: float16 inputs are multiplied
  as exact float32 products, accumulated in float32, and rounded to float16 once at the end.
* :func:`reduce_sum` and :func:`unbroadcast` accumulate float16 in float32.
* :func:`scatter_add` is ``numpy.add.at`` / ``cupyx.scatter_add``.
"""

from __future__ import annotations

import numpy as np

from .device import get_array_module
from .dtypes import accumulation_dtype, float16, float32


def matmul(a, b, transpose_a: bool = False, transpose_b: bool = False):
    """``op(a) @ op(b)`` where ``op`` transposes the last two axes when asked.

    float16 inputs follow what a tensor core does: products are exact in float32 (a float16
    times a float16 always fits), sums are float32, and the result is rounded to nearest even
    float16 once. Other dtypes use the library's matmul directly.
    """
    if transpose_a and a.ndim >= 2:
        a = a.swapaxes(-1, -2)
    if transpose_b and b.ndim >= 2:
        b = b.swapaxes(-1, -2)
    if a.dtype == float16 and b.dtype == float16:
        xp = get_array_module(a, b)
        if xp is np:
            return np.matmul(a.astype(float32), b.astype(float32)).astype(float16)
        # cuBLAS computes half GEMMs with float32 accumulation already.
        return xp.matmul(a, b)
    return a @ b


def reduce_sum(x, axis=None, keepdims: bool = False):
    """Sum in the accumulation dtype (float32 for float16), returned in ``x``'s dtype."""
    acc = accumulation_dtype(x.dtype)
    if acc == x.dtype:
        return x.sum(axis=axis, keepdims=keepdims)
    return x.sum(axis=axis, dtype=acc, keepdims=keepdims).astype(x.dtype)


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


def scatter_add(target, index, values) -> None:
    """``target[index] += values`` in place, adding every repeated index (unbuffered)."""
    xp = get_array_module(target)
    if xp is np:
        np.add.at(target, index, values)
    else:
        import cupyx

        cupyx.scatter_add(target, index, values)
