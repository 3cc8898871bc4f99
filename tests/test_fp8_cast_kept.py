"""The FP8 casts (``cast_fp8_with_amax``, ``cast_transpose_fp8``) keep a GPU call's launch
under its signature, as ``gemm.gemm`` does (``tests/test_gemm_kept.py``): the next call
like it launches exactly what a fresh call would, and a call that differs in anything
checked is not taken for it. On the CPU, with CuPy stood in for
(``benchmarks/gpu_stand_in.py``)."""

from __future__ import annotations

from unittest import mock

import ml_dtypes
import numpy as np
import pytest
from kept_launches import assert_same_launch, fresh, hopper_stand_in, on_gpu

from minitorch_amp.backend import fp8_kernels as fk
from minitorch_amp.backend import fp8_scale
from minitorch_amp.backend.fp8_kernels import E4M3, E5M2

BF16 = ml_dtypes.bfloat16

gpu = pytest.fixture(hopper_stand_in)


def variants():
    """Casts that differ from the first in one thing each: ``{name: call}``."""
    rng = np.random.default_rng(0)
    x = on_gpu(rng.standard_normal((48, 80)).astype(BF16))
    x16, x32 = on_gpu(np.asarray(x).astype(np.float16)), on_gpu(np.asarray(x, np.float32))
    scale, amax = on_gpu(np.ones(1, np.float32)), on_gpu(np.zeros(1, np.float32))
    history, scale_inv = on_gpu(np.zeros(4, np.float32)), on_gpu(np.ones(1, np.float32))
    done = on_gpu(np.zeros(1, np.uint32))
    update = fp8_scale.update_in_cast(history, scale, scale_inv, 448.0, 0, "max", amax, done)[0]
    empty = on_gpu(np.zeros((0, 80), BF16))
    return {
        "plain": lambda: fk.cast_fp8_with_amax(x, scale, E4M3),
        "E5M2": lambda: fk.cast_fp8_with_amax(x, scale, E5M2),
        "not saturating": lambda: fk.cast_fp8_with_amax(x, scale, E4M3, saturate=False),
        "float16": lambda: fk.cast_fp8_with_amax(x16, scale, E4M3),
        "float32": lambda: fk.cast_fp8_with_amax(x32, scale, E4M3),
        "amax given": lambda: fk.cast_fp8_with_amax(x, scale, E4M3, amax=amax),
        "with its update": lambda: fk.cast_fp8_with_amax(x, scale, E4M3, amax=amax, update=update),
        "another shape": lambda: fk.cast_fp8_with_amax(x[:16], scale, E4M3),
        "empty": lambda: fk.cast_fp8_with_amax(empty, scale, E4M3),
        "transposed": lambda: fk.cast_transpose_fp8(x, scale, E4M3),
        "transposed, E5M2": lambda: fk.cast_transpose_fp8(x, scale, E5M2),
        "transposed, float32": lambda: fk.cast_transpose_fp8(x32, scale, E4M3),
        "transposed, update": lambda: fk.cast_transpose_fp8(x, scale, E4M3, True, amax, update),
        "transposed, another shape": lambda: fk.cast_transpose_fp8(x[:16], scale, E4M3),
        "transposed, empty": lambda: fk.cast_transpose_fp8(empty, scale, E4M3),
    }


def test_every_cast_launches_what_a_fresh_cast_launches(gpu):
    """Each variant, cast after all the others were kept, launches the kernel and the
    arguments it launches with nothing kept, and returns outputs of the same shapes."""
    calls = variants()
    for call in calls.values():
        call()
    assert len(fk.KEPT) == len(calls)
    for what, call in calls.items():
        gpu.recorded.clear()
        kept = call()
        first = fresh(call, fk.KEPT)
        assert [(a.shape, a.dtype) for a in kept] == [(a.shape, a.dtype) for a in first], what
        if "empty" in what:
            assert gpu.recorded == [], what  # no block to run
            continue
        assert len(gpu.recorded) == 2, what
        assert_same_launch(*gpu.recorded)
    assert len(fk.KEPT) == len(calls)


def test_a_kept_cast_checks_nothing_again_and_still_refuses_what_it_refused(gpu):
    calls = variants()
    calls["transposed"]()
    checks = []
    original = fk._check_cast_args
    with mock.patch.object(fk, "_check_cast_args", lambda *a: checks.append(a) or original(*a)):
        calls["transposed"]()
    assert checks == []
    x, scale = on_gpu(np.ones((8, 8), BF16)), on_gpu(np.ones(1, np.float32))
    fk.cast_fp8_with_amax(x, scale, E4M3)
    with pytest.raises(ValueError, match="out_dtype_code must be 0"):
        fk.cast_fp8_with_amax(x, scale, 2)
    with pytest.raises(ValueError, match="scale must be a float32 array of shape"):
        fk.cast_fp8_with_amax(x, on_gpu(np.ones(2, np.float32)), E4M3)
    with pytest.raises(ValueError, match="update needs amax"):
        fk.cast_fp8_with_amax(x, scale, E4M3, update=(0,) * 7)
    with pytest.raises(ValueError, match="takes a 2-D array"):
        fk.cast_transpose_fp8(on_gpu(np.ones(8, BF16)), scale, E4M3)


def test_a_cast_of_a_copied_input_is_not_kept(gpu):
    x = on_gpu(np.ones((16, 32), BF16))[:, ::2]  # strided: copied first
    fk.cast_fp8_with_amax(x, on_gpu(np.ones(1, np.float32)), E4M3)
    assert fk.KEPT == {} and len(gpu.recorded) == 1


def test_the_kept_casts_are_bounded(gpu, monkeypatch):
    monkeypatch.setattr(fk, "KEPT_CALLS", 4)
    scale = on_gpu(np.ones(1, np.float32))
    for rows in range(1, 10):
        fk.cast_fp8_with_amax(on_gpu(np.ones((rows, 16), BF16)), scale, E4M3)
        assert len(fk.KEPT) <= 4


@pytest.mark.gpu
def test_on_a_gpu_a_kept_cast_gives_the_first_casts_bytes():
    from minitorch_amp.backend import device

    cp = device.cupy
    x = cp.asarray(np.random.default_rng(6).standard_normal((96, 160)).astype(np.float32))
    scale = cp.asarray(np.float32([3.0]))
    first = [cp.asnumpy(a) for a in fk.cast_transpose_fp8(x, scale, E4M3)]
    assert len(fk.KEPT) == 1
    again = [cp.asnumpy(a) for a in fk.cast_transpose_fp8(x, scale, E4M3)]  # the kept launch
    assert all(f.tobytes() == a.tobytes() for f, a in zip(first, again))
    out, amax = fk.twin_cast(cp.asnumpy(x), np.float32([3.0]), E4M3)
    assert first[0].tobytes() == out.tobytes() and first[1].tobytes() == out.T.copy().tobytes()
    assert first[2].tolist() == amax.tolist()
