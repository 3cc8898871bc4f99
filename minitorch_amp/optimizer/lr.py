"""Learning-rate schedulers (Paddle's ``paddle.optimizer.lr``).

A scheduler is a function of the epoch counter ``last_epoch``. The optimizer reads the current
value with ``scheduler()``; the user advances it with ``scheduler.step()`` (per batch or per
epoch, their choice). Construction already takes one step, so ``last_epoch`` starts at 0 and
``last_lr`` holds the value for epoch 0.

Example:
    >>> from minitorch_amp.optimizer import lr
    >>> sched = lr.StepDecay(learning_rate=0.5, step_size=2, gamma=0.1)
    >>> values = []
    >>> for _ in range(5):
    ...     values.append(round(sched(), 6))
    ...     sched.step()
    >>> values
    [0.5, 0.5, 0.05, 0.05, 0.005]
"""

from __future__ import annotations

import itertools
import math
import warnings

__all__ = [
    "CosineAnnealingDecay",
    "ExponentialDecay",
    "LRScheduler",
    "LinearWarmup",
    "MultiStepDecay",
    "StepDecay",
]


def _check_number(value, what: str, owner: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{owner}: '{what}' must be a float or int, got {type(value).__name__}")
    return float(value)


def _check_positive_int(value, what: str, owner: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{owner}: '{what}' must be a positive integer, got {value!r}")
    return value


def _check_decay_gamma(gamma, owner: str) -> float:
    gamma = _check_number(gamma, "gamma", owner)
    if not 0.0 < gamma < 1.0:
        raise ValueError(
            f"{owner}: 'gamma' must be in (0.0, 1.0) so that the learning rate decays, got {gamma}"
        )
    return gamma


class LRScheduler:
    """Base class: subclasses implement :meth:`get_lr` as a function of ``self.last_epoch``.

    Args:
        learning_rate: the initial learning rate, ``base_lr``.
        last_epoch: the epoch to resume after; -1 starts from scratch.
        verbose: print the new learning rate on every step.

    Attributes:
        base_lr: the initial learning rate.
        last_epoch: the current epoch counter (0 after construction from scratch).
        last_lr: the learning rate for ``last_epoch``; what ``scheduler()`` returns.
    """

    def __init__(self, learning_rate: float = 0.1, last_epoch: int = -1, verbose: bool = False):
        owner = type(self).__name__
        self.base_lr = _check_number(learning_rate, "learning_rate", owner)
        if isinstance(last_epoch, bool) or not isinstance(last_epoch, int) or last_epoch < -1:
            raise ValueError(f"{owner}: 'last_epoch' must be an int >= -1, got {last_epoch!r}")
        self.last_lr = self.base_lr
        self.last_epoch = last_epoch
        self.verbose = verbose
        self.step()

    def __call__(self) -> float:
        """The current learning rate (``last_lr``)."""
        return self.last_lr

    def step(self, epoch: int | None = None) -> None:
        """Advance to ``epoch`` (default: the next one) and recompute ``last_lr``."""
        if epoch is None:
            self.last_epoch += 1
            self.last_lr = self.get_lr()
        else:
            if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
                raise ValueError(f"step(epoch=...) needs a non-negative int, got {epoch!r}")
            self.last_epoch = epoch
            self.last_lr = self._get_closed_form_lr()
        if self.verbose:
            print(
                f"Epoch {self.last_epoch}: {type(self).__name__} set learning rate to "
                f"{self.last_lr}."
            )

    def get_lr(self) -> float:
        """The learning rate for ``self.last_epoch``; subclasses override this."""
        raise NotImplementedError(f"{type(self).__name__} must implement get_lr()")

    def _get_closed_form_lr(self) -> float:
        """The learning rate for an arbitrary ``last_epoch`` (used by ``step(epoch)``)."""
        return self.get_lr()

    # ---- checkpointing ----------------------------------------------------------------------
    _state_keys = ("last_epoch", "last_lr")

    def state_dict(self) -> dict:
        """``{'last_epoch': int, 'last_lr': float}`` (subclasses may add entries)."""
        return {key: getattr(self, key) for key in self._state_keys}

    def set_state_dict(self, state_dict: dict) -> None:
        """Restore what :meth:`state_dict` returned; checks every key before changing anything.

        Raises:
            RuntimeError: a required key is missing.
        """
        self._check_state(state_dict)
        self._load_state(state_dict)

    def _check_state(self, state_dict) -> None:
        name = type(self).__name__
        if not isinstance(state_dict, dict):
            raise TypeError(f"{name}.set_state_dict needs a dict, got {type(state_dict).__name__}")
        missing = [key for key in self._state_keys if key not in state_dict]
        if missing:
            raise RuntimeError(
                f"{name}.set_state_dict: the state dict has no {missing}; "
                "pass what scheduler.state_dict() returned"
            )
        unused = set(state_dict) - set(self._state_keys) - set(self._nested_keys)
        if unused:
            warnings.warn(
                f"{name}.set_state_dict ignores unknown keys {sorted(unused)}; "
                "was the state saved from a different scheduler?",
                stacklevel=3,
            )

    def _load_state(self, state_dict) -> None:
        self.last_epoch = int(state_dict["last_epoch"])
        self.last_lr = float(state_dict["last_lr"])

    _nested_keys: tuple[str, ...] = ()

    set_dict = set_state_dict  # Paddle's older name


class StepDecay(LRScheduler):
    """Multiply by ``gamma`` every ``step_size`` epochs.

    ``lr = base_lr * gamma ** (last_epoch // step_size)``
    """

    def __init__(self, learning_rate, step_size, gamma=0.1, last_epoch=-1, verbose=False):
        self.step_size = _check_positive_int(step_size, "step_size", "StepDecay")
        self.gamma = _check_decay_gamma(gamma, "StepDecay")
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        return self.base_lr * self.gamma ** (self.last_epoch // self.step_size)


class MultiStepDecay(LRScheduler):
    """Multiply by ``gamma`` at each milestone epoch.

    ``lr = base_lr * gamma ** (number of milestones <= last_epoch)``
    """

    def __init__(self, learning_rate, milestones, gamma=0.1, last_epoch=-1, verbose=False):
        if not isinstance(milestones, (list, tuple)) or not milestones:
            raise TypeError(
                f"MultiStepDecay: 'milestones' must be a non-empty list or tuple of ints, "
                f"got {milestones!r}"
            )
        for m in milestones:
            _check_positive_int(m, "milestones", "MultiStepDecay")
        if any(a >= b for a, b in itertools.pairwise(milestones)):
            raise ValueError(
                f"MultiStepDecay: 'milestones' must be strictly increasing, got {milestones}"
            )
        self.milestones = list(milestones)
        self.gamma = _check_decay_gamma(gamma, "MultiStepDecay")
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        passed = sum(1 for m in self.milestones if self.last_epoch >= m)
        return self.base_lr * self.gamma**passed


class ExponentialDecay(LRScheduler):
    """``lr = base_lr * gamma ** last_epoch``."""

    def __init__(self, learning_rate, gamma, last_epoch=-1, verbose=False):
        self.gamma = _check_decay_gamma(gamma, "ExponentialDecay")
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        return self.base_lr * self.gamma**self.last_epoch


class CosineAnnealingDecay(LRScheduler):
    """Cosine annealing from ``base_lr`` down to ``eta_min`` over ``T_max`` epochs.

    ``lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * last_epoch / T_max)) / 2``

    NOTE: Paddle computes sequential steps with a recursion,
    ``lr_t - eta_min = (1 + cos(pi t/T)) / (1 + cos(pi (t-1)/T)) * (lr_{t-1} - eta_min)``,
    with a special case where the denominator is 0 (``t - 1 = T, 3T, ...``, where it adds
    ``(base_lr - eta_min) * (1 - cos(pi/T)) / 2`` to ``lr_{t-1} = eta_min``). The ratios
    telescope, and the special case lands on the same point, so the recursion equals the
    closed form above at every epoch (up to rounding, ~1e-16 per step). We use the closed form
    everywhere: it cannot drift and does not depend on how the counter got where it is.
    """

    def __init__(self, learning_rate, T_max, eta_min=0, last_epoch=-1, verbose=False):  # noqa: N803
        self.T_max = _check_positive_int(T_max, "T_max", "CosineAnnealingDecay")
        self.eta_min = _check_number(eta_min, "eta_min", "CosineAnnealingDecay")
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        cosine = 1.0 + math.cos(math.pi * self.last_epoch / self.T_max)
        return self.eta_min + (self.base_lr - self.eta_min) * cosine / 2.0


class LinearWarmup(LRScheduler):
    """Rise linearly from ``start_lr`` to ``end_lr`` over ``warmup_steps``, then hand over.

    ``lr = start_lr + (end_lr - start_lr) * last_epoch / warmup_steps`` while
    ``last_epoch < warmup_steps``; afterwards ``learning_rate`` (a number, or a scheduler that
    is stepped to ``last_epoch - warmup_steps``).

    Args:
        learning_rate: the rate after warmup: a float or another LRScheduler.
        warmup_steps: how many steps the warmup lasts (a positive int).
        start_lr: the rate at step 0.
        end_lr: the rate reached at ``warmup_steps`` (must exceed ``start_lr``).
    """

    def __init__(self, learning_rate, warmup_steps, start_lr, end_lr, last_epoch=-1, verbose=False):
        if not isinstance(learning_rate, LRScheduler):
            learning_rate = _check_number(learning_rate, "learning_rate", "LinearWarmup")
        self.learning_rate = learning_rate
        self.warmup_steps = _check_positive_int(warmup_steps, "warmup_steps", "LinearWarmup")
        self.start_lr = _check_number(start_lr, "start_lr", "LinearWarmup")
        self.end_lr = _check_number(end_lr, "end_lr", "LinearWarmup")
        if not self.end_lr > self.start_lr:
            raise ValueError(
                f"LinearWarmup: end_lr ({end_lr}) must be greater than start_lr ({start_lr})"
            )
        super().__init__(start_lr, last_epoch, verbose)

    def get_lr(self) -> float:
        if self.last_epoch < self.warmup_steps:
            frac = self.last_epoch / self.warmup_steps
            return self.start_lr + (self.end_lr - self.start_lr) * frac
        if isinstance(self.learning_rate, LRScheduler):
            self.learning_rate.step(self.last_epoch - self.warmup_steps)
            return self.learning_rate()
        return self.learning_rate

    def state_dict(self) -> dict:
        state = super().state_dict()
        if isinstance(self.learning_rate, LRScheduler):
            state["LinearWarmup_LR"] = self.learning_rate.state_dict()
        return state

    _nested_keys = ("LinearWarmup_LR",)

    def _check_state(self, state_dict) -> None:
        super()._check_state(state_dict)
        if isinstance(self.learning_rate, LRScheduler):
            if "LinearWarmup_LR" not in state_dict:
                raise RuntimeError(
                    "LinearWarmup.set_state_dict: the state dict has no 'LinearWarmup_LR' "
                    "entry for the wrapped scheduler; pass what LinearWarmup.state_dict() returned"
                )
            self.learning_rate._check_state(state_dict["LinearWarmup_LR"])

    def _load_state(self, state_dict) -> None:
        super()._load_state(state_dict)
        if isinstance(self.learning_rate, LRScheduler):
            self.learning_rate._load_state(state_dict["LinearWarmup_LR"])
