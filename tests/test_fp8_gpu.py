"""The FP8 kernels on a GPU: the cast against ``ml_dtypes`` bit for bit, the Hopper FP8 GEMM
against its twin and against ``torch._scaled_mm`` (cuBLASLt).

Skipped without CuPy and a device (the ``gpu`` marker); the GEMM tests also on GPUs that
are not Hopper (the kernel is built for sm_90a; elsewhere ``fp8_gemm`` runs the twin's
arithmetic on CuPy, which the last test covers). The CPU halves, with the emulators, are
``test_fp8_cast_kernel.py`` and ``test_fp8_gemm.py``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from test_fp8_cast_kernel import ALL_HALF, plain_cast, saturated

from minitorch_amp.backend import device, gemm_sm90
from minitorch_amp.backend import fp8_gemm as fp8_gemm_module
from minitorch_amp.backend.fp8_gemm import fp8_gemm, fp8_gemm_nt, twin_gemm
from minitorch_amp.backend.fp8_kernels import (
    E4M3,
    E5M2,
    FORMATS,
    cast_fp8_with_amax,
    cast_transpose_fp8,
    twin_cast,
)

pytestmark = pytest.mark.gpu

OUTS = ["float32", "float16", ml_dtypes.bfloat16]
PAIRS = [(E4M3, E4M3), (E4M3, E5M2), (E5M2, E4M3)]


@pytest.fixture
def cp():
    if device.cupy is None:
        pytest.skip("needs CuPy and a CUDA device")
    return device.cupy


@pytest.fixture
def hopper(cp, monkeypatch):
    if not gemm_sm90.device_is_hopper():
        pytest.skip("the FP8 GEMM kernel needs compute capability 9.0 (an H100 or H200)")
    monkeypatch.delenv(gemm_sm90.KERNEL_ENV, raising=False)
    return cp


def gpu_cast(cp, x: np.ndarray, scale: float, code: int, saturate: bool):
    out, amax = cast_fp8_with_amax(
        cp.asarray(x), cp.asarray(np.array([scale], np.float32)), code, saturate
    )
    return cp.asnumpy(out), cp.asnumpy(amax)


@pytest.mark.parametrize("saturate", [True, False], ids=["saturate", "plain"])
@pytest.mark.parametrize("code", [E4M3, E5M2], ids=["e4m3", "e5m2"])
def test_every_16_bit_value_and_a_million_float32_cast_like_ml_dtypes(cp, code, saturate):
    bits = np.random.default_rng(28).integers(0, 2**32, 10**6, dtype=np.uint64)
    inputs = [
        ALL_HALF.view(np.float16),
        ALL_HALF.view(ml_dtypes.bfloat16),
        bits.astype(np.uint32).view(np.float32),
    ]
    for x in inputs:
        out, amax = gpu_cast(cp, x, 1.0, code, saturate)
        expected = plain_cast(x, 1.0, code)
        if saturate:
            with np.errstate(invalid="ignore"):
                expected = saturated(expected, x.astype(np.float32), code)
        np.testing.assert_array_equal(out, expected)
        assert np.isnan(amax[0])  # each input holds NaNs


@pytest.mark.parametrize("code", [E4M3, E5M2])
def test_scaled_casts_and_their_transposes_equal_the_twin(cp, code):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((333, 517)) * 500).astype(np.float32)
    scale = np.array([0.37], np.float32)
    out, out_t, amax = cast_transpose_fp8(cp.asarray(x), cp.asarray(scale), code)
    expected, expected_amax = twin_cast(x, scale, code)
    np.testing.assert_array_equal(cp.asnumpy(out), expected)
    np.testing.assert_array_equal(cp.asnumpy(out_t), expected.T)
    assert cp.asnumpy(amax).tolist() == expected_amax.tolist()


def integers(rng, shape, code):
    """FP8 integers in [-4, 4]: every sum of their products is exact, in any order, in
    float32 and in the tensor cores' narrower FP8 accumulation (the sums stay far below
    2**13 here)."""
    return rng.integers(-4, 5, shape).astype(np.float32).astype(FORMATS[code])


SHAPES = [(136, 136, 272), (8, 24, 16), (520, 1032, 1024), (4096, 512, 256)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("out_dtype", OUTS)
@pytest.mark.parametrize("codes", PAIRS)
def test_the_kernel_equals_the_twin_where_the_sums_are_exact(hopper, shape, out_dtype, codes):
    cp = hopper
    m, n, k = shape
    rng = np.random.default_rng(m + n + k)
    a, b_t = integers(rng, (m, k), codes[0]), integers(rng, (n, k), codes[1])
    sa, sb = np.array([0.5], np.float32), np.array([0.375], np.float32)
    out = fp8_gemm_nt(
        cp.asarray(a.view(np.uint8)), cp.asarray(b_t.view(np.uint8)),
        cp.asarray(sa), cp.asarray(sb), out_dtype, *codes,
    )  # fmt: skip
    expected = twin_gemm(a, b_t.T, sa, sb, out_dtype)
    np.testing.assert_array_equal(cp.asnumpy(out).view(np.uint8), expected.view(np.uint8))


def test_random_values_meet_the_twin_within_fp8_accumulation(hopper):
    cp = hopper
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((1000, 4096)) * 30).astype(FORMATS[E4M3])
    b = (rng.standard_normal((4096, 700)) * 0.01).astype(FORMATS[E5M2])
    sa, sb = np.array([0.25], np.float32), np.array([3.0], np.float32)
    a_gpu, b_gpu = cp.asarray(a.view(np.uint8)), cp.asarray(b.view(np.uint8))
    out = fp8_gemm(a_gpu, b_gpu, cp.asarray(sa), cp.asarray(sb), "float32", E4M3, E5M2)
    out = cp.asnumpy(out)
    exact = a.astype(np.float64) @ b.astype(np.float64) * 0.75
    size = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) * 0.75
    # Hopper accumulates FP8 products with about 14 significant bits (not float32's 24):
    # a loose bound, which a wrong operand layout or scale still misses by far
    assert np.all(np.abs(out - exact) <= size * 2.0**-8)


@pytest.mark.parametrize("codes", PAIRS)
def test_the_kernel_agrees_with_torch_scaled_mm(hopper, codes):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not hasattr(torch, "_scaled_mm"):
        pytest.skip("this PyTorch has no CUDA or no torch._scaled_mm")
    cp = hopper
    rng = np.random.default_rng(11)
    m, n, k = 512, 768, 1024
    a, b_t = integers(rng, (m, k), codes[0]), integers(rng, (n, k), codes[1])
    sa, sb = np.array([0.5], np.float32), np.array([0.125], np.float32)
    a_gpu, b_gpu = cp.asarray(a.view(np.uint8)), cp.asarray(b_t.view(np.uint8))
    sa_gpu, sb_gpu = cp.asarray(sa), cp.asarray(sb)
    ours = fp8_gemm_nt(a_gpu, b_gpu, sa_gpu, sb_gpu, ml_dtypes.bfloat16, *codes)
    torch_types = {E4M3: torch.float8_e4m3fn, E5M2: torch.float8_e5m2}
    ta = torch.from_dlpack(a_gpu).view(torch_types[codes[0]])
    tb = torch.from_dlpack(b_gpu).view(torch_types[codes[1]]).t()  # column-major [K, N]
    theirs = torch._scaled_mm(
        ta, tb, scale_a=torch.from_dlpack(sa_gpu).reshape(()),
        scale_b=torch.from_dlpack(sb_gpu).reshape(()), out_dtype=torch.bfloat16,
    )  # fmt: skip
    theirs_bits = theirs.view(torch.int16).cpu().numpy().view(np.uint16)
    np.testing.assert_array_equal(cp.asnumpy(ours).view(np.uint16), theirs_bits)


def test_off_hopper_or_forced_off_the_gemm_runs_the_twin_arithmetic(cp, monkeypatch):
    monkeypatch.setenv(gemm_sm90.KERNEL_ENV, "sm80")
    rng = np.random.default_rng(6)
    a, b = integers(rng, (40, 24), E4M3), integers(rng, (24, 8), E4M3)  # K % 16 != 0 too
    sa = np.array([2.0], np.float32)
    a_gpu, b_gpu, s_gpu = (cp.asarray(v) for v in (a.view(np.uint8), b.view(np.uint8), sa))
    out = fp8_gemm_module.fp8_gemm(a_gpu, b_gpu, s_gpu, s_gpu, "float16", E4M3, E4M3)
    np.testing.assert_array_equal(cp.asnumpy(out), twin_gemm(a, b, sa, sa, "float16"))


@pytest.mark.parametrize("forced_off", [False, True], ids=["kernel", "twin arithmetic"])
def test_out_receives_the_product_and_a_wrong_out_is_refused_untouched(cp, monkeypatch, forced_off):
    # a weight gradient's GEMM writes into the stale .grad buffer: the same bytes as a new
    # array, on the Hopper kernel and on the twin's arithmetic on CuPy alike
    if forced_off:
        monkeypatch.setenv(gemm_sm90.KERNEL_ENV, "sm80")
    elif not gemm_sm90.device_is_hopper():
        pytest.skip("the FP8 GEMM kernel needs compute capability 9.0 (an H100 or H200)")
    rng = np.random.default_rng(7)
    a, b_t = integers(rng, (136, 272), E4M3), integers(rng, (200, 272), E5M2)
    args = [cp.asarray(v) for v in (a.view(np.uint8), b_t.view(np.uint8))]
    args += [cp.asarray(np.array([s], np.float32)) for s in (0.5, 0.375)]
    fresh = fp8_gemm_nt(*args, ml_dtypes.bfloat16, E4M3, E5M2)
    sevens = np.full((136, 200), 7, ml_dtypes.bfloat16)  # (moved as bits, as elsewhere here)
    out = cp.asarray(sevens.view(np.uint16)).view(ml_dtypes.bfloat16)
    assert fp8_gemm_nt(*args, ml_dtypes.bfloat16, E4M3, E5M2, out=out) is out
    np.testing.assert_array_equal(
        cp.asnumpy(out).view(np.uint16), cp.asnumpy(fresh).view(np.uint16)
    )
    wrong = cp.full((136, 200), 7, dtype=np.float32)
    with pytest.raises(ValueError, match="out"):
        fp8_gemm_nt(*args, ml_dtypes.bfloat16, E4M3, E5M2, out=wrong)
    assert bool((wrong == 7).all())


@pytest.mark.parametrize("out_dtype", OUTS)
def test_the_epilogue_adds_a_bias_to_the_stored_product_as_the_twin(hopper, out_dtype):
    cp = hopper
    rng = np.random.default_rng(9)
    a, b_t = integers(rng, (200, 272), E4M3), integers(rng, (136, 272), E4M3)
    bias = (rng.standard_normal(136) * 3).astype(np.float32).astype(out_dtype)
    sa, sb = np.array([0.5], np.float32), np.array([0.375], np.float32)
    on_device = cp.asarray(bias.view(np.uint8)).view(bias.dtype)
    out = fp8_gemm_nt(
        cp.asarray(a.view(np.uint8)), cp.asarray(b_t.view(np.uint8)),
        cp.asarray(sa), cp.asarray(sb), out_dtype, E4M3, E4M3, bias=on_device,
    )  # fmt: skip
    expected = twin_gemm(a, b_t.T, sa, sb, out_dtype, bias=bias)
    np.testing.assert_array_equal(cp.asnumpy(out).view(np.uint8), expected.view(np.uint8))
