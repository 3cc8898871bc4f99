"""``bias_grad`` keeps a GPU call's launch under its signature, as ``gemm.gemm`` does
(``tests/test_gemm_kept.py``): the next call like it launches exactly what a fresh call
would, and a call that differs in anything checked is not taken for it. On the CPU, with
CuPy and a GPU stood in for (``benchmarks/gpu_stand_in.py``)."""

from __future__ import annotations

import numpy as np
import pytest
from kept_launches import assert_same_launch, fresh, hopper_stand_in, on_gpu

from minitorch_amp.backend import bias_grad as bg

gpu = pytest.fixture(hopper_stand_in)


def variants():
    rng = np.random.default_rng(0)
    g = on_gpu(rng.standard_normal((8, 64)).astype(np.float16))
    y = on_gpu(np.maximum(rng.standard_normal((8, 64)), 0).astype(np.float16))
    g32 = on_gpu(rng.standard_normal((8, 64)).astype(np.float32))
    out = on_gpu(np.zeros(64, np.float32))
    return (
        out,
        {
            "plain": lambda: bg.bias_grad(g, np.float32),
            "float16 bias": lambda: bg.bias_grad(g, np.float16),
            "cast": lambda: bg.bias_grad(g32, np.float32, np.float16),  # (O1's)
            "relu": lambda: bg.bias_grad(g, np.float32, np.float16, relu_out=y),
            "no relu": lambda: bg.bias_grad(g, np.float32, np.float16),  # (no cast: gp is None)
            "out": lambda: bg.bias_grad(g, np.float32, out=out),
            "another shape": lambda: bg.bias_grad(g[:4], np.float32),
        },
    )


def test_every_call_launches_what_a_fresh_call_launches(gpu):
    out, calls = variants()
    for call in calls.values():
        call()
    assert len(bg.KEPT) == len(calls)
    for what, call in calls.items():
        gpu.recorded.clear()
        gb, gp = call()
        assert (gb is out) == (what == "out"), what
        assert (gp is None) == (what not in ("cast", "relu")), what
        fresh(call, bg.KEPT)
        assert len(gpu.recorded) == 2, what
        assert_same_launch(*gpu.recorded)


def test_raw_kernels_off_is_part_of_the_signature(gpu, monkeypatch):
    _, calls = variants()
    calls["plain"]()
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "0")  # CuPy's twin: no launch
    gpu.recorded.clear()
    calls["plain"]()
    assert gpu.recorded == []


def test_a_kept_signature_still_refuses_what_it_refused(gpu):
    _, calls = variants()
    calls["plain"]()
    g = on_gpu(np.zeros((8, 64), np.float16))
    with pytest.raises(TypeError, match="bias_dtype must be"):
        bg.bias_grad(g, np.float64)
    with pytest.raises(ValueError, match="out must have shape"):
        bg.bias_grad(g, np.float32, out=on_gpu(np.zeros(63, np.float32)))


def test_float_means_the_default_dtype_of_each_call(gpu):
    """``float`` names the default dtype, which ``set_default_dtype`` changes: a call kept
    under float32 is not taken for the same call under float16."""
    import minitorch_amp as mt

    g = on_gpu(np.ones((8, 64), np.float16))
    assert mt.get_default_dtype() == "float32"
    float32_sum, _ = bg.bias_grad(g, float)
    mt.set_default_dtype("float16")
    try:
        gpu.recorded.clear()
        float16_sum, _ = bg.bias_grad(g, float)
        fresh(lambda: bg.bias_grad(g, float), bg.KEPT)
    finally:
        mt.set_default_dtype("float32")
    assert (float32_sum.dtype, float16_sum.dtype) == (np.float32, np.float16)
    assert_same_launch(*gpu.recorded)
