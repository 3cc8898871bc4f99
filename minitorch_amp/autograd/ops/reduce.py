"""Reductions and the running sum. float16 input is summed in float32 (see
``accumulation_dtype``)."""

from __future__ import annotations

import numpy as np

from ...backend import get_array_module
from ...backend.dtypes import accumulation_dtype, is_floating
from ...backend.primitives import reduce_sum
from ..op import BLACK, GRAY, NONE, Op
from .index import check_axis


def _normalise_axes(axis, ndim):
    """``axis`` (None, int or tuple) as a sorted tuple of non-negative axes.

    None and an empty tuple or list mean every axis (Paddle's ``axis=[]``; NumPy's
    ``axis=()`` would reduce none).
    """
    axes = (axis,) if isinstance(axis, int) else () if axis is None else tuple(axis)
    if not axes:
        return tuple(range(ndim))
    for a in axes:
        if not -max(ndim, 1) <= a < max(ndim, 1):
            raise ValueError(f"axis {a} is out of range for a tensor with {ndim} dimensions")
    return tuple(sorted({a % max(ndim, 1) for a in axes})) if ndim else ()


def _expand_back(grad, shape, axes, keepdim):
    """Broadcast a reduced gradient back to the input ``shape``."""
    xp = get_array_module(grad)
    if not keepdim:
        grad = grad.reshape([1 if i in axes else n for i, n in enumerate(shape)])
    return xp.broadcast_to(grad, shape)


class Sum(Op):
    name = "sum"
    amp = BLACK  # Paddle: reduce_sum

    @staticmethod
    def forward(ctx, x, axis=None, keepdim=False):
        axes = _normalise_axes(axis, x.ndim)
        ctx.shape, ctx.axes, ctx.keepdim = x.shape, axes, keepdim
        if x.dtype.kind == "b":
            return x.sum(axis=axes, keepdims=keepdim)
        return reduce_sum(x, axis=axes, keepdims=keepdim)

    @staticmethod
    def backward(ctx, grad):
        return _expand_back(grad, ctx.shape, ctx.axes, ctx.keepdim)


class Mean(Op):
    name = "mean"
    amp = BLACK

    @staticmethod
    def forward(ctx, x, axis=None, keepdim=False):
        axes = _normalise_axes(axis, x.ndim)
        count = 1
        for a in axes:
            count *= x.shape[a]
        ctx.shape, ctx.axes, ctx.keepdim, ctx.count = x.shape, axes, keepdim, count
        if not is_floating(x.dtype):
            raise TypeError(f"mean needs a floating tensor, got {x.dtype}; cast it first")
        acc = accumulation_dtype(x.dtype)
        return x.mean(axis=axes, dtype=acc, keepdims=keepdim).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, grad):
        return _expand_back(grad / ctx.count, ctx.shape, ctx.axes, ctx.keepdim)


class Max(Op):
    """Maximum; every tied maximum gets the whole gradient (Paddle's ``max``, not ``amax``)."""

    name = "max"
    amp = GRAY

    @staticmethod
    def forward(ctx, x, axis=None, keepdim=False):
        if x.size == 0:
            raise ValueError(f"max of an empty tensor (shape {list(x.shape)}) is undefined")
        axes = _normalise_axes(axis, x.ndim)
        out = x.max(axis=axes, keepdims=True)
        ctx.x, ctx.out, ctx.axes, ctx.keepdim = x, out, axes, keepdim
        return out if keepdim else out.reshape([n for i, n in enumerate(x.shape) if i not in axes])

    @staticmethod
    def backward(ctx, grad):
        # NOTE: not shared among ties: Paddle's max passes ``grad`` to each of them (its amax,
        # and PyTorch's full-reduction max, split it evenly).
        mask = ctx.x == ctx.out
        if not ctx.keepdim:
            grad = grad.reshape(ctx.out.shape)
        return mask * grad


class ArgMax(Op):
    """Index of the maximum (int64); not differentiable."""

    name = "argmax"
    amp = NONE

    @staticmethod
    def forward(ctx, x, axis=None, keepdim=False):
        if axis is not None:
            if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
                raise TypeError(
                    f"argmax: axis must be an int or None (the flattened tensor), got {axis!r}"
                )
            axis = check_axis("argmax", int(axis), max(x.ndim, 1))
        if x.size == 0:
            raise ValueError(
                f"argmax of an empty tensor (shape {list(x.shape)}) is undefined; check the "
                "tensor's size before taking it"
            )
        xp = get_array_module(x)
        if axis is None:
            out = xp.argmax(x.reshape(-1))
            return out.reshape([1] * x.ndim) if keepdim else out
        return xp.argmax(x, axis=axis, keepdims=keepdim).astype("int64", copy=False)

    @staticmethod
    def backward(ctx, grad):  # pragma: no cover - integer results are never recorded
        return None


def _running_sum(x, axis: int, reverse: bool):
    """``cumsum`` along ``axis`` (from the end when ``reverse``), in the accumulation dtype
    for floating input, rounded once; integer input keeps its dtype, bool becomes int64."""
    xp = get_array_module(x)
    if reverse:
        x = xp.flip(x, axis)
    dtype = accumulation_dtype(x.dtype) if is_floating(x.dtype) else x.dtype
    out = xp.cumsum(x, axis=axis, dtype="int64" if x.dtype.kind == "b" else dtype)
    if is_floating(x.dtype):
        out = out.astype(x.dtype, copy=False)
    return xp.flip(out, axis) if reverse else out


class Cumsum(Op):
    """Running sum along ``axis`` (``reverse``: from the end); ``out[i] = x[0] + ... + x[i]``.

    d/dx[j] = sum of grad[i] for i >= j: the running sum of the gradient the other way.
    """

    name = "cumsum"
    amp = BLACK  # Paddle: cumsum is on the float16 black list

    @staticmethod
    def forward(ctx, x, axis, reverse=False):
        (axis,) = _normalise_axes(axis, x.ndim) or (0,)
        ctx.axis, ctx.reverse = axis, reverse
        if x.ndim == 0:
            return x.copy()
        return _running_sum(x, axis, reverse)

    @staticmethod
    def backward(ctx, grad):
        if grad.ndim == 0:
            return grad
        return _running_sum(grad, ctx.axis, not ctx.reverse)
