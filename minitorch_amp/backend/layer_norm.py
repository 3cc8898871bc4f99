"""LayerNorm's forward and backward on a GPU in three launches (``cuda/layer_norm.cu``).

``nn_ops.LayerNorm`` normalises float32 rows with array expressions: on the CPU about eight
NumPy passes each way, with BLAS for the row sums. On a GPU the same expressions are about
twelve CuPy launches forward and thirteen backward, each paying its host time (about 15 µs),
nine times in the example GPT's step. Here the forward is one launch (the row's mean and
``1 / sqrt(var + eps)`` kept for the backward), and the backward two: the input's gradient
per row, and the weight's and bias's gradients per column.

* NumPy arrays never come here: the op's own expressions are the twin, the specification.
* CuPy float32 rows, C-contiguous, with ``backend.kernels.enabled()``: the kernels, whose
  sums run in an order the shape alone decides (the same bits on every run and GPU), another
  order than the twin's BLAS: they agree within float32 rounding, not bit for bit.
* ``MINITORCH_AMP_RAW_KERNELS=0``, other dtypes, or an empty row: the op's expressions on
  CuPy arrays.
"""

from __future__ import annotations

import math

import numpy as np

from . import kernels
from .device import get_array_module
from .dtypes import float32

__all__ = ["backward", "forward", "usable"]

FILE = "layer_norm.cu"
KERNELS = kernels.register(
    FILE, names=("layer_norm_forward", "layer_norm_backward_input", "layer_norm_backward_params")
)
THREADS = 256  # kThreads in cuda/layer_norm.cu
COLUMNS = 32  # kColumns: columns per block of layer_norm_backward_params
MAX_ROW_BLOCKS = 8192  # past that, blocks stride over the rows
MAX_COLUMN_BLOCKS = 65535  # and over the column tiles
_INT32_MAX = 2**31 - 1  # (a constant: np.iinfo costs a microsecond a call)
WEIGHT, BIAS = 1, 2  # the kernels' flags: LN_WEIGHT, LN_BIAS


def usable(rows, weight=None, bias=None) -> bool:
    """Whether the kernels take these ``[rows, n]`` float32 rows (and ``[n]`` parameters)."""
    if get_array_module(rows) is np or not kernels.enabled():
        return False
    return (
        rows.ndim == 2
        and rows.size > 0
        and max(rows.shape) <= _INT32_MAX
        and all(
            a.dtype == float32 and a.flags.c_contiguous
            for a in (rows, weight, bias)
            if a is not None
        )
    )


def forward(rows, weight, bias, epsilon: float):
    """``(out, mean, rstd)`` of LayerNorm over the last axis of the float32 ``rows``."""
    xp = get_array_module(rows)
    count, n = rows.shape
    out = xp.empty_like(rows)
    mean = xp.empty(count, dtype=float32)
    rstd = xp.empty(count, dtype=float32)
    flags = (WEIGHT if weight is not None else 0) | (BIAS if bias is not None else 0)
    args = (
        rows,
        rows if weight is None else weight,  # (read only with its flag)
        rows if bias is None else bias,
        out,
        mean,
        rstd,
        np.int32(count),
        np.int32(n),
        np.float32(epsilon),
        np.int32(flags),
    )
    grid = (min(count, MAX_ROW_BLOCKS),)
    kernels.launch(FILE, "layer_norm_forward", grid, (THREADS,), args)
    return out, mean, rstd


def backward(
    grad, rows, weight, mean, rstd, weight_grad: bool, bias_grad: bool, dw_out=None, db_out=None
):
    """``(d rows, d weight or None, d bias or None)`` for the float32 ``grad`` of the output.

    ``dw_out``/``db_out``: float32, C-contiguous arrays of ``n`` elements (a parameter's
    gradient buffer, of any shape) that receive d weight / d bias and are returned as they
    are: the parameters' kernel writes them, and nothing copies its result in after.
    """
    xp = get_array_module(rows)
    for out, name in ((dw_out, "dw_out"), (db_out, "db_out")):
        if out is not None:
            kernels.check_array(out, float32, name)
            if out.size != rows.shape[1]:
                raise ValueError(f"{name} has {out.size} elements, not n = {rows.shape[1]}")
    count, n = rows.shape
    grad = xp.ascontiguousarray(grad)
    dx = xp.empty_like(rows)
    flags = WEIGHT if weight is not None else 0
    args = (rows, grad, rows if weight is None else weight, mean, rstd, dx)
    args += (np.int32(count), np.int32(n), np.int32(flags))
    grid = (min(count, MAX_ROW_BLOCKS),)
    kernels.launch(FILE, "layer_norm_backward_input", grid, (THREADS,), args)
    dw = (xp.empty(n, dtype=float32) if dw_out is None else dw_out) if weight_grad else None
    db = (xp.empty(n, dtype=float32) if db_out is None else db_out) if bias_grad else None
    if dw is not None or db is not None:
        flags = (WEIGHT if dw is not None else 0) | (BIAS if db is not None else 0)
        args = (rows, grad, mean, rstd, dx if dw is None else dw, dx if db is None else db)
        args += (np.int32(count), np.int32(n), np.int32(flags))
        grid = (min(math.ceil(n / COLUMNS), MAX_COLUMN_BLOCKS),)
        kernels.launch(FILE, "layer_norm_backward_params", grid, (THREADS,), args)
    return dx, dw, db
