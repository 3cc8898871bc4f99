"""The scaler's settings and checkpoints: Paddle's getters and setters, PyTorch's names for
them, and ``state_dict`` / ``load_state_dict`` (all-or-nothing)."""

from __future__ import annotations

import functools

import numpy as np

from ..autograd.tensor import Tensor
from ..backend import device as _device
from ..backend import dtypes as _dtypes
from ..backend import sync as _sync
from .scaler_rules import (
    check_attr,
    check_count,
    check_flag,
    from_either_form,
    to_torch_keys,
)


class ScalerSettings:
    """Mixed into :class:`~minitorch_amp.amp.AmpScaler`; reads and writes its attributes."""

    # ---- getters and setters (Paddle's) -------------------------------------------------
    def is_enable(self) -> bool:
        return self._enable

    is_enabled = is_enable  # PyTorch's name

    def is_use_dynamic_loss_scaling(self) -> bool:
        return self._use_dynamic_loss_scaling

    def get_loss_scaling(self) -> float:
        """The current scale as a Python float (a host read; 1.0 when disabled)."""
        if not self._enable:
            return 1.0
        _sync.host_read("GradScaler.get_loss_scaling()")
        return float(_device.asnumpy(self._scale._data)[0])

    # What a disabled scaler's get_scale() answers: Paddle 3.x's 0.0; PyTorch's 1.0 for
    # cuda.amp.GradScaler, PyTorch's spelling (its recipes multiply by get_scale()).
    _disabled_scale = 0.0

    def get_scale(self) -> float:
        """PyTorch's name for the current scale (a host read). Disabled: Paddle's 0.0, or
        PyTorch's 1.0 for ``cuda.amp.GradScaler``; :meth:`get_loss_scaling` says 1.0."""
        if not self._enable:
            return self._disabled_scale
        return self.get_loss_scaling()

    def get_init_loss_scaling(self) -> float:
        return self._init_loss_scaling

    def set_init_loss_scaling(self, new_init_loss_scaling: float) -> None:
        """Set the initial scale and, as Paddle does, reset the current scale to it."""
        self._init_loss_scaling = self._checked_scale(new_init_loss_scaling)
        if self._enable:
            self._scale._data[...] = self._init_loss_scaling

    def get_incr_ratio(self) -> float:
        return self._incr_ratio

    def set_incr_ratio(self, new_incr_ratio: float) -> None:
        self._incr_ratio = check_attr("incr_ratio", new_incr_ratio)

    def get_decr_ratio(self) -> float:
        return self._decr_ratio

    def set_decr_ratio(self, new_decr_ratio: float) -> None:
        self._decr_ratio = check_attr("decr_ratio", new_decr_ratio)

    def get_incr_every_n_steps(self) -> int:
        return self._incr_every_n_steps

    def set_incr_every_n_steps(self, new_incr_every_n_steps: int) -> None:
        n = check_attr("incr_every_n_steps", new_incr_every_n_steps)
        self._incr_every_n_steps = n
        self._clamp_count(0, n)

    def _clamp_count(self, which: int, limit: int) -> None:
        """Keep counter ``which`` (0: good steps, 1: bad) below its new ``limit``, on the
        device: past it, the update's ``count + 1 == limit`` would never hold again (the
        scale would stop moving for good; Paddle's counters do that), and the state dict
        would hold a count its loader refuses. A count that has reached the limit acts at
        the next step of its kind."""
        counters = getattr(self, "_counters", None)  # (a disabled scaler keeps none)
        if counters is not None:
            counter = counters[which : which + 1]
            _device.get_array_module(counter).minimum(counter, limit - 1, out=counter)

    # PyTorch's names for the same three settings (a bad value is refused under them)
    def get_growth_factor(self) -> float:
        return self._incr_ratio

    def set_growth_factor(self, new_factor: float) -> None:
        self.set_incr_ratio(check_attr("incr_ratio", new_factor, shown="growth_factor"))

    def get_backoff_factor(self) -> float:
        return self._decr_ratio

    def set_backoff_factor(self, new_factor: float) -> None:
        self.set_decr_ratio(check_attr("decr_ratio", new_factor, shown="backoff_factor"))

    def get_growth_interval(self) -> int:
        return self._incr_every_n_steps

    def set_growth_interval(self, new_interval: int) -> None:
        n = check_attr("incr_every_n_steps", new_interval, shown="growth_interval")
        self.set_incr_every_n_steps(n)

    def get_decr_every_n_nan_or_inf(self) -> int:
        return self._decr_every_n_nan_or_inf

    def set_decr_every_n_nan_or_inf(self, new_decr_every_n_nan_or_inf: int) -> None:
        n = check_attr("decr_every_n_nan_or_inf", new_decr_every_n_nan_or_inf)
        self._decr_every_n_nan_or_inf = n
        self._clamp_count(1, n)

    # ---- checkpoints --------------------------------------------------------------------
    _state_dict_form = "paddle"  # "torch": cuda.amp.GradScaler, PyTorch's spelling

    def state_dict(self) -> dict:
        """The scaler's state; ``{}`` if disabled (as Paddle and PyTorch).

        Paddle's keys (:data:`~.scaler_rules.PADDLE_KEYS`, ``scale`` a float32 NumPy array
        of shape [1]); PyTorch's (``scale`` a float, ``growth_factor``, ``backoff_factor``,
        ``growth_interval``, ``_growth_tracker``) for ``cuda.amp.GradScaler``, which also
        saves ``decr_every_n_nan_or_inf``, ``decr_count`` and ``use_dynamic_loss_scaling``
        when one of them differs from what PyTorch's scaler always does (1, 0, True).
        """
        if not self._enable:
            return {}
        _sync.host_read("GradScaler.state_dict()")
        good, bad, _ = (int(c) for c in _device.asnumpy(self._counters))
        state = {
            "scale": _device.asnumpy(self._scale._data).copy(),
            "incr_ratio": self._incr_ratio,
            "decr_ratio": self._decr_ratio,
            "incr_every_n_steps": self._incr_every_n_steps,
            "decr_every_n_nan_or_inf": self._decr_every_n_nan_or_inf,
            "incr_count": good,
            "decr_count": bad,
            "use_dynamic_loss_scaling": self._use_dynamic_loss_scaling,
        }
        return to_torch_keys(state) if self._state_dict_form == "torch" else state

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore a state dict in either form (Paddle's keys or PyTorch's, whichever scaler
        saved it); all-or-nothing: every value is checked before anything changes.

        Each value meets the constructor's rules (``scale="1024"`` or ``True`` is refused, as
        ``init_loss_scaling`` would be); ``scale`` may also be a one-element array or Tensor
        of numbers. PyTorch's form sets the settings it lacks to what its scaler always does:
        ``decr_every_n_nan_or_inf=1``, dynamic scaling.

        Raises:
            RuntimeError: the dict is empty (saved from a disabled scaler).
            ValueError: missing or unexpected keys, or an invalid value.
        """
        if self._enable:
            self._prepare_load(state_dict)()

    def _prepare_load(self, state_dict: dict):
        """Check ``state_dict`` as :meth:`load_state_dict` does and return ``commit()``,
        which loads it (nothing can fail there): several scalers load all or none."""
        if not state_dict:
            raise RuntimeError(
                "The input state dict is empty, possibly because it was saved from a disabled "
                "instance of GradScaler."
            )
        values, given_as = from_either_form(state_dict)
        new = {}
        rules = {  # in this order: each count after its limit
            "scale": self._loaded_scale,
            "incr_ratio": functools.partial(check_attr, "incr_ratio"),
            "decr_ratio": functools.partial(check_attr, "decr_ratio"),
            "incr_every_n_steps": functools.partial(check_attr, "incr_every_n_steps"),
            "decr_every_n_nan_or_inf": functools.partial(check_attr, "decr_every_n_nan_or_inf"),
            "incr_count": lambda v: check_count(v, new["incr_every_n_steps"]),
            "decr_count": lambda v: check_count(v, new["decr_every_n_nan_or_inf"]),
            "use_dynamic_loss_scaling": check_flag,
        }
        for key, rule in rules.items():
            try:
                new[key] = rule(values[key])
            except ValueError as exc:
                raise ValueError(
                    f"GradScaler.load_state_dict: state dict {given_as.get(key, key)!r}: {exc}. "
                    "Nothing was loaded."
                ) from None
        counters = _device.to_place(
            np.array([new["incr_count"], new["decr_count"], 0], "int32"), self._scale.place
        )

        def commit() -> None:  # everything checked and staged: now change state
            self._init_loss_scaling = new["scale"]
            self._scale._data[...] = new["scale"]
            self._incr_ratio, self._decr_ratio = new["incr_ratio"], new["decr_ratio"]
            self._incr_every_n_steps = new["incr_every_n_steps"]
            self._decr_every_n_nan_or_inf = new["decr_every_n_nan_or_inf"]
            self._counters[...] = counters
            self._use_dynamic_loss_scaling = new["use_dynamic_loss_scaling"]

        return commit

    def _checked_scale(self, value, what: str = "init_loss_scaling") -> float:
        """``value`` as a scale: one float32 can hold, and at most ``max_loss_scaling``."""
        try:
            scale = check_attr("init_loss_scaling", value)
        except ValueError as exc:
            raise ValueError(str(exc).replace("init_loss_scaling", what, 1)) from None
        if scale > self._max_loss_scaling:
            raise ValueError(
                f"{what} {value!r} is above max_loss_scaling={self._max_loss_scaling}; the scale "
                "never exceeds its ceiling: start lower or raise max_loss_scaling"
            )
        return scale

    def _loaded_scale(self, value) -> float:
        """A loaded ``scale`` as a float, by ``init_loss_scaling``'s rules; Paddle saves it as
        a float32 array of shape [1], PyTorch as a float."""
        if isinstance(value, Tensor):
            _sync.host_read("GradScaler.load_state_dict() of a Tensor scale")
            value = value._data
        if _device.is_array(value):
            if value.size != 1:
                raise ValueError(f"must hold one value, got shape {list(value.shape)}")
            if _dtypes.is_floating(value.dtype) or value.dtype.kind in "iu":
                number = _device.asnumpy(value).reshape(-1)[0]
                value = int(number) if value.dtype.kind in "iu" else float(number)
        return self._checked_scale(value, "scale")
