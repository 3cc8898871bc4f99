"""Exact GELU's forward and backward on a GPU, one launch each (``cuda/elementwise.cu``).

``activation.Gelu`` computes ``x * Phi(x)`` and its derivative with array expressions: on the
CPU float32 polynomials in cache-sized blocks (``backend/special.py``), on a GPU CuPy's
``erf`` and about five launches forward, eight backward, each paying its host time, with a
widening and a narrowing around them for a 16-bit input. ``gelu_forward<T>`` and
``gelu_backward<T>`` read float16, bfloat16 or float32, compute in float32 and round once:
one launch each way.

* NumPy arrays never come here: the op's expressions are the twin, the specification.
* CuPy float16, bfloat16 or float32 arrays (``x`` and its gradient of one dtype), with
  ``backend.kernels.enabled()``: the kernels, within a few float32 ulps of the twin (CUDA's
  ``erfcf`` against the twin's polynomials), not bit for bit.
* ``MINITORCH_AMP_RAW_KERNELS=0``, float64 or mixed dtypes: the op's expressions on CuPy.
"""

from __future__ import annotations

import math

import numpy as np

from . import kernels
from .device import get_array_module
from .dtypes import bfloat16, float16, float32

__all__ = ["backward", "forward", "usable"]

FILE = "elementwise.cu"
_CUDA_TYPE = {float16: "__half", bfloat16: "__nv_bfloat16", float32: "float"}
_FORWARD = {dtype: f"gelu_forward<{name}>" for dtype, name in _CUDA_TYPE.items()}
_BACKWARD = {dtype: f"gelu_backward<{name}>" for dtype, name in _CUDA_TYPE.items()}
# relu_backward (backend.primitives) is registered for this file too: the entry names both
KERNELS = kernels.register(FILE, names=(*_FORWARD.values(), *_BACKWARD.values()))
THREADS = 256  # kBlock in cuda/elementwise.cu
MAX_BLOCKS = 8192  # past that, threads stride over the elements


def usable(x, grad=None) -> bool:
    """Whether the kernels take ``x`` (and ``grad``): CuPy, one of their dtypes, contiguous."""
    if get_array_module(x) is np or not kernels.enabled() or x.dtype not in _CUDA_TYPE:
        return False
    arrays = (x,) if grad is None else (x, grad)
    return all(a.dtype == x.dtype and a.flags.c_contiguous for a in arrays)


def forward(x):
    """``x * Phi(x)`` in ``x``'s dtype, computed in float32 and rounded once."""
    out = get_array_module(x).empty_like(x)
    _launch(_FORWARD[x.dtype], (x, out), x.size)
    return out


def backward(x, grad):
    """``grad * (Phi(x) + x * phi(x))`` in ``x``'s dtype, computed in float32."""
    out = get_array_module(x).empty_like(x)
    _launch(_BACKWARD[x.dtype], (x, grad, out), x.size)
    return out


def _launch(name: str, arrays: tuple, n: int) -> None:
    if n:
        grid = (min(math.ceil(n / THREADS), MAX_BLOCKS),)
        kernels.launch(FILE, name, grid, (THREADS,), (*arrays, np.int64(n)))
