"""``cuda/fp8_cast.cu`` against ``ml_dtypes``, bit for bit, on a CPU emulator.

The emulator (``tests/fp8_cast_emulator.cpp``, built on ``tests/cuda_emulator.h``) runs the
kernel file unchanged, fed by the real launchers of ``backend/fp8_kernels.py`` around NumPy
arrays that pose as CuPy arrays, under flush-to-zero as CuPy compiles kernels. So without a
GPU the suite checks the targets of issue 28: every float16 and every bfloat16 value and
10^6 random float32 bit patterns cast to E4M3 and E5M2, saturating and not, equal to
``ml_dtypes``' ``astype`` (saturation: equal where that is finite, +-max where it overflows),
and the amax reduced with them. The GPU runs the same checks in ``test_fp8_gpu.py``.
"""

from __future__ import annotations

import emulated_gpu
import ml_dtypes
import numpy as np
import pytest
from emulated_gpu import HostArray

from minitorch_amp.backend import fp8_kernels
from minitorch_amp.backend.fp8_kernels import (
    E4M3,
    E5M2,
    FORMATS,
    cast_fp8_with_amax,
    cast_transpose_fp8,
    twin_cast,
)

LARGEST_BITS = {E4M3: 0x7E, E5M2: 0x7B}
FORMAT_IDS = {E4M3: "e4m3", E5M2: "e5m2"}


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    return emulated_gpu.build("fp8_cast_emulator.cpp", tmp_path_factory.mktemp("emulator"))


@pytest.fixture
def on_emulator(emulator, monkeypatch):
    launches = emulated_gpu.install(emulator, monkeypatch, "fp8_cast.cu", block=256)
    fake = fp8_kernels._device.cupy
    fake.empty = emulated_gpu.poisoned_empty
    # Fewer, longer-striding blocks: the emulator pays per block (256 fibers), the kernel's
    # grid-stride loops take any grid (the small cases below still launch several blocks).
    monkeypatch.setattr(fp8_kernels, "_MAX_BLOCKS", 7)
    return launches


def on_device(a: np.ndarray) -> HostArray:
    out = np.empty(a.shape, a.dtype).view(HostArray)
    out[...] = a.view(HostArray)
    return out


def plain_cast(x: np.ndarray, scale: float, code: int) -> np.ndarray:
    """ml_dtypes' own conversion of the float32 product: the non-saturating specification."""
    with np.errstate(invalid="ignore", over="ignore"):
        product = x.astype(np.float32) * np.float32(scale)
        return product.astype(FORMATS[code]).view(np.uint8)


def saturated(plain: np.ndarray, product: np.ndarray, code: int) -> np.ndarray:
    """What saturation changes in ``plain``: a finite or infinite product that came out inf or
    NaN becomes the largest finite value with its sign; NaN products stay NaN."""
    decoded = plain.view(FORMATS[code]).astype(np.float32)
    overflowed = ~np.isnan(product) & ~np.isfinite(decoded)
    sign = np.where(np.signbit(product), 0x80, 0).astype(np.uint8)
    return np.where(overflowed, sign | LARGEST_BITS[code], plain).astype(np.uint8)


def check_every_bit(x: np.ndarray, scale: float, code: int, saturate: bool) -> None:
    out, amax = cast_fp8_with_amax(
        on_device(x), on_device(np.array([scale], np.float32)), code, saturate
    )
    expected = plain_cast(x, scale, code)
    if saturate:
        with np.errstate(invalid="ignore"):  # signalling NaNs among the float32 patterns
            product = x.astype(np.float32) * np.float32(scale)
        expected = saturated(expected, product, code)
    wrong = np.flatnonzero(np.asarray(out) != expected)
    assert wrong.size == 0, (
        f"{wrong.size} of {x.size} differ, e.g. input bits "
        f"{x.view(np.uint16 if x.itemsize == 2 else np.uint32)[wrong[:4]]}: kernel "
        f"{np.asarray(out)[wrong[:4]]} expected {expected[wrong[:4]]}"
    )
    magnitude = np.abs(x.astype(np.float32))
    if np.isnan(magnitude).any():
        assert np.isnan(amax[0])
    else:
        assert amax[0] == magnitude.max(initial=0.0)


ALL_HALF = np.arange(65536, dtype=np.uint32).astype(np.uint16)


@pytest.mark.parametrize("saturate", [True, False], ids=["saturate", "plain"])
@pytest.mark.parametrize("code", [E4M3, E5M2], ids=FORMAT_IDS.get)
def test_every_float16_value_casts_like_ml_dtypes(code, saturate, on_emulator):
    check_every_bit(ALL_HALF.view(np.float16), 1.0, code, saturate)


@pytest.mark.parametrize("saturate", [True, False], ids=["saturate", "plain"])
@pytest.mark.parametrize("code", [E4M3, E5M2], ids=FORMAT_IDS.get)
def test_every_bfloat16_value_casts_like_ml_dtypes(code, saturate, on_emulator):
    check_every_bit(ALL_HALF.view(ml_dtypes.bfloat16), 1.0, code, saturate)


@pytest.mark.parametrize("saturate", [True, False], ids=["saturate", "plain"])
def test_a_million_random_float32_bit_patterns_cast_like_ml_dtypes(saturate, on_emulator):
    bits = np.random.default_rng(28).integers(0, 2**32, 10**6, dtype=np.uint64)
    x = bits.astype(np.uint32).view(np.float32)
    # half the patterns to each format: every exponent, NaN payloads, subnormals, both signs
    check_every_bit(x[: x.size // 2], 1.0, E4M3, saturate)
    check_every_bit(x[x.size // 2 :], 1.0, E5M2, saturate)


@pytest.mark.parametrize("scale", [3.7, 2.0**-12, 1 / 3])
@pytest.mark.parametrize("code", [E4M3, E5M2], ids=FORMAT_IDS.get)
def test_the_scale_multiplies_in_float32_before_the_one_rounding(scale, code, on_emulator):
    x = np.random.default_rng(1).standard_normal(10_001).astype(np.float32) * 300
    check_every_bit(x, scale, code, saturate=True)


def test_the_amax_is_of_the_unscaled_input_and_a_nan_anywhere_makes_it_nan(on_emulator):
    x = np.zeros(5000, np.float32)
    x[4321] = -77.5  # the largest magnitude, negative, deep in the vector path
    x[4999] = 12.0  # the scalar tail
    scale = on_device(np.array([0.25], np.float32))
    _, amax = cast_fp8_with_amax(on_device(x), scale, E4M3)
    assert amax.tolist() == [77.5]
    x[17] = np.nan
    _, amax = cast_fp8_with_amax(on_device(x), scale, E4M3)
    assert np.isnan(amax[0])


def test_a_given_amax_is_folded_into_not_reset(on_emulator):
    scale = on_device(np.array([1.0], np.float32))
    amax = on_device(np.array([5.0], np.float32))
    cast_fp8_with_amax(on_device(np.array([1.0, -3.0], np.float32)), scale, E5M2, amax=amax)
    assert amax.tolist() == [5.0]
    cast_fp8_with_amax(on_device(np.array([9.0], np.float16)), scale, E5M2, amax=amax)
    assert amax.tolist() == [9.0]


def test_an_empty_tensor_launches_nothing_and_has_amax_zero(on_emulator):
    scale = on_device(np.array([1.0], np.float32))
    out, amax = cast_fp8_with_amax(on_device(np.zeros((0, 3), np.float32)), scale, E4M3)
    assert out.shape == (0, 3) and amax.tolist() == [0.0] and on_emulator == []


# Words along both (64 x 32, 128 x 68), along rows only (130 x 36), along columns only
# (36 x 130), bytes only (33 x 70); partial tiles on either side.
@pytest.mark.parametrize(
    "shape", [(1, 1), (33, 70), (64, 32), (3, 100), (100, 3), (128, 68), (130, 36), (36, 130)]
)
@pytest.mark.parametrize("dtype", ["float32", "float16", ml_dtypes.bfloat16])
def test_cast_transpose_writes_the_cast_and_its_transpose(shape, dtype, on_emulator):
    x = (np.random.default_rng(2).standard_normal(shape) * 1000).astype(dtype)
    scale = np.array([0.5], np.float32)
    out, out_t, amax = cast_transpose_fp8(on_device(x), on_device(scale), E4M3)
    expected, expected_amax = twin_cast(x, scale, E4M3)
    assert np.array_equal(np.asarray(out), expected)
    assert np.array_equal(np.asarray(out_t), expected.T)
    assert amax.tolist() == expected_amax.tolist()


def test_the_twin_matches_the_kernel_on_edges(on_emulator):
    edges = np.array(
        [448, 464, 465, 480, 57344, 61440, 2**-9, 2**-10, 3 * 2**-11, 2**-16, 2**-17, -0.0],
        np.float32,
    )
    for code in (E4M3, E5M2):
        for saturate in (True, False):
            scale = np.array([1.0], np.float32)
            out, _ = cast_fp8_with_amax(on_device(edges), on_device(scale), code, saturate)
            assert np.array_equal(np.asarray(out), twin_cast(edges, scale, code, saturate)[0])


@pytest.mark.parametrize(
    "x, scale, code, error",
    [
        (np.zeros(3, np.float32), np.ones(1, np.float32), 2, "0 \\(E4M3\\) or 1"),
        (np.zeros(3, np.int32), np.ones(1, np.float32), 0, "float32, float16 or bfloat16"),
        (np.zeros(3, np.float32), np.ones(2, np.float32), 0, "shape \\[1\\]"),
        (np.zeros(3, np.float32), np.ones(1, np.float64), 0, "float32 array"),
    ],
)
def test_bad_arguments_are_refused_before_any_launch(x, scale, code, error):
    with pytest.raises((TypeError, ValueError), match=error):
        cast_fp8_with_amax(x, scale, code)


def test_the_environment_check_of_the_cast_passes_on_the_kernel(on_emulator):
    """``fp8_kernels.check_cast`` (what ``python -m minitorch_amp`` runs on a GPU) holds the
    emulated kernel to the twin: every float16 value, both formats and modes, the transpose."""
    assert fp8_kernels.check_cast(on_device, np.asarray)
    names = {name for name, _ in on_emulator}
    assert names == {"cast_fp8_amax<__half>", "cast_transpose_fp8_amax<__half>"}


def test_on_numpy_arrays_the_launchers_run_the_twin_and_fold_a_given_amax():
    x = np.float32([[1.0, -600.0], [3e-3, np.inf]])
    scale = np.float32([1.0])
    amax = np.float32([700.0])
    out, out_t, folded = cast_transpose_fp8(x[:, :1], scale, E4M3, amax=amax)
    assert folded is amax and amax.tolist() == [700.0] and np.array_equal(out_t, out.T)
    out, again = cast_fp8_with_amax(x, scale, E4M3)
    assert np.array_equal(out, twin_cast(x, scale, E4M3)[0]) and again.tolist() == [np.inf]
    assert np.asarray(out).view(FORMATS[E4M3]).astype(np.float32)[1].tolist() == [
        2.0**-8,
        448,
    ]  # 1.5 units
