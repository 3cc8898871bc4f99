"""2-D pooling, Paddle's ``pool2d`` op: max, average and adaptive average over windows.

Windows are strided views of the padded input ``[N, C, OH, OW, kh, kw]`` (no copy for the
average). Padding never takes part: max pads with -inf, average pads with zeros and divides
by the number of real elements in the window (``exclusive=True``, Paddle's default) or by
``kh * kw`` (``exclusive=False``). Sums of float16 run in float32, rounded once.

Nothing is uploaded after an op's first call with given shapes: the window counts and the
adaptive pool's averaging matrices are device constants (``backend.constants``), so a
convolutional training step can be captured as a CUDA graph. An adaptive pool whose output
size divides the input's is a plain mean over equal windows (reductions, no GEMM).
"""

from __future__ import annotations

import numpy as np

from ...backend import get_array_module, graphs
from ...backend.constants import device_constant
from ...backend.dtypes import accumulation_dtype
from ..op import GRAY, Op
from .activation import float_only

POOLING_TYPES = ("max", "avg")


def pool_output_size(size: int, kernel: int, before: int, after: int, stride: int, ceil: bool):
    """Paddle's ``PoolOutputSize``: floor (or ceil) of ``(size + pads - kernel) / stride``, + 1.

    NOTE: unlike PyTorch, Paddle does not drop a last ``ceil_mode`` window that starts in the
    padding; such a window pools nothing but padding (max: -inf, average: 0 / 0).
    """
    span = size + before + after - kernel
    return (span + (stride - 1 if ceil else 0)) // stride + 1


def _windows(xpad, kernel, out_hw, stride):
    """The view ``[N, C, OH, OW, kh, kw]`` of the windows of the padded input."""
    xp = get_array_module(xpad)
    s_n, s_c, s_h, s_w = xpad.strides
    return xp.lib.stride_tricks.as_strided(
        xpad,
        shape=(*xpad.shape[:2], *out_hw, *kernel),
        strides=(s_n, s_c, s_h * stride[0], s_w * stride[1], s_h, s_w),
    )


def _taps(kernel, out_hw, stride):
    """For each kernel tap ``(p, q)``: the slices of the padded input its outputs read."""
    for p in range(kernel[0]):
        rows = slice(p, p + stride[0] * (out_hw[0] - 1) + 1, stride[0])
        for q in range(kernel[1]):
            yield p, q, rows, slice(q, q + stride[1] * (out_hw[1] - 1) + 1, stride[1])


def _real_counts(size, kernel, before, stride, out):
    """How many input (not padding) elements each window along one axis covers."""
    start = np.arange(out) * stride - before
    return np.minimum(start + kernel, size) - np.maximum(start, 0)


def _adaptive_matrix(size: int, out: int, dtype):
    """``[out, size]``: row i averages input ``floor(i*size/out) .. ceil((i+1)*size/out) - 1``."""
    matrix = np.zeros((out, size), dtype=dtype)
    for i in range(out):
        start, end = (i * size) // out, -((-(i + 1) * size) // out)
        matrix[i, start:end] = 1.0 / (end - start)
    return matrix


class Pool2D(Op):
    """Max or average pooling of ``[N, C, H, W]`` over ``kernel`` windows (Paddle's pool2d).

    ``padding`` is ``(top, bottom, left, right)``. With ``adaptive=True``, ``kernel`` is the
    output size and output ``(i, j)`` averages rows ``floor(i*H/OH) .. ceil((i+1)*H/OH) - 1``
    and the same for columns. Max sends each output's gradient to the first maximum of its
    window (row-major order), as Paddle's max-pool gradient does.
    """

    name = "pool2d"
    amp = GRAY  # Paddle: pool2d is on no AMP list (max_pool2d_with_index is white)

    @staticmethod
    def forward(
        ctx,
        x,
        pooling_type="max",
        kernel=(2, 2),
        stride=(2, 2),
        padding=(0, 0, 0, 0),
        ceil_mode=False,
        exclusive=True,
        divisor=None,
        adaptive=False,
    ):
        if x.dtype.kind in "biu":  # Paddle's pool2d has float kernels only
            kind = "adaptive_avg" if adaptive else pooling_type
            raise float_only(f"{kind}_pool2d", x.dtype)
        if x.ndim != 4:
            raise ValueError(f"pool2d: needs a 4-D input [N, C, H, W], got {list(x.shape)}")
        if pooling_type not in POOLING_TYPES:
            raise ValueError(f"pool2d: pooling_type must be one of {POOLING_TYPES}")
        xp = get_array_module(x)
        acc = accumulation_dtype(x.dtype)
        ctx.kind, ctx.dtype, ctx.shape = (
            ("adaptive" if adaptive else pooling_type),
            x.dtype,
            x.shape,
        )
        if adaptive:
            if pooling_type != "avg":
                raise ValueError("pool2d: adaptive pooling is implemented for 'avg' only")
            return _adaptive_forward(ctx, x, kernel, acc)

        h, w = x.shape[2:]
        top, bottom, left, right = padding
        oh = pool_output_size(h, kernel[0], top, bottom, stride[0], ceil_mode)
        ow = pool_output_size(w, kernel[1], left, right, stride[1], ceil_mode)
        if oh <= 0 or ow <= 0:
            raise ValueError(
                f"pool2d: the output would be {oh}x{ow}: input {h}x{w}, kernel {list(kernel)}, "
                f"padding {list(padding)}, stride {list(stride)}; use a smaller kernel"
            )
        # ceil_mode's last window may reach past the padding: pad that far too.
        extra_h = max(0, (oh - 1) * stride[0] + kernel[0] - (h + top + bottom))
        extra_w = max(0, (ow - 1) * stride[1] + kernel[1] - (w + left + right))
        fill = -np.inf if pooling_type == "max" else 0
        widths = ((0, 0), (0, 0), (top, bottom + extra_h), (left, right + extra_w))
        xpad = xp.pad(x, widths, constant_values=fill) if any(widths[2] + widths[3]) else x
        windows = _windows(xpad, kernel, (oh, ow), stride)
        ctx.geometry = (xpad.shape, kernel, (oh, ow), stride, top, left)

        if pooling_type == "max":
            flat = windows.reshape(*windows.shape[:4], kernel[0] * kernel[1])  # a copy
            ctx.argmax = flat.argmax(axis=-1)
            return xp.take_along_axis(flat, ctx.argmax[..., None], axis=-1)[..., 0]

        if divisor is not None:
            counts = float(divisor)
        elif exclusive:

            def real_counts():
                count_h = _real_counts(h, kernel[0], top, stride[0], oh)
                count_w = _real_counts(w, kernel[1], left, stride[1], ow)
                return np.outer(count_h, count_w).astype(acc)

            key = ("pool2d counts", h, w, *kernel, top, left, *stride, oh, ow, np.dtype(acc).str)
            counts = device_constant(x, key, real_counts, "an average pool's window counts")
        else:
            counts = float(kernel[0] * kernel[1])
        ctx.counts = counts
        with np.errstate(invalid="ignore", divide="ignore"):  # an all-padding window: 0 / 0
            out = windows.sum(axis=(-2, -1), dtype=acc) / counts
        return out.astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, grad):
        xp = get_array_module(grad)
        acc = accumulation_dtype(grad.dtype)
        g = grad.astype(acc, copy=False)
        if ctx.kind == "adaptive":
            return _adaptive_backward(ctx, g)
        padded_shape, kernel, out_hw, stride, top, left = ctx.geometry
        dx = xp.zeros(padded_shape, dtype=acc)
        if ctx.kind == "avg":
            with np.errstate(invalid="ignore", divide="ignore"):
                share = g / ctx.counts
        for p, q, rows, cols in _taps(kernel, out_hw, stride):
            if ctx.kind == "max":
                dx[:, :, rows, cols] += g * (ctx.argmax == p * kernel[1] + q)
            else:
                dx[:, :, rows, cols] += share
        h, w = ctx.shape[2:]
        return dx[:, :, top : top + h, left : left + w].astype(ctx.dtype)


def _adaptive_forward(ctx, x, out_hw, acc):
    """Adaptive average pooling of ``x`` to ``out_hw``: a mean over equal windows when the
    output size divides the input's, else the averaging matrices ``R x C^T`` (einsum)."""
    xp = get_array_module(x)
    n, c, h, w = x.shape
    oh, ow = out_hw
    xa = x.astype(acc, copy=False)
    if h % oh == 0 and w % ow == 0:
        ctx.windows = (h // oh, w // ow)
        out = xa.reshape(n, c, oh, h // oh, ow, w // ow).mean(axis=(3, 5))
        return out.astype(x.dtype, copy=False)
    ctx.windows = None
    _refuse_einsum_in_capture(xp)
    ctx.matrices = tuple(
        device_constant(
            x,
            ("adaptive pool matrix", size, out, np.dtype(acc).str),
            lambda size=size, out=out: _adaptive_matrix(size, out, acc),
            "an adaptive pool's averaging matrix",
        )
        for size, out in ((h, oh), (w, ow))
    )
    rows, cols = ctx.matrices
    return xp.einsum("ih,nchw,jw->ncij", rows, xa, cols).astype(x.dtype, copy=False)


def _adaptive_backward(ctx, g):
    """The gradient of :func:`_adaptive_forward`: each output's share spread over its window."""
    xp = get_array_module(g)
    n, c, h, w = ctx.shape
    if ctx.windows is not None:
        kh, kw = ctx.windows
        oh, ow = g.shape[2:]
        dx = xp.empty((n, c, oh, kh, ow, kw), dtype=g.dtype)
        dx[...] = (g / (kh * kw))[:, :, :, None, :, None]
        return dx.reshape(n, c, h, w).astype(ctx.dtype, copy=False)
    _refuse_einsum_in_capture(xp)
    rows, cols = ctx.matrices
    return xp.einsum("ih,ncij,jw->nchw", rows, g, cols).astype(ctx.dtype, copy=False)


def _refuse_einsum_in_capture(xp) -> None:
    if xp is not np:
        graphs.refuse_in_capture(
            "an adaptive average pool whose output size does not divide its input's",
            "its averaging matrices are applied with einsum, which runs on cuBLAS, and CuPy "
            "refuses cuBLAS while a stream is captured; pick an output size that divides the "
            "input's (a mean over equal windows), or run this step eagerly",
        )


__all__ = ["POOLING_TYPES", "Pool2D", "pool_output_size"]
