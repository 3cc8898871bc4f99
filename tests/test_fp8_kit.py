"""The FP8 testing kit (``minitorch_amp.testing.fp8*``) and the properties it exists for.

1. The landmarks are ``ml_dtypes``' own, the strategies reach every edge they promise (448,
   57344, the smallest subnormals, every NaN encoding, the values that round up into
   overflow), and the assertions count FP8 ulps the way the formats space their values.
2. The casts, checked with the kit: a plain cast is correctly rounded or overflows exactly
   where the format says; a saturating one never overflows.
3. The scaling recipe (``amp/fp8/scaling.py``, Transformer Engine's formulas), as
   properties: a tensor cast with the scale of its own amax never overflows, for any margin
   and format; and what a too-short amax history costs when spikes arrive: with 'max', a
   history at least as long as the spikes' period absorbs every spike after the first, a
   shorter one (or 'most_recent') lets every spike saturate.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minitorch_amp.amp.fp8.recipe import DelayedScaling
from minitorch_amp.amp.fp8.scaling import (
    ScalingState,
    current_scale,
    update_amax_history_and_scale,
)
from minitorch_amp.backend.fp8 import to_fp8
from minitorch_amp.testing import (
    FP8_EDGE_VALUES,
    assert_fp8_bit_equal,
    assert_fp8_close,
    fp8,
    fp8_error_in_ulps,
    fp8_ulp_distance,
    fp8_values,
    fp32_values_near_fp8_edges,
)
from minitorch_amp.testing.fp8 import E4M3, E5M2

FORMATS = [E4M3, E5M2]
IDS = ["e4m3", "e5m2"]

# --- 1. the kit ---------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
def test_the_landmarks_are_ml_dtypes_own(fmt):
    info = ml_dtypes.finfo(fmt.dtype)
    assert float(info.max) == fmt.MAX
    assert float(info.smallest_normal) == fmt.SMALLEST_NORMAL
    assert float(info.smallest_subnormal) == fmt.SMALLEST_SUBNORMAL
    assert float(info.eps) == fmt.EPSILON
    values = fmt.values()
    assert sorted(np.flatnonzero(np.isnan(values)).tolist()) == list(fmt.NAN_BITS)
    assert sorted(np.flatnonzero(np.isinf(values)).tolist()) == list(fmt.INF_BITS)


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
def test_overflows_says_where_a_plain_cast_overflows(fmt):
    below, at, above = (
        np.nextafter(np.float32(fmt.OVERFLOW_THRESHOLD), np.float32(0)),
        np.float32(fmt.OVERFLOW_THRESHOLD),
        np.nextafter(np.float32(fmt.OVERFLOW_THRESHOLD), np.float32(np.inf)),
    )
    with np.errstate(over="ignore", invalid="ignore"):
        for x in (below, at, above, -at, -above):
            cast = np.float32(x).astype(fmt.dtype).astype(np.float64)
            assert fmt.overflows(x) == (not np.isfinite(cast)), x


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
def test_fp8_values_reach_every_landmark_and_every_nan_encoding(fmt):
    edges = FP8_EDGE_VALUES[fmt.dtype]
    bits = {int(np.array(v).view(np.uint8)) for v in edges}
    assert set(fmt.NAN_BITS) | set(fmt.INF_BITS) <= bits
    magnitudes = {abs(float(v)) for v in edges if np.isfinite(float(v))}
    assert {fmt.MAX, fmt.SMALLEST_SUBNORMAL, fmt.SMALLEST_NORMAL, 0.0} <= magnitudes

    @given(fp8_values(fmt.dtype, allow_nan=False, allow_infinity=False, allow_subnormal=False))
    @settings(max_examples=60)
    def only_normal_finite(v):
        assert v.dtype == fmt.dtype and (v == 0 or fmt.SMALLEST_NORMAL <= abs(float(v)) <= fmt.MAX)

    only_normal_finite()


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
def test_adjacent_bytes_are_one_ulp_apart_and_zeros_are_the_same_point(fmt):
    values = fmt.values()[:128]
    finite = values[np.isfinite(values)]
    assert np.all(fp8_ulp_distance(finite[:-1], finite[1:], fmt.dtype) == 1)
    assert fp8_ulp_distance(0.0, -0.0, fmt.dtype) == 0
    assert fp8_ulp_distance(-fmt.SMALLEST_SUBNORMAL, fmt.SMALLEST_SUBNORMAL, fmt.dtype) == 2
    assert np.isnan(fp8_ulp_distance(np.nan, 1.0, fmt.dtype))


def test_the_assertions_speak_fp8_ulps_and_bytes():
    x = np.float32([1.0, 448.0]).astype(E4M3.dtype)
    assert fp8_error_in_ulps(x, [1.0625, 480.0]).tolist() == [0.5, 1.0]  # spacings 1/8, 32
    assert_fp8_close(x, [1.0625, 464.0])
    with pytest.raises(AssertionError, match=r"actual 448.0 \(0x7E\), expected 480.0: 1 ulps"):
        assert_fp8_close(x, [1.0, 480.0])
    assert_fp8_bit_equal(x.view(np.uint8), x, dtype="float8_e4m3fn")  # storage, named format
    with pytest.raises(AssertionError, match=r"0x00.*0x80"):
        assert_fp8_bit_equal(
            np.float32([0.0]).astype(E5M2.dtype), np.float32([-0.0]).astype(E5M2.dtype)
        )
    with pytest.raises(TypeError, match="pass dtype="):
        assert_fp8_close(np.uint8([1]), [1.0])


# --- 2. the casts, checked with the kit ---------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
def test_a_plain_cast_rounds_correctly_or_overflows_exactly_where_the_format_says(fmt):
    @given(fp32_values_near_fp8_edges(fmt.dtype))
    @settings(max_examples=300)
    def check(x):
        with np.errstate(over="ignore", invalid="ignore"):
            out = to_fp8(np.array([x]), fmt.dtype)
        if fmt.overflows(x):
            assert not np.isfinite(out.astype(np.float32)[0])
        else:
            assert_fp8_close(out, [float(x)], max_ulps=0.5)

    check()


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
def test_a_saturating_cast_never_overflows(fmt):
    @given(fp32_values_near_fp8_edges(fmt.dtype, max_ulps=4))
    @settings(max_examples=200)
    def check(x):
        out = to_fp8(np.array([x]), fmt.dtype, saturate=True).astype(np.float64)[0]
        assert abs(out) <= fmt.MAX
        if fmt.overflows(x):
            assert out == np.copysign(fmt.MAX, x)

    check()


# --- 3. the scaling recipe ----------------------------------------------------------------


def log_uniform_tensors(min_exp: int = -100, max_exp: int = 100):
    """float32 vectors whose magnitudes spread over many binades, signs mixed, zeros too."""
    magnitudes = st.lists(st.floats(min_exp, max_exp), min_size=1, max_size=16)
    signs = st.lists(st.sampled_from([-1.0, 0.0, 1.0]), min_size=16, max_size=16)
    return st.tuples(magnitudes, signs).map(
        lambda ms: (np.exp2(ms[0]) * np.array(ms[1][: len(ms[0])])).astype(np.float32)
    )


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
@given(x=log_uniform_tensors(), margin=st.integers(0, 3))
@settings(max_examples=150, deadline=None)
def test_a_cast_with_the_scale_of_its_own_amax_never_overflows(fmt, x, margin):
    amax = np.abs(x).max(keepdims=True).reshape(1).astype(np.float32)
    for scale in (
        current_scale(amax, fmt.MAX, margin),  # current scaling
        delayed_scale_after(amax, fmt.MAX, margin),  # delayed, this amax in the history
    ):
        with np.errstate(over="ignore", invalid="ignore"):
            plain = to_fp8(x * scale, fmt.dtype).astype(np.float64)  # no saturation
        assert np.all(np.isfinite(plain)), (x, scale)
        if amax[0] > 0:  # the amax lands within one FP8 rounding of MAX / 2**margin
            top = np.abs(plain).max()
            assert_fp8_close(np.array([top]).astype(fmt.dtype), [fmt.MAX / 2.0**margin])


TINY_AMAX = np.float32([7.523164e-37])  # 448 / it is beyond float32: the scale would be inf


@pytest.mark.parametrize("scale_of", ["current", "delayed"])
def test_a_tiny_amax_gets_the_largest_float32_scale_not_inf(scale_of):
    x = -TINY_AMAX
    if scale_of == "current":
        scale = current_scale(TINY_AMAX, E4M3.MAX)
    else:
        scale = delayed_scale_after(TINY_AMAX, E4M3.MAX, 0)
    assert scale[0] == np.finfo(np.float32).max
    assert np.isfinite(to_fp8(x * scale, E4M3.dtype).astype(np.float32)).all()


def delayed_scale_after(amax, fp8_max, margin):
    history = np.array([amax[0], 0.0, 0.0], np.float32)  # this step's amax in slot 0
    scale, scale_inv = np.ones(1, np.float32), np.ones(1, np.float32)
    update_amax_history_and_scale(history, scale, scale_inv, fp8_max, margin, "max")
    return scale


def run_spikes(recipe, base: float, factor: float, period: int, steps: int) -> list[bool]:
    """Cast a tensor of amax ``base`` each step, ``base * factor`` every ``period``-th step
    from step ``period - 1`` on; return, for each spike, whether the cast saturated it."""
    state = ScalingState(recipe, "float8_e4m3fn", np)
    clipped = []
    for step in range(steps):
        spike = step % period == period - 1
        amax = base * factor if spike else base
        scale_used = float(state.scale[0])
        state.cast(np.array([amax, -amax / 3], np.float32))
        if spike:
            clipped.append(amax * scale_used > E4M3.OVERFLOW_THRESHOLD)
    return clipped


@given(
    base=st.floats(-20, 20).map(lambda e: float(2.0**e)),
    factor=st.floats(3.0, 1000.0),
    period=st.integers(2, 8),
    history=st.integers(1, 12),
)
@settings(max_examples=60, deadline=None)
def test_a_history_shorter_than_the_spike_period_lets_every_spike_saturate(
    base, factor, period, history
):
    recipe = DelayedScaling(amax_history_len=history, amax_compute_algo="max")
    clipped = run_spikes(recipe, base, factor, period, steps=4 * period)
    assert clipped[0]  # delayed scaling cannot see the first spike coming
    assert all(clipped[1:]) if history < period else not any(clipped[1:])


@given(period=st.integers(2, 8), history=st.integers(1, 12), factor=st.floats(3.0, 1000.0))
@settings(max_examples=30, deadline=None)
def test_most_recent_forgets_every_spike_and_margin_pays_for_them_in_advance(
    period, history, factor
):
    latest = DelayedScaling(amax_history_len=history, amax_compute_algo="most_recent")
    assert all(run_spikes(latest, 1.0, factor, period, steps=3 * period))
    headroom = DelayedScaling(margin=10, amax_compute_algo="most_recent")  # 2**10 > factor
    assert not any(run_spikes(headroom, 1.0, factor, period, steps=3 * period))


def test_the_kit_is_exported_from_minitorch_amp_testing():
    import minitorch_amp.testing as kit

    assert kit.fp8 is fp8 and {"fp8_values", "assert_fp8_close"} <= set(kit.__all__)
