"""backend/layer_norm.py and cuda/layer_norm.cu: LayerNorm in three launches on a GPU.

The kernels run on a CPU emulator (tests/layer_norm_emulator.cpp on tests/cuda_emulator.h,
with -ftz's flushes) fed by the real launcher, so its grids, arguments and strides, the
kernels' row and column loops, shared-memory trees and barriers are checked without a GPU:
against float64 LayerNorm within float32 bounds, and against the op's own NumPy expressions
(the twin), which sum in another order. The GPU test at the end runs the op on a GPU.
"""

from __future__ import annotations

from types import SimpleNamespace

import emulated_gpu
import numpy as np
import pytest
from emulated_gpu import HostArray, on_device
from emulated_gpu import to_host as host

import minitorch_amp as mt
import minitorch_amp.nn.functional as F
from minitorch_amp.autograd.ops.nn_ops import LayerNorm
from minitorch_amp.backend import device
from minitorch_amp.backend import layer_norm as module
from minitorch_amp.backend.dtypes import float32

EPS = 1e-5
# (rows, n): one element; fewer columns than threads; n past the 256 threads; three 32-column
# tiles, the last with a tail. The launches below allow 4 row blocks and 2 column blocks (not
# 8192 and 65535), so the 7 and 9 rows and the three tiles are strided over as on a GPU.
SHAPES = [(1, 1), (3, 5), (7, 300), (9, 70)]


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    return emulated_gpu.build("layer_norm_emulator.cpp", tmp_path_factory.mktemp("emulator"))


@pytest.fixture
def launches(emulator, monkeypatch):
    """Route layer_norm.cu's launches to the emulator; the list of ``(name, grid)``."""
    made = emulated_gpu.install(emulator, monkeypatch, module.FILE, block=module.THREADS)
    monkeypatch.setattr(module, "MAX_ROW_BLOCKS", 4)
    monkeypatch.setattr(module, "MAX_COLUMN_BLOCKS", 2)
    device.cupy.empty = emulated_gpu.poisoned_empty
    device.cupy.empty_like = lambda a: np.empty_like(a).view(HostArray)
    device.cupy.ascontiguousarray = lambda a: np.ascontiguousarray(a).view(HostArray)
    return made


def case(rows, n, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, n)) * 3 + 1).astype(float32)
    g = rng.standard_normal((rows, n)).astype(float32)
    w = (rng.standard_normal(n) + 1).astype(float32)
    b = rng.standard_normal(n).astype(float32)
    return x, g, w, b


def oracle(x, g, w, b):
    """float64 LayerNorm and its gradients: (out, mean, rstd, dx, dw, db)."""
    x, g = x.astype(np.float64), g.astype(np.float64)
    mean = x.mean(axis=1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + EPS)
    xhat = (x - mean) * rstd
    out = xhat * (1.0 if w is None else w) + (0.0 if b is None else b)
    gw = g * (1.0 if w is None else w)
    dx = rstd * (gw - gw.mean(axis=1, keepdims=True) - xhat * (gw * xhat).mean(1, keepdims=True))
    return out, mean[:, 0], rstd[:, 0], dx, (g * xhat).sum(axis=0), g.sum(axis=0)


def assert_close(got, want, scale, what):
    """Within float32 rounding of sums of ``scale``-sized terms (a loose relative bound)."""
    np.testing.assert_allclose(host(got), want, rtol=2e-5, atol=2e-5 * scale, err_msg=what)


@pytest.mark.parametrize("with_params", [True, False], ids=["affine", "plain"])
@pytest.mark.parametrize("rows, n", SHAPES)
def test_the_kernels_compute_layer_norm_and_its_gradients(launches, rows, n, with_params):
    x, g, w, b = case(rows, n)
    if not with_params:
        w = b = None
    dev = [None if a is None else on_device(a) for a in (x, g, w, b)]
    out, mean, rstd = module.forward(dev[0], dev[2], dev[3], EPS)
    dx, dw, db = module.backward(dev[1], dev[0], dev[2], mean, rstd, w is not None, b is not None)
    want = oracle(x, g, w, b)
    for name, got, expected in zip(("out", "mean", "rstd", "dx"), (out, mean, rstd, dx), want):
        scale = np.abs(expected).max() if expected.size else 1.0
        assert_close(got, expected, scale, f"{name} of {rows} x {n}")
    if with_params:
        assert_close(dw, want[4], np.abs(g).sum(axis=0).max() * 4, "dw")
        assert_close(db, want[5], np.abs(g).sum(axis=0).max(), "db")
    else:
        assert dw is None and db is None
    names = [name for name, _ in launches]
    assert names == ["layer_norm_forward", "layer_norm_backward_input"] + (
        ["layer_norm_backward_params"] if with_params else []
    )
    assert launches[0][1] == (min(rows, 4),)
    if with_params:
        assert launches[2][1] == (min(-(-n // module.COLUMNS), 2),)


def test_the_op_on_the_kernels_matches_the_op_on_numpy(launches):
    """nn_ops.LayerNorm with device rows takes the kernels, and agrees with its NumPy self."""
    x, g, w, b = case(6, 40, seed=1)
    x3, g3 = x.reshape(2, 3, 40), g.reshape(2, 3, 40)

    def run(to):
        ctx = SimpleNamespace(needs_grad=(True, True, True))
        out = LayerNorm.forward(ctx, to(x3), to(w), to(b), normalized_shape=(40,), epsilon=EPS)
        return (out, *LayerNorm.backward(ctx, to(g3)))

    numpy_run = run(np.asarray)
    launches.clear()
    kernel_run = run(on_device)
    assert [name for name, _ in launches] == [
        "layer_norm_forward",
        "layer_norm_backward_input",
        "layer_norm_backward_params",
    ]
    for got, want in zip(kernel_run, numpy_run):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(host(got), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_the_parameters_kernel_writes_into_their_grad_buffers(launches):
    """Offered the weight's and bias's stale grad buffers (``ctx.grad_out``), the op's
    backward has the kernel write d weight and d bias there and returns those very arrays
    (the engine copies nothing in after); the values are those of a backward without them."""
    x, g, w, b = case(6, 40, seed=3)
    w2, b2 = w.reshape(5, 8), b.reshape(5, 8)  # normalized_shape (5, 8): n = 40 over two dims

    def run(grad_out):
        ctx = SimpleNamespace(needs_grad=(True, True, True), grad_out=grad_out)
        x3 = on_device(x.reshape(6, 5, 8))
        LayerNorm.forward(ctx, x3, on_device(w2), on_device(b2), (5, 8), EPS)
        return LayerNorm.backward(ctx, on_device(g.reshape(6, 5, 8)))

    want = run(None)
    buffers = (
        None,
        on_device(np.full((5, 8), np.nan, float32)),
        on_device(np.zeros((5, 8), float32)),
    )
    got = run(buffers)
    assert got[1] is buffers[1] and got[2] is buffers[2]
    for i in range(3):
        np.testing.assert_array_equal(host(got[i]), host(want[i]))
    # a buffer of another dtype is left alone (the engine converts the float32 result)
    half = (None, on_device(np.zeros((5, 8), np.float16)), None)
    other = run(half)
    assert other[1] is not half[1] and other[1].dtype == float32
    np.testing.assert_array_equal(host(half[1]), 0)


def test_the_parameters_buffers_are_checked_before_any_launch(launches):
    x, g, w, _ = case(3, 8)
    rows, grad, weight = on_device(x), on_device(g), on_device(w)
    mean, rstd = on_device(np.zeros(3, float32)), on_device(np.ones(3, float32))
    bad = {
        "dw_out must be float32": {"dw_out": on_device(np.zeros(8, np.float16))},
        "db_out has 9 elements, not n = 8": {"db_out": on_device(np.zeros(9, float32))},
        "dw_out must be C-contiguous": {"dw_out": on_device(np.zeros((8, 2), float32))[:, 0]},
    }
    for message, outs in bad.items():
        launches.clear()
        with pytest.raises((TypeError, ValueError), match=message):
            module.backward(grad, rows, weight, mean, rstd, True, True, **outs)
        assert launches == []


def test_other_dtypes_and_raw_kernels_off_keep_the_array_expressions(launches, monkeypatch):
    rows = on_device(np.ones((2, 3), float32))
    assert module.usable(rows)
    assert not module.usable(on_device(np.ones((2, 3), np.float64)))
    assert not module.usable(on_device(np.ones((0, 3), float32)))
    assert not module.usable(np.ones((2, 3), float32))  # NumPy: the op's own expressions
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "0")
    assert not module.usable(rows)


@pytest.mark.gpu
def test_on_a_gpu_layer_norm_takes_the_kernels_and_matches_the_cpu():
    x, g, w, b = case(64, 96, seed=2)

    def run(place):
        t = mt.to_tensor(x.reshape(4, 16, 96), place=place, stop_gradient=False)
        weight = mt.to_tensor(w, place=place, stop_gradient=False)
        bias = mt.to_tensor(b, place=place, stop_gradient=False)
        out = F.layer_norm(t, 96, weight, bias, EPS)
        out.backward(mt.to_tensor(g.reshape(4, 16, 96), place=place))
        return [a.numpy() for a in (out, t.grad, weight.grad, bias.grad)]

    for got, want in zip(run("gpu:0"), run("cpu")):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
