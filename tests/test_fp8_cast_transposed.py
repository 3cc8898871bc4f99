"""``ScalingState.cast_transposed``: the FP8 bytes and their transpose from one cast, so an FP8
Linear hands its GEMMs every operand K-major without a transposing copy of the bytes. On an
emulated GPU a delayed cast-and-transpose is one launch (``cast_transpose_fp8``, whose last
block runs the scale update, as the plain cast's does) and gives the NumPy path's bytes,
transpose and state bit for bit; on NumPy it is :meth:`~ScalingState.cast` and a transposed
copy, for every recipe. The FP8 Linear's products then get contiguous K-major operands only
(what the kernel reads: any other layout would be copied first, as the H200 profile showed: 9
copies, 329 of 1517 GPU µs per FP8 O2 SimpleNet step).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import test_fp8_scale_kernel as kernel_tests
from test_amp_kernels import assert_same_bits
from test_fp8_scale_kernel import assert_bits, host, on_device
from test_fp8_scale_state import fp8_kernels_in_type, steps

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.amp.fp8.recipe import DelayedScaling, Float8CurrentScaling
from minitorch_amp.amp.fp8.scaling import ScalingState
from minitorch_amp.backend import device

emulators = kernel_tests.emulators  # the fixtures: both emulators built once per module
on_emulator = kernel_tests.on_emulator

RECIPES = [DelayedScaling(amax_history_len=4), Float8CurrentScaling()]


@pytest.mark.parametrize("dtype", ["float32", "float16", ml_dtypes.bfloat16], ids=str)
def test_on_the_gpu_a_delayed_cast_and_transpose_is_one_launch_and_the_numpy_bits(
    dtype, on_emulator
):
    recipe = DelayedScaling(amax_history_len=4)
    fp8_dtype = recipe.dtype(False)
    gpu = ScalingState(recipe, fp8_dtype, device.cupy)
    cpu = ScalingState(recipe, fp8_dtype, np)
    for step, x in enumerate(steps(dtype, seed=7)):
        on_emulator.clear()
        out, scale_inv, out_t = gpu.cast_transposed(on_device(x))
        want_out, want_scale_inv = cpu.cast(x)
        where = f"step {step}"
        np.testing.assert_array_equal(host(out).view(np.uint8), want_out.view(np.uint8), where)
        np.testing.assert_array_equal(host(out_t).view(np.uint8), want_out.T.view(np.uint8))
        assert out_t.dtype == out.dtype == want_out.dtype and host(out_t).flags.c_contiguous
        assert_bits(scale_inv, want_scale_inv, where)
        for field in ("scale", "scale_inv", "amax_history"):
            assert_same_bits(getattr(gpu, field), getattr(cpu, field), f"{where}: {field}")
        assert on_emulator == [
            ("fp8_cast.cu", f"cast_transpose_fp8_amax<{fp8_kernels_in_type(dtype)}>")
        ]


@pytest.mark.parametrize("recipe", RECIPES, ids=["delayed", "current"])
def test_on_numpy_it_is_the_cast_and_its_transpose(recipe):
    fp8_dtype = recipe.dtype(False)
    plain, transposed = (ScalingState(recipe, fp8_dtype, np) for _ in range(2))
    for x in steps("float32", seed=3):
        out, scale_inv = plain.cast(x)
        got, got_scale_inv, got_t = transposed.cast_transposed(x)
        assert np.array_equal(got.view(np.uint8), out.view(np.uint8))
        assert np.array_equal(got_t.view(np.uint8), out.T.view(np.uint8))
        assert got_t.flags.c_contiguous and got_t.dtype == out.dtype
        assert_bits(got_scale_inv, scale_inv)
        for field in ("scale", "scale_inv", "amax_history"):
            assert_same_bits(getattr(transposed, field), getattr(plain, field), field)


def test_only_a_matrix_is_cast_and_transposed_and_a_refusal_records_nothing():
    state = ScalingState(DelayedScaling(amax_history_len=4), ml_dtypes.float8_e4m3fn, np)
    before = [a.copy() for a in (state.scale, state.scale_inv, state.amax_history)]
    with pytest.raises(ValueError, match="2-D"):
        state.cast_transposed(np.ones((2, 3, 4), np.float32))
    for was, now in zip(before, (state.scale, state.scale_inv, state.amax_history)):
        assert np.array_equal(was, now)


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_an_fp8_linear_hands_its_gemms_contiguous_k_major_operands_only(level, monkeypatch):
    from minitorch_amp.amp.fp8 import gemm

    layouts, plain = [], gemm.fp8_matmul

    def recording(a, b, sa, sb, out_dtype, out=None, bias=None):
        # the kernel reads A [M, K] and B^T [N, K] row by row: anything else is copied
        layouts.append((a.flags.c_contiguous, b.T.flags.c_contiguous))
        return plain(a, b, sa, sb, out_dtype, out=out, bias=bias)

    monkeypatch.setattr(gemm, "fp8_matmul", recording)
    mt.seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
    opt = mt.optimizer.SGD(learning_rate=0.1, parameters=model.parameters())
    if level == "O2":
        model, opt = amp.decorate(model, opt, level="O2", dtype="bfloat16")
    with amp.auto_cast(level=level, dtype="bfloat16"), amp.fp8_autocast():
        out = model(mt.randn([4, 16]))
    out.astype("float32").mean().backward()
    assert len(layouts) == 5 and all(a and b for a, b in layouts), layouts


@pytest.mark.gpu
@pytest.mark.parametrize("recipe", RECIPES, ids=["delayed", "current"])
def test_on_a_gpu_cast_transposed_is_the_numpy_cast_and_its_transpose(recipe, monkeypatch):
    if device.cupy is None:
        pytest.skip("needs CuPy and a CUDA device")
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "1")
    cp, fp8_dtype = device.cupy, recipe.dtype(False)
    gpu = ScalingState(recipe, fp8_dtype, cp)
    cpu = ScalingState(recipe, fp8_dtype, np)
    for step, x in enumerate(steps("float16", seed=5)):
        out, scale_inv, out_t = gpu.cast_transposed(cp.asarray(x))
        want, want_scale_inv = cpu.cast(x)
        got, got_t = (device.asnumpy(a.view(cp.uint8)) for a in (out, out_t))
        np.testing.assert_array_equal(got, want.view(np.uint8), f"step {step}")
        np.testing.assert_array_equal(got_t, want.T.view(np.uint8), f"step {step}")
        # NOTE: asnumpy first: assert_bits reads through np.asarray, which CuPy refuses
        assert_bits(device.asnumpy(scale_inv), want_scale_inv, f"step {step}")
        for field in ("scale", "scale_inv"):
            assert_same_bits(device.asnumpy(getattr(gpu, field)), getattr(cpu, field), field)


def test_a_weight_a_convolution_cast_first_is_transposed_from_its_copy_not_cast_again():
    # one cast per weight per region: a second would record a second amax
    from minitorch_amp.amp.fp8 import autocast as fp8_autocast_module

    weight = nn.Linear(4, 6).weight
    region = fp8_autocast_module._Region(DelayedScaling(), {})
    meta = fp8_autocast_module._meta_for(weight, region.recipe, np)
    w_q, scale_inv = fp8_autocast_module._weight_fp8(region, weight, meta)
    again_q, again_scale_inv, w_qt = fp8_autocast_module._weight_fp8(
        region, weight, meta, transpose=True
    )
    assert again_q is w_q and again_scale_inv is scale_inv
    assert np.array_equal(w_qt.view(np.uint8), w_q.T.view(np.uint8)) and w_qt.flags.c_contiguous
    assert np.count_nonzero(meta.weight.amax_history) == 1
