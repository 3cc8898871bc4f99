"""The maths of one tensor: square, sqrt, rsqrt, exp, log, abs, tanh, sigmoid; forward next
to backward.

Float maths of integer tensors (``sqrt``, ``exp``, ``log``, ``tanh``, ``sigmoid``, ``rsqrt``)
gives the default float dtype, float32, not NumPy's float64 (see :func:`floating`).
"""

from __future__ import annotations

from ...backend import get_array_module
from ...backend.dtypes import accumulation_dtype, default_float
from ..op import BLACK, Op


def floating(x):
    """``x`` itself when floating, else (an integer or bool array) in the default float dtype:
    Paddle's and PyTorch's result dtype for ``sqrt``, ``exp``... of integers (NumPy's is
    float64). A cast inside the forward: an integer input never gets a gradient."""
    return x if x.dtype.kind in "fV" else x.astype(default_float())


class Square(Op):
    name = "square"
    amp = BLACK

    @staticmethod
    def forward(ctx, x):
        ctx.x = x
        return x * x

    @staticmethod
    def backward(ctx, grad):
        return grad * 2 * ctx.x


class Sqrt(Op):
    name = "sqrt"

    @staticmethod
    def forward(ctx, x):
        out = get_array_module(x).sqrt(floating(x))
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad / (2 * ctx.out)


class Rsqrt(Op):
    """``1 / sqrt(x)``; 16-bit input is computed in float32 and rounded once.

    d/dx = -y^3 / 2 for the result y (in float32 for 16-bit gradients).
    """

    name = "rsqrt"
    amp = BLACK  # Paddle: rsqrt is on the float16 black list

    @staticmethod
    def forward(ctx, x):
        x = floating(x)
        xp = get_array_module(x)
        acc = accumulation_dtype(x.dtype)
        y = 1.0 / xp.sqrt(x.astype(acc, copy=False))
        ctx.y = y  # in the accumulation dtype: backward reads it unrounded
        return y.astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, grad):
        y = ctx.y
        return (grad.astype(y.dtype, copy=False) * (-0.5 * y * y * y)).astype(grad.dtype)


class Exp(Op):
    name = "exp"
    amp = BLACK

    @staticmethod
    def forward(ctx, x):
        out = get_array_module(x).exp(floating(x))
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.out


class Log(Op):
    name = "log"
    amp = BLACK

    @staticmethod
    def forward(ctx, x):
        ctx.x = x = floating(x)
        return get_array_module(x).log(x)

    @staticmethod
    def backward(ctx, grad):
        return grad / ctx.x


class Abs(Op):
    name = "abs"

    @staticmethod
    def forward(ctx, x):
        ctx.x = x
        return abs(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * get_array_module(ctx.x).sign(ctx.x)


class Tanh(Op):
    name = "tanh"

    @staticmethod
    def forward(ctx, x):
        out = get_array_module(x).tanh(floating(x))
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad * (1 - ctx.out * ctx.out)


class Sigmoid(Op):
    """``1 / (1 + exp(-x))``, computed as ``(1 + tanh(x/2)) / 2`` so it never overflows."""

    name = "sigmoid"

    @staticmethod
    def forward(ctx, x):
        xp = get_array_module(x)
        out = (xp.tanh(floating(x) * 0.5) + 1) * 0.5
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.out * (1 - ctx.out)


__all__ = ["Abs", "Exp", "Log", "Rsqrt", "Sigmoid", "Sqrt", "Square", "Tanh"]
