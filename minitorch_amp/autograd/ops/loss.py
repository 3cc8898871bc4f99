"""Losses: softmax cross-entropy with integer labels, and mean squared error.

Both compute in float32 for float16 input (AMP keeps them in float32 anyway: they are on the
black list) and return a result in the input's dtype.
"""

from __future__ import annotations

from ...backend import cross_entropy as _cross_entropy
from ...backend import get_array_module, sync
from ...backend.dtypes import accumulation_dtype
from ...backend.squared_error import squared_error, squared_error_backward
from ..op import BLACK, Op
from .activation import log_softmax
from .elementwise import binary

REDUCTIONS = ("mean", "sum", "none")


def check_reduction(name: str, reduction: str) -> None:
    """Raise a ValueError unless ``reduction`` is 'mean', 'sum' or 'none'."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"{name}: reduction must be one of {REDUCTIONS}, got {reduction!r}")


def hard_labels(logits, label, axis: int):
    """``label`` with the class axis dropped; checks dtype and shape against ``logits``."""
    shapes = f"label of shape {list(label.shape)} for input of shape {list(logits.shape)}"
    if label.dtype.kind not in "iu":
        raise TypeError(
            f"cross_entropy: label must hold integer class indices, got {label.dtype} ({shapes}); "
            "probabilities need soft_label=True"
        )
    if label.ndim == logits.ndim:
        if label.shape[axis] != 1:
            raise ValueError(f"cross_entropy: {shapes}; label needs size 1 on axis {axis}")
        label = label.reshape(label.shape[:axis] + label.shape[axis + 1 :])
    expected = logits.shape[:axis] + logits.shape[axis + 1 :]
    if label.shape != expected:
        raise ValueError(
            f"cross_entropy: {shapes}; label must be {list(expected)} or have an extra 1 on "
            f"axis {axis}"
        )
    return label


class CrossEntropy(Op):
    """``loss_i = -weight[y_i] * log_softmax(x_i)[y_i]`` for integer labels ``y_i``.

    Labels equal to ``ignore_index`` give zero loss and zero gradient. ``mean`` divides the
    sum by the total weight of the labels that were not ignored (their count when ``weight``
    is None), as Paddle does; when every label is ignored it returns 0.
    d/dx_i = weight[y_i] * (softmax(x_i) - onehot(y_i)) times the incoming gradient.
    CuPy logits with the classes on the last axis go through
    :mod:`~minitorch_amp.backend.cross_entropy`: two launches forward (one for 'none') and
    one backward where the expressions below, its twin, take about 29 and 8.
    """

    name = "cross_entropy"
    amp = BLACK

    @staticmethod
    def forward(ctx, logits, label, weight=None, ignore_index=-100, reduction="mean", axis=-1):
        check_reduction("cross_entropy", reduction)
        xp = get_array_module(logits, label)
        if not -max(logits.ndim, 1) <= axis < logits.ndim:
            raise ValueError(
                f"cross_entropy: axis {axis} is out of range for input of shape "
                f"{list(logits.shape)}"
            )
        axis %= logits.ndim
        classes = logits.shape[axis]
        label = sync.to_device(label, logits, "cross_entropy's label")
        ctx.label_shape = label.shape  # reduction='none' returns the label's shape (Paddle)
        label = hard_labels(logits, label, axis)
        if weight is not None and tuple(weight.shape) != (classes,):
            raise ValueError(
                f"cross_entropy: weight of shape {list(weight.shape)} must be [{classes}], one "
                f"value per class of input of shape {list(logits.shape)}"
            )
        shapes = f"label of shape {list(label.shape)}, input of shape {list(logits.shape)}"
        check = ("cross_entropy", classes, ignore_index)  # the label check's key and message

        def out_of_range(what):
            return ValueError(
                f"cross_entropy: {what} is out of range; labels must be in [0, {classes}) or "
                f"equal ignore_index={ignore_index} ({shapes})"
            )

        ctx.reduction, ctx.dtype, ctx.rows = reduction, logits.dtype, None
        if _cross_entropy.usable(logits, label, weight, axis, ignore_index):
            # a GPU: two launches (one for 'none'), the label check a flag the kernel sets
            flag = sync.device_flag(check, logits)
            out, ctx.rows = _cross_entropy.forward(
                logits, label, weight, ignore_index, reduction, flag
            )
            sync.defer_flag(check, flag, "label value", out_of_range)
            if reduction == "none":
                return out.reshape(ctx.label_shape).astype(logits.dtype, copy=False)
            return out
        valid = label != ignore_index
        bad = valid & ((label < 0) | (label >= classes))
        # No host read: on the GPU the check is a device flag, reported at the next read.
        sync.check(check, bad, label, "label value", out_of_range)
        valid &= ~bad
        acc = accumulation_dtype(logits.dtype)
        safe = xp.where(valid, label, 0)
        lsm = log_softmax(xp.moveaxis(logits, axis, -1).astype(acc), -1)
        picked = xp.take_along_axis(lsm, safe[..., None], axis=-1)[..., 0]
        w = valid.astype(acc) if weight is None else weight.astype(acc)[safe] * valid
        losses = -picked * w
        ctx.lsm, ctx.safe, ctx.w, ctx.axis, ctx.scale = lsm, safe, w, axis, 1.0
        if reduction == "none":
            return losses.reshape(ctx.label_shape).astype(logits.dtype, copy=False)
        total = losses.sum()
        if reduction == "mean":
            denominator = w.sum()
            ctx.scale = 1.0 / (denominator + (denominator == 0))  # all ignored: 0, not nan
            total = total * ctx.scale
        return xp.asarray(total).astype(logits.dtype)

    @staticmethod
    def backward(ctx, grad):
        if ctx.rows is not None:  # the forward's kernels: one launch
            return _cross_entropy.backward(ctx.rows, grad), None, None
        xp = get_array_module(grad)
        lsm = ctx.lsm
        grad = grad.reshape(ctx.w.shape) if ctx.reduction == "none" else grad
        per_row = grad.astype(lsm.dtype, copy=False) * ctx.scale * ctx.w
        onehot = xp.arange(lsm.shape[-1]) == ctx.safe[..., None]
        g = (xp.exp(lsm) - onehot) * per_row[..., None]
        return xp.moveaxis(g, -1, ctx.axis).astype(ctx.dtype, copy=False), None, None


class MseLoss(Op):
    """``(input - label)^2``, then averaged (``mean``), summed (``sum``) or kept (``none``).

    d/d input = 2 (input - label) * grad (divided by the element count for ``mean``).
    ``mean`` and ``sum`` of a label of the input's shape go through
    :func:`~minitorch_amp.backend.squared_error.squared_error`: the same maths on NumPy, one
    deterministic launch (two past 64Ki elements) on the GPU where CuPy took three.
    """

    name = "mse_loss"
    amp = BLACK

    @staticmethod
    def forward(ctx, input, label, reduction="mean"):  # noqa: A002 - Paddle's name
        check_reduction("mse_loss", reduction)
        xp = get_array_module(input, label)
        acc = accumulation_dtype(input.dtype)
        # (no copies of inputs already in acc: a launch each on the GPU)
        x = input.astype(acc, copy=False)
        y = sync.to_device(label, input, "mse_loss's label").astype(acc, copy=False)
        ctx.dtype, ctx.scale = input.dtype, 2.0
        if reduction != "none" and x.shape == y.shape:
            # the difference and its squares' mean (sum) in one or two launches on the GPU;
            # on NumPy diff = x - y, then (diff * diff).mean() (sum), as below
            ctx.diff, out = squared_error(x, y, mean=reduction == "mean")
            if reduction == "mean":  # of an empty tensor: nan, as in NumPy and Paddle
                ctx.scale = 2.0 / x.size if x.size else 0.0
            return xp.asarray(out).astype(input.dtype, copy=False)
        diff = binary("mse_loss", lambda a, b: a - b, x, y)
        ctx.diff = diff
        out = diff * diff
        if reduction == "sum":
            out = out.sum()
        elif reduction == "mean":
            ctx.scale = 2.0 / diff.size if diff.size else 0.0
            # mean: sum then divide, as NumPy's; one reduction kernel on the GPU, not two
            out = out.mean() if diff.size else xp.full((), xp.nan, dtype=acc)
        return xp.asarray(out).astype(input.dtype, copy=False)

    @staticmethod
    def backward(ctx, grad):
        g = squared_error_backward(ctx.diff, grad, ctx.scale)  # on a GPU one launch
        needs_input, needs_label = ctx.needs_grad
        return g if needs_input else None, -g if needs_label else None  # (labels rarely do)


__all__ = ["CrossEntropy", "MseLoss"]
