"""Elementwise arithmetic and math: forward next to backward, broadcasting everywhere.

Gradients are returned at the broadcast shape; the engine un-broadcasts them.
Python numbers are weak constants (``x * 2.0`` stays float16 for a float16 ``x``); an integer
tensor meeting a floating one takes its dtype (``promote``, applied by ``dispatch.promote``).
"""

from __future__ import annotations

import numpy as np

from ...backend import get_array_module, is_array
from ...backend.dtypes import accumulation_dtype, is_floating
from ..op import BLACK, NONE, Op


def _shape_of(v):
    return list(getattr(v, "shape", ()))


def binary(name: str, fn, x, y):
    """``fn(x, y)``, turning NumPy's broadcast error into one that names both shapes."""
    try:
        return fn(x, y)
    except ValueError as exc:
        if "broadcast" not in str(exc):
            raise
        raise ValueError(
            f"{name}: shapes {_shape_of(x)} and {_shape_of(y)} cannot be broadcast together "
            "(trailing dimensions must be equal or 1)"
        ) from None


class Add(Op):
    name = "add"
    promote = (0, 1)

    @staticmethod
    def forward(ctx, x, y):
        return binary("add", lambda a, b: a + b, x, y)

    @staticmethod
    def backward(ctx, grad):
        return grad, grad


class Subtract(Op):
    name = "subtract"
    promote = (0, 1)

    @staticmethod
    def forward(ctx, x, y):
        return binary("subtract", lambda a, b: a - b, x, y)

    @staticmethod
    def backward(ctx, grad):
        return grad, -grad


class Multiply(Op):
    name = "multiply"
    promote = (0, 1)

    @staticmethod
    def forward(ctx, x, y):
        ctx.x, ctx.y = x, y
        return binary("multiply", lambda a, b: a * b, x, y)

    @staticmethod
    def backward(ctx, grad):
        needs_x, needs_y = ctx.needs_grad  # (a loss times the scaler's factor: x only)
        return grad * ctx.y if needs_x else None, grad * ctx.x if needs_y else None


class Divide(Op):
    name = "divide"
    promote = (0, 1)

    @staticmethod
    def forward(ctx, x, y):
        ctx.x, ctx.y = x, y
        return binary("divide", lambda a, b: a / b, x, y)

    @staticmethod
    def backward(ctx, grad):
        needs_x, needs_y = ctx.needs_grad
        gx = grad / ctx.y
        return gx if needs_x else None, -gx * ctx.x / ctx.y if needs_y else None


class Neg(Op):
    name = "neg"

    @staticmethod
    def forward(ctx, x):
        return -x

    @staticmethod
    def backward(ctx, grad):
        return -grad


class Pow(Op):
    """``x ** y``; d/dy uses log(x), so it is only computed when ``y`` is a tensor."""

    name = "pow"
    amp = BLACK
    promote = (0, 1)

    @staticmethod
    def forward(ctx, x, y):
        out = binary("pow", lambda a, b: a**b, x, y)
        ctx.x, ctx.y, ctx.out = x, y, out
        return out

    @staticmethod
    def backward(ctx, grad):
        x, y, out = ctx.x, ctx.y, ctx.out
        gx = grad * y * x ** (y - 1)
        if not is_array(y):  # a Python number: no gradient to compute
            return gx, None
        # NOTE: log(x) is nan for x < 0; that is the true derivative there, so keep it quiet.
        with np.errstate(all="ignore"):
            gy = grad * out * get_array_module(x, y).log(x)
        return gx, gy


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
        out = get_array_module(x).sqrt(x)
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
        if not is_floating(x.dtype):
            raise TypeError(f"rsqrt needs a floating tensor, got {x.dtype}; cast it first")
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
        out = get_array_module(x).exp(x)
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
        ctx.x = x
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
        out = get_array_module(x).tanh(x)
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
        out = (xp.tanh(x * 0.5) + 1) * 0.5
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.out * (1 - ctx.out)


class Clip(Op):
    """Clamp to ``[min, max]`` (either may be None); the gradient passes where not clamped."""

    name = "clip"

    @staticmethod
    def forward(ctx, x, min=None, max=None):  # noqa: A002 - Paddle's names
        xp = get_array_module(x)
        ctx.mask = xp.ones(x.shape, dtype=bool)
        out = x
        if min is not None:
            ctx.mask &= x >= min
            out = xp.maximum(out, _bound(min, x.dtype))
        if max is not None:
            ctx.mask &= x <= max
            out = xp.minimum(out, _bound(max, x.dtype))
        return out if out is not x else x.copy()

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.mask


def _bound(value, dtype):
    """A clip bound in ``dtype``: an array as it is, a number as a NumPy scalar (a kernel
    argument on the GPU, not an upload)."""
    return value.astype(dtype, copy=False) if is_array(value) else dtype.type(value)


class Compare(Op):
    """``equal``, ``not_equal``, ``less``, ... : a bool result, never differentiated."""

    name = "compare"
    amp = NONE

    @staticmethod
    def forward(ctx, x, y, relation):
        xp = get_array_module(x, y)
        return binary(relation, getattr(xp, relation), x, y)

    @staticmethod
    def backward(ctx, grad):  # pragma: no cover - bool results are never recorded
        return None, None


__all__ = [
    "Abs",
    "Add",
    "Clip",
    "Compare",
    "Divide",
    "Exp",
    "Log",
    "Multiply",
    "Neg",
    "Pow",
    "Sigmoid",
    "Sqrt",
    "Square",
    "Subtract",
    "Tanh",
]
