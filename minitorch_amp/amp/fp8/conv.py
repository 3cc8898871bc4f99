"""``fp8_conv2d``: a convolution whose GEMMs are FP8 (Conv2D's im2col + GEMM, see
``autograd/ops/conv.py``), forward next to backward.

The input is cast to FP8 once, *before* im2col: im2col only copies values (and pads zeros),
so the windows of the FP8 input are the FP8 windows of the input, with the same amax, at a
ninth of the copy's bytes for a 3x3 kernel. Then ``out = cols @ W^T`` as an FP8 GEMM; in
backward the output gradient is cast (E5M2 under HYBRID) for ``dW = g^T @ cols`` and
``dcols = g @ W``, and col2im adds ``dcols`` back in float32. Depthwise convolutions (a GEMM
per channel) are left to the usual op.
"""

from __future__ import annotations

from ...autograd.op import WHITE, Op
from ...autograd.ops.conv import _col2im, _im2col, conv_output_size
from ...backend.device import get_array_module
from .gemm import fp8_gemm, quantize

__all__ = ["Fp8Conv2D"]


def check_conv(x_shape, weight_shape, stride, padding, dilation, groups) -> tuple[int, int]:
    """The output's ``(height, width)`` of a convolution of an [N, C, H, W] input with an
    [O, C / groups, KH, KW] weight; raise unless they fit. Checked before anything is cast
    (a cast records an amax into the scaling state)."""
    if len(x_shape) != 4 or len(weight_shape) != 4:
        raise ValueError(
            f"conv2d: input {list(x_shape)} and weight {list(weight_shape)} must be 4-D "
            "([N, C, H, W] and [O, C / groups, KH, KW])"
        )
    _, c, h, w = x_shape
    o, c_group, kh, kw = weight_shape
    top, bottom, left, right = padding
    oh = conv_output_size(h, kh, top, bottom, stride[0], dilation[0])
    ow = conv_output_size(w, kw, left, right, stride[1], dilation[1])
    if c_group * groups != c or o % groups or oh <= 0 or ow <= 0:
        raise ValueError(
            f"conv2d: input {list(x_shape)} and weight {list(weight_shape)} do not fit "
            f"(groups={groups}, padding {list(padding)}, stride {list(stride)})"
        )
    return oh, ow


class Fp8Conv2D(Op, register=False):
    """2-D convolution ``[N, C, H, W]`` by ``[O, C/groups, kh, kw]`` with FP8 GEMMs.

    AMP casts ``x`` by conv2d's rule (white); the weight's FP8 copy comes from its own dtype,
    cast once per ``fp8_autocast`` region, as for :class:`~minitorch_amp.amp.fp8.gemm.Fp8Linear`.
    """

    name = "fp8_conv2d"
    amp = WHITE
    amp_inputs = (0,)
    amp_also = ("conv2d",)
    promote = (0, 1)

    @staticmethod
    def forward(ctx, x, weight, stride, padding, dilation, groups, *, meta, weight_fp8):
        n, _, _, _ = x.shape
        o, c_group, kh, kw = weight.shape
        top, bottom, left, right = padding
        oh, ow = check_conv(x.shape, weight.shape, stride, padding, dilation, groups)
        xp = get_array_module(x)
        x_q, sx = quantize(meta.input, x)
        if any(padding):  # FP8 zeros: the pad after the cast is the cast of the pad
            x_q = xp.pad(x_q, ((0, 0), (0, 0), (top, bottom), (left, right)))
        cols = _im2col(x_q, (kh, kw), (oh, ow), stride, dilation, groups)
        w_q, sw = weight_fp8
        w2 = w_q.reshape(groups, o // groups, c_group * kh * kw)
        out = fp8_gemm(cols, w2.swapaxes(-1, -2), sx, sw, x.dtype)  # [g, N*OH*OW, O/g]
        out = out.reshape(groups, n, oh, ow, o // groups).transpose(1, 0, 4, 2, 3)
        ctx.saved = (x_q, sx, w_q, sw, x.shape, x.dtype, weight.dtype)
        ctx.conv = (stride, padding, dilation, groups, (oh, ow), meta)
        return out.reshape(n, o, oh, ow)

    @staticmethod
    def backward(ctx, grad):
        x_q, sx, w_q, sw, x_shape, x_dtype, w_dtype = ctx.saved
        stride, padding, dilation, groups, (oh, ow), meta = ctx.conv
        needs_x, needs_w = ctx.needs_grad
        n, _, h, w = x_shape
        o, c_group, kh, kw = w_q.shape
        g = grad.reshape(n, groups, o // groups, oh, ow).transpose(1, 0, 3, 4, 2)
        g_q, sg = quantize(meta.grad, g.reshape(groups, n * oh * ow, o // groups))
        gx = gw = None
        if needs_w:
            cols = _im2col(x_q, (kh, kw), (oh, ow), stride, dilation, groups)
            gw = fp8_gemm(g_q.swapaxes(-1, -2), cols, sg, sx, w_dtype).reshape(w_q.shape)
        if needs_x:
            w2 = w_q.reshape(groups, o // groups, c_group * kh * kw)
            dcols = fp8_gemm(g_q, w2, sg, sw).reshape(groups, n, oh, ow, c_group, kh, kw)
            gx = _col2im(dcols, x_q.shape, stride, dilation, (oh, ow))  # float32 sums
            top, _, left, _ = padding
            gx = gx[:, :, top : top + h, left : left + w].astype(x_dtype)
        return gx, gw
