"""cuda/elementwise.cu, cuda/reduction.cu and cuda/probe.cu on the GPU, held to the same
specifications as on the CPU emulator (tests/test_primitive_kernels.py): relu_backward to its
twin bit for bit, sum_squares to the NumPy model of its order bit for bit (three runs each,
blocks racing), to float64 within its bound, to the same bits on every grid, and captured in
a CUDA graph that replays on new values; the probe kernel to its twin.

Skipped without a GPU.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_amp_kernels import assert_same_bits
from test_primitive_kernels import (
    FLOATS,
    NAMES,
    SIZES,
    TILE,
    alike_inputs,
    error_bound,
    kernel_order,
    norm_inputs,
    relu_inputs,
    relu_twin,
    whole_buffer,
)

from minitorch_amp.backend import device, graphs, kernels, primitives
from minitorch_amp.backend.dtypes import bfloat16, float16, float32, float64
from minitorch_amp.backend.primitives import relu_backward, sum_squares

pytestmark = pytest.mark.gpu


@pytest.fixture
def cp(monkeypatch):
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "1")
    return device.cupy


def skip_without_bfloat16(*dtypes) -> None:
    if bfloat16 in dtypes:
        reason = device.bfloat16_unsupported(device.Place("gpu", 0))
        if reason is not None:
            pytest.skip(reason)


@pytest.mark.parametrize("g_dtype", FLOATS, ids=NAMES.get)
@pytest.mark.parametrize("y_dtype", FLOATS, ids=NAMES.get)
def test_relu_backward_on_the_gpu_equals_the_twin_bit_for_bit(cp, y_dtype, g_dtype):
    skip_without_bfloat16(y_dtype, g_dtype)
    y, g = relu_inputs(y_dtype, g_dtype, n_random=3 * 2**20 + 5)  # past one grid: strides
    got = relu_backward(cp.asarray(y), cp.asarray(g))
    assert_same_bits(got, relu_twin(y, g), f"{y_dtype}, {g_dtype}")


@pytest.mark.parametrize("acc", [float32, float64], ids=NAMES.get)
@pytest.mark.parametrize("x_dtype", FLOATS, ids=NAMES.get)
def test_sum_squares_on_the_gpu_adds_in_its_stated_order(cp, x_dtype, acc):
    skip_without_bfloat16(x_dtype)
    for n in [*SIZES, 300 * TILE + 5, 2**24 + 3]:
        x = norm_inputs(x_dtype, n, seed=n)
        runs = [sum_squares(cp.asarray(x), acc) for _ in range(3)]
        want = kernel_order(x, acc)
        for run in runs:
            assert run.shape == () and run.dtype == acc
            assert_same_bits(run, want, f"n={n}")
        exact = math.fsum(float(v) ** 2 for v in x.astype(float64)) if n < 10**6 else None
        if exact is not None:
            assert abs(float(runs[0]) - exact) <= error_bound(n, x_dtype, acc) * exact


def test_sum_squares_on_the_gpu_has_the_same_bits_on_every_grid(cp, monkeypatch):
    x = cp.asarray(alike_inputs(float32, 300 * TILE + 5, seed=7))
    buffers = []
    for max_blocks in (1, 2, 7, 132, 1024):
        monkeypatch.setattr(primitives, "_MAX_BLOCKS", max_blocks)
        monkeypatch.setattr(primitives, "_ONE_BLOCK_TILES", 0)
        for _ in range(3):  # blocks race on the GPU: the order must not
            buffers.append(whole_buffer(sum_squares(x, float32)).copy())
    for buffer in buffers:
        assert_same_bits(buffer, buffers[0])


def test_sum_squares_is_captured_in_a_graph_and_replays_on_new_values(cp):
    """No cuBLAS (CuPy refuses it while capturing), no upload, no host read: the launches
    and the one result array (from the graph's pool) are recorded, and a replay computes
    the norm of whatever the gradient holds then."""
    x = cp.asarray(norm_inputs(float16, 40 * TILE + 3, seed=1))
    sum_squares(x, float32)  # compiled and loaded before the capture
    capture = graphs.Capture(x.device.id)
    capture.begin()
    try:
        norm = sum_squares(x, float32)
    except Exception:
        capture.abort()
        raise
    capture.end()
    assert capture.pool.used_bytes() > 0  # the result came from the graph's own pool
    for seed in (2, 3):
        host = norm_inputs(float16, x.size, seed=seed)
        x[...] = cp.asarray(host)
        capture.replay()
        assert_same_bits(norm, kernel_order(host, float32), f"replay {seed}")


def test_the_probe_kernel_writes_its_twins_value(cp):
    x = cp.zeros(1, float16)
    kernels.launch("probe.cu", "minitorch_amp_probe", (1,), (1,), (x,))
    assert_same_bits(x, np.array([1.0], float16))


@pytest.mark.parametrize("dtype", FLOATS, ids=NAMES.get)
def test_with_raw_kernels_off_cupys_own_ops_give_the_twins_values(cp, monkeypatch, dtype):
    """MINITORCH_AMP_RAW_KERNELS=0: grad * (y > 0) and (x.astype(acc) ** 2).sum() in CuPy,
    in the dtypes the kernels give (normal values: CuPy's -ftz flushes subnormals)."""
    skip_without_bfloat16(dtype)
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "0")
    rng = np.random.default_rng(0)
    y, g = (rng.standard_normal(1000).astype(dtype) for _ in range(2))
    got = relu_backward(cp.asarray(y), cp.asarray(g))
    assert got.dtype == dtype
    assert_same_bits(got, relu_twin(y, g))
    acc = float64 if dtype == float64 else float32
    total = sum_squares(cp.asarray(g), acc)
    assert total.shape == () and total.dtype == acc
    exact = math.fsum(float(v) ** 2 for v in g.astype(float64))
    u = 2.0**-24 if acc == float32 else 2.0**-53
    assert abs(float(total) - exact) <= (g.size + 1) * u * exact  # any order of additions
