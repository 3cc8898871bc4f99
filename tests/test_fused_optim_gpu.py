"""cuda/optim.cu on a GPU: the kernel and the CuPy twin equal the NumPy twin bit for bit, a
set flag skips bit-identically, and a whole GradScaler step queues its work without ever
waiting for the GPU. Skipped without a GPU (the CPU emulator in test_fused_optim_kernel.py
holds the kernel to the twin everywhere).

Each case runs three times: on NumPy (the twin is the step), on CuPy with
``MINITORCH_AMP_RAW_KERNELS=0`` (the twin on the device) and with ``=1`` (the kernel).
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from optim_cases import (
    DTYPES,
    FAMILY,
    KINDS,
    LR,
    OPTIMIZERS,
    SHAPES,
    SIZES,
    assert_same,
    make_params,
    run_steps,
    sized_grads,
    state_of,
    train,
)

import minitorch_amp as mt
from minitorch_amp.backend import device as _device
from minitorch_amp.nn.parameter import Parameter
from minitorch_amp.optimizer import Adam

pytestmark = pytest.mark.gpu

MISALIGNED = (3, 6)  # these parameters and grads start one element into their buffer
CASES = [(p, g, mp) for p, g in DTYPES for mp in ((True, False) if p != "float32" else (True,))]


def to_gpu(a, offset=0):
    """``a`` copied to the GPU, into an array that starts ``offset`` elements into its buffer.

    NOTE: ``out[...] = a`` is wrong for a CuPy ``out``: CuPy refuses to convert a NumPy array
    implicitly (TypeError), so the array is moved to ``out``'s place first.
    """
    import cupy

    offset = offset if a.size else 0
    out = cupy.empty(a.size + offset, dtype=a.dtype)[offset:].reshape(a.shape)
    out[...] = _device.to_place(a, _device.place_of(out))
    return out


def buckets_of(opt) -> list:
    return [bucket for _, bucket in opt._state.plan.buckets]


@pytest.fixture(autouse=True)
def _numpy_arrays():
    """Parameters are made on the CPU (the NumPy twin's) and moved by ``to_gpu``."""
    mt.set_device("cpu")


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("ptype, gtype, mp", CASES)
def test_on_the_gpu_the_kernel_and_the_cupy_twin_equal_the_twin(
    kind, ptype, gtype, mp, monkeypatch
):
    if "bfloat16" in (ptype, gtype):
        reason = _device.bfloat16_unsupported(_device.parse_device("gpu:0"))
        if reason:
            pytest.skip(reason)
    twin, twin_params = train(kind, ptype, gtype, SIZES, mp)
    want = state_of(twin, twin_params)
    for raw_kernels in ("0", "1"):
        monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", raw_kernels)
        opt, params = train(kind, ptype, gtype, SIZES, mp, move=to_gpu, misaligned=MISALIGNED)
        (bucket,) = buckets_of(opt)
        assert bucket.kernel == (FAMILY[kind] if raw_kernels == "1" else None)
        # Bit for bit, as on the CPU emulator: --fmad=false and correctly rounded '/' and
        # sqrtf leave no room for the GPU to round differently from the twin.
        assert_same(state_of(opt, params), want)
        for p in params:  # the optimize-cast: the param is its master, rounded
            master = opt._master_weights.get(p.name)
            if master is not None:
                np.testing.assert_array_equal(
                    p.numpy().view(np.uint16), master.numpy().astype(ptype).view(np.uint16)
                )


@pytest.mark.parametrize("raw_kernels", ["1", "0"])
@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_on_the_gpu_every_optimizer_equals_the_twin(kind, raw_kernels, monkeypatch):
    """Three steps, the third skipped on overflow (a host flag on NumPy, a device flag)."""
    import cupy

    def run(move, flag):
        params = make_params(("float16", "float32"))
        for p in params if move else ():
            p._data = move(p._data)
        make = lambda ps: OPTIMIZERS[kind](ps, True)  # noqa: E731
        opt, casts = run_steps(make, params, 3, move=move, found_inf_at=(2,), flag=flag)
        return state_of(opt, params), casts, opt

    want, want_casts, _ = run(None, lambda: np.array([True]))
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", raw_kernels)
    have, casts, opt = run(to_gpu, lambda: cupy.ones(1, dtype=bool))
    kind_of_kernel = type(opt)._kernel_kind() if raw_kernels == "1" else None
    assert [b.kernel for b in buckets_of(opt)] == [kind_of_kernel] * len(buckets_of(opt))
    assert_same(have, want)
    # NOTE: the host cannot know a device flag, so the skipped step's casts are counted too.
    assert casts == want_casts * 3 // 2 == 3 * len(SHAPES)


@pytest.mark.parametrize("raw_kernels", ["1", "0"])
@pytest.mark.parametrize("kind", ["momentum", "adamw_l2"])
def test_on_the_gpu_a_set_flag_leaves_everything_bit_identical(kind, raw_kernels, monkeypatch):
    import cupy

    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", raw_kernels)  # the kernel, or the CuPy twin
    opt, params = train(kind, "float16", "float16", SIZES, steps=1, move=to_gpu)
    before = state_of(opt, params)
    for p, g in zip(params, sized_grads(params, "float16", 1)):
        p.grad = to_gpu(g)
    opt._set_auxiliary_var("found_inf", cupy.ones(1, dtype=bool))
    opt.step()
    assert_same(state_of(opt, params), before)


SPIN = r"""
extern "C" __global__ void spin(long long cycles)
{
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
}
"""


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
        before = state_of(gpu[1], gpu[0])
        spin((1,), (1,), (np.int64(2_000_000_000),))  # about a second of a busy GPU
        start = time.perf_counter()
        train_step(*gpu, i, overflow)
        busy = not cupy.cuda.get_current_stream().done
        took = time.perf_counter() - start
        cupy.cuda.Device().synchronize()
        assert busy, f"the step waited for the GPU ({took:.3f} s): a host read of a device value"
        train_step(*cpu, i, overflow)
        if overflow:
            assert_same(state_of(gpu[1], gpu[0]), before)
    for p_cpu, p_gpu in zip(cpu[0], gpu[0]):
        tol = 1e-3 if p_cpu.dtype == mt.float16 else 1e-6
        np.testing.assert_allclose(p_gpu.numpy(), p_cpu.numpy(), rtol=tol, atol=tol)
    assert cpu[2].get_loss_scaling() == gpu[2].get_loss_scaling()
