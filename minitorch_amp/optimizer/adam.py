"""``Adam``: adaptive moments with bias correction, Paddle's kernel maths."""

from __future__ import annotations

import numbers

import numpy as np

from ..backend import get_array_module
from .optimizer import Optimizer
from .torch_compat import torch_spellings

__all__ = ["Adam"]


class Adam(Optimizer):
    """Adam (Kingma & Ba), computed exactly as Paddle's ``adam`` kernel.

    The accumulators ``beta1_pow_acc`` / ``beta2_pow_acc`` hold ``beta1**t`` / ``beta2**t``
    for the current step ``t`` (they start at ``beta1``, ``beta2`` and are multiplied by the
    beta after each update). With ``b1p, b2p`` those powers::

        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        lr_t = lr * sqrt(1 - b2p) / (1 - b1p)
        p = p - lr_t * m / (sqrt(v) + epsilon * sqrt(1 - b2p))

    (the epsilon term equals ``epsilon`` added to the bias-corrected ``sqrt(v_hat)``).

    Args:
        learning_rate: a float or an ``lr.LRScheduler``.
        beta1, beta2: the decay rates of the moments, in [0, 1).
        epsilon: keeps the division finite, >= 0.
        parameters: the parameters (or param groups) to optimize; required.
        weight_decay: None, a float L2 coefficient (added to the gradient), or a regularizer.
            For decoupled decay use :class:`AdamW`.
        grad_clip: e.g. ``nn.ClipGradByGlobalNorm(1.0)``.
        lazy_mode: only changes sparse-gradient updates; gradients here are dense, so it has
            no effect (accepted for Paddle compatibility).
        multi_precision: keep fp32 master weights for float16 parameters and update
            those in fp32 (AMP O2; see ``Optimizer``). Float32 parameters are unaffected.

    State dict keys: ``{name}_moment1_0``, ``{name}_moment2_0``, ``{name}_beta1_pow_acc_0``,
    ``{name}_beta2_pow_acc_0`` (the pows have shape ``[1]``).

    Example:
        >>> import numpy as np
        >>> from minitorch_amp.nn.parameter import Parameter
        >>> from minitorch_amp.optimizer import Adam
        >>> w = Parameter(np.array([1.0, -1.0], dtype="float32"))
        >>> w.grad = np.array([0.5, -3.0], dtype="float32")
        >>> Adam(learning_rate=0.1, parameters=[w]).step()
        >>> w.numpy().round(4)  # the first step moves each weight by ~lr against its gradient
        array([ 0.9, -0.9], dtype=float32)
    """

    _kernel = "adam"  # optim.cu's adam_step computes _update and _advance, bit for bit
    _kernel_name = "adam_"  # its op in Paddle's operator statistics (eager)

    _group_keys = ("beta1", "beta2", "epsilon", "lazy_mode")

    @torch_spellings
    def __init__(
        self,
        learning_rate=0.001,
        beta1=0.9,
        beta2=0.999,
        epsilon=1e-08,
        parameters=None,
        weight_decay=None,
        grad_clip=None,
        lazy_mode=False,
        multi_precision=False,
        name=None,
    ):
        self._defaults = {
            **getattr(self, "_defaults", {}),
            "beta1": beta1,
            "beta2": beta2,
            "epsilon": epsilon,
            "lazy_mode": lazy_mode,
        }
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name, multi_precision)

    def _validate_group(self, group: dict) -> None:
        super()._validate_group(group)
        for key in ("beta1", "beta2", "epsilon"):
            value = group[key]
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"{type(self).__name__}: {key} must be a float, got {value!r}")
            group[key] = float(value)
        for key in ("beta1", "beta2"):
            if not 0.0 <= group[key] < 1.0:
                raise ValueError(
                    f"{type(self).__name__}: {key} must be in [0, 1), got {group[key]}"
                )
        if group["epsilon"] < 0:
            raise ValueError(f"{type(self).__name__}: epsilon must be >= 0, got {group['epsilon']}")

    def _state_layout(self, group: dict) -> dict:
        return {
            "moment1": ("element", 0.0),
            "moment2": ("element", 0.0),
            "beta1_pow_acc": ("tensor", group["beta1"]),  # beta1**t for the coming step t
            "beta2_pow_acc": ("tensor", group["beta2"]),
        }

    def _update(self, p, g, state, lr, hyper) -> None:
        xp = get_array_module(p)
        beta1, beta2, eps = hyper["beta1"], hyper["beta2"], hyper["epsilon"]
        m, v = state["moment1"], state["moment2"]
        if hyper["decay"] is not None:
            p *= hyper["decay"]  # AdamW's decoupled decay, 1 - lr * coeff, before the step
        m *= beta1
        m += (1.0 - beta1) * g
        v *= beta2
        t = g * g  # one temporary for the rest (products commute: the same bits)
        t *= 1.0 - beta2
        v += t
        root = xp.sqrt(1.0 - state["beta2_pow_acc"])  # stays on the device: no host sync
        lr_t = lr * root / (1.0 - state["beta1_pow_acc"])
        xp.sqrt(v, out=t)
        t += eps * root
        xp.divide(m, t, out=t)
        t *= lr_t
        p -= t  # p -= lr_t * (m / (sqrt(v) + eps * root))

    def _advance(self, state, hyper) -> None:
        state["beta1_pow_acc"] *= hyper["beta1"]
        state["beta2_pow_acc"] *= hyper["beta2"]

    def _kernel_scalars(self, group: dict) -> tuple:
        beta1, beta2 = group["beta1"], group["beta2"]
        scalars = (beta1, beta2, 1.0 - beta1, 1.0 - beta2, group["epsilon"])
        return tuple(np.float32(x) for x in scalars)  # rounded as NumPy rounds the doubles
