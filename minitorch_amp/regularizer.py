"""Weight-decay regularizers (Paddle's ``paddle.regularizer``): added to the gradient.

An optimizer applies a regularizer after gradient clipping and before its update:
``grad = regularizer(param, grad)``. A float ``weight_decay`` given to an optimizer means
``L2Decay(weight_decay)``. A regularizer set on the parameter itself (``param.regularizer``,
from ``ParamAttr``) takes precedence over the optimizer's; inside a param group given as a
dict the group's ``weight_decay`` (default: the optimizer's) replaces it instead, as in
Paddle (AdamW's groups excepted). ``L2Decay`` is fused into the update; any other regularizer
runs before the update, on the clipped gradient (so Momentum's ``rescale_grad`` scales its
term too, as in Paddle).

Example:
    >>> import numpy as np
    >>> from minitorch_amp.regularizer import L2Decay
    >>> L2Decay(0.1)(np.array([1.0, -2.0]), np.array([0.5, 0.5]))
    array([0.6, 0.3])
"""

from __future__ import annotations

from .backend import get_array_module

__all__ = ["L1Decay", "L2Decay", "WeightDecayRegularizer"]


class WeightDecayRegularizer:
    """Base class: ``__call__(param_array, grad_array)`` returns a new gradient array.

    Implementations must not modify either argument: the gradient may be the parameter's own
    ``.grad`` storage.
    """

    def __init__(self, coeff: float = 0.0):
        if isinstance(coeff, bool) or not isinstance(coeff, (int, float)):
            raise TypeError(
                f"{type(self).__name__}: coeff must be a float, got {type(coeff).__name__}"
            )
        if coeff < 0:
            raise ValueError(f"{type(self).__name__}: coeff must be >= 0, got {coeff}")
        self._coeff = float(coeff)

    @property
    def coeff(self) -> float:
        return self._coeff

    def __call__(self, param, grad):
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(coeff={self._coeff})"


class L2Decay(WeightDecayRegularizer):
    """L2 weight decay: ``grad + coeff * param`` (the gradient of ``coeff/2 * ||param||^2``)."""

    def __call__(self, param, grad):
        return grad + self._coeff * param


class L1Decay(WeightDecayRegularizer):
    """L1 weight decay: ``grad + coeff * sign(param)``."""

    def __call__(self, param, grad):
        xp = get_array_module(param)
        return grad + self._coeff * xp.sign(param)
