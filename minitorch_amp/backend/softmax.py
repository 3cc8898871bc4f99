"""Softmax along the last axis on a GPU, one launch each way (``cuda/softmax.cu``).

``activation.Softmax`` is array expressions: on the CPU a halving row maximum, ``exp`` and
BLAS row sums; on a GPU about five CuPy launches forward (the maximum, the subtraction,
``exp``, the sum, the division) and four backward, each paying its host time, four times in
the example GPT's step (attention's weights). ``softmax_forward`` and ``softmax_backward``
take a block per row and do each direction in one launch.

* NumPy arrays never come here: the op's expressions are the twin, the specification.
* CuPy float32 arrays, C-contiguous, softmax along the last axis, with
  ``backend.kernels.enabled()``: the kernels, whose sums run in an order the shape alone
  decides, another than the twin's: within float32 rounding, not bit for bit.
* ``MINITORCH_AMP_RAW_KERNELS=0``, another axis or dtype, or an empty array: the op's
  expressions on CuPy arrays.
"""

from __future__ import annotations

import numpy as np

from . import kernels
from .device import get_array_module
from .dtypes import float32

__all__ = ["backward", "forward", "usable"]

FILE = "softmax.cu"
KERNELS = kernels.register(FILE, names=("softmax_forward", "softmax_backward"))
THREADS = 256  # kThreads in cuda/softmax.cu
MAX_BLOCKS = 8192  # past that, blocks stride over the rows


def usable(*arrays, axis: int = -1) -> bool:
    """Whether the kernels take softmax along ``axis`` of these same-shaped arrays."""
    x = arrays[0]
    if get_array_module(x) is np or not kernels.enabled() or x.ndim == 0:
        return False
    return (
        axis % x.ndim == x.ndim - 1
        and x.size > 0
        and x.size // x.shape[-1] <= np.iinfo(np.int32).max
        and x.shape[-1] <= np.iinfo(np.int32).max
        and all(a.dtype == float32 and a.flags.c_contiguous for a in arrays)
    )


def forward(x):
    """``exp(x - max) / sum(exp(x - max))`` along the last axis of the float32 ``x``."""
    y = get_array_module(x).empty_like(x)
    _launch("softmax_forward", (x, y), x)
    return y


def backward(y, grad):
    """``(grad - sum(grad * y)) * y`` along the last axis: the input's gradient."""
    dx = get_array_module(y).empty_like(y)
    _launch("softmax_backward", (y, grad, dx), y)
    return dx


def _launch(name: str, arrays: tuple, x) -> None:
    n = x.shape[-1]
    rows = x.size // n
    args = (*arrays, np.int32(rows), np.int32(n))
    kernels.launch(FILE, name, (min(rows, MAX_BLOCKS),), (THREADS,), args)
