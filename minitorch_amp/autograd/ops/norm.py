"""Norms: ``rms_norm`` (root-mean-square layer normalisation) and ``p_norm`` (vector p-norms).

Both reduce, so float16 and bfloat16 input is summed in float32 and the result rounded once
to the input's dtype (``accumulation_dtype``).
"""

from __future__ import annotations

import math

from ...backend import get_array_module
from ...backend.dtypes import accumulation_dtype
from ..op import BLACK, GRAY, Op


class RmsNorm(Op):
    """Scale by the root mean square over the trailing ``normalized_shape`` dims.

    ``y = x / sqrt(mean(x^2) + epsilon) * weight``: layer norm without the mean and the bias.
    With ``xhat = x * rstd``, d/dx = ``rstd * (gw - xhat * mean(gw * xhat))``, ``gw = g * weight``.
    """

    name = "rms_norm"
    # Paddle's lists do not name rms_norm; it is held in float32 at O1 like layer_norm, the op
    # it replaces (PyTorch's autocast keeps it in float32 too). Only x is cast.
    amp = BLACK
    amp_inputs = (0,)

    @staticmethod
    def forward(ctx, x, weight=None, normalized_shape=(), epsilon=1e-5):
        normalized_shape = tuple(normalized_shape)
        k = len(normalized_shape)
        if k == 0 or k > x.ndim or tuple(x.shape[x.ndim - k :]) != normalized_shape:
            raise ValueError(
                f"rms_norm: input of shape {list(x.shape)} does not end with "
                f"normalized_shape {list(normalized_shape)}"
            )
        if weight is not None and weight.size != math.prod(normalized_shape):
            raise ValueError(
                f"rms_norm: weight of shape {list(weight.shape)} does not match "
                f"normalized_shape {list(normalized_shape)}"
            )
        xp = get_array_module(x)
        acc = accumulation_dtype(x.dtype)
        axes = tuple(range(x.ndim - k, x.ndim))
        xa = x.astype(acc, copy=False)
        rstd = 1.0 / xp.sqrt((xa * xa).mean(axis=axes, keepdims=True) + epsilon)
        xhat = xa * rstd
        w = None if weight is None else weight.reshape(normalized_shape).astype(acc, copy=False)
        out = xhat if w is None else xhat * w
        ctx.xhat, ctx.rstd, ctx.w, ctx.axes, ctx.dtype = xhat, rstd, w, axes, x.dtype
        ctx.w_shape = None if weight is None else weight.shape
        return out.astype(x.dtype, copy=out is xhat)

    @staticmethod
    def backward(ctx, grad):
        xhat, axes = ctx.xhat, ctx.axes
        g = grad.astype(xhat.dtype, copy=False)
        lead = tuple(range(g.ndim - len(axes)))
        gw = None if ctx.w_shape is None else (g * xhat).sum(axis=lead).reshape(ctx.w_shape)
        gxhat = g if ctx.w is None else g * ctx.w
        # d/dx of x * rstd(x): remove the gradient's projection on xhat.
        gx = ctx.rstd * (gxhat - xhat * (gxhat * xhat).mean(axis=axes, keepdims=True))
        return gx.astype(ctx.dtype, copy=False), gw


class PNorm(Op):
    """``(sum |x|^p)^(1/p)`` along ``axis``; ``p = inf``: max |x|, ``-inf``: min |x|, 0: count.

    d/dx = ``sign(x) |x|^(p-1) / norm^(p-1)`` (``x / norm`` for p = 2); for +-inf the gradient
    goes to every element whose |x| equals the norm, as in Paddle's kernel. A zero norm sends
    a zero gradient (the formula's 0/0).

    NOTE: Paddle's float16 black list names ``pnorm``, not this op's name ``p_norm``, so
    Paddle's AMP treats ``p_norm`` as gray: it follows its input.
    """

    name = "p_norm"
    amp = GRAY

    @staticmethod
    def forward(ctx, x, porder=2.0, axis=-1, keepdim=False):
        if not -max(x.ndim, 1) <= axis < max(x.ndim, 1):
            raise ValueError(f"p_norm: axis {axis} is out of range for a tensor with {x.ndim} dims")
        xp = get_array_module(x)
        xa = x.astype(accumulation_dtype(x.dtype), copy=False)
        axis = None if x.ndim == 0 else axis
        a = xp.abs(xa)
        if porder == math.inf:
            norm = a.max(axis=axis, keepdims=True)
        elif porder == -math.inf:
            norm = a.min(axis=axis, keepdims=True)
        elif porder == 0:
            norm = (a != 0).sum(axis=axis, keepdims=True).astype(a.dtype)
        elif porder == 2:
            norm = xp.sqrt((xa * xa).sum(axis=axis, keepdims=True))
        else:
            norm = (a**porder).sum(axis=axis, keepdims=True) ** (1.0 / porder)
        ctx.x, ctx.norm, ctx.porder, ctx.dtype = xa, norm, porder, x.dtype
        out = norm if keepdim or axis is None else xp.squeeze(norm, axis=axis)
        return out.astype(x.dtype, copy=out is norm and out.dtype == x.dtype)

    @staticmethod
    def backward(ctx, grad):
        xp = get_array_module(grad)
        x, norm, p = ctx.x, ctx.norm, ctx.porder
        g = grad.astype(x.dtype, copy=False).reshape(norm.shape)
        if p == 0:
            return xp.zeros(x.shape, dtype=ctx.dtype)
        if p in (math.inf, -math.inf):
            gx = g * xp.sign(x) * (xp.abs(x) == norm)
        else:
            # A zero norm means x is all zeros, and an x of 0 gets 0 (Paddle masks it): both
            # divisions are kept away from 0, and sign(0) = 0 zeroes those elements.
            safe_norm = xp.where(norm == 0, 1, norm)
            if p == 2:
                gx = g * (x / safe_norm)
            else:
                safe_x = xp.where(x == 0, 1, xp.abs(x))
                gx = g * xp.sign(x) * (safe_x / safe_norm) ** (p - 1)
        return gx.astype(ctx.dtype, copy=False)


__all__ = ["PNorm", "RmsNorm"]
