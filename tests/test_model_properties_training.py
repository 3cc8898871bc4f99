"""Training-level loss-scale properties (issue 29, item 4) and the model input strategies
(item 3): skipped steps change nothing, skip streaks and the scale stay within bounds, and
each strategy reaches what its documentation says."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.testing import (
    LossScaleError,
    adversarial_tensors,
    assert_loss_scale_healthy,
    bf16,
    check_loss_scale_stream,
    fp16,
    log_uniform_tensors,
    scaled_batches,
)

QUICK = settings(max_examples=15, derandomize=True, database=None, deadline=None)
CALM, HUGE = mt.full([3, 4], 1.0), mt.full([3, 4], 1e5)  # HUGE overflows float16's GEMM


def scaler_1024():
    return amp.GradScaler(init_loss_scaling=1024.0)


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_exactly_k_skips_in_a_row_pass_and_k_plus_1_fail(level):
    stream = [CALM, HUGE, HUGE, CALM, HUGE, HUGE, HUGE, CALM]
    model = nn.Linear(4, 2)
    history = check_loss_scale_stream(
        model, stream[:4], scaler=scaler_1024, level=level, max_skip_streak=2
    )
    assert history.skipped == [False, True, True, False] and history.longest_skip_streak() == 2
    with pytest.raises(LossScaleError, match=r"step 6: 3 steps in a row were skipped") as info:
        check_loss_scale_stream(model, stream, scaler=scaler_1024, level=level, max_skip_streak=2)
    assert info.value.step == 6 and info.value.history.skipped[4:] == [True, True, True]


def test_the_scale_must_stay_in_its_band():
    kwargs = dict(scaler=scaler_1024, scale_band=(1000.0, 4096.0))
    check_loss_scale_stream(nn.Linear(4, 2), [CALM, CALM], **kwargs)
    with pytest.raises(LossScaleError, match=r"step 1: the loss scale 512 left the band"):
        check_loss_scale_stream(nn.Linear(4, 2), [CALM, HUGE], **kwargs)
    check_loss_scale_stream(
        nn.Linear(4, 2), [CALM, HUGE], scaler=scaler_1024, scale_band=(512, 1024)
    )


class StepsAnyway(amp.GradScaler):
    """A broken scaler: it steps the optimizer whatever the gradients hold."""

    def step(self, optimizer):
        optimizer._set_auxiliary_var("found_inf", np.zeros(1, bool))
        return optimizer.step()


def test_a_step_that_changes_parameters_after_an_overflow_is_caught():
    check_loss_scale_stream(nn.Linear(4, 2), [CALM, HUGE], scaler=scaler_1024)  # the real one
    with pytest.raises(LossScaleError, match=r"step 1: a skipped step changed parameter"):
        check_loss_scale_stream(
            nn.Linear(4, 2), [CALM, HUGE], scaler=lambda: StepsAnyway(init_loss_scaling=1024.0)
        )


def test_the_model_given_is_not_trained():
    model = nn.Linear(4, 2)
    before = model.weight.numpy().copy()
    check_loss_scale_stream(model, [CALM, CALM], level="O2")
    assert np.array_equal(model.weight.numpy(), before) and model.weight.dtype == mt.float32


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_searched_stream_of_calm_batches_never_skips(dtype):
    calm = log_uniform_tensors((3, 4), dtype, low_exp=-6, high_exp=6)
    assert_loss_scale_healthy(
        nn.Linear(4, 2),
        st.lists(calm, min_size=1, max_size=6),
        dtype=dtype,
        scaler=lambda: amp.GradScaler(  # bfloat16: Paddle turns a dynamic scale off
            init_loss_scaling=1024.0, use_dynamic_loss_scaling=dtype == "float16"
        ),
        max_skip_streak=0,
        settings=QUICK,
    )


def test_the_search_shrinks_a_stream_to_the_shortest_run_of_skips():
    batches = st.sampled_from([CALM, HUGE])
    with pytest.raises(LossScaleError) as info:
        assert_loss_scale_healthy(
            nn.Linear(4, 2),
            st.lists(batches, min_size=1, max_size=8),
            scaler=scaler_1024,
            max_skip_streak=1,
            settings=settings(QUICK, max_examples=60),
        )
    assert info.value.history.skipped == [True, True]  # shrunk: two huge batches, nothing else


def test_bad_streams_say_what_to_pass():
    with pytest.raises(TypeError, match="batches must be a list of examples"):
        check_loss_scale_stream(nn.Linear(4, 2), CALM)
    with pytest.raises(TypeError, match="streams must be a Hypothesis strategy"):
        assert_loss_scale_healthy(nn.Linear(4, 2), [CALM])


# ---- the input strategies ------------------------------------------------------------------
@pytest.mark.parametrize("dtype, module", [("float16", fp16), ("bfloat16", bf16)])
def test_log_uniform_tensors_reach_subnormals_and_the_values_next_to_max(dtype, module):
    strategy = log_uniform_tensors((4,), dtype)

    def magnitudes(t):
        return np.abs(t.numpy().astype(np.float64))

    first = settings(QUICK, max_examples=100, phases=[Phase.generate])  # no shrinking
    subnormal = find(
        strategy, lambda t: (magnitudes(t) < module.SMALLEST_NORMAL).any(), settings=first
    )
    near_max = find(strategy, lambda t: (magnitudes(t) > module.MAX / 2).any(), settings=first)
    assert magnitudes(subnormal).min() < module.SMALLEST_NORMAL
    assert magnitudes(near_max).max() > module.MAX / 2


@given(x=log_uniform_tensors((3, 5), "float16"))
@settings(QUICK, max_examples=30)
def test_log_uniform_tensors_stay_within_the_dtypes_range(x):
    m = np.abs(x.numpy().astype(np.float64))
    assert x.dtype == mt.float32 and x.shape == [3, 5]
    assert ((m >= fp16.SMALLEST_SUBNORMAL) & (m <= fp16.MAX)).all()


def test_scaled_batches_are_the_batch_times_a_grid_scale_that_shrinks_to_the_smallest():
    batch = mt.to_tensor([[1.0, -2.0], [0.5, 3.0]])
    smallest = find(scaled_batches(batch, low=0.25, high=8.0), lambda x: True)
    assert np.array_equal(smallest.numpy(), batch.numpy() * 0.25)
    big = find(
        scaled_batches(batch, low=0.25, high=8.0, steps_per_octave=4),
        lambda x: np.abs(x.numpy()).max() > 6.0,
    )
    scale = np.abs(big.numpy()).max() / 3.0
    assert scale == pytest.approx(2.0**1.25)  # 0.25 * 2**(k/4): the first grid point past 2


@given(x=adversarial_tensors((2, 6), st.sampled_from([10.0, 1000.0])))
@settings(QUICK, max_examples=30)
def test_adversarial_tensors_point_all_positive_or_have_one_large_element(x):
    v = np.abs(x.numpy()).reshape(-1)
    m = v.max()
    all_positive = (x.numpy() > 0).all() and (v >= m / 2).all()
    one_large = (v == m).sum() == 1 and np.sort(v)[-2] <= 1.0
    assert (all_positive and m <= 1000.0) or (one_large and m in (10.0, 1000.0))


def test_strategies_refuse_bad_arguments_with_what_to_pass():
    with pytest.raises(ValueError, match="dtype must be 'float16' or 'bfloat16'"):
        log_uniform_tensors((2,), "float8")
    with pytest.raises(TypeError, match="shape must be a tuple of ints"):
        log_uniform_tensors("2x3")
    with pytest.raises(ValueError, match="need 0 < low < high"):
        scaled_batches(CALM, low=4.0, high=2.0)
    with pytest.raises(ValueError, match="kinds must be some of"):
        adversarial_tensors((2,), 1.0, kinds=("all_negative",))
