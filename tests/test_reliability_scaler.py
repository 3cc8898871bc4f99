"""The loss scale is a float32 on the device: every way in refuses a value it cannot hold.

A scale float32 cannot hold (1e39 becomes inf, 1e-46 becomes 0) would skip every step
silently, and a scale above ``max_loss_scaling`` would break the rule that the scale never
exceeds it. The constructor, ``set_init_loss_scaling`` and ``load_state_dict`` all refuse
them and change nothing.
"""

from __future__ import annotations

import numpy as np
import pytest

from minitorch_amp import amp

UNHOLDABLE = [1e39, float("inf"), 1e-46, 0.0, -1.0, float("nan")]


@pytest.mark.parametrize("value", UNHOLDABLE)
def test_the_constructor_refuses_a_scale_float32_cannot_hold(value):
    with pytest.raises(ValueError, match="init_loss_scaling"):
        amp.GradScaler(init_loss_scaling=value)


def test_the_constructor_refuses_a_scale_above_its_ceiling():
    with pytest.raises(ValueError, match=r"init_loss_scaling .* max_loss_scaling"):
        amp.GradScaler(init_loss_scaling=2.0**20, max_loss_scaling=2.0**10)


@pytest.mark.parametrize("value", [*UNHOLDABLE, 2.0**30])
def test_set_init_loss_scaling_refuses_and_keeps_the_scale(value):
    scaler = amp.GradScaler(init_loss_scaling=1024.0, max_loss_scaling=2.0**24)
    with pytest.raises(ValueError, match="init_loss_scaling"):
        scaler.set_init_loss_scaling(value)
    assert scaler.get_loss_scaling() == 1024.0 and scaler.get_init_loss_scaling() == 1024.0


@pytest.mark.parametrize("value", [*UNHOLDABLE, 2.0**30])
def test_load_state_dict_refuses_and_loads_nothing(value):
    scaler = amp.GradScaler(init_loss_scaling=1024.0, max_loss_scaling=2.0**24)
    state = scaler.state_dict()
    bad = {**state, "scale": np.array([value], "float64"), "incr_ratio": 4.0}
    with pytest.raises(ValueError, match="scale"):
        scaler.load_state_dict(bad)
    assert scaler.state_dict()["incr_ratio"] == 2.0 and scaler.get_loss_scaling() == 1024.0


def test_the_floor_too_must_be_a_float32_number():
    with pytest.raises(ValueError, match="min_loss_scaling"):
        amp.GradScaler(min_loss_scaling=1e-46)
