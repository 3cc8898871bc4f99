"""Elementwise arithmetic, clip and comparisons: forward next to backward, broadcasting
everywhere. (The maths of one tensor, ``sqrt``, ``exp``, ..., is in ``unary_math.py``.)

Gradients are returned at the broadcast shape; the engine un-broadcasts them.
Python numbers are weak constants (``x * 2.0`` stays float16 for a float16 ``x``); an integer
tensor meeting a floating one takes its dtype (``promote``, applied by ``dispatch.promote``).
A float16 tensor meeting a number that float16 cannot hold exactly is computed in float32 and
rounded once (see :func:`binary`).
Float maths of integer tensors (true division here; ``sqrt``, ``exp``, ``log``, ``tanh``,
``sigmoid``, ``rsqrt`` in ``unary_math.py``) gives the default float dtype, float32, not NumPy's
float64.
"""

from __future__ import annotations

import operator

import numpy as np

from ...backend import get_array_module, is_array
from ..op import BLACK, NONE, Op


def _shape_of(v):
    return list(getattr(v, "shape", ()))


_mul, _div, _pow = operator.mul, operator.truediv, operator.pow
_F16 = np.dtype(np.float16)
_NUMBERS = (int, float)  # (exactly: a bool is no number here, and NumPy scalars are not weak)
_OPMATH = {"add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide",
           "pow": "power"}  # fmt: skip


def _exact_in_float16(number) -> bool:
    return -65504.0 <= number <= 65504.0 and float(np.float16(number)) == number


def _half_beside_an_inexact_number(x, y):
    """The float16 array of ``x`` and ``y`` when the other is a Python number that float16
    cannot hold exactly, else None."""
    if y.__class__ in _NUMBERS and getattr(x, "dtype", None) is _F16:
        return None if _exact_in_float16(y) else x
    if x.__class__ in _NUMBERS and getattr(y, "dtype", None) is _F16:
        return None if _exact_in_float16(x) else y
    return None


def _in_float32(name: str, a, b, half):
    """``name``'s ufunc of ``a`` and ``b`` (one of them ``half``, a float16 array; the other a
    Python number) computed in float32 and rounded once into a float16 result: one pass (one
    kernel on a GPU). ``dtype=float32`` picks the float32 loop whatever the promotion rules
    (NumPy 1's value-based casting would pick float16's for a float32 number in its range),
    and each result is rounded to float16 as it is written."""
    with np.errstate(over="ignore"):  # a number past float32's range is inf, as in PyTorch
        a, b = (np.float32(v) if v.__class__ in _NUMBERS else v for v in (a, b))
    xp = get_array_module(half)
    out = xp.empty(half.shape, _F16)
    return getattr(xp, _OPMATH[name])(a, b, out=out, dtype=np.float32)


def binary(name: str, fn, x, y):
    """``fn(x, y)``, turning NumPy's broadcast error into one that names both shapes.

    NOTE: arithmetic of a float16 array with a Python number that float16 cannot hold
    exactly (``x * 1e9``, ``x / 1e5``, ``x * 0.1``) is computed in float32 and rounded once,
    as Paddle's and PyTorch's kernels compute half-precision arithmetic in float ("opmath"):
    NumPy (and CuPy) would round the number to float16 first, 1e9 to inf (``x * 1e9`` inf or
    NaN everywhere, ``x / 1e5`` zero) and 0.1 to 0.0999755859375. A number float16 holds
    exactly gives the same bits either way (bar a rare double rounding of a sum or quotient),
    so it keeps the plain path. Comparisons keep NumPy's rule, the number rounded to the
    tensor's dtype first, as Paddle and PyTorch compare (``x == 0.1`` is True for a float16
    0.1).
    """
    half = _half_beside_an_inexact_number(x, y)
    if half is not None and name in _OPMATH:
        return _in_float32(name, x, y, half)
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
        return binary("add", operator.add, x, y)

    @staticmethod
    def backward(ctx, grad):
        return grad, grad


class Subtract(Op):
    name = "subtract"
    promote = (0, 1)

    @staticmethod
    def forward(ctx, x, y):
        return binary("subtract", operator.sub, x, y)

    @staticmethod
    def backward(ctx, grad):
        return grad, -grad


class Multiply(Op):
    name = "multiply"
    promote = (0, 1)

    @staticmethod
    def forward(ctx, x, y):
        ctx.x, ctx.y = x, y
        return binary("multiply", _mul, x, y)

    @staticmethod
    def backward(ctx, grad):
        needs_x, needs_y = ctx.needs_grad  # (a loss times the scaler's factor: x only)
        gx = binary("multiply", _mul, grad, ctx.y) if needs_x else None
        return gx, binary("multiply", _mul, grad, ctx.x) if needs_y else None


class Divide(Op):
    """True division ``x / y``; integers are divided in the default float dtype (float32).

    ``dispatch.promote`` casts integer and bool tensors first: ``int32 / 2`` and
    ``int32 / int32`` are float32, as in Paddle and PyTorch (NumPy: float64).
    """

    name = "divide"
    promote = (0, 1)
    integers_to_float = True  # (read by dispatch.promote)

    @staticmethod
    def forward(ctx, x, y):
        ctx.x, ctx.y = x, y
        return binary("divide", _div, x, y)

    @staticmethod
    def backward(ctx, grad):
        needs_x, needs_y = ctx.needs_grad
        gx = binary("divide", _div, grad, ctx.y)
        if not needs_y:
            return gx, None
        if ctx.x.__class__ in _NUMBERS:  # number / y: -(g / y) * (number / y), each in range
            return None, -gx * binary("divide", _div, ctx.x, ctx.y)  # (-g * 1e5 would not be)
        return gx if needs_x else None, -gx * ctx.x / ctx.y


class Neg(Op):
    name = "neg"

    @staticmethod
    def forward(ctx, x):
        if x.dtype.kind == "b":
            raise TypeError(
                "neg: -x is not defined for a bool tensor; for a logical not write x == False, "
                "for signed numbers cast first: -x.astype('int64')"
            )
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
        _check_integer_power(x, y)
        out = binary("pow", _pow, x, y)
        ctx.x, ctx.y, ctx.out = x, y, out
        return out

    @staticmethod
    def backward(ctx, grad):
        x, y, out = ctx.x, ctx.y, ctx.out
        if not is_array(y):  # a Python number: no gradient for it; float16 meets it in float32
            scaled = binary("multiply", _mul, grad, y)
            return binary("multiply", _mul, scaled, binary("pow", _pow, x, y - 1)), None
        gx = grad * y * x ** (y - 1)
        # NOTE: log(x) is nan for x < 0; that is the true derivative there, so keep it quiet.
        with np.errstate(all="ignore"):
            gy = grad * out * get_array_module(x, y).log(x)
        return gx, gy


def _check_integer_power(x, y) -> None:
    """Refuse an integer base with a negative integer exponent (1 / x is no integer), which
    NumPy refuses with its own words and CuPy computes as 0."""
    integer_base = isinstance(x, int) if not hasattr(x, "dtype") else x.dtype.kind in "iub"
    if not integer_base:
        return
    if isinstance(y, (int, np.integer)) and not isinstance(y, bool):
        negative = y < 0
    else:  # an integer array of exponents (a host read, for integer bases only)
        negative = getattr(y, "dtype", np.dtype("f")).kind == "i" and bool((y < 0).any())
    if negative:
        raise ValueError(
            "pow: an integer base to a negative integer power is not an integer; make the "
            "base floating first: x.astype('float32') ** y, or 2.0 ** y for a number"
        )


class Clip(Op):
    """Clamp to ``[min, max]`` (either may be None); the gradient passes strictly inside.

    d/dx = 1 where ``min < x < max``, else 0: on a bound too (Paddle's clip_grad; PyTorch's
    ``clamp`` passes it there). A bound that is None bounds nothing.
    """

    name = "clip"

    @staticmethod
    def forward(ctx, x, min=None, max=None):  # noqa: A002 - Paddle's names
        xp = get_array_module(x)
        ctx.mask = xp.ones(x.shape, dtype=bool)
        out = x
        if min is not None:
            ctx.mask &= x > min
            out = xp.maximum(out, _bound(min, x.dtype))
        if max is not None:
            ctx.mask &= x < max
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
    "Add",
    "Clip",
    "Compare",
    "Divide",
    "Multiply",
    "Neg",
    "Pow",
    "Subtract",
]
