"""Activations: relu, gelu (erf and tanh forms), softmax and log_softmax.

float16 input is computed in float32 and rounded once at the end (what Paddle's and cuDNN's
half kernels do): ``exp`` of a float16 overflows past 11.1, and a softmax sum in float16 stops
growing past 2048.
"""

from __future__ import annotations

import math

import numpy as np

from ...backend import gelu as _gelu
from ...backend import get_array_module, host_c
from ...backend import softmax as _softmax
from ...backend.blocks import blocks
from ...backend.dtypes import accumulation_dtype
from ...backend.primitives import relu_backward
from ...backend.row_sums import row_dots
from ...backend.special import gelu_float32, normal_cdf
from ..op import BLACK, GRAY, Op

_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_CUBIC = 0.044715


def _widen(x):
    """``x`` in its accumulation dtype (float32 for float16; otherwise ``x`` itself)."""
    return x.astype(accumulation_dtype(x.dtype), copy=False)


def float_only(name: str, dtype) -> TypeError:
    """The error for an integer or bool input to an op with floating-point kernels only.

    Paddle registers no integer kernels for these ops and PyTorch raises "not implemented for
    'Long'"; computing them in integers would truncate every value silently. The ops test
    ``x.dtype.kind in "biu"`` (one comparison) and raise this.
    """
    return TypeError(
        f"{name}: got an input of dtype {dtype}, but {name} computes in floating point only; "
        "cast it to a float dtype first, e.g. x.astype('float32')"
    )


def softmax_axis(axis: int, ndim: int, name: str):
    """Check ``axis`` for a tensor of ``ndim`` dims; a 0-d tensor reduces over everything."""
    if not -max(ndim, 1) <= axis < max(ndim, 1):
        raise ValueError(f"{name}: axis {axis} is out of range for a tensor with {ndim} dims")
    return None if ndim == 0 else axis


def log_softmax(x, axis):
    """``x - max - log(sum(exp(x - max)))`` along ``axis``, in ``x``'s dtype (non-empty ``x``)."""
    xp = get_array_module(x)
    z = x - x.max(axis=axis, keepdims=True)
    return z - xp.log(xp.exp(z).sum(axis=axis, keepdims=True))


class Relu(Op):
    """``max(x, 0)``; the gradient is 0 where ``x <= 0`` (Paddle takes 0 at the kink)."""

    name = "relu"
    amp = GRAY
    defers_mask = True  # the engine may leave the mask to a Linear before it (relu_fold)

    @staticmethod
    def forward(ctx, x):
        if x.dtype.kind in "biu":
            raise float_only("relu", x.dtype)
        ctx.y = get_array_module(x).maximum(x, x.dtype.type(0))
        return ctx.y  # saved for backward: y > 0 exactly where x > 0 (NaN in neither)

    @staticmethod
    def backward(ctx, grad):
        return relu_backward(ctx.y, grad)


def _fused_gelu(*arrays):
    """The compiled ``csrc/gelu.c`` when every array is a C-contiguous NumPy float32 one
    (the backward's loop, one pass where NumPy makes seven), else None."""
    if all(a.__class__ is np.ndarray and a.dtype == np.float32 and a.flags.c_contiguous
           for a in arrays):  # fmt: skip
        return host_c.load("gelu")
    return None


class Gelu(Op):
    """Gaussian error linear unit.

    Exact (``approximate=False``): ``x * Phi(x)`` with ``Phi(x) = (1 + erf(x / sqrt(2))) / 2``,
    derivative ``Phi(x) + x * phi(x)`` where ``phi`` is the standard normal density.
    Tanh form: ``x/2 * (1 + tanh(u))`` with ``u = sqrt(2/pi) * (x + 0.044715 x^3)``.
    On a GPU the exact form is one kernel launch each way (``backend/gelu.py``).
    """

    name = "gelu"
    amp = GRAY

    @staticmethod
    def forward(ctx, x, approximate=False):
        if x.dtype.kind in "biu":
            raise float_only("gelu", x.dtype)
        xp = get_array_module(x)
        if not approximate and _gelu.usable(x):  # a GPU: one launch each way (backend/gelu.py)
            ctx.x, ctx.approximate, ctx.cdf = x, False, None
            return _gelu.forward(x)
        xa = _widen(x)
        ctx.x, ctx.approximate = xa, approximate
        if approximate:
            ctx.t = xp.tanh(_SQRT_2_OVER_PI * (xa + _GELU_CUBIC * xa * xa * xa))
            out = 0.5 * xa * (1.0 + ctx.t)
        elif xp is np and xa.dtype == np.float32:  # Phi and the product in the same blocks
            ctx.cdf, out = gelu_float32(xa)
        else:
            ctx.cdf = cdf = normal_cdf(xa)  # float32 in float32 alone: no erf, no widening
            out = xa * cdf
        return out.astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, grad):
        xp = get_array_module(grad)
        x = ctx.x
        if not ctx.approximate and ctx.cdf is None:  # the forward ran on the GPU's kernel
            if _gelu.usable(x, grad):
                return _gelu.backward(x, grad)
            ctx.cdf = normal_cdf(_widen(x))  # (a gradient of another dtype: the expressions)
            x = _widen(x)
        if ctx.approximate:
            t = ctx.t
            du = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_CUBIC * x * x)
            slope = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du
        else:  # in x's dtype (float32 for 16-bit x), in place, block by block on the CPU
            slope = xp.empty(x.shape, dtype=x.dtype)  # C order: its flat view is a view
            flat_x, flat_slope = x.reshape(-1), slope.reshape(-1)
            flat_cdf, flat_grad = ctx.cdf.reshape(-1), grad.reshape(-1)
            fused = _fused_gelu(flat_x, flat_cdf, flat_grad)
            for block in blocks(x.size) if xp is np else [slice(None)]:
                xb, sb = flat_x[block], flat_slope[block]
                if fused is not None:  # csrc/gelu.c: the passes around exp, the same bits
                    fused.density_exponent(xb, sb)
                    np.exp(sb, out=sb)
                    fused.slope(sb, xb, flat_cdf[block], flat_grad[block], _INV_SQRT_2PI)
                    continue
                xp.multiply(xb, xb, out=sb)
                sb *= -0.5
                xp.exp(sb, out=sb)
                sb *= _INV_SQRT_2PI
                sb *= xb
                sb += flat_cdf[block]
                sb *= flat_grad[block]
            return slope.astype(grad.dtype, copy=False)
        slope *= grad
        return slope.astype(grad.dtype, copy=False)


class Softmax(Op):
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``; d/dx = y * (g - sum(g * y))."""

    name = "softmax"
    amp = BLACK

    @staticmethod
    def forward(ctx, x, axis=-1):
        if x.dtype.kind in "biu":
            raise float_only("softmax", x.dtype)
        xp = get_array_module(x)
        axis = softmax_axis(axis, x.ndim, "softmax")
        ctx.axis = axis
        if x.size == 0:
            ctx.out = _widen(x)
            return x.copy()
        if _softmax.usable(x, axis=axis):  # a GPU: one launch each way (backend/softmax.py)
            ctx.out, out = _softmax.forward(x)  # (float32, and out in x's dtype)
            return out
        xa = _widen(x)
        if xa.ndim == 0 or xa.dtype.kind != "f":  # a 0-d or bfloat16 input: no fast path
            e = xp.exp(xa - xa.max(axis=axis, keepdims=True))
            ctx.out = e / e.sum(axis=axis, keepdims=True)
            return ctx.out.astype(x.dtype, copy=False)
        # NOTE: NumPy's fmax.reduce is about 1.5x faster than max over short rows and gives
        # the same softmax: a NaN it skips still makes its row NaN through exp and the sum.
        top = _row_fmax(xa, axis) if xp is np else xp.max(xa, axis=axis, keepdims=True)
        e = xp.subtract(xa, top)  # fresh: exp and the division write into it
        xp.exp(e, out=e)
        e /= _row_sums(e, axis)
        ctx.out = e
        return e.astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, grad):
        xp = get_array_module(grad)
        y = ctx.out
        if _softmax.usable(y, grad, axis=ctx.axis):
            return _softmax.backward(y, grad)  # (in grad's dtype)
        g = _widen(grad)
        gx = xp.subtract(g, _row_sums(g, ctx.axis, y))  # fresh: scaled by y in place
        gx *= y
        return gx.astype(grad.dtype, copy=False)


def _row_fmax(a, axis: int):
    """``np.fmax.reduce(a, axis=axis, keepdims=True)`` (NaN skipped; all-NaN rows NaN).

    Over many short rows along the last axis (attention's softmax: rows of the sequence
    length) NumPy's reduction pays per row: ``[16, 4, 64, 64]`` took 0.46 ms, most of the
    softmax's forward. There the rows are halved instead, ``fmax`` of the two halves in one
    pass over all rows (an odd length's last column folded into the first), six passes for
    64: 2.3x faster. The maximum is exact, so the order gives the same values.
    """
    if axis % a.ndim != a.ndim - 1 or a.shape[-1] > _TREE_ROWS_UP_TO or a.size < 4096:
        return np.fmax.reduce(a, axis=axis, keepdims=True)
    while a.shape[-1] > 1:
        n = a.shape[-1]
        half = n // 2
        head = np.fmax(a[..., :half], a[..., half : 2 * half])
        if n % 2:
            np.fmax(head[..., :1], a[..., 2 * half :], out=head[..., :1])
        a = head
    return a


_TREE_ROWS_UP_TO = 64  # longer rows: the reduction's own loop is faster (rows of 512: 2x)


def _row_sums(a, axis, b=None):
    """``sum(a * b)`` (``b`` absent: ``sum(a)``) along ``axis``, keeping it as a size-1 axis.

    Along a contiguous last axis on the CPU this is a matrix-vector product or an einsum,
    several times faster than NumPy's ``sum`` over short rows, with no ``a * b`` temporary
    (``backend/row_sums.py``; on a GPU a reduction, which a CUDA graph can capture).
    """
    if axis is None or a.ndim == 0 or axis % a.ndim != a.ndim - 1:
        return (a if b is None else a * b).sum(axis=axis, keepdims=True)
    return row_dots(a, b)[..., None]


class LogSoftmax(Op):
    """``x - max - log(sum(exp(x - max)))`` along ``axis``; d/dx = g - exp(y) * sum(g)."""

    name = "log_softmax"
    amp = BLACK

    @staticmethod
    def forward(ctx, x, axis=-1):
        if x.dtype.kind in "biu":
            raise float_only("log_softmax", x.dtype)
        axis = softmax_axis(axis, x.ndim, "log_softmax")
        ctx.axis = axis
        if x.size == 0:
            ctx.out = _widen(x)
            return x.copy()
        ctx.out = log_softmax(_widen(x), axis)
        return ctx.out.astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, grad):
        xp = get_array_module(grad)
        g = _widen(grad)
        gx = g - xp.exp(ctx.out) * g.sum(axis=ctx.axis, keepdims=True)
        return gx.astype(grad.dtype, copy=False)


class LeakyRelu(Op):
    """``x`` where ``x > 0``, else ``negative_slope * x``; the slope is taken at 0 (Paddle)."""

    name = "leaky_relu"
    amp = GRAY

    @staticmethod
    def forward(ctx, x, negative_slope=0.01):
        if x.dtype.kind in "biu":
            raise float_only("leaky_relu", x.dtype)
        ctx.slope = get_array_module(x).where(x > 0, 1.0, negative_slope).astype(_widen(x).dtype)
        return (_widen(x) * ctx.slope).astype(x.dtype, copy=False)  # one rounding

    @staticmethod
    def backward(ctx, grad):
        return (_widen(grad) * ctx.slope).astype(grad.dtype, copy=False)


class Silu(Op):
    """``x * sigmoid(x)`` (swish); d/dx = ``s * (1 + x * (1 - s))`` with ``s = sigmoid(x)``.

    ``sigmoid(x) = (1 + tanh(x / 2)) / 2``, which never overflows.
    """

    name = "silu"
    amp = GRAY

    @staticmethod
    def forward(ctx, x):
        if x.dtype.kind in "biu":
            raise float_only("silu", x.dtype)
        xa = _widen(x)
        ctx.x, ctx.s = xa, 0.5 * (get_array_module(x).tanh(0.5 * xa) + 1.0)
        return (xa * ctx.s).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, grad):
        s = ctx.s
        return (_widen(grad) * (s * (1.0 + ctx.x * (1.0 - s)))).astype(grad.dtype, copy=False)


__all__ = ["Gelu", "LeakyRelu", "LogSoftmax", "Relu", "Silu", "Softmax"]
