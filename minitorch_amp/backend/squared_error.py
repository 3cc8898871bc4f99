"""mse_loss's forward: the difference ``input - label`` and the mean (or sum) of its squares.

``MseLoss`` saves the difference for its backward and reduces its squares. CuPy spells this
as three launches (``a - b``, ``diff * diff`` and ``mean()``, a reduction whose host cost is
the highest of the three); ``squared_error<Acc>`` of ``cuda/reduction.cu`` writes the
difference and the sum in one pass, and divides by ``n`` in the same launch up to 64Ki
elements (``mean_partials<Acc>`` or ``sum_partials<Acc>`` finish larger inputs: two).

* NumPy arrays: ``diff = input - label``, then ``(diff * diff).mean()`` or ``.sum()``, the
  op's maths before the kernel, bit for bit. This is the twin, the specification.
* CuPy arrays: the kernels, deterministic (the order of ``sum_squares``: 4096-element tiles,
  fixed trees; the grid never changes a bit). The difference is the twin's (a float32
  subnormal difference is 0 under CuPy's -ftz, as it was with CuPy's ``a - b``); the result
  lies within ``(34 + ceil(n / 2**20)) * u`` times the exact mean (sum) of the difference's
  squares, ``u`` = 2**-24 in float32, 2**-53 in float64 (plus 2**-126 in float32, where
  squares below 2**-126 count as 0); the mean is the sum divided by ``n`` in float64 and
  rounded once, as NumPy's.
* Other dtypes, arrays of different shapes or not C-contiguous, and
  ``MINITORCH_AMP_RAW_KERNELS=0``: the twin's code on CuPy arrays.

The backward, ``diff * (grad * scale)``, is two CuPy launches (the 0-d gradient times the
scale, then the difference times that); ``squared_error_backward<Acc>`` is one, with the
same two roundings (:func:`squared_error_backward`).

Example:
    >>> import numpy as np
    >>> diff, loss = squared_error(np.array([1.0, 4.0]), np.array([0.0, 2.0]), mean=True)
    >>> diff.tolist(), float(loss)
    ([1.0, 2.0], 2.5)
"""

from __future__ import annotations

import numpy as np

from . import kernels, primitives  # primitives registers sum_partials<Acc> (sum_squares's)
from .device import get_array_module
from .dtypes import float32, float64

__all__ = ["squared_error", "squared_error_backward"]

_CUDA_TYPE = {float32: "float", float64: "double"}
_FORWARD = {acc: f"squared_error<{name}>" for acc, name in _CUDA_TYPE.items()}
_MEAN = {acc: f"mean_partials<{name}>" for acc, name in _CUDA_TYPE.items()}
_BACKWARD = {acc: f"squared_error_backward<{name}>" for acc, name in _CUDA_TYPE.items()}
REDUCTION = kernels.register(
    "reduction.cu", names=(*_FORWARD.values(), *_MEAN.values(), *_BACKWARD.values())
)
_TILE = 4096  # kTile in cuda/reduction.cu: elements per partial sum
_THREADS = 256  # kThreads
_ONE_BLOCK_TILES = 16  # up to 64Ki elements one block does both steps: one launch
_MAX_BLOCKS = 1024  # past that, blocks stride over the tiles


def squared_error(input, label, mean: bool):  # noqa: A002 - Paddle's name
    """``(diff, loss)``: ``diff = input - label`` and ``loss``, the mean (``mean=True``; nan
    for empty arrays) or the sum of ``diff * diff``, a 0-d array of ``input``'s dtype.

    ``input`` and ``label`` have one shape and one float dtype (the loss's accumulation
    dtype: the caller casts). On NumPy arrays this is the twin; on CuPy arrays, the kernels
    above (one launch up to 64Ki elements, two past that) for float32 and float64.

    Raises:
        ValueError: ``input`` and ``label`` have different shapes or dtypes; broadcast or
            cast them first. Nothing is computed then.
    """
    if input.shape != label.shape or input.dtype != label.dtype:
        raise ValueError(
            f"squared_error: input {list(input.shape)} {input.dtype} and label "
            f"{list(label.shape)} {label.dtype} must have one shape and dtype; broadcast "
            "and cast them first (MseLoss does)"
        )
    xp = get_array_module(input, label)
    acc = input.dtype
    contiguous = input.flags.c_contiguous and label.flags.c_contiguous
    if xp is np or acc not in _FORWARD or not kernels.enabled() or not contiguous:
        return _twin(xp, input, label, mean)
    n = input.size
    tiles = -(-n // _TILE)
    blocks = 1 if tiles <= _ONE_BLOCK_TILES else min(tiles, _MAX_BLOCKS)
    with input.device:
        diff = xp.empty(input.shape, acc)
        buffer = xp.empty(1 + tiles, acc)  # the result, then the partials (as sum_squares)
        out, partials = buffer[:1], buffer[1:]
        args = (input, label, np.int64(n), np.int32(mean), diff, partials, out)
        kernels.launch("reduction.cu", _FORWARD[acc], (blocks,), (_THREADS,), args)
        if blocks > 1:  # a one-block grid finishes in its own launch
            if mean:
                args = (partials, np.int64(tiles), np.int64(n), out)
                name = _MEAN[acc]
            else:
                args = (partials, np.int64(tiles), out)
                name = primitives._SUM_PARTIALS[acc]
            kernels.launch("reduction.cu", name, (1,), (_THREADS,), args)
    return diff, out.reshape(())


def squared_error_backward(diff, grad, scale: float):
    """``diff * (grad * scale)``: mse_loss's input gradient, ``grad`` the incoming gradient
    of the loss (0-d for a mean or sum: then ``scale`` is 2 / n or 2), in ``diff``'s dtype.

    On NumPy arrays this expression is the twin. On CuPy float32 or float64 arrays with a
    0-d ``grad`` of ``diff``'s dtype and raw kernels on, ``squared_error_backward<Acc>`` of
    ``cuda/reduction.cu`` computes it in one launch, with the expression's two roundings as
    NumPy 2 makes them (``grad * scale`` rounded once to ``diff``'s dtype, then each
    element): the twin's bits, a float32 product below 2**-126 flushed to 0 (CuPy's -ftz).
    Anything else (``reduction='none'``'s full-shape ``grad``, another dtype) is the
    expression on CuPy arrays.
    """
    xp = get_array_module(diff, grad)
    acc = diff.dtype
    if (
        xp is np
        or acc not in _BACKWARD
        or grad.dtype != acc
        or grad.ndim != 0
        or not kernels.enabled()
        or not diff.flags.c_contiguous
    ):
        return diff * (grad.astype(acc, copy=False) * scale)
    n = diff.size
    with diff.device:
        out = xp.empty(diff.shape, acc)
        if n:
            blocks = min(-(-n // _THREADS), _BACKWARD_BLOCKS)
            args = (diff, grad, acc.type(scale), np.int64(n), out)
            kernels.launch("reduction.cu", _BACKWARD[acc], (blocks,), (_THREADS,), args)
    return out


_BACKWARD_BLOCKS = 4096  # past that, blocks stride over the elements


def _twin(xp, x, label, mean: bool):
    """The specification: the op's maths before the kernel (NumPy's pairwise sum)."""
    diff = x - label
    squares = diff * diff
    if not mean:
        return diff, squares.sum()
    # mean: sum then divide, as NumPy's; of an empty array nan, as in NumPy and Paddle
    return diff, squares.mean() if diff.size else xp.full((), xp.nan, dtype=x.dtype)
