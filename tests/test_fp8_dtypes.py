"""FP8 dtypes: float8_e4m3fn and float8_e5m2 cast bit-exactly, print, save and load.

The reference is ``ml_dtypes`` (plain casts) and ``ml_dtypes`` on values clipped to the
largest finite value (saturating casts); our own float64 rounding is held to the same bits
for every float16 and bfloat16 value and 10**6 random float32 values.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp.backend import fp8
from minitorch_amp.backend.dtypes import FP8_MAX, float8_e4m3fn, float8_e5m2, result_type

# ml_dtypes warns when it turns a NaN (or an E4M3 overflow) into FP8: expected here
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in cast")

FORMATS = [float8_e4m3fn, float8_e5m2]


def every_16_bit_value(dtype) -> np.ndarray:
    return np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(dtype)


def random_float32(n: int = 10**6) -> np.ndarray:
    """Random bit patterns (every exponent) and values around each format's range."""
    rng = np.random.default_rng(28)
    bits = rng.integers(0, 2**32, n // 2, dtype=np.uint64).astype(np.uint32).view(np.float32)
    near = rng.uniform(-70000, 70000, n // 4).astype(np.float32)
    tiny = (rng.uniform(-1, 1, n - bits.size - near.size) * 2.0**-12).astype(np.float32)
    return np.concatenate([bits, near, tiny])


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal bytes, except that any NaN equals any NaN (E4M3 has two encodings)."""
    nan_a, nan_b = np.isnan(a.astype(np.float32)), np.isnan(b.astype(np.float32))
    return bool(
        np.array_equal(nan_a, nan_b)
        and np.array_equal(a.view(np.uint8)[~nan_a], b.view(np.uint8)[~nan_b])
    )


def ml_dtypes_saturating(x: np.ndarray, dtype) -> np.ndarray:
    top = FP8_MAX[dtype]
    return np.clip(x.astype(np.float32), -top, top).astype(dtype)


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
@pytest.mark.parametrize("source", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("saturate", [False, True], ids=["plain", "saturating"])
def test_casts_are_bit_exact_against_ml_dtypes(dtype, source, saturate):
    if source == "float32":
        x = random_float32()
    else:
        x = every_16_bit_value(np.dtype(getattr(ml_dtypes, source, source)))
    expected = ml_dtypes_saturating(x, dtype) if saturate else x.astype(dtype)
    assert same_bits(fp8.to_fp8(x, dtype, saturate), expected)
    # the float64 rounding (used for float64 and integer sources) gives the same bits
    assert same_bits(fp8.to_fp8(x.astype(np.float64), dtype, saturate), expected)


def test_plain_casts_overflow_to_nan_in_e4m3_and_to_inf_in_e5m2():
    x = np.array([448, 464, 465, 57344, 61439, 61440, -1e9, np.inf], np.float32)
    assert fp8.to_fp8(x, float8_e4m3fn).astype(np.float32).tolist()[:2] == [448, 448]
    assert np.isnan(fp8.to_fp8(x, float8_e4m3fn).astype(np.float32)[2:]).all()
    e5m2 = fp8.to_fp8(x, float8_e5m2).astype(np.float32).tolist()
    assert e5m2 == [448, 448, 448, 57344, 57344, np.inf, -np.inf, np.inf]


def test_saturating_casts_stop_at_the_largest_finite_value_and_keep_nan():
    x = np.array([1e9, -np.inf, np.nan, 2.0**-10], np.float32)
    for dtype, top in FP8_MAX.items():
        out = fp8.to_fp8(x, dtype, saturate=True).astype(np.float32)
        assert out[:2].tolist() == [top, -top] and np.isnan(out[2])
    # 2**-10 is half E4M3's smallest subnormal (2**-9): a tie, to even zero; E5M2 keeps it
    assert fp8.to_fp8(x, float8_e4m3fn, True).astype(np.float32)[3] == 0.0
    assert fp8.to_fp8(x, float8_e5m2, True).astype(np.float32)[3] == 2.0**-10


def test_float64_is_rounded_once_not_through_float32():
    x = np.array([1 + 2**-4 + 2**-30, 1 + 2**-3 + 2**-30])  # ties in float32, not in float64
    assert fp8.to_fp8(x, float8_e4m3fn).astype(float).tolist() == [1.125, 1.125]
    assert fp8.to_fp8(x, float8_e5m2).astype(float).tolist() == [1.0, 1.25]
    t = mt.to_tensor(x, dtype="float64").astype("float8_e4m3fn")
    assert t.astype("float32").tolist() == [1.125, 1.125]


def test_subnormals_survive_and_are_exact():
    for dtype, smallest in [(float8_e4m3fn, 2.0**-9), (float8_e5m2, 2.0**-16)]:
        x = np.array([smallest, 3 * smallest, -smallest], np.float32)
        assert fp8.to_fp8(x, dtype).astype(np.float32).tolist() == x.tolist()


def test_tensors_cast_to_fp8_with_paddle_and_torch_names():
    for name in ["float8_e4m3fn", "paddle.float8_e4m3fn", mt.float8_e4m3fn]:
        assert mt.to_tensor([1.0, 2.0]).astype(name).dtype == float8_e4m3fn
    assert mt.to_tensor([1.0]).cast("float8_e5m2").dtype == mt.float8_e5m2
    assert mt.to_tensor([600.0]).astype("float8_e5m2").astype("float32").item() == 640.0


def test_fp8_tensors_print_their_values():
    text = repr(mt.to_tensor([1.0, 500.0, 0.3], dtype="float8_e4m3fn"))
    assert "dtype=float8_e4m3fn" in text and "[1.    ,    nan, 0.3125]" in text


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_save_and_load_are_bit_exact(tmp_path, dtype):
    bits = np.arange(256, dtype=np.uint8).view(dtype)
    path = str(tmp_path / "fp8.pdparams")
    mt.save({"w": mt.to_tensor(bits), "a": bits}, path)
    loaded = mt.load(path)
    assert loaded["w"].dtype == dtype and loaded["a"].dtype == dtype
    assert np.array_equal(loaded["w"].numpy().view(np.uint8), bits.view(np.uint8))
    assert np.array_equal(loaded["a"].view(np.uint8), bits.view(np.uint8))


def test_an_fp8_tensor_takes_one_byte_an_element():
    t = mt.zeros([1000]).astype("float8_e4m3fn")
    assert t._data.nbytes == 1000 and t.dtype.itemsize == 1


def test_promotion_with_wider_floats_gives_the_wider_float():
    assert result_type(float8_e4m3fn, "float32") == np.float32
    assert result_type(float8_e5m2, "bfloat16") == mt.bfloat16
    assert result_type(float8_e4m3fn, float8_e5m2) == np.float16
    assert result_type(float8_e4m3fn, "int64") == float8_e4m3fn


def test_layer_to_fp8_converts_parameters_to_one_byte_each():
    layer = mt.nn.Linear(32, 32)
    layer.to(dtype="float8_e4m3fn")
    assert layer.weight.dtype == float8_e4m3fn and layer.weight._data.nbytes == 32 * 32


class _RecordingKernels:
    """Stands in for backend.fp8_kernels (h22's CUDA launchers), recording the calls."""

    def __init__(self):
        self.calls = []

    def cast_fp8_with_amax(self, x, scale, out_dtype_code, saturate=True, amax=None, update=None):
        self.calls.append(("cast", out_dtype_code, saturate))
        dtype = [float8_e4m3fn, float8_e5m2][out_dtype_code]
        scaled = x * scale
        if saturate:
            scaled = np.clip(scaled, -FP8_MAX[dtype], FP8_MAX[dtype])
        out = scaled.astype(dtype).view(np.uint8)  # the bits, as the kernel returns them
        return out, np.abs(x).max(keepdims=True).reshape(1).astype(np.float32)

    def fp8_gemm(
        self, a, b, scale_a, scale_b, out_dtype, a_code=None, b_code=None, out=None, bias=None
    ):
        self.calls.append(("gemm", np.dtype(out_dtype), out, bias))
        return (a.astype(np.float32) @ b.astype(np.float32)) * (scale_a * scale_b)


def test_on_a_gpu_the_casts_and_the_gemm_go_to_the_fp8_kernels(monkeypatch):
    import inspect

    from minitorch_amp.backend import fp8_gemm, fp8_kernels

    fake = _RecordingKernels()
    launchers = ((fp8_kernels, "cast_fp8_with_amax"), (fp8_gemm, "fp8_gemm"))
    for module, name in launchers:  # the calls fit the real launchers
        real, ours = (
            inspect.signature(getattr(module, name)),
            inspect.signature(getattr(fake, name)),
        )
        assert list(real.parameters) == list(ours.parameters)
    not_numpy = type("FakeCuPy", (), {"ones": staticmethod(np.ones)})
    monkeypatch.setattr(fp8, "get_array_module", lambda array: not_numpy)
    monkeypatch.setattr(fp8, "_fp8_kernels", lambda: fake)
    monkeypatch.setattr(fp8, "_fp8_gemm", lambda: fake)
    x = np.array([1.0, 500.0], np.float32)
    out, amax = fp8.cast_to_fp8(x, float8_e5m2, np.ones(1, np.float32), saturate=False)
    assert out.dtype == float8_e5m2 and amax.tolist() == [500.0]
    assert fp8.to_fp8(x, float8_e4m3fn).dtype == float8_e4m3fn
    product = fp8.fp8_matmul(out.reshape(1, 2), out.reshape(2, 1), amax, amax, "bfloat16")
    assert product.shape == (1, 1)
    assert fake.calls == [("cast", 1, False), ("cast", 0, False), ("gemm", mt.bfloat16, None, None)]
