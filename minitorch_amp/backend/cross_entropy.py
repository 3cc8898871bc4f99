"""Softmax cross-entropy with integer labels on a GPU: two launches forward, one backward
(``cuda/cross_entropy.cu``).

``loss.CrossEntropy`` is array expressions: on a GPU about 29 CuPy launches forward (the
label checks and their device flag, ``where``, log-softmax's maximum, subtraction, ``exp``,
sum, ``log`` and subtraction, the pick, the weights, the sums, the mean's division) and 8
backward (``exp`` of the saved log-softmax, the one-hot, the products). Here
``cross_entropy_forward`` takes a block per row and writes each row's maximum, log-sum-exp,
weight and loss (ORing an out-of-range label into the op's device flag, reported at the next
host read as ``sync.check`` reports it), ``cross_entropy_reduce`` sums them for 'mean' or
'sum', and ``cross_entropy_backward`` writes ``(softmax - onehot) * grad * scale * w`` from
the logits and those rows: no log-softmax matrix is kept.

* NumPy arrays never come here: the op's expressions are the twin, the specification.
* CuPy logits of float32, float16 or bfloat16, C-contiguous, classes on the last axis, int64
  or int32 labels, with ``backend.kernels.enabled()``: the kernels, whose sums run in an
  order the shape alone decides, another than the twin's: within float32 rounding, not bit
  for bit (the bound is in ``cuda/cross_entropy.cu``). A 16-bit input is widened as the
  kernels read it and the gradient rounded once as they write it.
* ``MINITORCH_AMP_RAW_KERNELS=0``, another class axis, logits or labels of another dtype or
  not C-contiguous, an empty input, or an ``ignore_index`` outside int64: the expressions.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import kernels
from .device import get_array_module
from .dtypes import bfloat16, float16, float32

__all__ = ["Rows", "backward", "forward", "usable"]

FILE = "cross_entropy.cu"
_LOGITS = {float32: "float", float16: "__half", bfloat16: "__nv_bfloat16"}
_LABELS = {np.dtype(np.int64): "long long", np.dtype(np.int32): "int"}
_PAIRS = [(x, y, f"{xn}, {yn}") for x, xn in _LOGITS.items() for y, yn in _LABELS.items()]
_FORWARD = {(x, y): f"cross_entropy_forward<{names}>" for x, y, names in _PAIRS}
_BACKWARD = {(x, y): f"cross_entropy_backward<{names}>" for x, y, names in _PAIRS}
_REDUCE = {t: f"cross_entropy_reduce<{name}>" for t, name in _LOGITS.items()}
KERNELS = kernels.register(FILE, names=(*_FORWARD.values(), *_REDUCE.values(), *_BACKWARD.values()))
THREADS = 256  # kThreads in cuda/cross_entropy.cu
MAX_BLOCKS = 8192  # past that, blocks stride over the rows
_NULL = np.int64(0)  # a null pointer: RawKernel passes an int64 by value, 8 zero bytes
_INT32 = np.iinfo(np.int32).max
_INT64 = np.iinfo(np.int64)


class Rows(NamedTuple):
    """What the backward reads: the logits, the labels, each row's maximum, log-sum-exp and
    weight (``stats``: the three, one after another), the mean's scale (a float32 [1]; None:
    1) and whether each row has its own incoming gradient (reduction 'none')."""

    x: object
    label: object
    ignore_index: int
    stats: object
    scale: object
    per_row: bool


def usable(logits, label, weight, axis: int, ignore_index: int) -> bool:
    """Whether the kernels take cross-entropy over ``axis`` of ``logits`` with ``label`` (the
    class axis dropped) and ``weight`` (None or one value per class), both already checked
    against the logits' shape."""
    if get_array_module(logits) is np or not kernels.enabled() or logits.ndim == 0:
        return False
    n = logits.shape[-1]
    return (
        axis % logits.ndim == logits.ndim - 1
        and logits.size > 0
        and logits.size // n <= _INT32
        and n <= _INT32
        and logits.dtype in _LOGITS
        and logits.flags.c_contiguous
        and get_array_module(label) is not np
        and label.dtype in _LABELS
        and label.flags.c_contiguous
        and (weight is None or get_array_module(weight) is not np)
        and _INT64.min <= ignore_index <= _INT64.max
    )


def forward(logits, label, weight, ignore_index: int, reduction: str, bad):
    """``(out, rows)``: the loss (per row, float32, for reduction 'none'; else a 0-d array of
    the logits' dtype) and the :class:`Rows` the backward needs. ``weight`` is None or one
    value per class; ``bad`` is the device flag an out-of-range label sets."""
    xp = get_array_module(logits)
    n = logits.shape[-1]
    rows = logits.size // n
    w = _NULL if weight is None else weight.astype(float32, order="C", copy=False)
    buffer = xp.empty(3 * rows + 1, float32)  # max, lse and weight per row; the mean's scale
    stats, scale = buffer[: 3 * rows], buffer[3 * rows :]
    loss = xp.empty(rows, float32)  # its own: 'none' returns it, the backward never reads it
    row_max, row_lse, row_weight = stats[:rows], stats[rows : 2 * rows], stats[2 * rows :]
    args = (logits, label, w, np.int64(ignore_index), row_max, row_lse, row_weight, loss, bad)
    _launch(_FORWARD[logits.dtype, label.dtype], args, rows, n)
    mean = reduction == "mean"
    saved = Rows(logits, label, ignore_index, stats, scale if mean else None, reduction == "none")
    if reduction == "none":
        return loss, saved
    out = xp.empty(1, logits.dtype)
    args = (loss, row_weight, np.int32(rows), np.int32(mean), scale, out)
    kernels.launch(FILE, _REDUCE[logits.dtype], (1,), (THREADS,), args)
    return out.reshape(()), saved


def backward(rows: Rows, grad):
    """The logits' gradient, in their dtype: ``(softmax - onehot) * grad * scale * w`` per
    row, ``grad`` one value (a mean or a sum) or one per row (reduction 'none')."""
    x = rows.x
    n = x.shape[-1]
    count = x.size // n
    dx = get_array_module(x).empty(x.shape, x.dtype)
    g = grad.astype(float32, order="C", copy=False)
    row_max, row_lse, row_weight = (rows.stats[i * count : (i + 1) * count] for i in range(3))
    scale = _NULL if rows.scale is None else rows.scale
    args = (x, rows.label, np.int64(rows.ignore_index), row_max, row_lse, row_weight, g)
    args += (np.int32(rows.per_row), scale, dx)
    _launch(_BACKWARD[x.dtype, rows.label.dtype], args, count, n)
    return dx


def _launch(name: str, args: tuple, rows: int, n: int) -> None:
    grid = (min(rows, MAX_BLOCKS),)
    kernels.launch(FILE, name, grid, (THREADS,), (*args, np.int32(rows), np.int32(n)))
