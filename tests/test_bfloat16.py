"""bfloat16 as a dtype: storage, casts (against a bit-level oracle), printing, save/load.

bfloat16 is the top half of a float32: 1 sign bit, 8 exponent bits (bias 127, float32's), 7
fraction bits. The oracles here never ask ml_dtypes: one works on the float32 bits with
integer arithmetic (``struct``), the other rounds the exact rational value of a float64.
"""

from __future__ import annotations

import gc
import math
import struct
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitorch_amp as mt
from minitorch_amp import device
from minitorch_amp.backend import dtypes
from minitorch_amp.backend.cast import cast, to_bfloat16

pytestmark = pytest.mark.usefixtures("garbage_collected")


def f32_to_bf16_bits(value: float) -> int:
    """float32 -> bfloat16 by integer arithmetic on the bits: round to nearest, ties to even."""
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    sign, magnitude = bits & 0x8000_0000, bits & 0x7FFF_FFFF
    if magnitude > 0x7F80_0000:  # NaN: keep it a NaN (quiet), keep the sign
        return (sign >> 16) | 0x7FC0
    upper, lower = magnitude >> 16, magnitude & 0xFFFF  # kept bits, cut-off bits
    if lower > 0x8000 or (lower == 0x8000 and upper & 1):
        upper += 1  # a carry into the exponent is right: 0x7F7F + 1 is inf (0x7F80)
    return (sign >> 16) | upper


def exact_bf16(x: float) -> float:
    """The real number ``x`` rounded once to bfloat16 (exact rational arithmetic)."""
    if math.isnan(x) or math.isinf(x) or x == 0:
        return x
    q = Fraction(x)
    exponent = math.floor(math.log2(abs(q)))
    if Fraction(2) ** exponent > abs(q):  # log2 of a float can be off by one ulp
        exponent -= 1
    exponent = max(exponent, -126)  # the subnormals share 2**-126's spacing
    spacing = Fraction(2) ** (exponent - 7)
    rounded = round(abs(q) / spacing) * spacing  # Fraction rounds ties to even
    if rounded >= Fraction(2) ** 128:
        return math.copysign(math.inf, x)
    return math.copysign(float(rounded), x)


def bits_of(array) -> np.ndarray:
    return np.asarray(array).view(np.uint16)


# ---- the dtype ----------------------------------------------------------------------------------
def test_bfloat16_is_the_ml_dtypes_dtype_and_a_floating_one():
    assert mt.bfloat16 == np.dtype(ml_dtypes.bfloat16) == "bfloat16"
    assert dtypes.convert_dtype("bfloat16") == mt.bfloat16
    assert dtypes.convert_dtype("paddle.bfloat16") == mt.bfloat16
    assert dtypes.is_floating("bfloat16") and dtypes.is_low_precision("bfloat16")
    assert dtypes.accumulation_dtype("bfloat16") == mt.float32
    x = mt.to_tensor([1.0, 2.0], dtype="bfloat16")
    assert x.dtype == mt.bfloat16
    assert isinstance(x.numpy(), np.ndarray) and x.numpy().dtype == ml_dtypes.bfloat16


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("bfloat16", "float16", "float32"),  # neither holds the other (PyTorch, Paddle)
        ("bfloat16", "int64", "bfloat16"),
        ("bfloat16", "bool", "bfloat16"),
        ("bfloat16", "float32", "float32"),
        ("bfloat16", "float64", "float64"),
        ("bfloat16", "bfloat16", "bfloat16"),
    ],
)
def test_promotion(a, b, expected):
    assert dtypes.result_type(a, b) == expected
    x, y = mt.ones([2], dtype=a), mt.ones([2], dtype=b)
    assert (x + y).dtype == expected


def test_python_numbers_are_weak_and_keep_bfloat16():
    x = mt.to_tensor([1.0, 3.0], dtype="bfloat16", stop_gradient=False)
    y = (x * 0.5 + 1) / 3
    assert y.dtype == mt.bfloat16
    y.sum().backward()
    assert x.grad.dtype == mt.bfloat16
    assert x.grad.numpy().astype(np.float64).tolist() == [exact_bf16(1 / 6)] * 2


def test_reductions_accumulate_in_float32():
    # 1024 ones summed in bfloat16 would stall at 256 (256 + 1 rounds back to 256)
    x = mt.ones([1024], dtype="bfloat16")
    assert x.sum().dtype == mt.bfloat16 and float(x.sum()) == 1024.0
    assert float(x.mean()) == 1.0


def test_matmul_rounds_once_like_a_tensor_core():
    # 1 + 2**-8 is a tie in bfloat16 ... but 1*1 + 2**-8*1 + 2**-9*1 is not: one rounding
    a = mt.to_tensor([[1.0, 2.0**-8, 2.0**-9]], dtype="bfloat16")
    b = mt.ones([3, 1], dtype="bfloat16")
    out = mt.matmul(a, b)
    assert out.dtype == mt.bfloat16
    assert float(out) == 1.0 + 2.0**-7  # rounding after each add would give 1.0


def test_printing_shows_values_and_dtype():
    text = repr(mt.to_tensor([[1.0, 2.5], [-3.0, 0.0078125]], dtype="bfloat16"))
    assert "dtype=bfloat16" in text
    assert "2.5" in text and "-3." in text and "0.0078125" in text


def test_memory_accounting_counts_two_bytes_per_element():
    gc.collect()
    before = device.memory_allocated()
    x = mt.zeros([1000], dtype="bfloat16")
    assert device.memory_allocated() == before + 2000
    y = x.astype("float32")
    assert device.memory_allocated() == before + 6000
    del x, y
    gc.collect()
    assert device.memory_allocated() == before


# ---- casts --------------------------------------------------------------------------------------
OVERFLOW = (2 - 2**-8) * 2.0**127  # halfway from the largest bfloat16 to 2**128: a tie -> inf
BELOW_OVERFLOW = float(np.nextafter(np.float32(OVERFLOW), np.float32(0)))
LANDMARKS = [
    0.0, -0.0, 1.0, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-23, 255.0, 257.0, 2.0**-126,
    2.0**-133, 2.0**-134, 3 * 2.0**-134, 2.0**-135, 3.3895314e38, OVERFLOW, BELOW_OVERFLOW,
    3.4028235e38, 1e-45, math.inf, -math.inf, math.nan,
]  # fmt: skip


def _check_f32(values: np.ndarray) -> None:
    out = cast(values, "bfloat16")
    assert out.dtype == mt.bfloat16
    expected = [f32_to_bf16_bits(float(v)) for v in values]
    got = bits_of(out).tolist()
    for v, e, g in zip(values, expected, got):
        if math.isnan(v):  # NaN stays NaN, sign kept (the payload is not specified)
            assert g & 0x7FFF > 0x7F80 and g & 0x8000 == e & 0x8000, (v, hex(g))
        else:
            assert g == e, f"{float(v)!r}: got {hex(g)}, expected {hex(e)}"


def test_float32_landmarks_round_to_nearest_even_overflow_to_inf_keep_nan():
    values = np.array(LANDMARKS + [-v for v in LANDMARKS], np.float32)
    _check_f32(values)
    out = cast(
        np.array([OVERFLOW, BELOW_OVERFLOW, 1 + 2**-8, 1 + 3 * 2**-8], np.float32), "bfloat16"
    )
    largest = (2 - 2**-7) * 2.0**127
    assert out.astype(np.float64).tolist() == [math.inf, largest, 1.0, 1 + 2**-6]


@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=64))
def test_every_float32_bit_pattern_rounds_like_the_integer_oracle(patterns):
    _check_f32(np.array(patterns, np.uint32).view(np.float32))


@given(st.lists(st.floats(allow_nan=False, width=64), min_size=1, max_size=32))
def test_float64_rounds_once_to_the_exact_nearest(values):
    out = to_bfloat16(np.array(values, np.float64)).astype(np.float64)
    expected = [exact_bf16(v) for v in values]
    assert [float(v) for v in out] == expected


def test_float64_is_not_rounded_twice():
    # via float32 this is 1 + 2**-8, a tie that goes to 1.0; once, it is 1 + 2**-7
    x = mt.to_tensor([1 + 2**-8 + 2**-30], dtype="float64")
    assert float(x.astype("bfloat16")) == 1 + 2**-7
    assert float(mt.to_tensor([1 + 2**-8 + 2**-30], dtype="bfloat16")) == 1 + 2**-7


def test_float64_keeps_bfloat16s_subnormals_and_their_ties():
    # bfloat16's subnormals are k * 2**-133; each is a float32 subnormal too, which a GPU
    # flushes to zero, so the rounding must not pass through one
    units = np.array([1.0, 1.5, 2.5, 0.5, 0.75, 127.75, 128.0, -3.0])
    out = to_bfloat16(units * 2.0**-133).astype(np.float64) / 2.0**-133
    # ties go to the even neighbour (1.5 -> 2, 2.5 -> 2, 0.5 -> 0); 128 units are 2**-126
    assert out.tolist() == [1.0, 2.0, 2.0, 0.0, 1.0, 128.0, 128.0, -3.0]


def test_bfloat16_to_float32_is_exact_and_gradients_come_back_in_the_source_dtype():
    patterns = np.arange(0, 2**16, 7, dtype=np.uint16)
    values = patterns.view(ml_dtypes.bfloat16)
    wide = cast(values, "float32")
    finite = np.isfinite(wide)
    assert (wide.view(np.uint32)[finite] >> 16).tolist() == patterns[finite].tolist()
    assert (wide.view(np.uint32)[finite] & 0xFFFF == 0).all()
    x = mt.to_tensor([1.0, 2.0], dtype="float32", stop_gradient=False)
    (x.astype("bfloat16") * 3).sum().backward()
    assert x.grad.dtype == mt.float32 and x.grad.numpy().tolist() == [3.0, 3.0]


def test_float16_to_bfloat16_and_back():
    # 65504 needs 11 significant bits: bfloat16 rounds it to 65536, which float16 cannot hold
    x = mt.to_tensor([65504.0, 1 + 2**-10, 2.0**-24], dtype="float16")
    b = x.astype("bfloat16")
    assert b.numpy().astype(np.float64).tolist() == [65536.0, 1.0, 2.0**-24]
    with np.errstate(over="ignore"):
        assert b.astype("float16").numpy().tolist() == [math.inf, 1.0, 2.0**-24]


def test_cast_sets_found_inf_on_overflow():
    found_inf = np.zeros(1, bool)
    cast(np.array([1.0, 3e38], np.float32), "bfloat16", found_inf)
    assert not found_inf[0]
    cast(np.array([1.0, 3.4e38], np.float32), "bfloat16", found_inf)
    assert found_inf[0]


# ---- save / load --------------------------------------------------------------------------------
def test_save_load_round_trip_is_bit_exact(tmp_path):
    patterns = np.arange(0, 2**16, dtype=np.uint16)  # every bfloat16, NaN payloads included
    x = mt.to_tensor(patterns.view(ml_dtypes.bfloat16))
    path = tmp_path / "bf16.pdparams"
    mt.save({"w": x, "raw": patterns.view(ml_dtypes.bfloat16)[:5], "s": x.numpy()[3]}, path)
    state = mt.load(str(path))
    assert state["w"].dtype == mt.bfloat16
    np.testing.assert_array_equal(bits_of(state["w"].numpy()), patterns)
    assert state["raw"].dtype == mt.bfloat16 and bits_of(state["raw"]).tolist() == [0, 1, 2, 3, 4]
    assert state["s"].dtype == mt.bfloat16 and bits_of(state["s"]).tolist() == 3
    # the archive is still plain NumPy: the bits, as uint16
    with np.load(path) as archive:
        assert archive["arrays/0"].dtype == np.uint16


def test_a_bfloat16_parameter_loads_into_a_float32_layer(tmp_path):
    layer = mt.nn.Linear(2, 2)
    layer.bfloat16()
    path = tmp_path / "m.pdparams"
    mt.save(layer.state_dict(), path)
    fresh = mt.nn.Linear(2, 2)
    fresh.set_state_dict(mt.load(str(path)))
    assert fresh.weight.dtype == mt.float32
    np.testing.assert_array_equal(fresh.weight.numpy(), layer.weight.numpy().astype(np.float32))
