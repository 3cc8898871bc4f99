"""With raw kernels off, a GradScaler step reads nothing on the host: checked without a GPU.

test_fused_optim_gpu.py's ``test_on_the_gpu_a_grad_scaler_step_never_waits_for_the_gpu``
catches a host read on a GPU by timing it. Here the same step runs on a CPU stand-in for
CuPy (``emulated_gpu.install_strict``) whose arrays refuse every conversion to a host value,
and whose ``repeat``, ``nonzero``, ``where(cond)`` ... refuse what waits for the GPU in
CuPy 14, so a read fails with a traceback that points at it, on every machine.
"""

from __future__ import annotations

import operator

import emulated_gpu
import numpy as np
import pytest
from emulated_gpu import HostReadError, StrictArray, host_reads_refused
from optim_cases import LR, OPTIMIZERS, assert_same, make_params, state_of

import minitorch_amp as mt
from minitorch_amp.backend import device as _device
from minitorch_amp.nn.parameter import Parameter
from minitorch_amp.optimizer import Adam

# NOTE: an overflowing step computes inf / inf into the copies that found_inf discards
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")


@pytest.fixture
def strict(monkeypatch):
    """CuPy is the strict stand-in and the raw kernels are off (the CuPy twins run)."""
    emulated_gpu.install_strict(monkeypatch)
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "0")
    yield
    mt.set_device("cpu")


def on_device(a):
    return _device.cupy.asarray(a)


def scaled_step(params, opt, scaler, i, overflow=False):
    """The GPU test's step: scale a loss, set the gradients (one inf on overflow), step,
    update."""
    rng = np.random.default_rng(10 + i)
    place = params[0].place
    scaler.scale(mt.to_tensor(np.float32(1.0), place=place))
    for p in params:
        g = (rng.standard_normal(p.shape) * 1024).astype(p.dtype)
        if overflow and g.size:
            g.flat[0] = np.inf
        p.grad = mt.to_tensor(g, place=place)
    scaler.step(opt)
    scaler.update()


def train_both(make_opt, make_params_on, steps):
    """``steps`` (``[overflow]``) on the CPU and on the stand-in, each device step with host
    reads refused; an overflowing step leaves every bit. Returns the two (opt, params)."""
    runs = []
    for place in ("cpu", "gpu:0"):
        mt.set_device(place)
        params = make_params_on(place)
        opt = make_opt(params)
        scaler = mt.amp.GradScaler(init_loss_scaling=1024.0, incr_every_n_steps=2)
        for i, overflow in enumerate(steps):
            before = state_of(opt, params)
            if place == "cpu":
                scaled_step(params, opt, scaler, i, overflow)
            else:
                with host_reads_refused() as refused:
                    scaled_step(params, opt, scaler, i, overflow)
                assert refused == []  # none caught and swallowed on the way
            if overflow:
                assert_same(state_of(opt, params), before)
        runs.append((opt, params, scaler.get_loss_scaling()))
    assert runs[0][2] == runs[1][2]
    return runs


def assert_same_bits(cpu, device):
    """The device run's state equals the CPU run's, bit for bit (names differ: new params)."""
    have, want = state_of(device[0], device[1]), state_of(cpu[0], cpu[1])
    assert len(have) == len(want)
    for (label, x), (_, y) in zip(have, want):
        np.testing.assert_array_equal(x, y, err_msg=label)


def test_the_gpu_tests_scaler_step_on_the_cupy_twins_reads_nothing_on_the_host(strict):
    """The GPU test's case: Adam with masters, a float16 bucket of two parameters (their
    beta pows spread over their elements on the device) and a float32 one; clean steps and
    an overflowing one."""
    shapes = [((64, 33), "float16"), ((33,), "float16"), ((5,), "float32")]

    def params_on(place):
        rng = np.random.default_rng(0)
        return [Parameter(rng.standard_normal(s).astype(d)) for s, d in shapes]

    make = lambda ps: Adam(LR, parameters=ps, multi_precision=True)  # noqa: E731
    cpu, device = train_both(make, params_on, [False, False, True])
    assert isinstance(device[1][0]._data, StrictArray)
    assert_same_bits(cpu, device)


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_every_optimizers_scaler_step_on_the_cupy_twins_reads_nothing_on_the_host(kind, strict):
    """Every optimizer on float16 and float32 parameters of every SHAPE (an empty one, an lr
    ratio, a regularizer of its own), with and without an overflow."""

    def params_on(place):
        params = make_params(("float16", "float32"))
        for p in params if place != "cpu" else ():
            p._data = on_device(p._data)
        return params

    make = lambda ps: OPTIMIZERS[kind](ps, True)  # noqa: E731
    cpu, device = train_both(make, params_on, [False, True, False])
    assert_same_bits(cpu, device)


# ---- the stand-in itself ---------------------------------------------------------------------
READS = {
    "bool": lambda a: bool(a[0]),
    "int": lambda a: int(a[0]),
    "float": lambda a: float(a[0]),
    "index": lambda a: operator.index(a[0].astype("int32")),
    "item": lambda a: a.item(),
    "tolist": lambda a: a.tolist(),
    "get": lambda a: a.get(),
    "if on a reduction": lambda a: 1 if a.max() > 0 else 0,
    "a mask": lambda a: a[a > 0],
    "asnumpy": lambda a: _device.cupy.asnumpy(a),
    "nonzero": lambda a: _device.cupy.nonzero(a),
    "where(cond)": lambda a: _device.cupy.where(a > 0),
    "repeat(list)": lambda a: _device.cupy.repeat(a, [2]),
}


@pytest.mark.parametrize("read", sorted(READS))
def test_the_stand_in_refuses_each_kind_of_host_read(read, strict):
    a = on_device(np.ones(1, "float32"))
    with host_reads_refused(), pytest.raises(HostReadError):
        READS[read](a)
    READS[read](a)  # outside, the test's own reads work
    with host_reads_refused():  # and what stays on the device is allowed
        b = _device.cupy.repeat(a, 3) * a[0] + a.max()
        _device.cupy.copyto(b, a, where=b > a.reshape(()))
