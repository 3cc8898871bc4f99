"""``SGD``: plain stochastic gradient descent."""

from __future__ import annotations

from .optimizer import Optimizer
from .torch_compat import torch_spellings

__all__ = ["SGD"]


class SGD(Optimizer):
    """Stochastic gradient descent: ``p = p - lr * g``.

    ``g`` is the gradient after clipping and weight decay (``g + coeff * p`` for L2Decay).

    Args:
        learning_rate: a float or an ``lr.LRScheduler``.
        parameters: the parameters (or param groups) to optimize; required.
        weight_decay: None, a float L2 coefficient, or a regularizer.
        grad_clip: e.g. ``nn.ClipGradByGlobalNorm(1.0)``.
        multi_precision: keep fp32 master weights for float16 parameters and update
            those in fp32 (AMP O2; see ``Optimizer``). Float32 parameters are unaffected.

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

    _kernel = "sgd"  # optim.cu's sgd_step computes _update below, bit for bit
    _kernel_name = "sgd_"  # its op in Paddle's operator statistics (eager)

    @torch_spellings
    def __init__(
        self,
        learning_rate=0.001,
        parameters=None,
        weight_decay=None,
        grad_clip=None,
        multi_precision=False,
        name=None,
    ):
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name, multi_precision)

    def _update(self, p, g, state, lr, hyper) -> None:
        p -= lr * g
