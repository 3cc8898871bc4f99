"""The bfloat16 GEMMs: the twin's contract, which kernel a launch picks, the kernel files
(registered names, NVRTC PTX with the bfloat16 instructions, the loader's include), and on
a GPU every bfloat16 kernel against the specification.

The specification is ``backend/gemm.py``'s, with bfloat16 inputs: products of two 8-bit
significands are exact in float32, sums and the epilogue are float32, and the result is
rounded ONCE to bfloat16 (or kept in float32).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from test_gemm import LAYOUTS, exact

import minitorch_amp as mt
from minitorch_amp.backend import (
    device,
    gemm,
    gemm_bf16_sm90,
    gemm_gpu,
    gemm_sm90,
    kernels,
    nvrtc,
    tensor_maps,
)
from minitorch_amp.backend import primitives as prim
from minitorch_amp.backend.dtypes import bfloat16, float16, float32
from minitorch_amp.backend.gemm import gemm as run_gemm
from minitorch_amp.testing import bf16

ONE_PLUS = 1.0 + 2.0**-8  # a bfloat16 tie: rounds to the even 1.0


def stored(rng, rows, cols, transpose):
    """A random bfloat16 operand of logical shape (rows, cols), stored transposed if asked."""
    x = rng.standard_normal((rows, cols)).astype(bfloat16)
    return np.ascontiguousarray(x.T) if transpose else x


def assert_within_bound(result, a, b, ta=False, tb=False, **epilogue):
    """``result`` is within K float32 roundings of the sums plus half a ulp of its dtype."""
    value = exact(a, b, ta, tb, **epilogue)
    a64 = np.abs(np.asarray(a, np.float64))
    b64 = np.abs(np.asarray(b, np.float64))
    a64, b64 = (a64.swapaxes(-1, -2) if ta else a64), (b64.swapaxes(-1, -2) if tb else b64)
    scale = abs(float(np.float32(epilogue.get("alpha", 1.0)))) * (a64 @ b64)
    if epilogue.get("beta"):
        scale = scale + abs(epilogue["beta"]) * np.abs(np.asarray(epilogue["c"], np.float64))
    if epilogue.get("bias") is not None:
        scale = scale + np.abs(np.asarray(epilogue["bias"], np.float64))
    accumulated = (a64.shape[-1] + 4) * 2.0**-23 * scale
    half_ulp, tiny = (2.0**-8, 2.0**-134) if result.dtype == bfloat16 else (2.0**-24, 2.0**-149)
    bound = accumulated + half_ulp * (np.abs(value) + accumulated) + tiny
    if epilogue.get("bias") is not None:  # the product is rounded to the result's dtype first
        plain = {key: v for key, v in epilogue.items() if key not in ("bias", "relu")}
        bound = bound + half_ulp * (np.abs(exact(a, b, ta, tb, **plain)) + accumulated) + tiny
    error = np.abs(np.asarray(result, np.float64) - value)
    assert np.all(error <= bound), f"worst excess {np.max(error - bound):.3g}"


# ---- 1. the specification in bfloat16 (the twin) --------------------------------------------
def test_bf16_products_are_summed_in_float32_and_the_bias_added_to_the_rounded_product():
    # Paddle's F.linear is a matmul, then an add: 1 + 2**-8 is a bfloat16 tie stored as 1.0,
    # and 1.0 + 2**-8 is a tie again, 1.0. Adding the bias before the rounding would give
    # 1 + 2**-7 (exact).
    a = np.array([[1.0, 2.0**-8]], dtype=bfloat16)
    b = np.array([[1.0], [1.0]], dtype=bfloat16)
    out = run_gemm(a, b, bias=np.array([2.0**-8], dtype=bfloat16))
    assert out.dtype == bfloat16
    assert float(out[0, 0]) == 1.0
    wide = run_gemm(a, b, out_dtype="float32")
    assert wide.dtype == float32 and float(wide[0, 0]) == ONE_PLUS  # the accumulator itself
    # a float32 output rounds nothing: the bias lands on the exact sum
    biased = run_gemm(a, b, bias=np.array([2.0**-8], dtype=float32), out_dtype="float32")
    assert float(biased[0, 0]) == 1.0 + 2.0**-7


def test_bf16_rounds_to_inf_from_its_threshold_on():
    # the largest bfloat16 plus a quarter of its spacing: (2 - 2**-8) * 2**127, the tie
    # between the largest finite value and 2**128, which rounds to inf (float32 holds it)
    largest = bf16.MAX
    a = np.array([[1.0, 1.0]], dtype=bfloat16)
    b = np.array([[largest], [2.0**119]], dtype=bfloat16)
    assert np.isinf(float(run_gemm(a, b)[0, 0]))
    assert float(run_gemm(a, b, out_dtype="float32")[0, 0]) == (2 - 2.0**-8) * 2.0**127


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda a, b: run_gemm(a, b.astype(float16)), TypeError, "both"),
        (lambda a, b: run_gemm(a, b, out_dtype="float16"), TypeError, "bfloat16 or float32"),
        (lambda a, b: run_gemm(a, b, bias=np.zeros(6, float16)), TypeError, "bias must be"),
        (lambda a, b: run_gemm(a, b, c=np.zeros((4, 6), float16)), TypeError, "bfloat16 or"),
    ],
)
def test_bf16_bad_arguments_are_refused(call, error, message):
    a, b = np.zeros((4, 3), bfloat16), np.zeros((3, 6), bfloat16)
    with pytest.raises(error, match=message):
        call(a, b)


def test_linear_is_paddles_matmul_then_add_in_bf16():
    # The product 1 + 2**-8 is a bfloat16 tie, stored as 1.0; the add 1.0 + 2**-8 is a tie
    # again: 1.0 (the bias added before the rounding would give 1 + 2**-7).
    x = np.array([[1.0, 2.0**-8]], dtype=bfloat16)
    w = np.array([[1.0], [1.0]], dtype=bfloat16)
    bias = np.array([2.0**-8], dtype=bfloat16)
    out = prim.linear(x, w, bias)
    assert out.dtype == bfloat16 and float(out[0, 0]) == 1.0
    op = mt.nn.functional.linear(mt.to_tensor(x), mt.to_tensor(w), mt.to_tensor(bias))
    assert float(op.numpy()[0, 0]) == 1.0  # the op, through the dispatch point
    # a float32 bias (O1): the rounded product, cast to float32 exactly, plus the bias
    wide = prim.linear(x, w, bias.astype(float32))
    assert wide.dtype == float32 and float(wide[0, 0]) == 1.0 + 2.0**-8


def test_bf16_scatter_add_sums_in_float32_and_rounds_once():
    target = np.zeros(1, dtype=bfloat16)
    prim.scatter_add(target, np.array([0, 0, 0]), np.array([1.0, 2**-8, 2**-8], bfloat16))
    assert float(target[0]) == 1.0 + 2.0**-7  # added one by one in bfloat16: 1.0
    x = mt.to_tensor([0.0, 5.0], dtype="bfloat16", stop_gradient=False)
    x[mt.to_tensor([0, 0, 0])].backward(
        grad_tensor=mt.to_tensor([1.0, 2**-8, 2**-8], dtype="bfloat16")
    )
    assert x.grad.dtype == mt.bfloat16
    assert x.grad.numpy().astype(np.float64).tolist() == [1.0 + 2.0**-7, 0.0]


# ---- 2. which kernel a launch picks (run on the CPU with the launches recorded) -------------
@pytest.mark.parametrize("hopper", [True, False])
@pytest.mark.parametrize("in_dtype", [float16, bfloat16])
def test_each_input_dtype_goes_to_its_own_kernel(monkeypatch, hopper, in_dtype):
    calls = []
    monkeypatch.setattr(gemm_sm90, "usable", lambda a, b, k: hopper)
    monkeypatch.setattr(gemm_sm90, "sm_count", lambda: 132)
    monkeypatch.setattr(tensor_maps, "encode", lambda array, box: None)  # (no driver here)
    monkeypatch.setattr(kernels, "launch", lambda file, name, *args: calls.append((file, name)))
    a, b = np.ones((4, 8), in_dtype), np.ones((8, 4), in_dtype)
    epilogue = gemm._Epilogue(None, False, np.float32(1), np.float32(0))
    gemm_gpu._launch_2d(a, b, False, True, epilogue, np.empty((4, 4), in_dtype))
    ((file, name),) = calls
    if hopper:
        own = gemm_bf16_sm90 if in_dtype == bfloat16 else gemm_sm90
        assert file == own.FILE and name in own.NAMES
        operands = "__nv_bfloat16" if in_dtype == bfloat16 else "__half"  # out, then input
        assert name.startswith(f"gemm_sm90<false,true,{operands},{operands},")
    else:
        bf16, f16 = "gemm_bf16<false,true,__nv_bfloat16>", "gemm_f16<false,true,__half>"
        assert (file, name) == (gemm.FILE, bf16 if in_dtype == bfloat16 else f16)


# ---- 3. the kernel files ---------------------------------------------------------------------
def test_the_mma_sync_bf16_instantiations_are_registered_with_the_float16_ones():
    source = gemm.KERNELS.source()
    instantiated = {
        f"gemm_bf16<{ta},{tb},{out}>"
        for ta, tb, out in re.findall(r"GEMM_BF16_INSTANTIATE\((\w+), (\w+), (\w+)\)\n", source)
    }
    assert set(gemm.BF16_NAMES) == instantiated and len(instantiated) == 6
    assert set(gemm.BF16_NAMES) <= set(kernels.REGISTRY[gemm.FILE].names)
    assert gemm.kernel_name(True, False, float32, bfloat16) == "gemm_bf16<true,false,float>"


def test_the_hopper_bf16_kernel_is_registered_for_sm90a_with_every_layout_width_and_output():
    entry = kernels.REGISTRY[gemm_bf16_sm90.FILE]
    assert entry is gemm_bf16_sm90.KERNELS and entry.arch == gemm_sm90.ARCH == "sm_90a"
    assert len(entry.names) == 3 * 2 * len(gemm_sm90.SCHEDULES)  # (split-K: no reduce)
    assert all("__nv_bfloat16," in n for n in entry.names if n.startswith("gemm_sm90<"))


def test_the_loader_inlines_a_quoted_include_of_another_kernel_file(monkeypatch, tmp_path):
    text = kernels.REGISTRY[gemm_bf16_sm90.FILE].source()
    assert '#include "gemm_sm90.cu"' not in text
    assert kernels.REGISTRY[gemm_sm90.FILE].source() in text  # all of it, unchanged
    assert text.index("struct Wgmma<__nv_bfloat16>") < text.index("load_out<__nv_bfloat16>")
    (tmp_path / "a.cu").write_text('#include "b.cu"\n')
    (tmp_path / "b.cu").write_text('// b\n#include "a.cu"\n')
    monkeypatch.setattr(kernels, "cuda_dir", lambda: tmp_path)
    with pytest.raises(ValueError, match=r"a\.cu includes itself"):
        kernels.KernelFile("a.cu", ()).source()


def test_nvrtc_builds_the_bf16_mma_sync(nvrtc_available):
    result = nvrtc.compile_source(
        gemm.KERNELS.source(), gemm.FILE, gemm.KERNELS.all_options(), gemm.BF16_NAMES, "compute_80"
    )
    assert set(result["lowered"]) == set(gemm.BF16_NAMES)
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in result["ptx"]


@pytest.mark.slow
def test_nvrtc_builds_the_bf16_wgmma_and_a_bf16_epilogue(nvrtc_available):
    entry = gemm_bf16_sm90.KERNELS
    names = [gemm_bf16_sm90.kernel_name(False, False, bfloat16, 128)]
    result = nvrtc.compile_source(
        entry.source(), entry.file, entry.all_options(), names, entry.arch
    )
    ptx = result["ptx"]
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in ptx
    assert ".f32.f16.f16" not in ptx  # no float16 instruction in a bfloat16 kernel
    assert "cvt.rn.bf16.f32" in ptx  # the epilogue's one rounding, to nearest even
    assert "cvt.rn.bf16x2.f32" in ptx  # the interior tiles' pairs: two values, each once


# ---- 4. on a GPU -----------------------------------------------------------------------------
SHAPES = [(136, 136, 72), (8, 8, 8), (520, 264, 264), (33, 17, 20)]  # the last: no TMA
EPILOGUES = [dict(), dict(bias=True, relu=True), dict(alpha=0.5, beta=2.0, bias=True)]


@pytest.fixture
def cp(monkeypatch):
    if device.cupy is None:
        pytest.skip("needs CuPy and a CUDA device")
    monkeypatch.delenv(gemm_sm90.KERNEL_ENV, raising=False)
    monkeypatch.delenv("MINITORCH_AMP_RAW_KERNELS", raising=False)
    return device.cupy


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["sm80", "auto"])  # auto: the Hopper kernel on an H100
@pytest.mark.parametrize("ta, tb", LAYOUTS)
@pytest.mark.parametrize("out_dtype", [bfloat16, float32], ids=["bf16", "f32"])
def test_bf16_kernels_meet_the_specification(cp, monkeypatch, kernel, ta, tb, out_dtype):
    monkeypatch.setenv(gemm_sm90.KERNEL_ENV, kernel)
    for m, n, k in SHAPES:
        rng = np.random.default_rng(m + n + k)
        a, b = stored(rng, m, k, ta), stored(rng, k, n, tb)
        for options in EPILOGUES:
            options = dict(options)
            if options.pop("bias", False):
                options["bias"] = rng.standard_normal(n).astype(out_dtype)
            if options.get("beta"):
                options["c"] = rng.standard_normal((m, n)).astype(out_dtype)
            gpu = {
                key: cp.asarray(v) if isinstance(v, np.ndarray) else v for key, v in options.items()
            }
            out = run_gemm(cp.asarray(a), cp.asarray(b), ta, tb, out_dtype=out_dtype, **gpu)
            assert out.dtype == out_dtype
            assert_within_bound(cp.asnumpy(out), a, b, ta, tb, **options)


@pytest.mark.gpu
@pytest.mark.parametrize("schedule", list(gemm_sm90.SCHEDULES))
@pytest.mark.parametrize("splits", [1, 3])
def test_bf16_hopper_kernel_every_schedule_and_split(cp, schedule, splits):
    if not gemm_sm90.device_is_hopper():
        pytest.skip("the Hopper GEMM needs compute capability 9.0")
    bn, pingpong = schedule
    rng = np.random.default_rng(bn + splits + pingpong)
    a, b = stored(rng, 264, 1040, False), stored(rng, 1040, 392, False)
    bias = rng.standard_normal(392).astype(bfloat16)
    assert gemm_sm90.usable(cp.asarray(a), cp.asarray(b), 1040)
    with gemm_sm90.forced_plan(bn, splits, pingpong):
        out = run_gemm(cp.asarray(a), cp.asarray(b), bias=cp.asarray(bias), relu=True)
        wide = run_gemm(cp.asarray(a), cp.asarray(b), out_dtype="float32")
    assert_within_bound(cp.asnumpy(out), a, b, bias=bias, relu=True)
    assert_within_bound(cp.asnumpy(wide), a, b)
    name = gemm_bf16_sm90.kernel_name(False, False, bfloat16, bn, pingpong)
    loaded = kernels.get_function(gemm_bf16_sm90.FILE, name)  # the one it ran
    assert loaded.local_size_bytes == 0  # no spills in the binary the driver loaded
    assert loaded.max_dynamic_shared_size_bytes >= gemm_sm90.smem_bytes(bn)


@pytest.mark.gpu
@pytest.mark.parametrize("raw_kernels", ["1", "0"])
def test_batched_bf16_matmul_on_the_gpu_is_the_twin(cp, monkeypatch, raw_kernels):
    """CuPy 14 cannot multiply batched bfloat16 itself: the kernels, or float32 copies, do."""
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", raw_kernels)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 3, 24, 40)).astype(bfloat16)
    for b in (rng.standard_normal((40, 16)), rng.standard_normal((3, 40, 16))):
        b = b.astype(bfloat16)
        out = prim.matmul(cp.asarray(a), cp.asarray(b))
        assert out.dtype == bfloat16 and out.shape == (2, 3, 24, 16)
        assert_within_bound(cp.asnumpy(out), a, np.broadcast_to(b, (2, 3, 40, 16)))
