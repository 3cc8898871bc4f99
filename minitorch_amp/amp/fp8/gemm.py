"""The FP8 GEMM ops: ``fp8_linear`` (a Linear's product, delayed or current scaling) and
``fp8_matmul`` (two activations, current scaling), forward next to backward.

Forward casts the input with its scale to the recipe's forward format (E4M3), multiplies
by the weight's FP8 copy (cast once per ``fp8_autocast`` region), accumulates in float32,
applies both inverse scales once and rounds to the input's dtype (the AMP level's). Backward
casts the output gradient to the backward format (E5M2 under HYBRID) and runs two more FP8
GEMMs: ``dx = g @ W^T`` and ``dW = x^T @ g``, with the FP8 copies forward saved (one byte
an element). The FP8 kernel reads both operands K-major, so the casts of ``x``, ``W`` and
``g`` also write the transposes the products need (``ScalingState.cast_transposed``, one
pass over the input on a GPU) and no product copies its operands.

With a debugging tool on, each FP8 cast is also shown to the observers as op
``cast_to_fp8``, its output the *plain* cast of the scaled tensor: the operator statistics
count it, and an overflow the saturating cast hides shows up to the tensor checker as NaN
(E4M3) or inf (E5M2).
"""

from __future__ import annotations

import math

import numpy as np

from ...autograd import Tensor
from ...autograd.dispatch import hooks
from ...autograd.op import WHITE, Op
from ...backend.bias_grad import bias_grad
from ...backend.device import get_array_module
from ...backend.dtypes import bfloat16, float16, float32, result_type
from ...backend.fp8 import fp8_matmul, from_fp8, to_fp8
from ...backend.fp8_gemm import EPILOGUE_DTYPES as _EPILOGUE_DTYPES
from ...backend.primitives import relu_backward
from .recipe import Float8CurrentScaling

__all__ = ["CastToFp8", "Fp8Linear", "Fp8Matmul", "fp8_gemm", "quantize"]


class CastToFp8(Op, register=False):
    """What the debugging tools see of an FP8 cast (never applied: observers are told)."""

    name = "cast_to_fp8"


def quantize(state, x, transpose: bool = False):
    """``state.cast(x)`` (saturating), shown to the debugging observers when they are on;
    with ``transpose`` (a 2-D ``x``) ``(out, scale_inv, out.T contiguous)``, made in the
    same pass on a GPU: an FP8 GEMM reads both operands K-major, so a product that needs
    ``x`` transposed takes it from here instead of copying the bytes."""
    current = isinstance(state.recipe, Float8CurrentScaling)
    # the scale the cast uses: a delayed cast updates it after, a current one sets it first
    # (NOTE: not 1 / scale_inv, which is inf for float32's largest scale, and not the scale
    # for one in six float32 scales)
    used = state.scale.copy() if hooks.observers and not current else None
    if transpose:
        out, scale_inv, out_t = state.cast_transposed(x)
    else:
        out, scale_inv = state.cast(x)
    if hooks.observers:
        with np.errstate(all="ignore"):
            scaled = x.astype(float32) * (state.scale if current else used)
            plain = Tensor._wrap(to_fp8(scaled, state.dtype, saturate=False))
        for observe in hooks.observers:
            observe(CastToFp8, plain)
    return (out, scale_inv, out_t) if transpose else (out, scale_inv)


def fp8_gemm(a_q, b_q, scale_inv_a, scale_inv_b, out_dtype=float32, out=None, bias=None):
    """``a @ b`` of two FP8 arrays, accumulated in float32, times both inverse scales (the
    epilogue), rounded once to ``out_dtype``. For 2-D operands, ``fp8_matmul``'s ``out`` (a
    parameter's stale gradient buffer: no copy after the GEMM) and ``bias`` (an
    ``out_dtype`` [N] array the epilogue adds: no add after it).

    Rounding in the epilogue is the float32 result's ``astype(out_dtype)``, bit for bit; on a
    GPU it saves that cast's launch and a float32 copy of the product (the H200 profile of
    an FP8 step: 11 float32-to-bfloat16 copies, 300 µs of its 1517).
    """
    out_dtype = np.dtype(out_dtype)
    if (out is not None or bias is not None) and not (
        a_q.ndim == b_q.ndim == 2 and out_dtype in _EPILOGUE_DTYPES
    ):
        raise ValueError("fp8_gemm: out and bias need 2-D operands and a 16- or 32-bit result")
    if out_dtype not in _EPILOGUE_DTYPES:  # float64: the float32 result, widened exactly
        return fp8_gemm(a_q, b_q, scale_inv_a, scale_inv_b).astype(out_dtype)
    if a_q.ndim == 2 and b_q.ndim == 2:
        return fp8_matmul(a_q, b_q, scale_inv_a, scale_inv_b, out_dtype, out=out, bias=bias)
    if a_q.ndim == 3 and b_q.ndim == 3 and a_q.shape[0] == b_q.shape[0] == 1:  # one group
        return fp8_matmul(a_q[0], b_q[0], scale_inv_a, scale_inv_b, out_dtype)[None]
    xp = get_array_module(a_q)
    # NOTE: batched products have no FP8 kernel here: widened exactly, float32 products
    out = xp.matmul(from_fp8(a_q), from_fp8(b_q)) * (scale_inv_a * scale_inv_b)
    return out.astype(out_dtype, copy=False)


def check_linear(x_shape, weight_shape, bias_shape=None) -> None:
    """Raise unless an input of ``x_shape`` fits a Linear weight of ``weight_shape``
    ([in_features, out_features]) and a bias of ``bias_shape`` broadcasts to the result;
    checked before anything is cast (a cast records an amax into the scaling state)."""
    if len(weight_shape) != 2 or x_shape[-1] != weight_shape[0]:
        raise ValueError(
            f"linear: input of shape {list(x_shape)} does not match weight of shape "
            f"{list(weight_shape)} (weight is [in_features, out_features])"
        )
    out_shape = (*x_shape[:-1], weight_shape[1])
    if bias_shape is not None:
        try:
            if np.broadcast_shapes(out_shape, tuple(bias_shape)) == out_shape:
                return
        except ValueError:
            pass
        raise ValueError(
            f"linear: a bias of shape {list(bias_shape)} does not broadcast to the result's "
            f"shape {list(out_shape)}; give it shape [{weight_shape[1]}] (out_features)"
        )


class Fp8Linear(Op, register=False):
    """``x @ weight + bias`` as an FP8 GEMM (weight ``[in, out]``, Paddle's layout).

    AMP casts ``x`` by the matmul's rule (white) and the bias by the add's; the weight is
    not cast: its FP8 copy comes from its own dtype (the fp32 master at O1, the O2 parameter).
    """

    name = "fp8_linear"
    amp = WHITE
    amp_inputs = (0,)
    amp_also = ("linear", "matmul")
    amp_bias = 2
    promote = (0, 1, 2)

    @staticmethod
    def forward(ctx, x, weight, bias=None, *, meta, weight_fp8):
        check_linear(x.shape, weight.shape)
        rows = x.reshape(math.prod(x.shape[:-1]), x.shape[-1])
        # every operand K-major, as the FP8 kernel reads them: x for this product, x^T for
        # dW (saved instead of x: the same bytes), W^T here and W for dx (the region's)
        x_q, sx, x_qt = quantize(meta.input, rows, transpose=True)
        w_q, sw, w_qt = weight_fp8
        # a bias of the result's dtype is added in the GEMM's epilogue (the add's bits); an
        # other one (a float32 bias at O1) promotes, as Paddle's add does
        fold = bias is not None and bias.dtype == x.dtype and x.dtype in _EPILOGUE_DTYPES
        out = fp8_gemm(x_q, w_qt.T, sx, sw, x.dtype, bias=bias if fold else None)
        if bias is not None and not fold:
            out = out + bias
        ctx.saved = (x_qt, sx, w_q, sw, x.shape, x.dtype, weight.dtype, bias, meta)
        return out.reshape(*x.shape[:-1], weight.shape[1])

    @staticmethod
    def takes_relu_mask(ctx) -> bool:
        """A ReLU after this layer may leave its mask to this backward (``relu_fold``), as
        to a Linear's: the bias gradient's kernel applies it as it reads the gradient."""
        bias = ctx.saved[7]
        return bias is not None and (*ctx.needs_grad, False, False)[2]

    @staticmethod
    def backward(ctx, grad):
        x_qt, sx, w_q, sw, x_shape, x_dtype, w_dtype, bias, meta = ctx.saved
        needs = (*ctx.needs_grad, False)[:3]
        _, w_out, b_out = ctx.grad_out or (None, None, None)  # the parameters' grad buffers
        g = grad.reshape(-1, grad.shape[-1])
        gb = None
        if bias is not None and needs[2]:  # (with a ReLU's mask, the masked g comes back)
            gb, g = _bias_grad(g, bias.dtype, getattr(ctx, "relu_mask", None), b_out)
        # E5M2 under HYBRID: gradients need the range; g^T too when dW is wanted
        g_q, sg, *g_qt = quantize(meta.grad, g, transpose=needs[1])
        gx = gw = None
        if needs[0]:
            gx = fp8_gemm(g_q, w_q.T, sg, sw, x_dtype).reshape(x_shape)
        if needs[1]:  # written straight into the weight's gradient buffer when it has one
            w_out = w_out if w_out is not None and w_out.dtype == w_dtype else None
            gw = fp8_gemm(x_qt, g_qt[0].T, sx, sg, w_dtype, out=w_out)
        return gx, gw, gb


def _bias_grad(g, dtype, relu_out, out):
    """``(the sum of g's rows in float32, rounded once to dtype; g)``, as a Linear's bias
    gradient (``backend.bias_grad``: one kernel on a GPU, into ``out``, the bias's stale
    gradient buffer, when it has ``dtype``). With ``relu_out`` (a ReLU's output that left
    its mask to this op) the mask multiplies g first, and the masked g is returned."""
    if relu_out is not None:
        relu_out = relu_out.reshape(g.shape)
    out = out if out is not None and out.dtype == dtype else None
    if dtype in (g.dtype, float32) and g.dtype in _BIAS_GRAD_DTYPES:
        gb, masked = bias_grad(g, dtype, g.dtype if relu_out is not None else None, relu_out, out)
        return gb, (g if masked is None else masked)
    g = g if relu_out is None else relu_backward(relu_out, g)  # (a float32 g, a 16-bit bias)
    return g.sum(axis=0, dtype=float32).astype(dtype, copy=False), g


_BIAS_GRAD_DTYPES = (np.dtype(float32), np.dtype(float16), np.dtype(bfloat16))


def _swap(a, flag):
    return a.swapaxes(-1, -2) if flag else a


class Fp8Matmul(Op, register=False):
    """``op(x) @ op(y)`` of two activations (both at least 2-D) as an FP8 GEMM with current
    scaling: neither operand has a history to take a delayed scale from."""

    name = "fp8_matmul"
    amp = WHITE
    amp_also = ("matmul",)
    promote = (0, 1)

    @staticmethod
    def forward(ctx, x, y, transpose_x=False, transpose_y=False, *, meta):
        a, b = _swap(x, transpose_x), _swap(y, transpose_y)
        if a.shape[-1] != b.shape[-2]:
            raise ValueError(
                f"matmul: shapes {list(x.shape)} (transpose_x={transpose_x}) and "
                f"{list(y.shape)} (transpose_y={transpose_y}) do not match"
            )
        a_q, sa = quantize(meta.input, a)
        b_q, sb = quantize(meta.weight, b)
        dtype = result_type(x.dtype, y.dtype)  # bfloat16 with float16: float32, as outside
        ctx.saved = (a_q, sa, b_q, sb, transpose_x, transpose_y, x.dtype, y.dtype, meta)
        return fp8_gemm(a_q, b_q, sa, sb, dtype)

    @staticmethod
    def backward(ctx, grad):
        a_q, sa, b_q, sb, tx, ty, x_dtype, y_dtype, meta = ctx.saved
        g_q, sg = quantize(meta.grad, grad)
        ga = fp8_gemm(g_q, b_q.swapaxes(-1, -2), sg, sb, x_dtype)
        gb = fp8_gemm(a_q.swapaxes(-1, -2), g_q, sa, sg, y_dtype)  # batch dims: the engine sums
        return _swap(ga, tx), _swap(gb, ty)
