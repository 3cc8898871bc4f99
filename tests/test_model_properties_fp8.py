"""The model properties under FP8 (issue 29: "every property also works in FP8"):
``dtype='float8'`` runs ``auto_cast(level, 'bfloat16')`` with ``fp8_autocast(recipe)``. FP8's
casts saturate: a search names the ``cast_to_fp8`` whose plain conversion overflowed, which
happens with delayed scaling's first (unscaled) step and never with current scaling."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import settings
from test_model_properties import BATCH, IN, INPUTS, MLP, SEARCH, ones_linear

import minitorch_amp as mt
from minitorch_amp import amp
from minitorch_amp.backend.dtypes import FP8_MAX, float8_e4m3fn, float8_e5m2
from minitorch_amp.testing import (
    AmpDivergenceError,
    AmpNotFiniteError,
    assert_close_to_fp32,
    assert_finite_under_amp,
    check_close_to_fp32,
    check_finite_under_amp,
    check_loss_scale_stream,
    scaled_batches,
)
from minitorch_amp.testing.model_properties import ModelCopies
from minitorch_amp.testing.training_properties import LossScaleError

E4M3_MAX, E5M2_MAX = FP8_MAX[float8_e4m3fn], FP8_MAX[float8_e5m2]  # 448, 57344
BATCHES = scaled_batches(mt.ones([BATCH, IN]), low=2.0**-8, high=2.0**24)


def found(info) -> float:
    return float(np.abs(info.value.report.example[0]).max())


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_delayed_scalings_unscaled_first_step_saturates_e4m3_at_448_and_names_the_cast(level):
    with pytest.raises(AmpNotFiniteError) as info:
        assert_finite_under_amp(
            ones_linear(), BATCHES, level=level, dtype="float8", settings=SEARCH
        )
    report = info.value.report
    assert E4M3_MAX / 1.1 <= found(info) <= 1.1 * E4M3_MAX and report.examples_run <= 200
    op = report.op
    assert (op.op, op.feeds, op.phase) == ("cast_to_fp8", ("fp8_linear", 0, "input"), "forward")
    assert op.occurrence == 1  # cast #0 is the weight's (ones: no overflow)
    assert op.dtype == "float8_e4m3fn" and "NaN" in op.output
    assert op.inputs[0].startswith("bf16[2, 4] in [4")  # what the cast read, unscaled
    assert (report.fp32.op, report.fp32.occurrence) == ("linear", 0)  # the GEMM it fed
    assert report.fp32.inputs[0].startswith("fp32[2, 4]")
    text = str(info.value)
    assert "fp8_autocast" in text and "overflowed): the input of 'fp8_linear' #0" in text


def test_the_output_gradients_e5m2_cast_saturates_in_backward():
    """``loss = mean(y * y.detach()) * S``: ``dL/dy = S * y / (BATCH * OUT) = S * 4s / 6``
    rounds past E5M2's largest value first when ``S = 2**10``: at ``s = 90``, below E4M3's
    448 (the plain conversion rounds to inf from 61440, halfway from 57344 to 2**16)."""
    with pytest.raises(AmpNotFiniteError) as info:
        assert_finite_under_amp(
            ones_linear(),
            BATCHES,
            dtype="float8",
            backward=True,
            loss_scale=2.0**10,
            loss_fn=lambda y: (y * y.detach()).mean(),
            settings=SEARCH,
        )
    threshold = (E5M2_MAX + 2.0**16) / 2 * 6 / (4 * 2.0**10)
    assert threshold / 1.1 <= found(info) <= 1.1 * threshold
    op = info.value.report.op
    assert op.feeds == ("fp8_linear_grad", 0, "output gradient") and op.phase == "backward"
    assert op.dtype == "float8_e5m2" and "inf" in op.output
    fp32 = info.value.report.fp32  # float32's gradient in, and the weight's gradient out
    assert fp32.op == "linear_grad" and fp32.output.startswith("fp32[4, 3]")


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_current_scaling_never_saturates_so_the_same_search_passes(level):
    recipe = amp.Float8CurrentScaling()
    assert_finite_under_amp(
        ones_linear(), BATCHES, level=level, dtype="float8", fp8_recipe=recipe, settings=SEARCH
    )


def test_every_example_starts_from_fresh_scaling_state_and_the_model_is_unchanged():
    layer, x = ones_linear(), mt.full([BATCH, IN], 1000.0)
    copies = ModelCopies(layer, "O1", "float8")  # as a search shares them between examples
    for _ in range(2):  # a carried history (amax 1000) would scale the second run down
        with pytest.raises(AmpNotFiniteError):
            check_finite_under_amp(layer, x, dtype="float8", copies=copies)
    assert amp.fp8_meta(layer.weight) is None
    check_finite_under_amp(layer, mt.full([BATCH, IN], 400.0), dtype="float8")


def test_a_saturating_weight_cast_is_named_before_the_amp_cast_that_follows_it():
    layer = ones_linear()
    layer.weight.set_value(np.full((IN, 3), 1000.0, "float32"))  # cast #0 saturates
    x = mt.full([BATCH, IN], float("inf"))  # AMP's cast of x to bfloat16 shows next: inf
    with pytest.raises(AmpNotFiniteError) as info:
        check_finite_under_amp(layer, x, dtype="float8")
    op = info.value.report.op
    assert (op.op, op.occurrence, op.feeds) == ("cast_to_fp8", 0, ("fp8_linear", 0, "weight"))
    assert op.inputs == ("fp32[4, 3] in [1000, 1000]",)


def test_a_gemm_whose_result_overflows_is_named_with_its_float32_twin():
    x = mt.full([BATCH, IN], 1e38)  # current scaling casts it; 4e38 is past float32's range
    recipe = amp.Float8CurrentScaling()
    with pytest.raises(AmpNotFiniteError) as info:
        check_finite_under_amp(ones_linear(), x, level="O2", dtype="float8", fp8_recipe=recipe)
    report = info.value.report
    assert (report.op.op, report.op.dtype, report.op.feeds) == ("fp8_linear", "bf16", ())
    assert (report.fp32.op, report.fp32.occurrence) == ("linear", 0)
    assert "the float32 run, same op: 'linear' #0" in str(info.value)


def test_an_inf_that_fp8_would_saturate_into_a_finite_output_is_still_reported():
    x = mt.full([BATCH, IN], float("inf"))
    with amp.fp8_autocast():
        assert np.isfinite(ones_linear()(x).numpy()).all()  # the saturating cast hides it
    with pytest.raises(AmpNotFiniteError):
        check_finite_under_amp(ones_linear(), x, dtype="float8")
    check_loss_scale_stream(ones_linear(), [x], dtype="float8")  # finite gradients: passes


# ---- the differential property -------------------------------------------------------------
def test_an_mlp_in_fp8_stays_within_the_default_bound():
    for recipe in (None, amp.Float8CurrentScaling()):
        assert_close_to_fp32(
            MLP(),
            INPUTS,
            dtype="float8",
            fp8_recipe=recipe,
            settings=settings(SEARCH, max_examples=5),
        )


def test_a_bound_bfloat16_meets_and_fp8s_three_mantissa_bits_cannot_names_that_layer():
    bound = {"fc2": 2.0**-6}  # the other layers: the float8 default
    x = mt.randn([4, 16])
    check_close_to_fp32(MLP(), x, dtype="bfloat16", rtol=bound)
    with pytest.raises(AmpDivergenceError) as info:
        check_close_to_fp32(MLP(), x, dtype="float8", rtol=bound)
    assert info.value.report.layer == "fc2" and info.value.report.bound == 2.0**-6
    assert info.value.report.layers_checked[:3] == ("fc1", "act", "fc2")


def test_a_layer_whose_input_saturates_at_delayed_scalings_first_step_is_the_first_to_diverge():
    model = MLP()
    model.fc1.weight.set_value(model.fc1.weight.numpy() * 1000)  # fc2 reads values past 448
    x = mt.randn([4, 16])
    with pytest.raises(AmpDivergenceError) as info:
        check_close_to_fp32(model, x, dtype="float8")
    assert info.value.report.layer == "fc2" and info.value.report.error > 0.5
    check_close_to_fp32(model, x, dtype="float8", fp8_recipe=amp.Float8CurrentScaling())


# ---- the training property -----------------------------------------------------------------
def test_fp8_training_needs_no_scaler_and_a_saturating_stream_stays_finite():
    batches = [mt.full([3, IN], v) for v in (1.0, 1e4, 1.0)]  # 1e4: past the history's scale
    history = check_loss_scale_stream(ones_linear(), batches, dtype="float8")
    assert history.skipped == [False] * 3 and history.scales == [1.0] * 3


def test_fp8_gradients_that_are_not_finite_fail_with_no_scaler_to_skip_them():
    batches = [mt.full([3, IN], 1.0), mt.full([3, IN], float("nan"))]
    with pytest.raises(LossScaleError, match="no enabled GradScaler skipped the step") as info:
        check_loss_scale_stream(ones_linear(), batches, dtype="float8")
    assert info.value.step == 1 and info.value.history.skipped == [False, True]


# ---- what bad input gets -------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(dtype="float8_e4m3fn"), ValueError, "'float16', 'bfloat16' or 'float8'"),
        (dict(fp8_recipe=amp.DelayedScaling()), ValueError, "fp8_recipe= goes with dtype='float8'"),
        (dict(dtype="float8", fp8_recipe="hybrid"), TypeError, r"amp\.DelayedScaling\(\.\.\.\)"),
    ],
)
@pytest.mark.parametrize("prop", ["finite", "close", "stream"])
def test_bad_fp8_arguments_say_what_to_pass(kwargs, error, match, prop):
    layer = ones_linear()
    before = layer.weight.numpy().copy()
    with pytest.raises(error, match=match):
        if prop == "finite":
            assert_finite_under_amp(layer, BATCHES, **kwargs)
        elif prop == "close":
            assert_close_to_fp32(layer, BATCHES, **kwargs)
        else:
            check_loss_scale_stream(layer, [mt.ones([2, IN])], **kwargs)
    assert np.array_equal(layer.weight.numpy(), before) and amp.fp8_meta(layer.weight) is None
