"""Loss functions: cross_entropy, mse_loss and l1_loss (which warn when the label broadcasts).

Each takes Paddle's trailing ``name=None``, accepted and ignored.
"""

from __future__ import annotations

import warnings

import numpy as np

from ...autograd import Tensor, apply
from ...autograd import functions as _fn
from ...autograd import ops as _ops
from ...autograd.functions_index import take_along_axis
from ...autograd.ops.loss import check_reduction, hard_labels
from ...backend import get_array_module
from ...backend.dtypes import accumulation_dtype
from .activation import log_softmax
from .common import refuse_integers


def cross_entropy(
    input: Tensor,  # noqa: A002 - Paddle's argument name
    label: Tensor,
    weight: Tensor | None = None,
    ignore_index: int = -100,
    reduction: str = "mean",
    soft_label: bool = False,
    axis: int = -1,
    use_softmax: bool = True,
    name=None,
) -> Tensor:
    """Cross entropy between ``input`` (logits, or probabilities with ``use_softmax=False``)
    and ``label`` (class indices, or distributions with ``soft_label=True``), as Paddle.

    Hard labels: ``loss_i = -weight[y_i] * log(softmax(input_i)[y_i])``. Labels equal to
    ``ignore_index`` contribute nothing. ``'mean'`` divides the sum by the total weight of the
    labels that were not ignored (by their count without ``weight``); ``'none'`` returns one
    loss per label, in the label's shape. Computed in float32 for float16 logits.

    Soft labels: ``loss_i = -sum_c label_ic * log(softmax(input_i)_c)``, times
    ``sum_c label_ic * weight_c`` with ``weight``; ``'mean'`` then divides by the sum of those
    sample weights (the sample count without ``weight``); ``'none'`` keeps ``axis`` with size 1.

    ``use_softmax=False`` reads ``input`` as probabilities: ``log(input)`` replaces
    ``log(softmax(input))`` above (no normalisation).

    Args:
        input: logits (or probabilities) with the classes on ``axis``, e.g. ``[N, C]``.
        label: int64 class indices of shape ``[N]`` or ``[N, 1]`` (generally the input's shape
            without ``axis``, or with size 1 there); with ``soft_label=True`` float
            probabilities of the input's shape.
        weight: optional per-class weights, shape ``[C]``.
        ignore_index: the label value to ignore (hard labels only: Paddle refuses another
            value than -100 with ``soft_label=True``).
        reduction: ``'mean'``, ``'sum'`` or ``'none'``.
        soft_label: whether ``label`` holds a distribution per sample.
        axis: the class axis of ``input``.
        use_softmax: False when ``input`` already holds probabilities.
        name: accepted and ignored (Paddle's static-graph name).

    Raises:
        ValueError: a bad reduction, label shape or label value (out of ``[0, C)``), or
            ``ignore_index`` given with soft labels.
        TypeError: integer ``input``; integer soft labels or float hard labels.

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> logits = mt.to_tensor([[0.0, 0.0], [0.0, 0.0]])
        >>> round(F.cross_entropy(logits, mt.to_tensor([0, 1])).item(), 6)
        0.693147
        >>> soft = mt.to_tensor([[0.5, 0.5], [1.0, 0.0]])
        >>> round(F.cross_entropy(logits, soft, soft_label=True).item(), 6)
        0.693147
    """
    check_reduction("cross_entropy", reduction)
    check_soft_label("cross_entropy", soft_label, ignore_index)
    refuse_integers("cross_entropy", input)
    if soft_label:
        return _soft_label_loss(input, label, weight, reduction, int(axis), bool(use_softmax))
    if not use_softmax:
        return _probability_loss(input, label, weight, int(ignore_index), reduction, int(axis))
    return apply(
        _ops.CrossEntropy,
        input,
        label,
        weight,
        ignore_index=int(ignore_index),
        reduction=reduction,
        axis=int(axis),
    )


def check_soft_label(fn: str, soft_label, ignore_index) -> None:
    """ValueError for ``ignore_index`` with soft labels: a distribution has no class to skip
    (Paddle: "When soft_label == True, the value of 'ignore_index' ... should be '-100'")."""
    if soft_label and ignore_index != -100:
        raise ValueError(
            f"{fn}: ignore_index={ignore_index} has no meaning with soft_label=True (every "
            "class of a distribution counts); leave ignore_index at its default, -100"
        )


def _class_axis(input: Tensor, axis: int) -> int:  # noqa: A002 - Paddle's name
    ndim = input.ndim
    if not -max(ndim, 1) <= axis < ndim:
        raise ValueError(
            f"cross_entropy: axis {axis} is out of range for input of shape {input.shape}"
        )
    return axis % ndim


def _check_weight(weight, classes: int, input: Tensor) -> None:  # noqa: A002
    if weight is not None and list(weight.shape) != [classes]:
        raise ValueError(
            f"cross_entropy: weight of shape {list(weight.shape)} must be [{classes}], one "
            f"value per class of input of shape {input.shape}"
        )


def _reduce(losses: Tensor, sample_weights, reduction: str) -> Tensor:
    """'sum', 'none', or 'mean': the sum over the total sample weight (the count if None);
    0, not nan, when that total is 0 (every label ignored), as Paddle."""
    if reduction == "none":
        return losses
    total = losses.sum()
    if reduction == "sum":
        return total
    if sample_weights is None:
        return losses.mean()
    denominator = sample_weights.sum()
    return total / (denominator + (denominator == 0).astype(denominator.dtype))


def _soft_label_loss(input, label, weight, reduction, axis, use_softmax):  # noqa: A002
    """``-sum(label * log p, axis)`` per sample (``p`` the softmax of ``input``, or ``input``),
    times ``sum(label * weight, axis)`` with ``weight`` (Paddle's soft-label loss)."""
    axis = _class_axis(input, axis)
    if not isinstance(label, Tensor) or label.dtype.kind in "biu":
        raise TypeError(
            "cross_entropy: soft_label=True needs float label probabilities shaped like input, "
            f"got {getattr(label, 'dtype', type(label).__name__)}; pass class indices with "
            "soft_label=False"
        )
    if label.shape != input.shape:
        raise ValueError(
            f"cross_entropy: soft_label=True needs label of the input's shape {input.shape}, "
            f"got {label.shape}"
        )
    _check_weight(weight, input.shape[axis], input)
    acc = accumulation_dtype(input.dtype)  # float16 sums in float32, rounded once at the end
    x, label = input.astype(acc), label.astype(acc)
    if use_softmax:
        log_p = log_softmax(x, axis=axis)
    else:  # label * log(input) is 0 where label is 0, even where input is 0 (no nan)
        log_p = _fn.log(_fn.where(label != 0, x, 1.0))
    losses = -(label * log_p).sum(axis=axis, keepdim=True)
    sample_weights = None
    if weight is not None:
        shape = [1] * input.ndim
        shape[axis] = -1
        sample_weights = (label * weight.reshape(shape).astype(acc)).sum(axis=axis, keepdim=True)
        losses = losses * sample_weights
    return _reduce(losses, sample_weights, reduction).astype(input.dtype)


def _probability_loss(input, label, weight, ignore_index, reduction, axis):  # noqa: A002
    """Hard labels with ``use_softmax=False``: ``-weight[y] * log(input[y])`` per label."""
    axis = _class_axis(input, axis)
    classes = input.shape[axis]
    _check_weight(weight, classes, input)
    labels = label._data if isinstance(label, Tensor) else np.asarray(label)
    indices = hard_labels(input._data, labels, axis)  # dtype and shape checked
    xp = get_array_module(indices)
    valid = indices != ignore_index
    bad = valid & ((indices < 0) | (indices >= classes))
    if bool(bad.any()):  # (a host read: this rare path has no device flag)
        raise ValueError(
            f"cross_entropy: label value {indices[bad].reshape(-1)[0]} is out of range; labels "
            f"must be in [0, {classes}) or equal ignore_index={ignore_index}"
        )
    safe = xp.where(valid, indices, 0)
    acc = accumulation_dtype(input.dtype)
    picked = take_along_axis(input.astype(acc), Tensor._wrap(xp.expand_dims(safe, axis)), axis)
    keep = valid.astype(acc) if weight is None else weight._data.astype(acc)[safe] * valid
    keep = Tensor._wrap(keep)
    # an ignored label picks class 0, maybe of probability 0: log(1) = 0 there instead
    losses = -_fn.log(_fn.where(Tensor._wrap(valid), picked.squeeze(axis), 1.0)) * keep
    if reduction == "none":
        losses = losses.reshape(list(labels.shape))
    return _reduce(losses, keep, reduction).astype(input.dtype)


def mse_loss(
    input: Tensor,  # noqa: A002 - Paddle's argument name
    label: Tensor,
    reduction: str = "mean",
    name=None,
) -> Tensor:
    """Mean squared error: ``(input - label)^2``, averaged, summed or kept per element.

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> F.mse_loss(mt.to_tensor([1.0, 3.0]), mt.to_tensor([0.0, 0.0])).item()
        5.0
    """
    check_reduction("mse_loss", reduction)
    refuse_integers("mse_loss", input)
    warn_if_label_broadcasts("mse_loss", input, label)
    return apply(_ops.MseLoss, input, label, reduction=reduction)


def l1_loss(input: Tensor, label: Tensor, reduction: str = "mean", name=None) -> Tensor:  # noqa: A002
    """Mean absolute error: ``|input - label|``, averaged (``'mean'``), summed (``'sum'``) or
    kept per element (``'none'``).

    Composed as Paddle composes it (``subtract``, ``abs``, then ``mean`` or ``sum``), so AMP
    treats each step by its own category: under O1 the reduction runs in float32 (black).
    The gradient of ``|d|`` at ``d = 0`` is 0.

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> x, y = mt.to_tensor([1.0, -2.0, 3.0]), mt.to_tensor([0.0, 0.0, 0.0])
        >>> F.l1_loss(x, y).item(), F.l1_loss(x, y, reduction="sum").item()
        (2.0, 6.0)
    """
    check_reduction("l1_loss", reduction)
    warn_if_label_broadcasts("l1_loss", input, label)
    unreduced = apply(_ops.Abs, apply(_ops.Subtract, input, label))
    if reduction == "mean":
        return apply(_ops.Mean, unreduced)
    if reduction == "sum":
        return apply(_ops.Sum, unreduced)
    return unreduced


def warn_if_label_broadcasts(name: str, input, label, stacklevel: int = 3) -> None:  # noqa: A002
    """Warn (UserWarning) when an elementwise loss's label has another shape than its input.

    The loss still broadcasts, as Paddle's does: ``input [4, 1]`` against ``label [4]`` gives
    ``[4, 4]`` differences, rarely what was meant. PyTorch computes the same and warns; this is
    its warning, with the shapes and the fix. Shapes that cannot broadcast are left to the op's
    own error. ``stacklevel`` 3 points at the line that called the loss function.
    """
    input_shape, label_shape = list(np.shape(input)), list(np.shape(label))
    if input_shape == label_shape:
        return
    try:
        result = list(np.broadcast_shapes(tuple(input_shape), tuple(label_shape)))
    except ValueError:
        return
    warnings.warn(
        f"{name}: label shape {label_shape} differs from input shape {input_shape}; they "
        f"broadcast to {result}, which is rarely what a loss means (Paddle broadcasts silently, "
        "PyTorch warns). Give both the same shape: label.reshape(input.shape), or "
        "input.squeeze(-1) for a model's single output column.",
        UserWarning,
        stacklevel=stacklevel,
    )
