"""Loss functions: cross_entropy, mse_loss and l1_loss (which warn when the label broadcasts)."""

from __future__ import annotations

import warnings

import numpy as np

from ...autograd import Tensor, apply
from ...autograd import ops as _ops
from ...autograd.ops.loss import check_reduction


def cross_entropy(
    input: Tensor,  # noqa: A002 - Paddle's argument name
    label: Tensor,
    weight: Tensor | None = None,
    ignore_index: int = -100,
    reduction: str = "mean",
    soft_label: bool = False,
    axis: int = -1,
) -> Tensor:
    """Softmax cross-entropy between logits ``input`` and integer class ``label``.

    ``loss_i = -weight[y_i] * log(softmax(input_i)[y_i])``. Labels equal to ``ignore_index``
    contribute nothing. ``'mean'`` divides the sum by the total weight of the labels that were
    not ignored (by their count without ``weight``); ``'sum'`` sums; ``'none'`` returns one
    loss per label, in the label's shape. Computed in float32 for float16 logits.

    Args:
        input: logits with the classes on ``axis``, e.g. ``[N, C]``.
        label: int64 class indices of shape ``[N]`` or ``[N, 1]`` (generally the input's shape
            without ``axis``, or with size 1 there).
        weight: optional per-class weights, shape ``[C]``.
        ignore_index: the label value to ignore.
        reduction: ``'mean'``, ``'sum'`` or ``'none'``.
        soft_label: must be False; probability labels are not supported yet.
        axis: the class axis of ``input``.

    Raises:
        ValueError: a bad reduction, label shape or label value (out of ``[0, C)``).

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> logits = mt.to_tensor([[0.0, 0.0], [0.0, 0.0]])
        >>> round(F.cross_entropy(logits, mt.to_tensor([0, 1])).item(), 6)
        0.693147
    """
    check_reduction("cross_entropy", reduction)
    if soft_label:
        raise NotImplementedError(
            "cross_entropy(soft_label=True) is not supported; pass integer class indices, or "
            "compute -(label * log_softmax(input, axis)).sum(axis) for probability labels"
        )
    return apply(
        _ops.CrossEntropy,
        input,
        label,
        weight,
        ignore_index=int(ignore_index),
        reduction=reduction,
        axis=int(axis),
    )


def mse_loss(input: Tensor, label: Tensor, reduction: str = "mean") -> Tensor:  # noqa: A002
    """Mean squared error: ``(input - label)^2``, averaged, summed or kept per element.

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> F.mse_loss(mt.to_tensor([1.0, 3.0]), mt.to_tensor([0.0, 0.0])).item()
        5.0
    """
    check_reduction("mse_loss", reduction)
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
