"""The floor warning fires at the update that makes 100 overflowing updates at the floor.

porting.md: "A RuntimeWarning is raised once if steps keep overflowing with the scale at
the floor for 100 updates in a row ... On the CPU it is checked at once." With NumPy the
counter is on the host, so every update checks it; on a GPU it is handed to the deferred
checks every 100 updates (read at the next host read), and may be seen up to 99 updates
later.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import nn, optimizer
from minitorch_amp.amp.grad_scaler import GradScaler


def update_that_warns(scaler: GradScaler, limit: int = 400) -> int | None:
    """Train a tiny model on a NaN loss; the number of the update that warned (1-based)."""
    mt.seed(0)
    model = nn.Linear(2, 1)
    opt = optimizer.SGD(learning_rate=0.1, parameters=model.parameters())
    x = mt.to_tensor(np.array([[1.0, 2.0]], "float32"))
    for update in range(1, limit + 1):
        loss = model(x).sum() * float("nan")
        scaler.scale(loss).backward()
        scaler.step(opt)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            scaler.update()
        opt.clear_grad()
        if any("floor" in str(w.message) for w in caught):
            return update
    return None


@pytest.mark.skipif(mt.device.is_compiled_with_cuda(), reason="the CPU checks at once")
def test_starting_at_the_floor_a_nan_loss_every_step_warns_at_update_100():
    scaler = GradScaler(init_loss_scaling=1.0, min_loss_scaling=1.0)
    assert update_that_warns(scaler) == 100


@pytest.mark.skipif(mt.device.is_compiled_with_cuda(), reason="the CPU checks at once")
def test_from_the_default_scale_a_nan_loss_warns_100_updates_after_reaching_the_floor():
    # 2**15 halves to the floor 1.0 in 15 overflows (GradScaler's decr_every_n_nan_or_inf=1):
    # update 15 is the first of the 100 at the floor, so update 114 warns (it was update 200)
    scaler = GradScaler(init_loss_scaling=2.0**15, min_loss_scaling=1.0)
    assert update_that_warns(scaler) == 15 + 99


@pytest.mark.skipif(mt.device.is_compiled_with_cuda(), reason="the CPU checks at once")
def test_the_floor_warning_is_shown_once():
    scaler = GradScaler(init_loss_scaling=1.0, min_loss_scaling=1.0)
    assert update_that_warns(scaler) == 100
    # the same scaler, 300 more overflowing updates at the floor: no second warning
    assert update_that_warns(scaler, limit=300) is None
