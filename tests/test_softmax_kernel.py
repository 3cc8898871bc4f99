"""backend/softmax.py and cuda/softmax.cu: softmax along the last axis in one GPU launch each
way.

The kernels run on a CPU emulator (tests/softmax_emulator.cpp on tests/cuda_emulator.h, with
-ftz's flushes) fed by the real launcher, so its grids and arguments, the row loop, the
shared-memory trees and the barriers are checked without a GPU: against float64 within
float32 bounds, against the op's own NumPy expressions (the twin, which sums with BLAS), and
on rows with NaN, inf and -inf. The GPU test at the end runs the op on a GPU.
"""

from __future__ import annotations

from types import SimpleNamespace

import emulated_gpu
import ml_dtypes
import numpy as np
import pytest
from emulated_gpu import HostArray, on_device
from emulated_gpu import to_host as host
from test_amp_kernels import assert_same_bits

import minitorch_amp as mt
import minitorch_amp.nn.functional as F
from minitorch_amp.autograd.ops.activation import Softmax
from minitorch_amp.backend import device
from minitorch_amp.backend import softmax as module
from minitorch_amp.backend.dtypes import float32

# (rows, n): one element; fewer values than threads (attention's rows of 64); n past the 256
# threads; more rows than the 4 blocks the launches below allow (they stride)
SHAPES = [(1, 1), (5, 64), (3, 300), (9, 7)]


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    return emulated_gpu.build("softmax_emulator.cpp", tmp_path_factory.mktemp("emulator"))


@pytest.fixture
def launches(emulator, monkeypatch):
    """Route softmax.cu's launches to the emulator; the list of ``(name, grid)``."""
    made = emulated_gpu.install(emulator, monkeypatch, module.FILE, block=module.THREADS)
    device.cupy.empty_like = lambda a: np.empty_like(a).view(HostArray)
    monkeypatch.setattr(module, "MAX_BLOCKS", 4)
    return made


def oracle(x, g):
    """float64 softmax along the last axis and the input's gradient for ``g``."""
    x, g = x.astype(np.float64), g.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    y = e / e.sum(axis=-1, keepdims=True)
    return y, (g - (g * y).sum(axis=-1, keepdims=True)) * y


@pytest.mark.parametrize("rows, n", SHAPES)
def test_the_kernels_compute_softmax_and_its_gradient(launches, rows, n):
    rng = np.random.default_rng(rows * n)
    x = (rng.standard_normal((rows, n)) * 4).astype(float32)
    g = rng.standard_normal((rows, n)).astype(float32)
    y, out = module.forward(on_device(x))
    assert out is y  # a float32 input: nothing more to write
    dx = module.backward(y, on_device(g))
    want_y, want_dx = oracle(x, g)
    # float32 roundings of exp, the sum and the division; the gradient's sum of n products
    np.testing.assert_allclose(host(y), want_y, rtol=1e-5 * (1 + n / 64), atol=1e-37)
    bound = 1e-6 * (n + 4) * (np.abs(g).max() + 1)
    np.testing.assert_allclose(host(dx), want_dx, rtol=0, atol=bound)
    grid = (min(rows, 4),)
    assert launches == [("softmax_forward<float>", grid), ("softmax_backward<float>", grid)]


def test_nan_inf_and_all_masked_rows_come_out_as_the_op_makes_them(launches):
    """A NaN makes its row NaN; an inf makes the row NaN (inf - inf); -inf entries (a mask)
    get 0; a row of -inf only is NaN; large scores stay finite: as the op on NumPy gives
    them."""
    nan, inf = np.nan, np.inf
    x = np.array(
        [
            [1.0, nan, 2.0],
            [1.0, inf, 2.0],
            [0.0, -inf, 1.0],
            [-inf, -inf, -inf],
            [3.0, 3.0, 3.0],
            [100.0, 99.0, 98.0],  # exp(100) overflows float32: the maximum must come off first
        ],
        float32,
    )
    got = host(module.forward(on_device(x))[0])
    with np.errstate(invalid="ignore"):
        want = Softmax.forward(SimpleNamespace(), x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[~np.isnan(got)], want[~np.isnan(want)], rtol=1e-6)
    assert got[2, 1] == 0.0


def test_the_op_on_the_kernels_matches_the_op_on_numpy(launches):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((2, 3, 40)) * 3).astype(float32)
    g = rng.standard_normal((2, 3, 40)).astype(float32)

    def run(to):
        ctx = SimpleNamespace(needs_grad=(True,))
        return Softmax.forward(ctx, to(x), axis=-1), Softmax.backward(ctx, to(g))

    numpy_run = run(np.asarray)
    launches.clear()
    kernel_run = run(on_device)
    assert [name for name, _ in launches] == ["softmax_forward<float>", "softmax_backward<float>"]
    for got, want in zip(kernel_run, numpy_run):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(host(got), want, rtol=2e-5, atol=1e-6)


def test_other_axes_dtypes_and_raw_kernels_off_keep_the_expressions(launches, monkeypatch):
    x = on_device(np.ones((2, 3), float32))
    assert module.usable(x) and module.usable(x, axis=1)
    assert not module.usable(x, axis=0)
    assert not module.usable(on_device(np.ones((2, 3), np.float64)))
    assert module.usable(on_device(np.ones((2, 3), np.float16)))
    assert not module.usable(on_device(np.ones((0, 3), float32)))
    assert not module.usable(np.ones((2, 3), float32))  # NumPy: the op's own expressions
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "0")
    assert not module.usable(x)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_a_16_bit_softmax_is_one_launch_each_way_with_the_bits_of_three(launches, dtype):
    """Widened as read and rounded once as written: the bits of the float32 kernels between
    a widening and a narrowing (what the op launched before), with NaN, inf and -inf rows."""
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((9, 70)) * 4).astype(dtype)
    x[1, 3], x[2, 5], x[3, :] = np.nan, np.inf, -np.inf
    x[4, ::2] = -np.inf
    g = (rng.standard_normal((9, 70)) * 2).astype(dtype)
    y, out = module.forward(on_device(x))
    dx = module.backward(y, on_device(g))
    assert (y.dtype, out.dtype, dx.dtype) == (float32, dtype, dtype)
    assert [name for name, _ in launches] == [
        f"softmax_forward<{module._TYPES[np.dtype(dtype)]}>",
        f"softmax_backward<{module._TYPES[np.dtype(dtype)]}>",
    ]
    wide_y, _ = module.forward(on_device(x.astype(float32)))
    wide_dx = module.backward(wide_y, on_device(g.astype(float32)))
    assert_same_bits(host(y), host(wide_y))
    assert_same_bits(host(out), host(wide_y).astype(dtype))
    assert_same_bits(host(dx), host(wide_dx).astype(dtype))


def test_the_op_on_16_bit_scores_launches_the_kernels_alone(launches):
    """activation.Softmax on float16 (attention's scores under AMP): two launches a step, no
    widening or narrowing of its own, float32 kept for the backward."""
    rng = np.random.default_rng(5)
    x = on_device((rng.standard_normal((2, 4, 64)) * 3).astype(np.float16))
    g = on_device(rng.standard_normal((2, 4, 64)).astype(np.float16))
    ctx = SimpleNamespace(needs_grad=(True,))
    out = Softmax.forward(ctx, x, axis=-1)
    dx = Softmax.backward(ctx, g)
    assert out.dtype == dx.dtype == np.float16 and ctx.out.dtype == float32
    assert [name for name, _ in launches] == ["softmax_forward<__half>", "softmax_backward<__half>"]


def test_the_environment_reports_check_passes_on_the_emulator(launches):
    from minitorch_amp.utils.kernel_check_ops import softmax_matches

    assert softmax_matches(on_device, host)
    names = {name for name, _ in launches}
    assert {"softmax_forward<float>", "softmax_forward<__half>"} <= names


@pytest.mark.gpu
def test_on_a_gpu_softmax_takes_the_kernels_and_matches_the_cpu():
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((4, 2, 16, 16)) * 3).astype("float32")
    g = rng.standard_normal((4, 2, 16, 16)).astype("float32")

    def run(place):
        t = mt.to_tensor(x, place=place, stop_gradient=False)
        out = F.softmax(t, axis=-1)
        out.backward(mt.to_tensor(g, place=place))
        return out.numpy(), t.grad.numpy()

    for got, want in zip(run("gpu:0"), run("cpu")):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
