"""2-D convolution as im2col + one GEMM, so it runs where matmul runs (tensor cores in float16).

For input ``x`` of shape ``[N, C, H, W]`` and weight ``[O, C/g, kh, kw]`` (``g`` groups):

1. *im2col*: every output position's window of ``x`` (after zero padding, with stride and
   dilation) becomes one row of ``cols``: ``[g, N*OH*OW, C/g*kh*kw]``, a strided view copied once;
2. one (batched over groups) GEMM: ``out = cols @ weight^T``, ``[g, N*OH*OW, O/g]``, then
   rearranged to ``[N, O, OH, OW]``.

Backward is two more GEMMs: ``dweight = g^T @ cols`` and ``dcols = g @ weight``; *col2im* adds
each window of ``dcols`` back where it came from (overlapping windows add up). In float16 the
GEMMs are ``backend.primitives``' (fp32 products and sums, one rounding); ``dcols`` is kept in
float32 through col2im and rounded once, as an implicit-GEMM backward kernel would do.

The bias is not part of the op: as in Paddle, ``F.conv2d`` adds it with a separate ``add``.
"""

from __future__ import annotations

from ...backend import get_array_module
from ...backend.dtypes import accumulation_dtype
from ...backend.primitives import matmul, matmul_float32
from ..op import GRAY, WHITE, Op


def conv_output_size(size: int, kernel: int, before: int, after: int, stride: int, dilation: int):
    """Paddle's ``ConvOutputSize``: ``(size + pads - (dilation*(kernel-1) + 1)) // stride + 1``."""
    return (size + before + after - (dilation * (kernel - 1) + 1)) // stride + 1


def _im2col(xpad, kernel, out_hw, stride, dilation, groups):
    """``[groups, N*OH*OW, C/groups*kh*kw]``: each row one window of the padded input."""
    xp = get_array_module(xpad)
    n, c, _, _ = xpad.shape
    (kh, kw), (oh, ow) = kernel, out_hw
    s_n, s_c, s_h, s_w = xpad.strides
    windows = xp.lib.stride_tricks.as_strided(  # a view: [N, C, OH, OW, kh, kw]
        xpad,
        shape=(n, c, oh, ow, kh, kw),
        strides=(s_n, s_c, s_h * stride[0], s_w * stride[1], s_h * dilation[0], s_w * dilation[1]),
    )
    windows = windows.reshape(n, groups, c // groups, oh, ow, kh, kw)
    rows = windows.transpose(1, 0, 3, 4, 2, 5, 6)  # [g, N, OH, OW, C/g, kh, kw]
    return rows.reshape(groups, n * oh * ow, (c // groups) * kh * kw)  # the one copy


class Conv2D(Op):
    """2-D convolution (cross-correlation) of ``[N, C, H, W]`` by ``[O, C/groups, kh, kw]``.

    ``out[n, o, i, j] = sum_{c, p, q} xpad[n, c, i*sh + p*dh, j*sw + q*dw] * w[o, c, p, q]``
    with ``c`` running over the input channels of ``o``'s group. ``padding`` is
    ``(top, bottom, left, right)`` zeros; ``stride`` and ``dilation`` are ``(h, w)`` pairs.
    """

    name = "conv2d"
    amp = WHITE  # Paddle: conv2d is on the float16 white list
    promote = (0, 1)

    @staticmethod
    def forward(ctx, x, weight, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1):
        if x.ndim != 4 or weight.ndim != 4:
            raise ValueError(
                f"conv2d: needs a 4-D input [N, C, H, W] and a 4-D weight "
                f"[out, in/groups, kh, kw], got {list(x.shape)} and {list(weight.shape)}"
            )
        n, c, h, w = x.shape
        o, c_group, kh, kw = weight.shape
        if c_group * groups != c or o % groups != 0:
            raise ValueError(
                f"conv2d: input of shape {list(x.shape)} has {c} channels, weight of shape "
                f"{list(weight.shape)} with groups={groups} expects {c_group * groups} "
                f"(and out channels {o} divisible by groups)"
            )
        top, bottom, left, right = padding
        oh = conv_output_size(h, kh, top, bottom, stride[0], dilation[0])
        ow = conv_output_size(w, kw, left, right, stride[1], dilation[1])
        if oh <= 0 or ow <= 0:
            raise ValueError(
                f"conv2d: the output would be {oh}x{ow}: input {h}x{w}, kernel {kh}x{kw}, "
                f"padding {list(padding)}, stride {list(stride)}, dilation {list(dilation)}; "
                "use a smaller kernel or more padding"
            )
        xp = get_array_module(x)
        xpad = x
        if any(padding):
            xpad = xp.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
        cols = _im2col(xpad, (kh, kw), (oh, ow), stride, dilation, groups)
        w2 = weight.reshape(groups, o // groups, c_group * kh * kw)
        out = matmul(cols, w2, False, True)  # [g, N*OH*OW, O/g]
        out = out.reshape(groups, n, oh, ow, o // groups).transpose(1, 0, 4, 2, 3)
        ctx.saved = (xpad, weight, x.shape, stride, padding, dilation, groups, (oh, ow))
        return out.reshape(n, o, oh, ow)

    @staticmethod
    def backward(ctx, grad):
        xpad, weight, x_shape, stride, padding, dilation, groups, (oh, ow) = ctx.saved
        needs_x, needs_w = ctx.needs_grad
        n, _, h, w = x_shape
        o, c_group, kh, kw = weight.shape
        g = grad.reshape(n, groups, o // groups, oh, ow).transpose(1, 0, 3, 4, 2)
        g = g.reshape(groups, n * oh * ow, o // groups)  # [g, N*OH*OW, O/g], like the output
        gw = gx = None
        if needs_w:  # K of this GEMM is N*OH*OW: one long float32 sum, one rounding
            cols = _im2col(xpad, (kh, kw), (oh, ow), stride, dilation, groups)
            gw = matmul(g, cols, True, False).reshape(weight.shape)
        if needs_x:
            w2 = weight.reshape(groups, o // groups, c_group * kh * kw)
            dcols = matmul_float32(g, w2).reshape(groups, n, oh, ow, c_group, kh, kw)
            gx = _col2im(dcols, xpad.shape, stride, dilation, (oh, ow))
            top, _, left, _ = padding
            gx = gx[:, :, top : top + h, left : left + w].astype(xpad.dtype)
        return gx, gw


def _col2im(dcols, padded_shape, stride, dilation, out_hw):
    """Add each window of ``dcols`` ``[g, N, OH, OW, C/g, kh, kw]`` back into the padded
    input's shape, in the accumulation dtype: one strided add per kernel tap."""
    xp = get_array_module(dcols)
    groups, n, oh, ow, c_group, kh, kw = dcols.shape
    acc = accumulation_dtype(dcols.dtype)
    dx = xp.zeros((n, groups, c_group, *padded_shape[2:]), dtype=acc)
    for p in range(kh):
        rows = slice(p * dilation[0], p * dilation[0] + stride[0] * (oh - 1) + 1, stride[0])
        for q in range(kw):
            cols = slice(q * dilation[1], q * dilation[1] + stride[1] * (ow - 1) + 1, stride[1])
            dx[:, :, :, rows, cols] += dcols[..., p, q].transpose(1, 0, 4, 2, 3)
    return dx.reshape(padded_shape)


class DepthwiseConv2D(Conv2D):
    """:class:`Conv2D` where every input channel is its own group (``groups == C``).

    The same computation under Paddle's other op name: Paddle runs these convolutions as
    ``depthwise_conv2d``, which is on no AMP list, so it follows its inputs (gray).
    """

    name = "depthwise_conv2d"
    amp = GRAY


__all__ = ["Conv2D", "DepthwiseConv2D", "conv_output_size"]
