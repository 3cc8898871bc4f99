"""The scaler's settings and checkpoints: Paddle's getters and setters, PyTorch's names for
them, and ``state_dict`` / ``load_state_dict`` (all-or-nothing)."""

from __future__ import annotations

import numpy as np

from ..backend import device as _device
from ..backend import sync as _sync
from .scaler_rules import check_attr, is_int


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

    get_scale = get_loss_scaling  # PyTorch's name; 1.0 when disabled (Paddle 3.x: 0.0)

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
        self._incr_every_n_steps = check_attr("incr_every_n_steps", new_incr_every_n_steps)

    # PyTorch's names for the same three settings
    def get_growth_factor(self) -> float:
        return self._incr_ratio

    def set_growth_factor(self, new_factor: float) -> None:
        self.set_incr_ratio(new_factor)

    def get_backoff_factor(self) -> float:
        return self._decr_ratio

    def set_backoff_factor(self, new_factor: float) -> None:
        self.set_decr_ratio(new_factor)

    def get_growth_interval(self) -> int:
        return self._incr_every_n_steps

    def set_growth_interval(self, new_interval: int) -> None:
        self.set_incr_every_n_steps(new_interval)

    def get_decr_every_n_nan_or_inf(self) -> int:
        return self._decr_every_n_nan_or_inf

    def set_decr_every_n_nan_or_inf(self, new_decr_every_n_nan_or_inf: int) -> None:
        n = check_attr("decr_every_n_nan_or_inf", new_decr_every_n_nan_or_inf)
        self._decr_every_n_nan_or_inf = n

    # ---- checkpoints --------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Paddle's keys; ``scale`` is a float32 NumPy array of shape [1]. ``{}`` if disabled."""
        if not self._enable:
            return {}
        _sync.host_read("GradScaler.state_dict()")
        good, bad, _ = (int(c) for c in _device.asnumpy(self._counters))
        return {
            "scale": _device.asnumpy(self._scale._data).copy(),
            "incr_ratio": self._incr_ratio,
            "decr_ratio": self._decr_ratio,
            "incr_every_n_steps": self._incr_every_n_steps,
            "decr_every_n_nan_or_inf": self._decr_every_n_nan_or_inf,
            "incr_count": good,
            "decr_count": bad,
            "use_dynamic_loss_scaling": self._use_dynamic_loss_scaling,
        }

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore :meth:`state_dict`'s output; all-or-nothing (checked before any change).

        Raises:
            RuntimeError: the dict is empty (saved from a disabled scaler).
            ValueError: missing or unexpected keys, or an invalid value.
        """
        if not self._enable:
            return
        if not state_dict:
            raise RuntimeError(
                "The input state dict is empty, possibly because it was saved from a disabled "
                "instance of GradScaler."
            )
        sd, expected = dict(state_dict), list(self.state_dict())
        missing = [k for k in expected if k not in sd]
        unexpected = [k for k in sd if k not in expected]
        if missing or unexpected:
            raise ValueError(
                f"GradScaler.load_state_dict: missing keys {missing}, unexpected keys "
                f"{unexpected}; expected exactly {expected}. Nothing was loaded."
            )
        scale = np.asarray(sd["scale"], dtype=np.float64).reshape(-1)
        if scale.size != 1:
            raise ValueError(f"state dict 'scale' must hold one value, got shape {scale.shape}")
        scale = self._checked_scale(float(scale[0]), "state dict 'scale'")
        for key in ("incr_ratio", "decr_ratio", "incr_every_n_steps", "decr_every_n_nan_or_inf"):
            sd[key] = check_attr(key, sd[key])
        for key, limit in (
            ("incr_count", "incr_every_n_steps"),
            ("decr_count", "decr_every_n_nan_or_inf"),
        ):
            if not (is_int(sd[key]) and 0 <= sd[key] < sd[limit]):
                raise ValueError(
                    f"state dict {key!r} must be an integer in [0, {limit}), got {sd[key]!r}"
                )
        if not isinstance(sd["use_dynamic_loss_scaling"], (bool, np.bool_)):
            raise ValueError("state dict 'use_dynamic_loss_scaling' must be a bool")
        # Everything checked: now change state.
        self._init_loss_scaling = scale
        self._scale._data[...] = scale
        self._incr_ratio, self._decr_ratio = sd["incr_ratio"], sd["decr_ratio"]
        self._incr_every_n_steps = sd["incr_every_n_steps"]
        self._decr_every_n_nan_or_inf = sd["decr_every_n_nan_or_inf"]
        self._counters[...] = _device.to_place(
            np.array([sd["incr_count"], sd["decr_count"], 0], "int32"), self._scale.place
        )
        self._use_dynamic_loss_scaling = bool(sd["use_dynamic_loss_scaling"])
