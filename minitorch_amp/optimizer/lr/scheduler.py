"""The scheduler base class, :class:`LRScheduler`, and the argument checks the schedules share.

A scheduler is a function of the epoch counter ``last_epoch``. The optimizer reads the current
value with ``scheduler()``; the user advances it with ``scheduler.step()`` (per batch or per
epoch, their choice). Construction already takes one step, so ``last_epoch`` starts at 0 and
``last_lr`` holds the value for epoch 0.

Integers may be Python ints or NumPy integers (``np.int64(3)``, ``np.arange``'s elements), never
``bool``; numbers may be any real number but ``bool``.
"""

from __future__ import annotations

import math
import numbers
import warnings

from ...autograd.tensor import Tensor


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _snapshot(value):
    """A state entry as saved: a one-element Tensor as a float (Paddle's ``state_dict``), so
    the saved state does not follow later in-place writes; anything else as it is."""
    if isinstance(value, Tensor):
        if value.size != 1:
            raise ValueError(
                f"a scheduler's state entry must be a number or a one-element Tensor, got "
                f"shape {value.shape}"
            )
        return float(value.numpy().reshape(-1)[0])
    return value


def _check_lr_lambda(lr_lambda, owner: str, example: str):
    """``lr_lambda`` (LambdaDecay's, MultiplicativeDecay's), refused unless callable."""
    if not callable(lr_lambda):
        raise TypeError(
            f"{owner}: 'lr_lambda' must be a function of the epoch returning a factor (for "
            f"example {example}), got {type(lr_lambda).__name__}"
        )
    return lr_lambda


def _called_factor(lr_lambda, epoch: int, owner: str, on_what: str):
    """``lr_lambda(epoch)``, refused unless a number: the factor on ``on_what``."""
    factor = lr_lambda(epoch)
    if isinstance(factor, bool) or not isinstance(factor, numbers.Real):
        raise TypeError(
            f"{owner}: lr_lambda({epoch}) returned {factor!r}; it must return a number, the "
            f"factor on {on_what}"
        )
    return factor


def _check_number(value, what: str, owner: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{owner}: '{what}' must be a float or int, got {type(value).__name__}")
    return float(value)


def _check_non_negative(value, what: str, owner: str) -> float:
    value = _check_number(value, what, owner)
    if not value >= 0:
        raise ValueError(f"{owner}: '{what}' must be >= 0, got {value}")
    return value


def _check_positive_int(value, what: str, owner: str) -> int:
    if not _is_int(value) or value <= 0:
        raise ValueError(f"{owner}: '{what}' must be a positive integer, got {value!r}")
    return int(value)


def _check_decay_gamma(gamma, owner: str) -> float:
    gamma = _check_number(gamma, "gamma", owner)
    if not 0.0 < gamma < 1.0:
        raise ValueError(
            f"{owner}: 'gamma' must be in (0.0, 1.0) so that the learning rate decays, got {gamma}"
        )
    return gamma


def _check_learning_rate(value, owner: str) -> float:
    """Paddle's check in ``LRScheduler.__init__``: a number, not negative."""
    rate = _check_number(value, "learning_rate", owner)
    if rate < 0:
        raise ValueError(
            f"{owner}: invalid learning rate {value}: it must be >= 0 (a negative rate climbs "
            "the loss); pass the magnitude"
        )
    return rate


def _check_epoch_arg(epoch, what: str) -> int:
    if not _is_int(epoch) or epoch < 0:
        raise ValueError(f"{what} must be a non-negative integer, got {epoch!r}")
    return int(epoch)


class LRScheduler:
    """Base class: subclasses implement :meth:`get_lr` as a function of ``self.last_epoch``.

    Args:
        learning_rate: the initial learning rate, ``base_lr`` (>= 0, as in Paddle).
        last_epoch: the epoch to resume after; -1 starts from scratch.
        verbose: print the new learning rate on every step.

    Attributes:
        base_lr: the initial learning rate.
        last_epoch: the current epoch counter (0 after construction from scratch).
        last_lr: the learning rate for ``last_epoch``; what ``scheduler()`` returns.

    A subclass with more state lists it as Paddle does, in a ``state_keys()`` that sets
    ``self.keys`` (or in the class attribute ``_state_keys``): :meth:`state_dict` saves those
    attributes and :meth:`set_state_dict` requires and restores every one of them.
    """

    def __init__(self, learning_rate: float = 0.1, last_epoch: int = -1, verbose: bool = False):
        owner = type(self).__name__
        self.base_lr = _check_learning_rate(learning_rate, owner)
        if not _is_int(last_epoch) or last_epoch < -1:
            raise ValueError(f"{owner}: 'last_epoch' must be an integer >= -1, got {last_epoch!r}")
        self.last_lr = self.base_lr
        self.last_epoch = int(last_epoch)
        self.verbose = verbose
        self.step()

    def __call__(self) -> float:
        """The current learning rate (``last_lr``)."""
        return self.last_lr

    def step(self, epoch: int | None = None) -> None:
        """Advance to ``epoch`` (default: the next one) and recompute ``last_lr``.

        A schedule that refuses the new epoch (``OneCycleLR`` past ``total_steps``, a
        ``LambdaDecay`` whose function fails) raises and leaves ``last_epoch`` where it was.
        """
        previous = self.last_epoch
        if epoch is None:
            self.last_epoch += 1
            compute = self.get_lr
        else:
            self.last_epoch = _check_epoch_arg(epoch, "step(epoch=...)")
            compute = self._get_closed_form_lr
        try:
            self.last_lr = compute()
        except BaseException:
            self.last_epoch = previous
            raise
        self._print_rate()

    def _print_rate(self) -> None:
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
    _state_keys: tuple[str, ...] = ("last_epoch", "last_lr")
    _optional_keys: tuple[str, ...] = ()  # restored when present, not required

    def state_keys(self) -> None:
        """Paddle's hook: set ``self.keys``, the attributes the state holds (default
        ``_state_keys``, ``['last_epoch', 'last_lr']`` here). Override it to save more."""
        self.keys = list(self._state_keys)

    def _keys(self) -> tuple[str, ...]:
        """``state_keys()``'s ``self.keys``, after ``last_epoch`` and ``last_lr`` (always kept)."""
        self.state_keys()
        extra = [key for key in self.keys if key not in ("last_epoch", "last_lr")]
        return ("last_epoch", "last_lr", *extra)

    def state_dict(self) -> dict:
        """``{'last_epoch': int, 'last_lr': float}`` and every other key of ``state_keys()``
        the scheduler has (as in Paddle, a key it lacks is left out)."""
        keys = self._keys() + self._optional_keys
        return {key: _snapshot(getattr(self, key)) for key in keys if key in self.__dict__}

    def set_state_dict(self, state_dict: dict) -> None:
        """Restore what :meth:`state_dict` returned; all or nothing.

        Every entry, and every entry of a wrapped scheduler's state (``LinearWarmup``), is
        checked, its type and its value, before anything changes: a refused state leaves
        the scheduler as it was.

        Raises:
            RuntimeError: a required key (one of ``state_keys()``) is missing.
            TypeError: ``state_dict`` is not a dict, or an entry has the wrong type.
            ValueError: an entry is out of range (a negative epoch, a rate that is not
                finite, an epoch past ``OneCycleLR``'s ``total_steps``).
        """
        self._check_state(state_dict)
        self._load_state(state_dict)

    def _check_state(self, state_dict, where: str = "state_dict", caller: str = "") -> None:
        """Check everything :meth:`_load_state` reads. The errors begin with ``caller``
        (default ``'<Scheduler>.set_state_dict'``) and name the entry from ``where``
        (``LR_Scheduler`` when an optimizer loads it)."""
        caller = caller or f"{type(self).__name__}.set_state_dict"
        if not isinstance(state_dict, dict):
            raise TypeError(f"{caller}: {where} must be a dict, got {type(state_dict).__name__}")
        keys = self._keys()
        missing = [key for key in keys + tuple(self._nested()) if key not in state_dict]
        if missing:
            raise RuntimeError(
                f"{caller}: {where} has no {missing}; pass what scheduler.state_dict() returned"
            )
        epoch, rate = state_dict["last_epoch"], state_dict["last_lr"]
        if not _is_int(epoch):
            raise TypeError(f"{caller}: {where}['last_epoch'] must be an int, got {epoch!r}")
        if epoch < 0:
            raise ValueError(
                f"{caller}: {where}['last_epoch'] must be >= 0 (the epoch counter), got {epoch}"
            )
        if isinstance(rate, bool) or not isinstance(rate, numbers.Real):
            raise TypeError(f"{caller}: {where}['last_lr'] must be a number, got {rate!r}")
        if not math.isfinite(rate):
            raise ValueError(f"{caller}: {where}['last_lr'] must be a finite number, got {rate}")
        self._check_epoch(int(epoch), f"{caller}: {where}")
        self._check_extra(state_dict, f"{caller}: {where}")
        for key, inner in self._nested().items():
            inner._check_state(state_dict[key], f"{where}[{key!r}]", caller)
        known = set(keys) | set(self._optional_keys) | set(self._nested_keys)
        unused = set(state_dict) - known
        if unused:
            warnings.warn(
                f"{caller} ignores unknown keys {sorted(unused)}; "
                "was the state saved from a different scheduler?",
                stacklevel=3,
            )

    def _check_epoch(self, epoch: int, where: str) -> None:
        """Refuse an epoch this schedule cannot be at (``OneCycleLR``: past its end);
        ``where`` begins the error."""

    def _check_extra(self, state_dict: dict, where: str) -> None:
        """Check the entries beyond ``last_epoch``/``last_lr`` a subclass knows the types of
        (a user's ``state_keys()`` entries are restored as they are, as in Paddle)."""

    def _nested(self) -> dict:
        """``{key: scheduler}``: the schedulers whose state this one's state holds."""
        return {}

    def _load_state(self, state_dict) -> None:
        """Write a state :meth:`_check_state` passed (nothing here raises)."""
        for key, inner in self._nested().items():
            inner._load_state(state_dict[key])
        for key in self._keys() + self._optional_keys:
            if key in state_dict:
                setattr(self, key, state_dict[key])
        self.last_epoch = int(state_dict["last_epoch"])
        self.last_lr = float(state_dict["last_lr"])

    _nested_keys: tuple[str, ...] = ()  # keys a nested state may have (not an unknown key)

    set_dict = set_state_dict  # Paddle's older name
