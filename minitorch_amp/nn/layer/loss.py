"""Loss layers: MSELoss, L1Loss and CrossEntropyLoss (Paddle signatures).

``reduction`` is ``'mean'`` (average over elements, or over non-ignored samples weighted by
class weight for cross entropy), ``'sum'`` or ``'none'`` (one loss per element/sample).
"""

from __future__ import annotations

from ...autograd.tensor import Tensor
from .. import functional as F
from ..functional.loss import check_soft_label
from .layers import Layer

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(layer: str, reduction) -> str:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{layer}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return reduction


class MSELoss(Layer):
    """Mean squared error ``(input - label) ** 2``, reduced by ``reduction``.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> loss = nn.MSELoss()(mt.to_tensor([1.0, 3.0]), mt.to_tensor([0.0, 0.0]))
        >>> float(loss)
        5.0
    """

    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = _check_reduction("MSELoss", reduction)

    def forward(self, input: Tensor, label: Tensor) -> Tensor:  # noqa: A002 - Paddle's name
        return F.mse_loss(input, label, reduction=self.reduction)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction}"


class L1Loss(Layer):
    """Mean absolute error ``|input - label|``, reduced by ``reduction``.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> float(nn.L1Loss()(mt.to_tensor([1.0, -3.0]), mt.to_tensor([0.0, 0.0])))
        2.0
    """

    def __init__(self, reduction: str = "mean", name=None):
        super().__init__()
        self.reduction, self.name = _check_reduction("L1Loss", reduction), name

    def forward(self, input: Tensor, label: Tensor) -> Tensor:  # noqa: A002 - Paddle's name
        return F.l1_loss(input, label, reduction=self.reduction)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction}"


class CrossEntropyLoss(Layer):
    """Softmax cross entropy between logits ``input`` and ``label`` (see ``F.cross_entropy``).

    With hard labels (``soft_label=False``), ``label`` holds class indices (int64, the shape
    of ``input`` without ``axis``, or with a trailing 1) and
    ``loss = -log_softmax(input)[label]``; entries equal to ``ignore_index`` add nothing and
    are left out of the mean. With ``soft_label=True``, ``label`` is a distribution shaped
    like ``input`` and ``loss = -sum(label * log_softmax(input), axis)``; with ``weight`` each
    sample's loss is multiplied by ``sum(label * weight, axis)``, and ``'mean'`` divides by
    the sum of those. ``use_softmax=False`` reads ``input`` as probabilities (``log(input)``
    in place of ``log_softmax(input)``).

    Args:
        weight: optional per-class weights, shape ``[num_classes]``.
        ignore_index: a label value to skip (hard labels only; must stay -100 with
            ``soft_label=True``, as in Paddle).
        reduction: ``'mean'``, ``'sum'`` or ``'none'``.
        soft_label: whether ``label`` is a probability distribution.
        axis: the class axis of ``input``.
        use_softmax: False when ``input`` already holds probabilities.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> logits = mt.to_tensor([[0.0, 0.0], [0.0, 0.0]])
        >>> loss = nn.CrossEntropyLoss()(logits, mt.to_tensor([0, 1]))
        >>> round(float(loss), 4)   # log(2)
        0.6931
    """

    def __init__(
        self,
        weight: Tensor | None = None,
        ignore_index: int = -100,
        reduction: str = "mean",
        soft_label: bool = False,
        axis: int = -1,
        use_softmax: bool = True,
        name=None,
    ):
        super().__init__()
        if weight is not None and not isinstance(weight, Tensor):
            raise TypeError(
                f"CrossEntropyLoss: weight must be a Tensor or None, got {type(weight).__name__}"
            )
        self.weight = weight  # a plain Tensor: kept as a non-persistable buffer
        check_soft_label("CrossEntropyLoss", soft_label, ignore_index)
        self.ignore_index = int(ignore_index)
        self.reduction = _check_reduction("CrossEntropyLoss", reduction)
        self.soft_label, self.axis, self.name = bool(soft_label), int(axis), name
        self.use_softmax = bool(use_softmax)

    def forward(self, input: Tensor, label: Tensor) -> Tensor:  # noqa: A002 - Paddle's name
        return F.cross_entropy(
            input,
            label,
            weight=self.weight,
            ignore_index=self.ignore_index,
            reduction=self.reduction,
            soft_label=self.soft_label,
            axis=self.axis,
            use_softmax=self.use_softmax,
        )

    def extra_repr(self) -> str:
        return (
            f"ignore_index={self.ignore_index}, reduction={self.reduction}, "
            f"soft_label={self.soft_label}, axis={self.axis}"
            + ("" if self.use_softmax else ", use_softmax=False")
        )
