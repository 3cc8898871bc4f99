"""The testing kit keeps its promises: strategies reach what they claim, assertions catch
what they claim, and ``minitorch_amp.testing`` imports without Hypothesis."""

from __future__ import annotations

import inspect
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import find, given
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

import minitorch_amp as mt
from minitorch_amp.testing import (
    DEFAULT_TOLERANCES,
    assert_bit_equal,
    assert_close,
    fp16,
    ulp_distance,
)
from minitorch_amp.testing.strategies import (
    FP16_EDGE_VALUES,
    broadcastable_shapes,
    fp16_values,
    fp32_values_near_fp16_edges,
    gradient_magnitudes,
    shapes,
    tensors,
)


def bits16(h) -> int:
    return int(np.float16(h).view(np.uint16))


# ---- the constants ------------------------------------------------------------------------
def test_fp16_constants_are_the_binary16_landmarks():
    info = np.finfo(np.float16)
    assert float(info.max) == fp16.MAX and bits16(fp16.MAX) == 0x7BFF
    assert float(info.tiny) == fp16.SMALLEST_NORMAL and bits16(fp16.SMALLEST_NORMAL) == 0x0400
    assert float(info.eps) == fp16.EPSILON
    assert bits16(fp16.SMALLEST_SUBNORMAL) == 0x0001
    assert bits16(fp16.LARGEST_SUBNORMAL) == 0x03FF
    below = np.nextafter(np.float32(fp16.OVERFLOW_THRESHOLD), np.float32(0))
    with np.errstate(over="ignore"):
        assert np.float32(fp16.OVERFLOW_THRESHOLD).astype(np.float16) == np.inf
    assert below.astype(np.float16) == fp16.MAX
    above = np.nextafter(np.float32(fp16.UNDERFLOW_THRESHOLD), np.float32(1))
    assert np.float32(fp16.UNDERFLOW_THRESHOLD).astype(np.float16) == 0
    assert above.astype(np.float16) == fp16.SMALLEST_SUBNORMAL


@pytest.mark.parametrize("x", [1e-7, 2.0**-24, 2.0**-14, 1.0, 3.0, 1000.0, 65504.0, 65519.0])
def test_half_ulp_bounds_the_rounding_error_and_is_attained_at_the_tie(x):
    h = fp16.half_ulp(x)
    assert abs(float(np.float16(x)) - x) <= h
    low = float(np.float16(x))
    if low <= x and low < fp16.MAX:  # the next float16 is 2 * half_ulp above
        nxt = float(np.nextafter(np.float16(low), np.float16(np.inf)))
        assert nxt - low == 2 * h
    with pytest.raises(ValueError, match="65520"):
        fp16.half_ulp(65520.0)


# ---- strategies ---------------------------------------------------------------------------
@pytest.mark.parametrize("edge", FP16_EDGE_VALUES, ids=lambda h: f"0x{bits16(h):04X}")
def test_fp16_values_reaches_every_edge_value_bit_for_bit(edge):
    found = find(fp16_values(), lambda h: bits16(h) == bits16(edge))
    assert_bit_equal(found, edge)


def test_fp16_values_reaches_nan_payloads_and_values_off_the_edge_list():
    find(fp16_values(), lambda h: np.isnan(h) and bits16(h) not in (0x7E00,))
    edges = {bits16(e) for e in FP16_EDGE_VALUES}
    find(fp16_values(), lambda h: bits16(h) not in edges and 0 < abs(h) < fp16.SMALLEST_NORMAL)


@given(h=fp16_values(allow_nan=False, allow_infinity=False, allow_subnormal=False))
def test_fp16_values_flags_exclude_what_they_say(h):
    assert isinstance(h, np.float16)
    assert np.isfinite(h)
    assert h == 0 or abs(h) >= fp16.SMALLEST_NORMAL


@given(x=fp32_values_near_fp16_edges())
def test_fp32_values_near_fp16_edges_are_float32_and_near_an_edge(x):
    assert isinstance(x, np.float32)
    # within 2 float32 ulps of a float16 value, of a halfway point between two, or of 65520
    h = np.float16(x) if abs(x) < fp16.MAX else np.float16(np.sign(x) * fp16.MAX)
    with np.errstate(over="ignore"):  # the neighbour of 65504 is inf
        up, down = np.nextafter(h, np.float16(np.inf)), np.nextafter(h, np.float16(-np.inf))
    centers = [float(h), (float(h) + float(up)) / 2, (float(h) + float(down)) / 2]
    centers += [fp16.OVERFLOW_THRESHOLD, -fp16.OVERFLOW_THRESHOLD]
    assert min(ulp_distance(x, c, "float32") for c in centers) <= 2


@pytest.mark.parametrize(
    "target",
    [
        65520.0,  # the overflow threshold itself
        float(np.nextafter(np.float32(65520), np.float32(0))),  # just under: rounds to 65504
        2.0**-25,  # the tie with zero
        float(np.nextafter(np.float32(2.0**-25), np.float32(1))),  # rounds up to 2**-24
        1.0 + 2.0**-11,  # a tie that goes down to the even 1.0
        -3 * 2.0**-25,  # a tie that goes up to the even -2**-23
    ],
)
def test_fp32_values_near_fp16_edges_reaches_the_rounding_edges(target):
    find(fp32_values_near_fp16_edges(), lambda x: float(x) == target)


@given(data=st.data())
def test_tensors_respect_shape_dtype_place_and_stop_gradient(data):
    shape = data.draw(shapes(max_dims=3, min_side=0, max_side=4))
    dtype = data.draw(st.sampled_from(["float16", "float32", "float64", "int32", "int64", "bool"]))
    x = data.draw(tensors(shape=shape, dtype=dtype, place="cpu", stop_gradient=False))
    assert isinstance(x, mt.Tensor)
    assert x.shape == list(shape) and x.dtype == dtype and x.place == mt.Place("cpu")
    assert not x.stop_gradient
    if x.dtype.kind == "f":
        assert np.isfinite(x.numpy()).all(), "the default elements are finite"


@given(x=tensors(shape=shapes(min_dims=1, max_dims=2, min_side=1, max_side=3), dtype="float32"))
def test_tensors_draws_the_shape_when_given_a_strategy(x):
    assert 1 <= x.ndim <= 2 and all(1 <= n <= 3 for n in x.shape)


def test_tensors_uses_the_given_elements_and_dtype_strategy():
    x = find(
        tensors(shape=(3,), dtype=st.sampled_from(["float16"]), elements=st.just(np.float16(2))),
        lambda t: True,
    )
    assert_bit_equal(x, np.float16([2, 2, 2]))


@given(s=shapes(min_dims=1, max_dims=3, min_side=0, max_side=5))
def test_shapes_stay_within_bounds(s):
    assert isinstance(s, tuple) and 1 <= len(s) <= 3 and all(0 <= n <= 5 for n in s)


def test_shapes_default_to_sides_of_at_least_one_like_hypothesis():
    # Hypothesis's array_shapes and the kit's broadcastable_shapes start sides at 1; so does
    # shapes(): a default draw is never an empty tensor, and min_side=0 opts in to them.
    assert inspect.signature(shapes).parameters["min_side"].default == 1
    with pytest.raises(NoSuchExample):
        find(shapes(), lambda s: 0 in s)
    assert find(shapes(min_dims=1, min_side=0), lambda s: 0 in s) == (0,)
    with pytest.raises(NoSuchExample):
        find(tensors(), lambda t: t.size == 0)  # tensors() draws its shape from shapes()


@given(pair=broadcastable_shapes())
def test_broadcastable_shapes_broadcast(pair):
    a, b = pair
    result = np.broadcast_shapes(a, b)
    assert (np.zeros(a) + np.zeros(b)).shape == result


def test_broadcastable_shapes_include_real_broadcasting():
    find(broadcastable_shapes(), lambda p: len(p[0]) != len(p[1]))
    find(broadcastable_shapes(min_dims=1), lambda p: 1 in p[0] and p[0] != p[1])
    assert len(find(broadcastable_shapes(num_shapes=3), lambda p: True)) == 3


@given(g=gradient_magnitudes(-30, 5))
def test_gradient_magnitudes_have_exponents_in_range_and_are_float32_exact(g):
    assert -30 <= math.frexp(abs(g))[1] - 1 <= 5
    assert float(np.float32(g)) == g


def test_gradient_magnitudes_reach_both_signs_and_both_ends():
    find(gradient_magnitudes(-30, 5), lambda g: g < 0)
    find(gradient_magnitudes(-30, 5), lambda g: abs(g) < 2.0**-29)
    find(gradient_magnitudes(-30, 5), lambda g: abs(g) >= 2.0**5)
    assert find(gradient_magnitudes(-3, 3, signed=False), lambda g: True) > 0
    with pytest.raises(ValueError, match="low_exp"):
        gradient_magnitudes(3, -3)


# ---- ulp_distance -------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_ulp_distance_known_values(dtype):
    t = np.dtype(dtype).type
    one, inf = t(1.0), t(np.inf)
    tiny = np.nextafter(t(0), t(1))  # the smallest subnormal
    largest = np.finfo(dtype).max
    assert ulp_distance(one, np.nextafter(one, t(2)), dtype) == 1
    assert ulp_distance(-tiny, tiny, dtype) == 2  # across zero
    assert ulp_distance(t(0.0), t(-0.0), dtype) == 0
    assert ulp_distance(largest, inf, dtype) == 1
    assert ulp_distance(one, t(2.0), dtype) == 2 ** (np.finfo(dtype).nmant)
    assert math.isnan(ulp_distance(t(np.nan), one, dtype))


def test_ulp_distance_spans_the_whole_float64_line():
    assert ulp_distance(-np.inf, np.inf, "float64") == 2.0 * 0x7FF0000000000000


@given(a=fp16_values(allow_nan=False), b=fp16_values(allow_nan=False))
def test_ulp_distance_is_a_metric_on_the_float16_line(a, b):
    d = ulp_distance(a, b)
    assert d == ulp_distance(b, a) and d >= 0
    assert (d == 0) == (a == b)
    # along the line: distance to b via 0 adds up when a and b have opposite signs
    if a <= 0 <= b:
        assert d == ulp_distance(a, np.float16(0)) + ulp_distance(np.float16(0), b)


# ---- assert_close -------------------------------------------------------------------------
def test_assert_close_uses_the_least_precise_float_dtype():
    assert_close(np.float16(1.0 + 2**-10), np.float64(1.0))  # 1 ulp of float16: fine
    with pytest.raises(AssertionError, match="float32 tolerances"):
        assert_close(np.float32(1.0 + 2**-10), np.float64(1.0))
    assert DEFAULT_TOLERANCES[np.dtype("float16")] == (1e-3, 1e-5)


def test_assert_close_accepts_tensors_scalars_and_lists():
    assert_close(mt.to_tensor([1.0, 2.0]), [1.0, 2.0])
    assert_close(mt.to_tensor([1.0, 2.0]), mt.to_tensor([1.0, 2.0], dtype="float64"))
    assert_close(np.float32([3.0, 3.0]), 3.0)  # a scalar broadcasts
    assert_close(2.0, 2.0)


def test_assert_close_message_names_the_worst_element_and_the_errors():
    actual = np.zeros((2, 3), "float32")
    expected = actual.copy()
    expected[0, 1], expected[1, 2] = 1e-3, 5.0
    with pytest.raises(AssertionError) as err:
        assert_close(actual, expected)
    message = str(err.value)
    assert "2 of 6 elements differ" in message
    assert "worst at index (1, 2): actual 0.0, expected 5.0" in message
    assert "max abs error: 5 at index (1, 2)" in message
    assert "max rel error: 1 at index" in message


def test_assert_close_nan_and_inf_rules():
    assert_close(np.float32([np.nan, np.inf]), np.float32([np.nan, np.inf]))
    for bad in ([1.0, np.inf], [np.nan, -np.inf]):
        with pytest.raises(AssertionError, match="worst at index"):
            assert_close(np.float32([np.nan, np.inf]), np.float32(bad))


def test_assert_close_explicit_tolerances_shapes_and_integers():
    assert_close(np.float32(1.1), 1.0, rtol=0, atol=0.2)
    with pytest.raises(AssertionError, match=r"rtol=0, atol=0\.01"):
        assert_close(np.float32(1.1), 1.0, rtol=0, atol=0.01)
    with pytest.raises(AssertionError, match="shape mismatch"):
        assert_close(np.zeros(3), np.zeros(4))
    with pytest.raises(AssertionError, match="exact comparison"):
        assert_close(np.int64([2**60]), np.int64([2**60 + 1]))


# ---- assert_bit_equal ---------------------------------------------------------------------
def test_assert_bit_equal_catches_the_sign_of_zero():
    with pytest.raises(AssertionError, match=r"index \(1,\): actual -0.0 \(0x8000\)"):
        assert_bit_equal(np.float16([1.0, -0.0]), np.float16([1.0, 0.0]))


def test_assert_bit_equal_catches_nan_payloads_but_accepts_equal_nans():
    quiet = np.uint16([0x7E00]).view(np.float16)
    payload = np.uint16([0x7E01]).view(np.float16)
    assert_bit_equal(quiet, quiet.copy())
    with pytest.raises(AssertionError, match=r"0x7E01.*0x7E00"):
        assert_bit_equal(payload, quiet)


def test_assert_bit_equal_dtype_shape_and_wide_types():
    with pytest.raises(AssertionError, match="dtype mismatch"):
        assert_bit_equal(np.float32([1]), np.float16([1]))
    with pytest.raises(AssertionError, match="shape mismatch"):
        assert_bit_equal(np.zeros(2), np.zeros(3))
    with pytest.raises(AssertionError, match="0x0000000000000001"):
        assert_bit_equal(np.float64([5e-324]), np.float64([0.0]))
    assert_bit_equal(mt.to_tensor([True, False]), np.array([True, False]))
    assert_bit_equal(np.float32(-0.0), mt.to_tensor(-0.0))  # 0-d


# ---- importable without Hypothesis --------------------------------------------------------
def test_the_kit_imports_without_hypothesis_and_strategies_say_what_to_install():
    code = (
        "import sys; sys.modules['hypothesis'] = None\n"
        "import numpy as np, minitorch_amp.testing as t\n"
        "t.assert_close(np.float16(1), 1.0); print(t.fp16.MAX)\n"
        "try:\n"
        "    t.fp16_values\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "65504.0" in out.stdout and "pip install hypothesis" in out.stdout
