"""Sums along the rows or down the columns of a 2-D (or stacked) array, for LayerNorm and
softmax: BLAS on the CPU, plain reductions on a GPU.

NumPy's ``sum`` over many short rows pays per row; a matrix-vector product (``rows @ ones``)
or ``einsum`` runs the whole array through BLAS or one loop, several times faster. On a GPU
the same calls go to cuBLAS (or cuTENSOR), which CuPy refuses while a stream is captured into
a CUDA graph, so a transformer's step could not be replayed; there a reduction is one launch
(two with a product) and capturable. The two ways sum in different orders.

Each function takes NumPy float32/float64 arrays the CPU's way and every other array (CuPy,
another dtype) through ``reduced_*``, the GPU's way, which are plain array expressions that
NumPy runs too (``tests/test_row_sums.py`` holds the two to each other on the CPU).
"""

from __future__ import annotations

import numpy as np

from .dtypes import float32, float64


def _blas(a) -> bool:
    return a.__class__ is np.ndarray and a.dtype in (float32, float64)


def row_dots(a, b=None):
    """``sum(a * b)`` over the last axis (``b`` None: ``sum(a)``), that axis dropped."""
    if not _blas(a):
        return reduced_row_dots(a, b)
    if b is None:
        return a @ np.ones(a.shape[-1], dtype=a.dtype)
    return np.einsum("...i,...i->...", a, b)


def row_means(a):
    """The mean over the last axis, that axis dropped (``a @ full(n, 1/n)`` on the CPU)."""
    if not _blas(a):
        return reduced_row_means(a)
    n = a.shape[-1]
    return a @ np.full(n, 1.0 / n, dtype=a.dtype)


def column_dots(a, b):
    """``sum(a * b)`` over axis 0 of the 2-D ``a`` and ``b``."""
    if not _blas(a):
        return reduced_column_dots(a, b)
    return np.einsum("ij,ij->j", a, b)


def reduced_row_dots(a, b=None):
    """:func:`row_dots` as a reduction (the GPU's way; NumPy runs it too)."""
    return (a if b is None else a * b).sum(axis=-1)


def reduced_row_means(a):
    """:func:`row_means` as a reduction."""
    return a.mean(axis=-1)


def reduced_column_dots(a, b):
    """:func:`column_dots` as a reduction."""
    return (a * b).sum(axis=0)
