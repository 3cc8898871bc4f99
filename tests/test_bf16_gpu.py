"""bfloat16 on a GPU (CuPy 14 or newer, compute capability 8.0 or newer): every op of the
catalogue against float64 NumPy and against the CPU backend, gradients included; the
workarounds for what CuPy 14 cannot do in bfloat16; tensors, memory, and the tutorial.

Skipped without CuPy and a device (the ``gpu`` marker), and on a GPU that cannot run
bfloat16 (``amp.is_bfloat16_supported`` says why). The kernels alone (casts, unscale, the
fused optimizers, the GEMMs) are tested against their twins in their own files.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from op_catalogue import CATALOGUE

import minitorch_amp as mt
from minitorch_amp import amp
from minitorch_amp.backend import device, primitives

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("garbage_collected")]

# dropout draws its mask from CuPy's generator on the GPU, NumPy's on the CPU: not comparable
ENTRIES = [e for e in CATALOGUE if e.name != "dropout"]


@pytest.fixture(autouse=True)
def _bf16_gpu():
    if device.cupy is None:
        pytest.skip("needs CuPy and a CUDA device")
    if not amp.is_bfloat16_supported("gpu:0"):
        pytest.skip(amp.bf16.bfloat16_unsupported_reason("gpu:0"))


def _run(entry, case, place: str):
    """Forward (and backward with a fixed upstream) of ``entry`` in bfloat16 on ``place``."""
    mt.set_device(place)  # index tensors and labels made inside ``fn`` land here too
    leaves = []
    for a in case.inputs:
        t = mt.to_tensor(a.astype(mt.bfloat16))
        t.stop_gradient = not entry.differentiable
        leaves.append(t)
    out = entry.fn(*leaves, **case.attrs)
    grads = []
    if entry.differentiable:
        upstream = np.asarray(np.random.default_rng(1).standard_normal(out.shape))
        out.backward(grad_tensor=mt.to_tensor(upstream, dtype=out.dtype, place=out.place))
        grads = [t.grad.numpy().astype(np.float64) for t in leaves]
    return out, grads


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
@settings(max_examples=6, derandomize=True)
@given(data=st.data())
def test_every_op_in_bf16_on_the_gpu_matches_float64_and_the_cpu(entry, data):
    spec = data.draw(entry.spec, label="spec")
    case = entry.make(np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))), spec)
    rounded = [a.astype(mt.bfloat16).astype(np.float64) for a in case.inputs]
    expected = np.asarray(entry.ref(*rounded, **case.attrs))
    gpu, gpu_grads = _run(entry, case, "gpu:0")
    cpu, cpu_grads = _run(entry, case, "cpu")
    assert gpu.dtype == cpu.dtype == (entry.out_dtype or "bfloat16")
    assert gpu.shape == cpu.shape == list(expected.shape)
    rtol, atol = entry.tol["bfloat16"]
    np.testing.assert_allclose(gpu.numpy().astype(np.float64), expected, rtol=rtol, atol=atol)
    # Both backends compute each op in float32 and round to bfloat16; they may differ in the
    # order of float32 sums and in the last float32 bit of exp, tanh, log: at most a few
    # bfloat16 units, relative to the largest gradient.
    for g, c in zip(gpu_grads, cpu_grads):
        scale = max(1.0, float(np.max(np.abs(c), initial=0.0)))
        np.testing.assert_allclose(g, c, rtol=2 * rtol, atol=2 * atol * scale)


def test_a_bf16_tensor_moves_to_the_gpu_and_back_bit_for_bit():
    bits = np.array([0x3F80, 0x3F81, 0x0001, 0x7F7F, 0x7F80, 0xFF80, 0x7FC0, 0x8000], np.uint16)
    host = bits.view(mt.bfloat16)
    x = mt.to_tensor(host, place="gpu:0")
    assert x.place == "gpu:0" and x.dtype == mt.bfloat16
    assert isinstance(x._data, device.cupy.ndarray)
    np.testing.assert_array_equal(x.numpy().view(np.uint16), bits)
    np.testing.assert_array_equal(x.to("cpu").numpy().view(np.uint16), bits)


def test_bf16_gpu_memory_is_two_bytes_per_element():
    mt.set_device("gpu:0")
    gc.collect()
    before = mt.device.memory_allocated()
    x = mt.zeros([1 << 20], dtype="bfloat16")
    assert mt.device.memory_allocated() - before == 2 << 20
    del x
    gc.collect()
    assert mt.device.memory_allocated() == before


def test_casts_on_the_gpu_round_like_the_cpu():
    rng = np.random.default_rng(2)
    wide = rng.standard_normal(4096) * 10.0 ** rng.integers(-40, 38, 4096)
    wide = np.concatenate([wide, [1 + 2**-8, 1 + 2**-8 + 2**-30, 3.4e38, -np.inf, np.nan]])
    wide = np.concatenate([wide, np.array([1, 1.5, 2.5, 3, 127.5, -5]) * 2.0**-133])  # subnormal
    for dtype in ("float64", "float32", "float16"):
        with np.errstate(over="ignore"):
            src = wide.astype(dtype)
        gpu = mt.to_tensor(src, place="gpu:0").astype("bfloat16").numpy()
        cpu = mt.to_tensor(src, place="cpu").astype("bfloat16").numpy()
        nan = np.isnan(cpu.astype(np.float32))
        np.testing.assert_array_equal(np.isnan(gpu.astype(np.float32)), nan, err_msg=dtype)
        # every other value bit for bit (a NaN's payload is not specified)
        np.testing.assert_array_equal(
            gpu.view(np.uint16)[~nan], cpu.view(np.uint16)[~nan], err_msg=dtype
        )


def test_scatter_add_in_bf16_sums_in_float32_on_the_gpu():
    """cupyx.scatter_add refuses bfloat16; primitives.scatter_add sums in float32 instead."""
    cp = device.cupy
    target = cp.zeros(3, dtype=mt.bfloat16)
    index = cp.asarray([0, 0, 0, 2, 2])
    values = cp.asarray(np.array([1.0, 2**-8, 2**-8, 256.0, 1.0], mt.bfloat16))
    primitives.scatter_add(target, index, values)
    assert cp.asnumpy(target).astype(np.float64).tolist() == [1 + 2**-7, 0.0, 256.0]


@pytest.mark.parametrize("mode", ["O1", "O2"])
def test_simple_net_trains_in_bf16_on_the_gpu_like_on_the_cpu(mode):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    import simple_net

    # the sizes of test_bfloat16_amp's CPU test, which holds the same 3%
    kwargs = dict(input_size=64, batch_size=16, batches=8, epochs=5, learning_rate=1e-2)
    mt.set_device("cpu")
    cpu = simple_net.train(**kwargs, mode=mode, dtype="bfloat16", log=lambda *_: None)
    mt.set_device("gpu:0")
    fp32 = simple_net.train(**kwargs, mode="fp32", log=lambda *_: None)
    gpu = simple_net.train(**kwargs, mode=mode, dtype="bfloat16", log=lambda *_: None)
    assert all(np.isfinite(gpu)) and gpu[-1] < gpu[0]
    assert abs(gpu[-1] - fp32[-1]) <= 0.03 * fp32[-1]  # within a few percent of float32
    # the generators differ across backends: compare the trajectories, not the numbers
    np.testing.assert_allclose(gpu[-1] / gpu[0], cpu[-1] / cpu[0], rtol=0.1)


def test_bf16_o2_step_on_the_gpu_uses_the_fused_kernel_and_fp32_masters():
    mt.set_device("gpu:0")
    model = mt.nn.Sequential(mt.nn.Linear(16, 16), mt.nn.ReLU(), mt.nn.Linear(16, 4))
    opt = mt.optimizer.AdamW(learning_rate=1e-3, parameters=model.parameters())
    model, opt = amp.decorate(model, opt, level="O2", dtype="bfloat16")
    weight = model[0].weight
    assert weight.dtype == mt.bfloat16 and weight.place == "gpu:0"
    with amp.auto_cast(level="O2", dtype="bfloat16"):
        loss = model(mt.randn([8, 16])).astype("float32").square().mean()
    loss.backward()
    assert weight.grad.dtype == mt.bfloat16
    opt.step()
    buckets = [bucket for _, bucket in opt._state.plan.buckets]
    assert {bucket.kernel for bucket in buckets} == {"adam"}  # optim.cu, every bucket
    master = opt._master_weights[weight.name]
    assert master.dtype == mt.float32 and master.place == "gpu:0"
    # optimize-cast: the bfloat16 weight is the master rounded to nearest even, bit for bit
    np.testing.assert_array_equal(
        weight.numpy().view(np.uint16), master.numpy().astype(mt.bfloat16).view(np.uint16)
    )
