"""Matrix products. Both run through ``backend.primitives.matmul`` (the GEMM twin)."""

from __future__ import annotations

import math

import numpy as np

from ...backend.bias_grad import bias_grad
from ...backend.dtypes import bfloat16, float16, float32
from ...backend.primitives import gemm_ready, linear, matmul, matmul_widened
from ..op import GRAY, WHITE, Op


def _matmul_shapes_error(x, y, tx, ty):
    """The error for shapes that do not multiply, or None when they do."""
    kx = x.shape[-2] if tx and x.ndim > 1 else x.shape[-1]
    ky = y.shape[-1] if ty and y.ndim > 1 else y.shape[0 if y.ndim == 1 else -2]
    shapes = f"shapes {list(x.shape)} (transpose_x={tx}) and {list(y.shape)} (transpose_y={ty})"
    if kx != ky:
        return ValueError(f"matmul: {shapes} do not match: contracted dimensions {kx} != {ky}")
    batch_x, batch_y = x.shape[:-2], y.shape[:-2]
    for a, b in zip(reversed(batch_x), reversed(batch_y)):
        if a != b and 1 not in (a, b):
            return ValueError(
                f"matmul: {shapes}: batch dimensions {list(batch_x)} and {list(batch_y)} "
                "cannot be broadcast together"
            )
    return None


class Matmul(Op):
    """``op(x) @ op(y)`` with NumPy's batching; 1-D operands are vectors as in NumPy.

    d/dx = g @ op(y)^T and d/dy = op(x)^T @ g (transposed back when ``op`` transposed);
    batch dimensions that were broadcast are summed away by the engine. d/dx may come back
    widened to float32, as Linear's (``autograd.widen_fold``).
    """

    name = "matmul"
    amp = WHITE
    promote = (0, 1)

    @staticmethod
    def forward(ctx, x, y, transpose_x=False, transpose_y=False):
        if x.ndim == 0 or y.ndim == 0:
            raise ValueError("matmul needs tensors with at least one dimension; use multiply")
        if x.ndim >= 2 and y.ndim >= 2:  # the common case, checked by the product itself
            if x.dtype == y.dtype:  # (copied once, here, if the GEMM reads them contiguous)
                x, y = gemm_ready(x, y)
            try:
                out = matmul(x, y, transpose_x, transpose_y)
            except ValueError as exc:
                raise (_matmul_shapes_error(x, y, transpose_x, transpose_y) or exc) from None
            ctx.saved = (x, y, transpose_x, transpose_y, out.shape, x.shape, y.shape)
            return out
        error = _matmul_shapes_error(x, y, transpose_x, transpose_y)
        if error is not None:
            raise error
        # Vectors become matrices so backward only ever sees matrices.
        tx, ty = transpose_x and x.ndim > 1, transpose_y and y.ndim > 1
        x2 = x.reshape(1, -1) if x.ndim == 1 else x
        y2 = y.reshape(-1, 1) if y.ndim == 1 else y
        out = matmul(x2, y2, tx, ty)
        ctx.saved = (x2, y2, tx, ty, out.shape, x.shape, y.shape)
        if x.ndim == 1 or y.ndim == 1:
            squeezed = list(out.shape)
            if y.ndim == 1:
                squeezed.pop(-1)
            if x.ndim == 1:
                squeezed.pop(-2 if y.ndim != 1 else -1)
            out = out.reshape(squeezed)
        return out

    widen_positions = (0,)  # d/dx may come back in float32 (widen_fold) ...

    @staticmethod
    def widens_grad(ctx) -> bool:
        """... from a 16-bit product whose batch was not broadcast over ``x`` (the engine
        would have to sum it away in 16 bits)."""
        x, y, _, _, out_shape, x_shape, _ = ctx.saved
        return (
            x.dtype == y.dtype
            and x.dtype in (float16, bfloat16)
            and len(x_shape) >= 2
            and tuple(out_shape[:-2]) == tuple(x_shape[:-2])
        )

    @staticmethod
    def backward(ctx, grad):
        x, y, tx, ty, out_shape, x_shape, y_shape = ctx.saved
        needs_x, needs_y = ctx.needs_grad
        g = grad.reshape(out_shape)
        if (needs_x and needs_y) and g.dtype == x.dtype == y.dtype:
            (g,) = gemm_ready(g)  # one copy of a transposed view for both products
        # a = op(x), b = op(y); da = g @ b^T, db = a^T @ g.
        gx = gy = None
        if needs_x:  # widened when its AMP cast's backward is left to this GEMM (widen_fold)
            product_of = matmul_widened if 0 in getattr(ctx, "widen_grad", ()) else matmul
            gx = product_of(y, g, ty, True) if tx else product_of(g, y, False, not ty)
        if needs_y:
            gy = matmul(g, x, True, tx) if ty else matmul(x, g, not tx, False)
        # NOTE: explicit sizes, not -1: a -1 cannot be inferred when another dim is 0.
        if gx is not None and len(x_shape) == 1:  # gx is [..., 1, k]
            gx = gx.reshape(gx.shape[:-2] + gx.shape[-1:])
        if gy is not None and len(y_shape) == 1:  # gy is [..., k, 1]
            gy = gy.reshape(gy.shape[:-1])
        return gx, gy


class Bmm(Matmul):
    """``x @ y`` for 3-D ``[b, n, k]`` and ``[b, k, m]`` (Paddle's ``bmm``: no broadcasting).

    AMP: gray, unlike matmul. Paddle's lists name ``matmul_v2`` but not ``bmm``, so under
    O1 a float32 bmm stays float32 (PyTorch's autocast runs bmm in float16).
    """

    name = "bmm"
    amp = GRAY

    @staticmethod
    def forward(ctx, x, y):
        if x.ndim != 3 or y.ndim != 3:
            raise ValueError(
                f"bmm needs two 3-D tensors [b, n, k] and [b, k, m], got shapes "
                f"{list(x.shape)} and {list(y.shape)}; use matmul for other ranks"
            )
        if x.shape[0] != y.shape[0] or x.shape[2] != y.shape[1]:
            raise ValueError(
                f"bmm: shapes {list(x.shape)} and {list(y.shape)} do not match: the batch "
                f"sizes ({x.shape[0]}, {y.shape[0]}) and the contracted dimensions "
                f"({x.shape[2]}, {y.shape[1]}) must be equal"
            )
        return Matmul.forward(ctx, x, y)


class Linear(Op):
    """``x @ weight``, then ``+ bias`` in the bias's dtype; ``weight`` is ``[in, out]`` (Paddle).

    Paddle's ``F.linear`` is two ops, a ``matmul`` (white) and an ``add`` of the bias (gray),
    and AMP decides each on its own. This op is both in one (one GEMM with the bias in its
    epilogue where that gives the two ops' result): AMP casts ``x`` and ``weight`` by the
    matmul's rule, ``linear`` or ``matmul`` in a custom black list keeps them float32, and
    casts the bias by the add's rule (``amp_bias``). So a float32 bias after a float16
    product gives a float32 result at O1, OD and O2 with promotion, as in Paddle.

    d/dbias = sum of grad over the rows (in the bias's dtype, float32 sums); the product's
    gradient is grad cast to the product's dtype, then d/dx = g @ W^T and d/dW = x^T @ g.
    The first two come from one ``backend.bias_grad`` call (one kernel on the GPU), which
    also applies the mask of a ReLU after this layer when the engine leaves it here
    (``autograd.relu_fold``: one launch less per Linear + ReLU pair). When ``x`` is AMP's
    float16 cast of a float32 activation, d/dx comes back widened to float32 from its GEMM
    (``autograd.widen_fold``: the cast's backward in the epilogue, one launch less).
    """

    name = "linear"
    amp = WHITE
    amp_inputs = (0, 1)  # the matmul's inputs
    amp_also = ("matmul",)  # Paddle's matmul: custom lists naming it decide the product too
    amp_bias = 2  # added by Paddle's add op: cast by the add's rule
    promote = (0, 1, 2)

    @staticmethod
    def forward(ctx, x, weight, bias=None):
        if x.shape[-1] != weight.shape[0]:
            raise ValueError(
                f"linear: input of shape {list(x.shape)} does not match weight of shape "
                f"{list(weight.shape)} (weight is [in_features, out_features]; "
                f"{x.shape[-1]} != {weight.shape[0]})"
            )
        ctx.x, ctx.weight, ctx.has_bias = x, weight, bias is not None
        if x.ndim > 2:  # NOTE: one GEMM over all rows; NumPy multiplies a stack matrix by matrix
            out = linear(x.reshape(math.prod(x.shape[:-1]), x.shape[-1]), weight, bias)
            return out.reshape(*x.shape[:-1], weight.shape[1])
        return linear(x, weight, bias)

    @staticmethod
    def takes_relu_mask(ctx) -> bool:
        """A ReLU after this layer may leave its mask to this backward (``relu_fold``): the
        bias gradient's kernel applies it as it reads the gradient."""
        return ctx.has_bias and (*ctx.needs_grad, False, False)[2]

    widen_positions = (0, 1)  # d/dx and d/dW may come back in float32 (widen_fold) ...

    @staticmethod
    def widens_grad(ctx) -> bool:
        """... d/dW into a float32 buffer in ``ctx.grad_out``, when the product is 16-bit:
        its GEMM rounds them to 16 bits and stores them widened (``ctx.widen_grad`` says
        which)."""
        dtype = ctx.x.dtype
        return dtype == ctx.weight.dtype and dtype in (float16, bfloat16)

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.x, ctx.weight
        needs_x, needs_w, needs_b = (*ctx.needs_grad, False)[:3]
        _, w_out, b_out = ctx.grad_out or (None, None, None)  # the parameters' grad buffers
        flat = x.ndim != 2  # a stack of rows: one GEMM over all of them (2-D: no reshapes)
        rows = math.prod(x.shape[:-1])
        g2, gb = grad.reshape(rows, grad.shape[-1]) if flat else grad, None
        product = x.dtype if x.dtype == w.dtype else np.result_type(x.dtype, w.dtype)
        cast = product if grad.dtype != product else None  # back through the add's cast
        mask = getattr(ctx, "relu_mask", None)  # a ReLU's output: its mask left to us
        if mask is not None:  # the masked grad comes back as gp
            mask, cast = mask.reshape(g2.shape) if flat else mask, product
        if ctx.has_bias and needs_b:  # in the add's dtype, the bias's; on the GPU one kernel
            out = _same(b_out, None, grad.dtype)
            gb, gp = bias_grad(g2, grad.dtype, cast, relu_out=mask, out=out)
            g2 = g2 if gp is None else gp
        elif cast is not None:
            with np.errstate(over="ignore"):
                g2 = g2.astype(cast)
        gx = None  # (the data needs none)
        if needs_x:  # widened when its AMP cast's backward is left to this GEMM (widen_fold)
            widen = getattr(ctx, "widen_grad", ())
            product_of = matmul_widened if 0 in widen else matmul
            gx = product_of(g2, w, False, True)
            gx = gx.reshape(x.shape) if flat else gx
        gw = None
        if needs_w:  # written straight into the weight's gradient buffer when it has one
            x2 = x.reshape(rows, x.shape[-1]) if flat else x
            if 1 in getattr(ctx, "widen_grad", ()):  # an O1 weight's float32 buffer
                gw = matmul_widened(x2, g2, True, False, out=_same(w_out, None, float32))
            else:
                gw = matmul(x2, g2, True, False, out=_same(w_out, w))
        return gx, gw, gb


def _same(out, like, dtype=None):
    """``out`` if the result will have its dtype (``like``'s, or ``dtype``), else None."""
    if out is None:
        return None
    return out if out.dtype == (like.dtype if like is not None else dtype) else None
