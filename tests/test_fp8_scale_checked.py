"""A scaling state checks the delayed update's arguments once, not at every cast, and again
whenever they change: another array, an array changed in place, another recipe knob. On the
CPU, with CuPy stood in for (``benchmarks/gpu_stand_in.py``: the update takes device arrays)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp.amp.fp8.recipe import DelayedScaling
from minitorch_amp.amp.fp8.scaling import ScalingState
from minitorch_amp.backend import fp8_scale
from minitorch_amp.backend.dtypes import FP8_MAX, float8_e4m3fn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import gpu_stand_in


@pytest.fixture
def state(monkeypatch):
    """A delayed-scaling state on the stand-in GPU; ``state.checks`` counts the checks."""
    with gpu_stand_in.stand_in() as stand:
        mt.set_device("gpu:0")
        cp = stand.cupy
        s = ScalingState(DelayedScaling(), float8_e4m3fn, cp)
        s.slot, s.count = cp.zeros(1, dtype=np.float32), cp.zeros(1, dtype=np.uint32)
        s.checks = []
        real = fp8_scale.check_in_cast
        monkeypatch.setattr(fp8_scale, "check_in_cast", lambda *a: s.checks.append(a) or real(*a))
        s.cp = cp
        yield s


def args_of(state, fp8_max=None):
    fp8_max = fp8_max if fp8_max is not None else float(FP8_MAX[np.dtype(state.dtype)])
    return (*state._update_args(fp8_max), state.slot, state.count)


def test_the_same_arguments_are_checked_once(state):
    for _ in range(3):
        state._check_once(args_of(state))
    assert len(state.checks) == 1


def test_another_array_or_knob_is_checked_again_and_a_wrong_one_refused(state):
    state._check_once(args_of(state))
    state.recipe = DelayedScaling(margin=1)  # another knob: checked again
    state._check_once(args_of(state))
    assert len(state.checks) == 2
    state.scale = state.cp.ones(1, dtype=np.float64)  # another array, of the wrong dtype
    with pytest.raises(TypeError, match="scale must be float32"):
        state._check_once(args_of(state))
    state.scale = state.cp.ones(1, dtype=np.float32)
    state._check_once(args_of(state))
    state.amax_history.shape = (1, state.amax_history.size)  # changed in place: 2-D now
    with pytest.raises(ValueError, match="amax_history must be 1-D"):
        state._check_once(args_of(state))
    assert len(state.checks) == 5
