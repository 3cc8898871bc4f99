"""``AdamW``: Adam with decoupled weight decay (Loshchilov & Hutter), Paddle's kernel maths."""

from __future__ import annotations

import numbers

from .adam import Adam
from .torch_compat import torch_spellings

__all__ = ["AdamW"]


class AdamW(Adam):
    """Adam whose weight decay shrinks the parameter instead of adding to the gradient.

    Before the Adam step (see :class:`Adam` for it), for parameters that decay::

        p = p * (1 - lr * coeff)        # Adam._update's hyper['decay'], rounded once

    where ``lr`` already includes the per-parameter ratios (``optimize_attr`` and
    ``lr_ratio(param)``), as in Paddle's ``adamw`` kernel.

    Args:
        learning_rate: a float or an ``lr.LRScheduler``.
        beta1, beta2, epsilon: as for :class:`Adam`.
        parameters: the parameters (or param groups) to optimize; required.
        weight_decay: the decay coefficient ``coeff`` (a float; default 0.01). Not L2: the
            gradient is left alone.
        lr_ratio: optional ``fn(param) -> float`` multiplying the learning rate per parameter.
        apply_decay_param_fun: optional ``fn(param.name) -> bool``; only parameters for which it
            returns True decay (all of them when None). Typical: skip biases and norms.
            NOTE: Paddle calls both functions at every step; here they are called when the
            step's plan is built (the first step of a parameter set, and after anything that
            rebuilds it), so they must depend on the parameter only, as they do in practice.
        grad_clip: e.g. ``nn.ClipGradByGlobalNorm(1.0)``.
        lazy_mode, multi_precision: as for :class:`Adam`.

    Example:
        >>> import numpy as np
        >>> from minitorch_amp.nn.parameter import Parameter
        >>> from minitorch_amp.optimizer import AdamW
        >>> w = Parameter(np.array([2.0], dtype="float32"))
        >>> w.grad = np.array([0.0], dtype="float32")  # no gradient: only the decay acts
        >>> AdamW(learning_rate=0.1, weight_decay=0.5, parameters=[w]).step()
        >>> w.numpy()  # 2 * (1 - 0.1 * 0.5)
        array([1.9], dtype=float32)
    """

    _kernel_name = "adamw_"  # its op in Paddle's operator statistics (eager)
    # Paddle's AdamW._add_param_group writes a group's learning_rate into its parameters but
    # not its weight_decay: a ParamAttr regularizer stays in force inside a group.
    _group_sets_regularizer = False

    @torch_spellings
    def __init__(
        self,
        learning_rate=0.001,
        beta1=0.9,
        beta2=0.999,
        epsilon=1e-08,
        parameters=None,
        weight_decay=0.01,
        lr_ratio=None,
        apply_decay_param_fun=None,
        grad_clip=None,
        lazy_mode=False,
        multi_precision=False,
        name=None,
    ):
        for fn, what in ((lr_ratio, "lr_ratio"), (apply_decay_param_fun, "apply_decay_param_fun")):
            if fn is not None and not callable(fn):
                raise TypeError(f"AdamW: {what} must be a function or None, got {fn!r}")
        self._lr_ratio = lr_ratio
        self._apply_decay_param_fun = apply_decay_param_fun
        # The base class reads weight_decay as a regularizer; AdamW's is a coefficient, so it
        # travels as a group default and _validate_group turns it into group["coeff"].
        self._defaults = {"weight_decay": weight_decay}
        super().__init__(
            learning_rate,
            beta1,
            beta2,
            epsilon,
            parameters,
            None,
            grad_clip,
            lazy_mode,
            multi_precision,
            name,
        )

    def _validate_group(self, group: dict) -> None:
        coeff = group["weight_decay"]
        if coeff is None:
            coeff = 0.0
        if isinstance(coeff, bool) or not isinstance(coeff, numbers.Real):
            raise TypeError(
                f"AdamW: weight_decay is the decoupled decay coefficient, a float >= 0; got "
                f"{coeff!r} (for L2 on the gradient use Adam(weight_decay=L2Decay(...)))"
            )
        if not coeff >= 0:  # (NaN too)
            raise ValueError(
                f"AdamW: weight_decay is the decoupled decay coefficient and must be >= 0, "
                f"got {coeff!r}"
            )
        group["weight_decay"] = None  # so that the base sees no L2 regularizer
        super()._validate_group(group)
        group["weight_decay"] = group["coeff"] = float(coeff)

    def _lr_multiplier(self, param, group: dict) -> float:
        ratio = super()._lr_multiplier(param, group)
        return ratio if self._lr_ratio is None else ratio * float(self._lr_ratio(param))

    def _decay_coeff(self, param, group: dict) -> float:
        fn = self._apply_decay_param_fun
        return group["coeff"] if fn is None or fn(param.name) else 0.0
