"""cuda/optim.cu on a GPU: kernel == twin bit for bit, a set flag skips bit-identically, and a whole
GradScaler step queues its work without ever waiting for the GPU. Skipped without a GPU (the
CPU emulator in test_fused_optim_kernel.py holds the kernel to the twin everywhere)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from test_fused_optim_kernel import (
    DTYPES,
    KINDS,
    LR,
    bits,
    call,
    copy_bucket,
    flat_bits,
    host_bucket,
)

import minitorch_amp as mt
from minitorch_amp.backend import device as _device
from minitorch_amp.backend import fused_optim
from minitorch_amp.nn.parameter import Parameter
from minitorch_amp.optimizer import Adam

pytestmark = pytest.mark.gpu


def _gpu_empty(n, dtype):
    import cupy

    return cupy.empty(n, dtype)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("ptype, gtype", DTYPES)
def test_on_the_gpu_the_kernel_equals_the_twin_bit_for_bit(kind, ptype, gtype):
    import cupy

    twin = host_bucket(kind, ptype, gtype)
    kernel = copy_bucket(twin, _gpu_empty)
    assert fused_optim.update_path(kernel[0], kernel[2]) == "fused kernel"
    for _ in range(2):
        call(kind, twin, np.array([False]))
        call(kind, kernel, cupy.zeros(1, dtype=bool))
    # Bit for bit, as on the CPU emulator: --fmad=false and correctly rounded '/' and sqrtf
    # leave no room for the GPU to round differently from the twin.
    for i, (want, have) in enumerate(zip(flat_bits(twin), flat_bits(kernel), strict=True)):
        np.testing.assert_array_equal(have, want, err_msg=f"array {i} of the bucket")
    for param, master in zip(kernel[0], kernel[1]):
        if master is not None:  # the optimize-cast: the param is its master, rounded
            np.testing.assert_array_equal(cupy.asnumpy(param), cupy.asnumpy(master).astype(ptype))


@pytest.mark.parametrize("raw_kernels", ["1", "0"])
@pytest.mark.parametrize("kind", ["momentum", "adamw_l2"])
def test_on_the_gpu_a_set_flag_leaves_everything_bit_identical(kind, raw_kernels, monkeypatch):
    import cupy

    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", raw_kernels)  # the kernel, or the CuPy twin
    device = copy_bucket(host_bucket(kind, "float16", "float16"), _gpu_empty)
    before = flat_bits(device)
    call(kind, device, cupy.ones(1, dtype=bool))
    for want, have in zip(before, flat_bits(device)):
        np.testing.assert_array_equal(have, want)


SPIN = r"""
extern "C" __global__ void spin(long long cycles)
{
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
}
"""


def _snapshot(opt, params):
    out = [bits(p.numpy()).copy() for p in params]
    out += [bits(m.numpy()).copy() for _, m in sorted(opt._master_weights.items())]
    for p in params:
        out += [
            bits(_device.asnumpy(a)).copy() for _, a in sorted(opt._accumulators[id(p)].items())
        ]
    return out


@pytest.mark.parametrize("raw_kernels", ["1", "0"])
def test_on_the_gpu_a_grad_scaler_step_never_waits_for_the_gpu(raw_kernels, monkeypatch):
    """While the GPU spins for about a second, scaler.step + update return at once: nothing
    reads a device value on the host (found_inf, the tables, the scale). Results match the CPU."""
    import cupy

    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", raw_kernels)
    shapes = [((64, 33), "float16"), ((33,), "float16"), ((5,), "float32")]

    def build(place):
        mt.set_device(place)
        rng = np.random.default_rng(0)
        params = [Parameter(rng.standard_normal(s).astype(d)) for s, d in shapes]
        opt = Adam(LR, parameters=params, multi_precision=True)
        return params, opt, mt.amp.GradScaler(init_loss_scaling=1024.0)

    def train_step(params, opt, scaler, i, overflow=False):
        rng = np.random.default_rng(10 + i)
        scaler.scale(mt.to_tensor(np.float32(1.0), place=params[0].place))  # scale follows
        for p in params:
            g = (rng.standard_normal(p.shape) * 1024).astype(p.dtype)
            g.flat[0] = np.inf if overflow else g.flat[0]
            p.grad = mt.to_tensor(g, place=p.place)
        scaler.step(opt)
        scaler.update()

    cpu, gpu = build("cpu"), build("gpu:0")
    assert isinstance(gpu[0][0]._data, cupy.ndarray)
    train_step(*cpu, 0)
    train_step(*gpu, 0)  # compiles the kernels
    cupy.cuda.Device().synchronize()
    spin = cupy.RawKernel(SPIN, "spin")
    for i, overflow in ((1, False), (2, True)):
        before = _snapshot(gpu[1], gpu[0])
        spin((1,), (1,), (np.int64(2_000_000_000),))  # about a second of a busy GPU
        start = time.perf_counter()
        train_step(*gpu, i, overflow)
        busy = not cupy.cuda.get_current_stream().done
        took = time.perf_counter() - start
        cupy.cuda.Device().synchronize()
        assert busy, f"the step waited for the GPU ({took:.3f} s): a host read of a device value"
        train_step(*cpu, i, overflow)
        if overflow:
            for want, have in zip(before, _snapshot(gpu[1], gpu[0])):
                np.testing.assert_array_equal(have, want)
    for p_cpu, p_gpu in zip(cpu[0], gpu[0]):
        tol = 1e-3 if p_cpu.dtype == mt.float16 else 1e-6
        np.testing.assert_allclose(p_gpu.numpy(), p_cpu.numpy(), rtol=tol, atol=tol)
    assert cpu[2].get_loss_scaling() == gpu[2].get_loss_scaling()
