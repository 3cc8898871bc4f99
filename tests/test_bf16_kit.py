"""The bfloat16 half of the testing kit: landmarks, strategies, ULPs, tolerances."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest
from hypothesis import find, given
from hypothesis import strategies as st

from minitorch_amp.testing import assert_close, bf16, ulp_distance
from minitorch_amp.testing.strategies import (
    BF16_EDGE_VALUES,
    bf16_values,
    fp32_values_near_bf16_edges,
    tensors,
)

BF16 = ml_dtypes.bfloat16


def from_bits(bits: int) -> float:
    return float(np.uint16(bits).view(BF16))


def test_bf16_constants_are_the_bit_pattern_landmarks():
    assert from_bits(0x0001) == bf16.SMALLEST_SUBNORMAL
    assert from_bits(0x007F) == bf16.LARGEST_SUBNORMAL
    assert from_bits(0x0080) == bf16.SMALLEST_NORMAL
    assert from_bits(0x7F7F) == bf16.MAX
    assert from_bits(0x3F81) == 1.0 + bf16.EPSILON
    assert bf16.OVERFLOW_THRESHOLD == (bf16.MAX + 2.0**128) / 2
    assert bf16.UNDERFLOW_THRESHOLD == bf16.SMALLEST_SUBNORMAL / 2
    info = ml_dtypes.finfo(BF16)
    assert (
        float(info.max), float(info.eps), float(info.smallest_normal)
    ) == (bf16.MAX, bf16.EPSILON, bf16.SMALLEST_NORMAL)  # fmt: skip


@given(bits=st.integers(0, 0x7F7E))
def test_spacing_is_the_distance_to_the_next_bfloat16(bits):
    assert bf16.spacing(from_bits(bits)) == from_bits(bits + 1) - from_bits(bits)


@pytest.mark.parametrize("bad", [np.inf, np.nan, 3.4e38])
def test_spacing_and_half_ulp_refuse_values_out_of_range(bad):
    with pytest.raises(ValueError):
        bf16.spacing(bad)
    with pytest.raises(ValueError):
        bf16.half_ulp(bad)


@pytest.mark.parametrize("edge", BF16_EDGE_VALUES[:-1], ids=str)
def test_bf16_values_reaches_every_edge_value_bit_for_bit(edge):
    found = find(bf16_values(), lambda b: b.view(np.uint16) == edge.view(np.uint16))
    assert found.view(np.uint16) == edge.view(np.uint16)


@given(b=bf16_values(allow_nan=False, allow_infinity=False, allow_subnormal=False))
def test_bf16_values_flags_exclude_what_they_say(b):
    value = float(b)
    assert np.isfinite(value) and (value == 0 or abs(value) >= bf16.SMALLEST_NORMAL)


@given(x=fp32_values_near_bf16_edges(max_ulps=1))
def test_fp32_values_near_bf16_edges_are_float32(x):
    assert isinstance(x, np.float32)


def test_fp32_values_near_bf16_edges_reaches_the_round_to_inf_threshold():
    x = find(fp32_values_near_bf16_edges(), lambda x: np.isinf(x.astype(BF16)))
    assert abs(float(x)) == bf16.OVERFLOW_THRESHOLD


@given(x=tensors(shape=(3, 2), dtype="bfloat16"))
def test_tensors_of_bfloat16(x):
    assert x.dtype == "bfloat16" and x.shape == [3, 2]
    assert np.isfinite(x.numpy().astype(np.float32)).all()


def test_tensors_of_bfloat16_hold_each_drawn_value_bit_for_bit_signalling_nans_included():
    """The values reach the tensor as their own 16 bits: a signalling NaN is not widened to
    float32 and narrowed back (which quiets it, and warns, an error under a filter)."""
    signalling = np.uint16(0x7F81).view(BF16)
    strategy = tensors(shape=(4,), dtype="bfloat16", elements=st.just(signalling))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # as a test module with filterwarnings("error") has it
        x = find(strategy, lambda t: True)
    np.testing.assert_array_equal(x.numpy().view(np.uint16), np.full(4, 0x7F81, np.uint16))
    rounded = find(tensors(shape=(1,), dtype="bfloat16", elements=st.just(1 + 2**-8)), bool)
    assert rounded.numpy().view(np.uint16)[0] == 0x3F80  # a tie, to even: rounded as astype


def test_ulp_distance_in_bfloat16():
    assert ulp_distance(1.0, 1.0 + 2**-7, "bfloat16") == 1.0
    assert ulp_distance(-bf16.SMALLEST_SUBNORMAL, bf16.SMALLEST_SUBNORMAL, "bfloat16") == 2.0
    assert ulp_distance(bf16.MAX, np.inf, "bfloat16") == 1.0
    a = np.array([1.0, 256.0], BF16)
    np.testing.assert_array_equal(ulp_distance(a, np.array([1.0, 258.0], BF16)), [0.0, 1.0])


def test_assert_close_picks_bfloat16_tolerances_as_the_least_precise():
    x = np.array([1.0], BF16)
    assert_close(x, np.float16([1.005]))  # within bfloat16's 8e-3, not float16's 1e-3
    with pytest.raises(AssertionError, match="bfloat16 tolerances"):
        assert_close(x, [1.02], dtype="bfloat16")
