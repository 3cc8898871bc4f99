"""What AMP relies on about bfloat16, stated as properties with the public kit (as for float16
in ``test_fp16_properties.py``).

The oracle for rounding is integer arithmetic on the float32 bits (``struct``), never
``ml_dtypes`` alone.

1. The float32 -> bfloat16 cast is round to nearest even, bit for bit; NaN stays NaN.
2. Overflow happens exactly at ``(2 - 2**-8) * 2**127``.
3. Unscaling bfloat16 gradients by a power of two is exact unless it underflows, and
   ``found_inf`` is set exactly when an unscaled gradient is not finite.
4. The gradients float16 loses without a loss scale survive in bfloat16: no underflow down to
   ``2**-126`` (bfloat16 loses *precision* instead: at most 2**-8 relative).
"""

from __future__ import annotations

import struct

import ml_dtypes
import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import minitorch_amp as mt
from minitorch_amp.backend.loss_scaling import unscale_and_check
from minitorch_amp.testing import assert_bit_equal, assert_close, bf16, fp16, ulp_distance
from minitorch_amp.testing.strategies import (
    bf16_values,
    fp32_values_near_bf16_edges,
    gradient_magnitudes,
    shapes,
    tensors,
)

BF16 = ml_dtypes.bfloat16
# NumPy's overflow and invalid-value warnings are errors here: where overflow is the point, a
# test says so with np.errstate; anywhere else a warning is a bug in the test or the code.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def struct_bf16_bits(x: float) -> int:
    """float32 -> bfloat16 by integer arithmetic: round to nearest, ties to even."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    upper, lower = bits >> 16, bits & 0xFFFF
    if lower > 0x8000 or (lower == 0x8000 and upper & 1):
        upper += 1  # a carry out of the fraction into the exponent is the right answer
    return upper


# ---- 1. the cast -------------------------------------------------------------------------------
near_edges_or_any = fp32_values_near_bf16_edges() | st.floats(width=32, allow_nan=False)


@given(x=tensors(shape=shapes(min_dims=1, max_dims=2, max_side=6), elements=near_edges_or_any))
def test_fp32_to_bf16_cast_is_round_to_nearest_even_bit_for_bit(x):
    out = x.astype("bfloat16").numpy().ravel()
    expected = [struct_bf16_bits(float(v)) for v in x.numpy().ravel()]
    assert out.view(np.uint16).tolist() == expected


@given(bits=st.integers(0x7F800001, 0x7FFFFFFF), negative=st.booleans())
def test_a_nan_of_any_payload_stays_nan(bits, negative):
    nan = np.uint32([bits | (0x80000000 if negative else 0)]).view(np.float32)
    out = mt.to_tensor(nan).astype("bfloat16").numpy()
    assert np.isnan(out.astype(np.float32)).all()  # (truncating would make some of them inf)


def test_bf16_to_fp32_and_back_is_exact_for_every_one_of_the_65536_patterns():
    every = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(BF16)
    wide = mt.to_tensor(every).astype("float32").numpy()
    nan = np.isnan(wide)
    assert (wide.view(np.uint32)[~nan] == every.view(np.uint16)[~nan].astype(np.uint32) << 16).all()
    back = mt.to_tensor(wide).astype("bfloat16").numpy()
    assert_bit_equal(back[~nan], every[~nan])


@given(b=bf16_values(allow_nan=False, allow_infinity=False))
def test_half_ulp_bounds_the_rounding_error_of_every_neighbourhood(b):
    x = float(b) + 0.9 * bf16.half_ulp(float(b)) * (1 if float(b) >= 0 else -1)
    if abs(x) < bf16.MAX:
        rounded = float(mt.to_tensor([x], dtype="float64").astype("bfloat16").numpy()[0])
        assert abs(rounded - x) <= bf16.half_ulp(x)
        assert ulp_distance(rounded, float(b), "bfloat16") == 0.0


# ---- 2. overflow -------------------------------------------------------------------------------
@given(x=fp32_values_near_bf16_edges() | st.floats(width=32, allow_nan=False))
def test_overflow_happens_exactly_at_the_threshold(x):
    out = float(mt.to_tensor(np.float32([x])).astype("bfloat16").numpy()[0])
    if abs(x) < bf16.OVERFLOW_THRESHOLD:
        assert np.isfinite(out) and abs(out) <= bf16.MAX
    else:
        assert out == np.copysign(np.inf, x)


def test_the_overflow_boundary_itself():
    just_below = np.nextafter(np.float32(bf16.OVERFLOW_THRESHOLD), np.float32(0))
    x = np.float32([just_below, bf16.OVERFLOW_THRESHOLD, -just_below, -bf16.OVERFLOW_THRESHOLD])
    out = mt.to_tensor(x).astype("bfloat16")
    assert_bit_equal(out, np.array([bf16.MAX, np.inf, -bf16.MAX, -np.inf], BF16))


# ---- 3. unscaling ------------------------------------------------------------------------------
@given(g=tensors(shape=(16,), dtype="bfloat16"), k=st.integers(-4, 24))
def test_unscaling_by_a_power_of_two_is_exact_unless_it_underflows(g, k):
    grads = g.numpy().copy()
    found_inf = np.zeros(1, bool)
    unscale_and_check([grads], np.float32([2.0**-k]), found_inf)
    exact = g.numpy().astype(np.float64) * 2.0**-k
    keep = (exact == 0) | (np.abs(exact) >= bf16.SMALLEST_NORMAL)
    keep &= np.abs(exact) <= bf16.MAX
    assert (grads.astype(np.float64)[keep] == exact[keep]).all()
    assert found_inf[0] == (not np.isfinite(grads.astype(np.float32)).all())


@given(
    g=tensors(shape=(8,), dtype="bfloat16", elements=bf16_values()),
    scale=st.sampled_from([2.0**-3, 0.75, 1.0, 3.0, 2.0**20]),
)
@example(  # always the overflow: bfloat16's largest gradient unscaled by 1/scale = 8
    g=mt.to_tensor(np.full(8, bf16.MAX, np.float32)).astype("bfloat16"), scale=2.0**-3
)
def test_found_inf_is_exactly_a_non_finite_unscaled_bf16_gradient(g, scale):
    grads = g.numpy().copy()
    found_inf = np.zeros(1, bool)
    unscale_and_check([grads], np.float32([1 / scale]), found_inf)
    # A gradient near bfloat16's largest times 1/scale > 1 overflows to inf: the case under test;
    # a signalling NaN (the strategy draws every bit pattern) makes the product invalid.
    with np.errstate(over="ignore", invalid="ignore"):
        wide = g.numpy().astype(np.float32) * np.float32(1 / scale)  # widen, multiply, round once
        assert_bit_equal(grads[~np.isnan(wide)], wide.astype(BF16)[~np.isnan(wide)])
    assert found_inf[0] == (not np.isfinite(wide.astype(BF16).astype(np.float32)).all())


# ---- 4. no underflow to rescue ------------------------------------------------------------------
@given(st.lists(gradient_magnitudes(-60, -26), min_size=1, max_size=32))
def test_gradients_float16_flushes_to_zero_survive_in_bf16(magnitudes):
    g = np.float32(magnitudes)
    in_fp16 = mt.to_tensor(g).astype("float16").numpy()
    in_bf16 = mt.to_tensor(g).astype("bfloat16").numpy()
    assert (np.abs(g) <= fp16.UNDERFLOW_THRESHOLD).all() and (in_fp16 == 0).all()
    assert (in_bf16.astype(np.float32) != 0).all()
    # what bfloat16 loses instead: precision, at most half an ulp (2**-8 relative)
    assert_close(in_bf16, g, rtol=bf16.UNIT_ROUNDOFF, atol=0)
