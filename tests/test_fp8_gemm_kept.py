"""``fp8_gemm`` keeps a GPU call's launch under its signature, as ``gemm.gemm`` does
(``tests/test_gemm_kept.py``): the next call like it launches exactly what a fresh call
would, and a call that differs in anything checked is not taken for it. On the CPU, with
CuPy and a Hopper GPU stood in for (``benchmarks/gpu_stand_in.py``)."""

from __future__ import annotations

from unittest import mock

import ml_dtypes
import numpy as np
import pytest
from kept_launches import assert_same_launch, fresh, hopper_stand_in, on_gpu

from minitorch_amp.backend import fp8_gemm as fg
from minitorch_amp.backend import gemm_sm90
from minitorch_amp.backend.fp8_kernels import E4M3, E5M2

BF16 = ml_dtypes.bfloat16

gpu = pytest.fixture(hopper_stand_in)


def fp8(shape, seed):
    rng = np.random.default_rng(seed)
    return on_gpu(rng.integers(0, 256, shape, dtype=np.uint8))  # FP8 bytes (codes given)


def variants():
    a, w = fp8((64, 128), 0), fp8((96, 128), 1)  # b = w.T: K-major already
    scale = on_gpu(np.ones(1, np.float32))
    bias = on_gpu(np.zeros(96, np.float32).astype(BF16))
    out = on_gpu(np.zeros((64, 96), np.float32))
    shifted = on_gpu(np.zeros(a.size + 8, np.uint8))[1 : a.size + 1].reshape(a.shape)
    shifted[...] = a
    return out, {
        "plain": lambda: fg.fp8_gemm(a, w.T, scale, scale, BF16, E4M3, E4M3),
        "float32 out": lambda: fg.fp8_gemm(a, w.T, scale, scale, np.float32, E4M3, E4M3),
        "E4M3 x E5M2": lambda: fg.fp8_gemm(a, w.T, scale, scale, BF16, E4M3, E5M2),
        "bias": lambda: fg.fp8_gemm(a, w.T, scale, scale, BF16, E4M3, E4M3, bias=bias),
        "out": lambda: fg.fp8_gemm(a, w.T, scale, scale, np.float32, E4M3, E4M3, out=out),
        "another shape": lambda: fg.fp8_gemm(a[:32], w.T, scale, scale, BF16, E4M3, E4M3),
        "misaligned a": lambda: fg.fp8_gemm(shifted, w.T, scale, scale, BF16, E4M3, E4M3),
    }


def test_every_call_launches_what_a_fresh_call_launches(gpu):
    out, calls = variants()
    for call in calls.values():
        call()
    kept = len(fg.KEPT)
    assert kept == len(calls) - 1  # the misaligned operand takes CuPy's arithmetic: no launch
    for what, call in calls.items():
        gpu.recorded.clear()
        result = call()
        assert (result is out) == (what == "out"), what  # out is written into and returned
        fresh(call, fg.KEPT)
        if what == "misaligned a":
            assert gpu.recorded == [], what
            continue
        assert len(gpu.recorded) == 2, what
        assert_same_launch(*gpu.recorded)
    assert len(fg.KEPT) == kept


def test_a_kept_call_checks_nothing_again_and_still_refuses_what_it_refused(gpu):
    _, calls = variants()
    calls["plain"]()
    checks = []
    original = fg._check_gemm_args
    with mock.patch.object(fg, "_check_gemm_args", lambda *a: checks.append(a) or original(*a)):
        calls["plain"]()
    assert checks == []
    a, w = fp8((64, 128), 0), fp8((96, 128), 1)
    scale = on_gpu(np.ones(1, np.float32))
    with pytest.raises(ValueError, match="E5M2 x E5M2"):
        fg.fp8_gemm(a, w.T, scale, scale, BF16, E5M2, E5M2)
    with pytest.raises(TypeError, match="out must be an array of the operands' kind"):
        fg.fp8_gemm(a, w.T, scale, scale, BF16, E4M3, E4M3, out=np.zeros((64, 96), BF16))


def test_the_kernel_setting_is_part_of_the_signature(gpu, monkeypatch):
    _, calls = variants()
    calls["plain"]()
    monkeypatch.setenv(gemm_sm90.KERNEL_ENV, "sm80")  # CuPy's arithmetic: no FP8 launch
    gpu.recorded.clear()
    calls["plain"]()
    assert gpu.recorded == []


def test_an_operand_copied_first_is_not_kept(gpu):
    a = fp8((128, 64), 2)[:, ::1].T  # [64, 128], not C-contiguous: copied K-major first
    w = fp8((96, 128), 1)
    scale = on_gpu(np.ones(1, np.float32))
    fg.fp8_gemm(a, w.T, scale, scale, BF16, E4M3, E4M3)
    assert fg.KEPT == {} and len(gpu.recorded) == 1


@pytest.mark.gpu
def test_on_a_hopper_gpu_a_kept_fp8_call_gives_the_first_calls_bits():
    from minitorch_amp.backend import device
    from minitorch_amp.backend.fp8_kernels import FORMATS

    if not gemm_sm90.device_is_hopper():
        pytest.skip("the FP8 GEMM kernel needs compute capability 9.0")
    cp = device.cupy
    rng = np.random.default_rng(5)

    def small(shape):  # small integers: exact float32 sums in any order
        values = rng.integers(-4, 5, shape).astype(np.float32)
        return values.astype(FORMATS[E4M3]).view(np.uint8)

    a, w = small((256, 128)), small((192, 128))
    scale = np.float32([0.5])
    on = [cp.asarray(v) for v in (a, w, scale)]
    first = cp.asnumpy(fg.fp8_gemm(on[0], on[1].T, on[2], on[2], np.float32, E4M3, E4M3))
    again = cp.asnumpy(fg.fp8_gemm(on[0], on[1].T, on[2], on[2], np.float32, E4M3, E4M3))
    assert len(fg.KEPT) == 1 and first.tobytes() == again.tobytes()
    expected = fg.twin_gemm(a, w.T, scale, scale, np.float32, E4M3, E4M3)
    np.testing.assert_array_equal(first, expected)
