"""``Momentum``: SGD with (optionally Nesterov) momentum, Paddle's kernel maths."""

from __future__ import annotations

import numbers

import numpy as np

from .optimizer import Optimizer
from .torch_compat import torch_spellings

__all__ = ["Momentum"]


class Momentum(Optimizer):
    """Momentum SGD, with one ``velocity`` accumulator per parameter (zero at the start).

    ``g = rescale_grad * g + coeff * p`` with ``L2Decay(coeff)`` (fused after the rescale),
    ``g = rescale_grad * regularizer(p, g)`` with any other regularizer (``L1Decay``, one of
    the user's: applied first, as Paddle does in an op of its own before the momentum op)
    ``v = momentum * v + g``
    ``p = p - lr * v``; with Nesterov: ``p = p - lr * (g + momentum * v)`` (new ``v``)

    Args:
        learning_rate: a float or an ``lr.LRScheduler``.
        momentum: the decay of the velocity, ``mu``.
        parameters: the parameters (or param groups) to optimize; required.
        use_nesterov: use the Nesterov update.
        weight_decay: None, a float L2 coefficient, or a regularizer.
        grad_clip: e.g. ``nn.ClipGradByGlobalNorm(1.0)``.
        multi_precision: keep fp32 master weights for float16 parameters and update
            those in fp32 (AMP O2; see ``Optimizer``). Float32 parameters are unaffected.
        rescale_grad: multiplies the gradient; before an ``L2Decay``'s term (which Paddle
            fuses into the kernel after the rescale) but after any other regularizer's.

    State dict keys: ``f'{param.name}_velocity_0'``.

    Example:
        >>> import numpy as np
        >>> from minitorch_amp.nn.parameter import Parameter
        >>> from minitorch_amp.optimizer import Momentum
        >>> w = Parameter(np.array([1.0], dtype="float32"))
        >>> opt = Momentum(learning_rate=0.1, momentum=0.9, parameters=[w])
        >>> for _ in range(2):
        ...     w.grad = np.array([1.0], dtype="float32")
        ...     opt.step()
        >>> w.numpy()  # 1 - 0.1 * 1 - 0.1 * (0.9 + 1)
        array([0.71], dtype=float32)
    """

    _kernel = "momentum"  # optim.cu's momentum_step computes _update below, bit for bit
    _kernel_name = "momentum_"  # its op in Paddle's operator statistics (eager)

    _group_keys = ("momentum", "use_nesterov", "rescale_grad")

    @torch_spellings
    def __init__(
        self,
        learning_rate=0.001,
        momentum=0.9,
        parameters=None,
        use_nesterov=False,
        weight_decay=None,
        grad_clip=None,
        multi_precision=False,
        rescale_grad=1.0,
        name=None,
    ):
        self._defaults = {
            "momentum": momentum,
            "use_nesterov": use_nesterov,
            "rescale_grad": rescale_grad,
        }
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name, multi_precision)

    def _validate_group(self, group: dict) -> None:
        super()._validate_group(group)
        for key in ("momentum", "rescale_grad"):
            value = group[key]
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or value < 0:
                raise ValueError(f"Momentum: {key} must be a number >= 0, got {value!r}")
            group[key] = float(value)
        group["use_nesterov"] = bool(group["use_nesterov"])

    def _grad_scale(self, group: dict) -> float:
        # NOTE: the rescale comes before a fused L2Decay, so that it does not scale its
        # term, but after any other regularizer, whose term it does scale (Paddle's order:
        # that regularizer is an op before the momentum op; bucket.regularized).
        return group["rescale_grad"]

    def _state_layout(self, group: dict) -> dict:
        return {"velocity": ("element", 0.0)}

    def _update(self, p, g, state, lr, hyper) -> None:
        mu = hyper["momentum"]
        v = state["velocity"]
        v *= mu
        v += g
        if hyper["use_nesterov"]:
            p -= lr * (g + mu * v)
        else:
            p -= lr * v

    def _kernel_scalars(self, group: dict) -> tuple:
        return np.float32(group["momentum"]), np.int32(group["use_nesterov"])
