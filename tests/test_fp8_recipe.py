"""FP8 recipes: Transformer Engine's names, defaults and formulas, checked on cases computed
by hand, and the scaling state's update on the device."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.amp.fp8.scaling import (
    ScalingState,
    current_scale,
    update_amax_history_and_scale,
)
from minitorch_amp.backend.dtypes import float8_e4m3fn, float8_e5m2


def f32(*values):
    return np.array(values, dtype=np.float32)


def test_delayed_scaling_has_transformer_engines_names_and_defaults():
    recipe = amp.DelayedScaling()
    assert (recipe.margin, recipe.amax_history_len, recipe.amax_compute_algo) == (0, 1024, "max")
    assert recipe.fp8_format is amp.Format.HYBRID
    assert recipe.dtype(backward=False) == float8_e4m3fn
    assert recipe.dtype(backward=True) == float8_e5m2
    assert amp.DelayedScaling(fp8_format="e4m3").dtype(backward=True) == float8_e4m3fn
    assert amp.Float8CurrentScaling().fp8_format is amp.Format.HYBRID


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fp8_format": "E3M4"}, "use Format.HYBRID"),
        ({"amax_history_len": 0}, "amax_history_len must be an integer >= 1"),
        ({"margin": -1}, "margin must be >= 0"),
        ({"amax_compute_algo": "mean"}, "'max' or 'most_recent'"),
        ({"fp8_format": "E5M2"}, r"as in Transformer Engine\): use Format.HYBRID"),
        ({"fp8_format": amp.Format.E5M2}, "E5M2 for every tensor is not supported"),
        ({"margin": 135}, r"margin 135 leaves no usable scale.*margin <= 134"),
        ({"margin": float("inf")}, "leaves no usable scale"),
        ({"amax_history_len": np.int64(0)}, "amax_history_len must be an integer >= 1"),
    ],
)
def test_bad_settings_say_what_to_use(kwargs, message):
    with pytest.raises(ValueError, match=message):
        amp.DelayedScaling(**kwargs)


def test_pure_e5m2_current_scaling_is_refused_too():
    with pytest.raises(ValueError, match=r"use Format\.HYBRID"):
        amp.Float8CurrentScaling(fp8_format="E5M2")


def test_the_largest_margin_still_gives_a_finite_scale_above_zero():
    recipe = amp.DelayedScaling(margin=134, amax_history_len=1)
    state = ScalingState(recipe, float8_e4m3fn, np)
    state.cast(f32(1.0, -2.0))
    assert 0 < state.scale[0] < np.inf


def test_numpy_integers_are_taken_as_the_python_numbers_they_equal():
    recipe = amp.DelayedScaling(margin=np.int64(1), amax_history_len=np.int64(16))
    assert recipe == amp.DelayedScaling(margin=1, amax_history_len=16)
    assert type(recipe.margin) is int and type(recipe.amax_history_len) is int
    assert hash(recipe) == hash(amp.DelayedScaling(margin=1, amax_history_len=16))


def test_a_bad_recipe_leaves_the_fp8_region_as_it_was():
    with amp.fp8_autocast(recipe=amp.DelayedScaling(amax_history_len=4)) as region:
        with pytest.raises(TypeError, match="DelayedScaling"):
            amp.fp8_autocast(recipe="HYBRID")
        with pytest.raises(ValueError, match="amax_history_len"):
            amp.fp8_autocast(recipe=amp.DelayedScaling(amax_history_len=0))
        assert amp.fp8.is_fp8_enabled() and region.recipe.amax_history_len == 4
    assert not amp.fp8.is_fp8_enabled()


def test_max_algorithm_uses_the_largest_amax_in_the_history_and_rotates_it():
    # TE: amax = max(history) = 8; scale = 448 / 8 / 2**1 = 28; roll(-1), first entry zeroed
    history, scale, scale_inv = f32(2.0, 8.0, 4.0), f32(1.0), f32(1.0)
    update_amax_history_and_scale(history, scale, scale_inv, 448.0, 1, "max")
    assert scale.tolist() == [28.0] and scale_inv.tolist() == [np.float32(1 / 28)]
    assert history.tolist() == [0.0, 4.0, 2.0]


def test_most_recent_algorithm_uses_this_steps_amax():
    # amax = history[0] = 2; scale = 57344 / 2 = 28672 (E5M2, margin 0)
    history, scale, scale_inv = f32(2.0, 8.0, 4.0), f32(1.0), f32(1.0)
    update_amax_history_and_scale(history, scale, scale_inv, 57344.0, 0, "most_recent")
    assert scale.tolist() == [28672.0] and history.tolist() == [0.0, 4.0, 2.0]


@pytest.mark.parametrize("amax", [0.0, np.inf, np.nan])
def test_a_zero_or_non_finite_amax_keeps_the_old_scale(amax):
    history, scale, scale_inv = f32(amax), f32(3.0), f32(1 / 3)
    update_amax_history_and_scale(history, scale, scale_inv, 448.0, 0, "most_recent")
    assert scale.tolist() == [3.0] and history.tolist() == [0.0]


def test_max_over_a_history_holding_a_nan_keeps_the_scale():
    """A difference from TE (docs/porting.md): its kernel's fmaxf skips the NaN, which gives
    448 / 2 = 224 here."""
    history, scale, scale_inv = f32(2.0, np.nan, 1.0), f32(3.0), f32(1 / 3)
    update_amax_history_and_scale(history, scale, scale_inv, 448.0, 0, "max")
    assert scale.tolist() == [3.0]


def test_a_tensor_cast_twice_in_a_step_rolls_its_history_twice():
    """A difference from TE (docs/porting.md): the update follows each cast, so a Linear
    called twice in one region records both inputs' amaxes, one entry each."""
    mt.seed(0)
    layer = nn.Linear(2, 2)
    recipe = amp.DelayedScaling(amax_history_len=4, amax_compute_algo="most_recent")
    with amp.fp8_autocast(recipe=recipe):
        layer(mt.full([1, 2], 10.0))
        layer(mt.full([1, 2], 1.0))
    history = amp.fp8_meta(layer.weight).input.amax_history.tolist()
    assert history == [0.0, 0.0, 10.0, 1.0]  # (TE: one entry, the larger amax, 10)
    assert amp.fp8_meta(layer.weight).input.scale.tolist() == [448.0]  # from the last: 1


def test_a_tiny_amax_gets_float32s_largest_scale_not_inf():
    # 448 / 1e-37 overflows float32; Transformer Engine clamps the scale to float32's max
    history, scale, scale_inv = f32(1e-37), f32(1.0), f32(1.0)
    update_amax_history_and_scale(history, scale, scale_inv, 448.0, 0, "max")
    largest = np.finfo(np.float32).max
    assert scale.tolist() == [largest] and current_scale(f32(1e-37), 448.0).tolist() == [largest]


def test_current_scale_is_fp8_max_over_this_tensors_amax():
    assert current_scale(f32(7.0), 448.0).tolist() == [64.0]
    assert current_scale(f32(0.0), 448.0).tolist() == [1.0]
    assert current_scale(f32(np.nan), 448.0).tolist() == [1.0]


def test_delayed_scaling_casts_with_the_previous_steps_scale():
    state = ScalingState(amp.DelayedScaling(amax_history_len=3), float8_e4m3fn, np)
    steps = [f32(1.0, -14.0), f32(7.0), f32(1000.0), f32(2.0), f32(2.0), f32(2.0)]
    scales, largest = [], []
    for x in steps:
        out, scale_inv = state.cast(x)
        scales.append(round(float(1 / scale_inv[0]), 4))
        largest.append(float(np.abs(out.astype(np.float32)).max()))
    # step 0 casts with scale 1; then 448 / 14 = 32 while 14 is in the history; the spike of
    # 1000 is cast with 32 and saturates at 448; then 448 / 1000 for as long as the history
    # (3 amaxes) holds it; after that 448 / 2 = 224 for the next step
    assert scales == [1.0, 32.0, 32.0, 0.448, 0.448, 0.448]
    assert largest == [14.0, 224.0, 448.0, 0.875, 0.875, 0.875]
    assert state.scale.tolist() == [224.0]


def test_current_scaling_casts_each_tensor_with_its_own_scale():
    state = ScalingState(amp.Float8CurrentScaling(), float8_e5m2, np)
    out, scale_inv = state.cast(f32(1000.0, -250.0))
    assert out.astype(np.float32).tolist() == [57344.0, -14336.0]
    assert scale_inv.tolist() == [np.float32(1) / np.float32(57.344)]  # 1 / scale


def test_the_state_lives_in_float32_arrays_on_the_tensors_device():
    state = ScalingState(amp.DelayedScaling(amax_history_len=5), float8_e4m3fn, np)
    arrays = (state.amax_history, state.scale, state.scale_inv)
    assert [(a.dtype, a.shape) for a in arrays] == [
        (np.float32, (5,)),
        (np.float32, (1,)),
        (np.float32, (1,)),
    ]
