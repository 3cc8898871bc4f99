"""Softmax along the last axis on a GPU, one launch each way (``cuda/softmax.cu``).

``activation.Softmax`` is array expressions: on the CPU a halving row maximum, ``exp`` and
BLAS row sums; on a GPU about five CuPy launches forward (the maximum, the subtraction,
``exp``, the sum, the division) and four backward, each paying its host time, four times in
the example GPT's step (attention's weights). ``softmax_forward`` and ``softmax_backward``
take a block per row and do each direction in one launch.

* NumPy arrays never come here: the op's expressions are the twin, the specification.
* CuPy float32, float16 or bfloat16 arrays, C-contiguous, softmax along the last axis,
  with ``backend.kernels.enabled()``: the kernels, whose sums run in an order the shape alone
  decides, another than the twin's: within float32 rounding, not bit for bit. A 16-bit
  input is widened as the kernel reads it and the output rounded as it writes it (one
  launch, where the op's widening, the kernel and its narrowing took three, same bits).
* ``MINITORCH_AMP_RAW_KERNELS=0``, another axis or dtype, or an empty array: the op's
  expressions on CuPy arrays.
"""

from __future__ import annotations

import numpy as np

from . import kernels
from .device import get_array_module
from .dtypes import bfloat16, float16, float32

__all__ = ["backward", "forward", "usable"]

_INT32_MAX = 2**31 - 1  # (a constant: np.iinfo costs a microsecond a call)
FILE = "softmax.cu"
_TYPES = {float32: "float", float16: "__half", bfloat16: "__nv_bfloat16"}
_FORWARD = {t: f"softmax_forward<{name}>" for t, name in _TYPES.items()}
_BACKWARD = {t: f"softmax_backward<{name}>" for t, name in _TYPES.items()}
KERNELS = kernels.register(FILE, names=(*_FORWARD.values(), *_BACKWARD.values()))
THREADS = 256  # kThreads in cuda/softmax.cu
MAX_BLOCKS = 8192  # past that, blocks stride over the rows
_NULL = np.int64(0)  # a null pointer: RawKernel passes an int64 by value, 8 zero bytes


def usable(*arrays, axis: int = -1) -> bool:
    """Whether the kernels take softmax along ``axis`` of these same-shaped arrays: a
    float32 ``y`` (the backward's first) and float32, float16 or bfloat16 others."""
    x = arrays[0]
    if get_array_module(x) is np or not kernels.enabled() or x.ndim == 0:
        return False
    return (
        axis % x.ndim == x.ndim - 1
        and x.size > 0
        and x.size // x.shape[-1] <= _INT32_MAX
        and x.shape[-1] <= _INT32_MAX
        and all(a.dtype in _TYPES and a.flags.c_contiguous for a in arrays)
    )


def forward(x):
    """``(y, out)``: ``y = exp(x - max) / sum(exp(x - max))`` along the last axis in float32,
    and ``out``, ``y`` rounded once to ``x``'s dtype (``y`` itself for a float32 ``x``)."""
    xp = get_array_module(x)
    y = xp.empty(x.shape, float32)
    out = y if x.dtype == float32 else xp.empty_like(x)
    _launch(_FORWARD[x.dtype], (x, y, _NULL if out is y else out), x)
    return y, out


def backward(y, grad):
    """``(grad - sum(grad * y)) * y`` along the last axis, computed in float32 from the
    float32 ``y`` and rounded once to ``grad``'s dtype: the input's gradient."""
    dx = get_array_module(y).empty_like(grad)
    _launch(_BACKWARD[grad.dtype], (y, grad, dx), y)
    return dx


def _launch(name: str, arrays: tuple, x) -> None:
    n = x.shape[-1]
    rows = x.size // n
    args = (*arrays, np.int32(rows), np.int32(n))
    kernels.launch(FILE, name, (min(rows, MAX_BLOCKS),), (THREADS,), args)
