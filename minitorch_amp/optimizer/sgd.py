"""``SGD``: plain stochastic gradient descent."""

from __future__ import annotations

from .optimizer import Optimizer

__all__ = ["SGD"]


class SGD(Optimizer):
    """Stochastic gradient descent: ``p = p - lr * g``.

    ``g`` is the gradient after clipping and weight decay (``g + coeff * p`` for L2Decay).

    Args:
        learning_rate: a float or an ``lr.LRScheduler``.
        parameters: the parameters (or param groups) to optimize; required.
        weight_decay: None, a float L2 coefficient, or a regularizer.
        grad_clip: e.g. ``nn.ClipGradByGlobalNorm(1.0)``.
        multi_precision: reserved for AMP fp32 master weights; must be False for now.

    Example:
        >>> import numpy as np
        >>> from minitorch_amp.nn.parameter import Parameter
        >>> from minitorch_amp.optimizer import SGD
        >>> w = Parameter(np.array([1.0, 2.0], dtype="float32"))
        >>> w.grad = np.array([0.5, -1.0], dtype="float32")
        >>> SGD(learning_rate=0.1, parameters=[w]).step()
        >>> w.numpy()
        array([0.95, 2.1 ], dtype=float32)
    """

    def __init__(
        self,
        learning_rate=0.001,
        parameters=None,
        weight_decay=None,
        grad_clip=None,
        multi_precision=False,
        name=None,
    ):
        _check_no_multi_precision(multi_precision)
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)

    def _update(self, p, g, state, lr, hyper) -> None:
        p -= lr * g


def _check_no_multi_precision(flag) -> None:
    if flag:
        raise NotImplementedError(
            "multi_precision (fp32 master weights) is not available yet; pass "
            "multi_precision=False (float16 params are still updated with float32 maths)"
        )
