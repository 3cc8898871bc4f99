"""Ops that join tensors or choose between them: concat, stack and where.

Their backward passes only route the gradient: each input gets a slice of it (a view, which
the engine copies before storing) or the gradient masked by the condition. bfloat16 mixed
with another dtype is first cast to the library's promotion (``dtypes.result_type``: with
float16, float32), which NumPy's joining functions do not know.
"""

from __future__ import annotations

import numpy as np

from ...backend import get_array_module, is_array, sync
from ...backend.cast import cast
from ...backend.dtypes import bfloat16, float64, result_type
from ..op import GRAY, Op


def _shapes(arrays) -> str:
    return ", ".join(str(list(a.shape)) for a in arrays)


def _one_dtype(arrays) -> list:
    """The arrays in the one dtype of the library's rule (``result_type``) when bfloat16 is
    mixed with another dtype; otherwise as they are.

    NOTE: NumPy knows no common dtype of bfloat16 (an ``ml_dtypes`` dtype) and float16, so
    ``concatenate``, ``stack`` and ``where`` raise ``DTypePromotionError`` where ``a + h``
    (an ml_dtypes ufunc loop) gives float32. Integer inputs were already cast by
    ``dispatch.promote``, so every cast here widens and is exact (bfloat16 and float16 both
    fit in float32). Each input's gradient comes back in its own dtype (the engine casts it).
    """
    dtypes = {a.dtype for a in arrays}
    if len(dtypes) < 2 or bfloat16 not in dtypes:
        return list(arrays)
    dtype = result_type(*dtypes)
    return [a if a.dtype == dtype else cast(a, dtype) for a in arrays]


def _bfloat16_with_a_python_float(x, y) -> bool:
    """One is a bfloat16 array, the other a Python float (a weak constant, as for float16).

    NOTE: ``np.where(c, bf16_array, 0.5)`` is float64 (ml_dtypes promotes the float like a
    float64), where ``np.where(c, f16_array, 0.5)`` stays float16; the float64 result holds
    the bfloat16 values exactly, so rounding it to bfloat16 rounds only the constant.
    """
    for a, b in ((x, y), (y, x)):
        if is_array(a) and a.dtype == bfloat16 and isinstance(b, float) and not is_array(b):
            return not isinstance(b, np.generic)
    return False


def _join_axis(name: str, arrays, axis: int, extra: int) -> int:
    """Check that there are inputs and ``axis`` fits them (``extra`` = 1 for a new axis)."""
    if not arrays:
        raise ValueError(f"{name} needs at least one tensor, got an empty list")
    ndim = arrays[0].ndim + extra
    if not -ndim <= axis < ndim or ndim == 0:
        raise ValueError(
            f"{name}: axis {axis} is out of range for tensors of shapes {_shapes(arrays)}"
        )
    return axis % ndim


class Concat(Op):
    """Join tensors along an existing ``axis``; all other dimensions must match."""

    name = "concat"
    amp = GRAY
    promote = None  # every input

    @staticmethod
    def forward(ctx, *xs, axis=0):
        axis = _join_axis("concat", xs, axis, extra=0)
        first = xs[0].shape
        for x in xs:
            if x.ndim != len(first) or any(
                a != b for i, (a, b) in enumerate(zip(x.shape, first)) if i != axis
            ):
                raise ValueError(
                    f"concat along axis {axis}: shapes {_shapes(xs)} must match in every "
                    "other dimension"
                )
        ctx.axis, ctx.sizes = axis, [x.shape[axis] for x in xs]
        return get_array_module(*xs).concatenate(_one_dtype(xs), axis=axis)

    @staticmethod
    def backward(ctx, grad):
        grads, start = [], 0
        lead = (slice(None),) * ctx.axis
        for n in ctx.sizes:
            grads.append(grad[(*lead, slice(start, start + n))])
            start += n
        return tuple(grads)


class Stack(Op):
    """Join same-shaped tensors along a new ``axis``."""

    name = "stack"
    amp = GRAY
    promote = None  # every input

    @staticmethod
    def forward(ctx, *xs, axis=0):
        axis = _join_axis("stack", xs, axis, extra=1)
        if any(x.shape != xs[0].shape for x in xs):
            raise ValueError(f"stack: every tensor must have the same shape, got {_shapes(xs)}")
        ctx.axis, ctx.count = axis, len(xs)
        return get_array_module(*xs).stack(_one_dtype(xs), axis=axis)

    @staticmethod
    def backward(ctx, grad):
        lead = (slice(None),) * ctx.axis
        return tuple(grad[(*lead, i)] for i in range(ctx.count))


class Where(Op):
    """``x`` where ``condition`` holds, else ``y`` (all three broadcast together).

    The gradient flows to ``x`` where the condition is true and to ``y`` elsewhere;
    ``condition`` itself gets none.
    """

    name = "where"
    amp = GRAY
    promote = (1, 2)  # not the condition

    @staticmethod
    def forward(ctx, condition, x, y):
        like = next((a for a in (x, y) if is_array(a)), condition)
        condition = sync.to_device(condition, like, "where's condition")
        xp = get_array_module(condition, x, y)
        if condition.dtype.kind != "b":
            condition = condition.astype(bool)
        ctx.condition = condition
        if is_array(x) and is_array(y):
            x, y = _one_dtype((x, y))
        try:
            out = xp.where(condition, x, y)
        except ValueError:
            shapes = [list(getattr(v, "shape", ())) for v in (condition, x, y)]
            raise ValueError(
                f"where: condition {shapes[0]}, x {shapes[1]} and y {shapes[2]} cannot be "
                "broadcast together (trailing dimensions must be equal or 1)"
            ) from None
        if out.dtype == float64 and _bfloat16_with_a_python_float(x, y):
            out = cast(out, bfloat16)  # rounded once: the float's only rounding
        return out

    @staticmethod
    def backward(ctx, grad):
        keep = ctx.condition
        return None, grad * keep, grad * ~keep


__all__ = ["Concat", "Stack", "Where"]
