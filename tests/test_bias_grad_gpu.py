"""cuda/reduction.cu's bias_grad on the GPU, held to the NumPy model of its order bit for bit
(as on the CPU emulator, tests/test_bias_grad.py, but with blocks racing), and
Linear.backward's one launch of it. Skipped without a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_amp_kernels import assert_same_bits
from test_bias_grad import (
    TRIPLES,
    grads,
    kernel_order,
    product_for,
    relu_outputs,
    triple_id,
)

import minitorch_amp as mt
from minitorch_amp.backend import bias_grad as bias_grad_module
from minitorch_amp.backend import device, kernels
from minitorch_amp.backend.bias_grad import bias_grad
from minitorch_amp.backend.dtypes import bfloat16
from minitorch_amp.nn import functional as F

pytestmark = pytest.mark.gpu


@pytest.fixture
def cp(monkeypatch):
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "1")
    return device.cupy


@pytest.mark.parametrize("masked", [False, True], ids=["no mask", "relu mask"])
@pytest.mark.parametrize("triple", TRIPLES, ids=triple_id)
def test_the_kernel_on_the_gpu_adds_in_its_stated_order_bit_for_bit(cp, triple, masked):
    if bfloat16 in triple:
        reason = device.bfloat16_unsupported(device.Place("gpu", 0))
        if reason is not None:
            pytest.skip(reason)
    g_dtype, b_dtype, _ = triple
    product = product_for(triple, masked)
    for rows, n in [(0, 33), (1, 1), (7, 31), (33, 100), (300, 33), (4099, 1000)]:
        g = grads(g_dtype, rows, n, seed=rows + n)
        y = relu_outputs(g_dtype, rows, n) if masked else None
        want_gb, want_gp = kernel_order(g, y, b_dtype, product)
        for _ in range(2):  # the same bits on every run
            gb, gp = bias_grad(
                cp.asarray(g), b_dtype, product, relu_out=None if y is None else cp.asarray(y)
            )
            assert_same_bits(gb, want_gb, f"[{rows}, {n}]")
            assert (gp is None) == (want_gp is None)
            if gp is not None:
                assert_same_bits(gp, want_gp, f"[{rows}, {n}]")


def test_the_grid_never_changes_a_bit_on_the_gpu(cp, monkeypatch):
    g = cp.asarray(grads(np.float32, 1000, 2000, seed=3))
    results = []
    for max_blocks in (65535, 1, 7, 13):
        monkeypatch.setattr(bias_grad_module, "_MAX_BLOCKS", max_blocks)
        results.append(cp.asnumpy(bias_grad(g, np.float32)[0]))
    for result in results:
        assert_same_bits(result, results[0])


def test_linear_backward_on_float16_launches_the_bias_grad_kernel_once(cp, monkeypatch):
    launches = []
    launch = kernels.launch

    def recording(file, name, *args, **kwargs):
        launches.append((file, name))
        return launch(file, name, *args, **kwargs)

    monkeypatch.setattr(kernels, "launch", recording)
    rng = np.random.default_rng(0)
    shapes = ((64, 96), (96, 80), (80,), (64, 80))
    arrays = [rng.standard_normal(s).astype(np.float16) for s in shapes]
    x, w, b, c = (mt.to_tensor(a, place="gpu:0", stop_gradient=False) for a in arrays)
    (F.linear(x, w, b) * c).sum().backward()  # the linear's grad is c, a contiguous array
    assert [name for _, name in launches if name.startswith("bias_grad")] == [
        "bias_grad<__half, __half, __half>"
    ]
    assert_same_bits(b.grad.numpy(), kernel_order(arrays[3], None, np.float16, None)[0])
