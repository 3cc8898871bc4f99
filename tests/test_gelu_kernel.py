"""backend/gelu.py and cuda/elementwise.cu's gelu_forward / gelu_backward: exact GELU in one
launch each way on a GPU.

The kernels run on the CPU emulator (tests/primitives_emulator.cpp on tests/cuda_emulator.h,
with -ftz's flushes) fed by the real launcher, against float64 GELU within a few float32 ulps
(the host's erfcf stands in for CUDA's, both within a few ulps) and against the op's own
NumPy path (its float32 polynomials), for float32, float16 and bfloat16 inputs, the tails
included. The GPU test at the end runs the op on a GPU.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import emulated_gpu
import numpy as np
import pytest
from emulated_gpu import HostArray, on_device
from emulated_gpu import to_host as host

import minitorch_amp as mt
import minitorch_amp.nn.functional as F
from minitorch_amp.autograd.ops.activation import Gelu
from minitorch_amp.backend import device
from minitorch_amp.backend import gelu as module
from minitorch_amp.backend.dtypes import bfloat16, float16, float32

DTYPES = [float32, float16, bfloat16]
# values through both of the twin's ranges, both tails, zeros, and past exp's underflow
VALUES = np.concatenate(
    [np.linspace(-12, 12, 2001), [-0.0, 0.0, 1e-30, -1e-30, -40.0, 40.0, 1.5, -1.5]]
)


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    return emulated_gpu.build("primitives_emulator.cpp", tmp_path_factory.mktemp("emulator"))


@pytest.fixture
def launches(emulator, monkeypatch):
    """Route elementwise.cu's launches to the emulator; the list of ``(name, grid)``."""
    made = emulated_gpu.install(emulator, monkeypatch, module.FILE, block=module.THREADS)
    device.cupy.empty_like = lambda a: np.empty_like(a).view(HostArray)
    monkeypatch.setattr(module, "MAX_BLOCKS", 3)  # few blocks: threads stride, as on a GPU
    return made


def exact(x, g):
    """float64 GELU, its gradient times ``g``, and the size of that gradient's two terms
    (``Phi(x)`` and ``x * phi(x)`` cancel near GELU's minimum, x = -0.75)."""
    x, g = x.astype(np.float64), g.astype(np.float64)
    cdf = np.array([0.5 * math.erfc(-v / math.sqrt(2)) for v in x])
    pdf = np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    return x * cdf, g * (cdf + x * pdf), np.abs(g) * (cdf + np.abs(x) * pdf)


def ulps(got, want, dtype):
    """|got - want| in units of ``dtype``'s spacing at ``want`` (float32 ulps for float32)."""
    spacing = np.spacing(np.abs(want).astype(dtype)).astype(np.float64)
    tiny = np.finfo(dtype).smallest_subnormal if dtype != bfloat16 else 2.0**-133
    return np.abs(got.astype(np.float64) - want) / np.maximum(spacing, float(tiny))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_kernels_compute_gelu_and_its_gradient(launches, dtype):
    x = VALUES.astype(dtype)
    g = np.random.default_rng(0).standard_normal(x.size).astype(dtype)
    out = host(module.forward(on_device(x)))
    grad = host(module.backward(on_device(x), on_device(g)))
    assert out.dtype == grad.dtype == dtype
    want_out, want_grad, terms = exact(x, g)
    # float32: a rounding of x / sqrt(2) (or of x * x) moves erfc's (exp's) argument by half
    # an ulp, which changes Phi far in the tails by about x**2 float32 ulps: no float32
    # evaluation does better there; erfcf's own 4 ulps and the products' roundings on top.
    # A 16-bit result is that float32 value rounded once: one ulp of its own type.
    x64 = x.astype(np.float64)
    bound = 8 + 1.5 * x64 * x64 if dtype == float32 else 1.0
    bad = ulps(out, want_out, dtype) > bound
    assert not bad.any(), (x[bad], out[bad], want_out[bad])
    # the gradient: in ulps of its terms' size (cancellation), 2 more for the product with g
    error = np.abs(grad.astype(np.float64) - want_grad)
    bad = error > (bound + 2) * np.spacing(terms.astype(dtype)).astype(np.float64)
    bad &= ulps(grad, want_grad, dtype) > bound + 2
    assert not bad.any(), (x[bad], grad[bad], want_grad[bad])
    blocks = min(-(-x.size // module.THREADS), 3)
    assert launches == [
        (f"gelu_forward<{module._CUDA_TYPE[dtype]}>", (blocks,)),
        (f"gelu_backward<{module._CUDA_TYPE[dtype]}>", (blocks,)),
    ]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_op_on_the_kernels_agrees_with_the_op_on_numpy(launches, dtype):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((4, 33)) * 3).astype(dtype)
    g = rng.standard_normal((4, 33)).astype(dtype)

    def run(to):
        ctx = SimpleNamespace(needs_grad=(True,))
        return Gelu.forward(ctx, to(x)), Gelu.backward(ctx, to(g))

    numpy_out, numpy_grad = run(np.asarray)
    launches.clear()
    kernel_out, kernel_grad = run(on_device)
    assert [name.split("<")[0] for name, _ in launches] == ["gelu_forward", "gelu_backward"]
    for got, want in ((kernel_out, numpy_out), (kernel_grad, numpy_grad)):
        assert got.dtype == want.dtype == dtype
        tolerance = 1e-5 if dtype == float32 else 2.0 ** -(7 if dtype == bfloat16 else 10)
        np.testing.assert_allclose(host(got).astype(np.float64), want.astype(np.float64),
                                   rtol=tolerance, atol=tolerance)  # fmt: skip


def test_the_tanh_approximation_keeps_its_expressions(launches, monkeypatch):
    monkeypatch.setattr(device.cupy, "tanh", np.tanh, raising=False)  # (CuPy's, on the host)
    ctx = SimpleNamespace(needs_grad=(True,))
    x = np.linspace(-3, 3, 7).astype(float32)
    out = Gelu.forward(ctx, on_device(x), approximate=True)
    grad = Gelu.backward(ctx, on_device(np.ones(7, float32)))
    assert launches == []
    numpy_ctx = SimpleNamespace(needs_grad=(True,))
    np.testing.assert_array_equal(host(out), Gelu.forward(numpy_ctx, x, approximate=True))
    np.testing.assert_array_equal(host(grad), Gelu.backward(numpy_ctx, np.ones(7, float32)))


def test_other_dtypes_strides_and_raw_kernels_off_keep_the_expressions(launches, monkeypatch):
    x = on_device(np.ones(6, float32))
    assert module.usable(x) and module.usable(x, on_device(np.ones(6, float32)))
    assert not module.usable(on_device(np.ones(6, np.float64)))
    assert not module.usable(x, on_device(np.ones(6, float16)))  # mixed dtypes
    assert not module.usable(on_device(np.ones((3, 4), float32))[:, ::2])  # strided
    assert not module.usable(np.ones(6, float32))  # NumPy: the op's own expressions
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "0")
    assert not module.usable(x)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_on_a_gpu_gelu_takes_the_kernels_and_matches_the_cpu(dtype):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((8, 64)) * 3).astype(dtype)
    g = rng.standard_normal((8, 64)).astype(dtype)

    def run(place):
        t = mt.to_tensor(x, place=place, stop_gradient=False)
        out = F.gelu(t)
        out.backward(mt.to_tensor(g, place=place))
        return out.numpy().astype(np.float64), t.grad.numpy().astype(np.float64)

    tolerance = 1e-5 if dtype == "float32" else 2.0**-10
    for got, want in zip(run("gpu:0"), run("cpu")):
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)
