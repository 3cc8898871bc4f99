"""cuda/reduction.cu's squared_error and mean_partials on the GPU, held to the NumPy model of
their order bit for bit (as on the CPU emulator, tests/test_squared_error.py, but with blocks
racing), and mse_loss's one launch of them. Skipped without a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_amp_kernels import assert_same_bits
from test_squared_error import SIZES, kernel_order, pairs

import minitorch_amp as mt
from minitorch_amp.backend import device, kernels
from minitorch_amp.backend import squared_error as module
from minitorch_amp.backend.squared_error import squared_error
from minitorch_amp.nn import functional as F

pytestmark = pytest.mark.gpu


@pytest.fixture
def cp(monkeypatch):
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "1")
    return device.cupy


@pytest.mark.parametrize("mean", [True, False], ids=["mean", "sum"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_the_kernels_on_the_gpu_add_in_their_stated_order_bit_for_bit(cp, dtype, mean):
    for n in [*SIZES, 300 * 4096 + 11]:  # the last: 300 blocks racing
        a, b = pairs(dtype, n, seed=n)
        want_diff, want = kernel_order(a, b, mean)
        for _ in range(2):  # the same bits on every run
            diff, got = squared_error(cp.asarray(a), cp.asarray(b), mean)
            assert_same_bits(diff, want_diff, f"n={n}")
            assert_same_bits(got, want, f"n={n}")


def test_the_grid_never_changes_a_bit_on_the_gpu(cp, monkeypatch):
    a, b = (cp.asarray(v[20:]) for v in pairs(np.float32, 40 * 4096 + 20, seed=3))
    results = []
    for max_blocks in (1024, 1, 7, 13):
        monkeypatch.setattr(module, "_MAX_BLOCKS", max_blocks)
        results.append(cp.asnumpy(squared_error(a, b, True)[1]))
    for result in results:
        assert_same_bits(result, results[0])


def test_mse_loss_launches_one_kernel_and_saves_the_cpus_difference(cp, monkeypatch):
    launches = []
    launch = kernels.launch

    def recording(file, name, *args, **kwargs):
        launches.append(name)
        return launch(file, name, *args, **kwargs)

    monkeypatch.setattr(kernels, "launch", recording)
    a, b = (v[20:].reshape(-1, 10) for v in pairs(np.float32, 20 + 640, seed=5))
    x = mt.to_tensor(a, place="gpu:0", stop_gradient=False)
    loss = F.mse_loss(x, mt.to_tensor(b, place="gpu:0"))
    loss.backward()
    assert launches.count("squared_error<float>") == 1
    x_cpu = mt.to_tensor(a, stop_gradient=False)
    loss_cpu = F.mse_loss(x_cpu, mt.to_tensor(b))
    loss_cpu.backward()
    assert_same_bits(x.grad.numpy(), x_cpu.grad.numpy())  # the same diff, the same scale
    assert_same_bits(loss.numpy(), kernel_order(a, b, True)[1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_the_backward_kernel_on_the_gpu_is_the_expression_bit_for_bit(cp, dtype):
    """One launch of squared_error_backward against the NumPy expression diff * (grad *
    scale) (a float32 product below 2**-126 flushed, as -ftz does) and against CuPy's own
    two launches of it."""
    for n in (1, 257, 5000 * 256 + 3):  # the last: more blocks than the grid's 4096
        rng = np.random.default_rng(n)
        diff = (rng.standard_normal(n) * rng.choice([1e-3, 1.0, 1e4], n)).astype(dtype)
        grad = np.asarray(rng.standard_normal(), dtype)
        want = diff * (grad * (2.0 / n))
        if dtype == np.float32:
            want = np.where(np.abs(want) < 2.0**-126, np.copysign(np.float32(0), want), want)
        got = module.squared_error_backward(cp.asarray(diff), cp.asarray(grad), 2.0 / n)
        assert_same_bits(got, want, f"n={n}")
        expression = cp.asarray(diff) * (cp.asarray(grad) * (2.0 / n))
        assert_same_bits(got, expression, f"n={n}, CuPy's expression")
