"""``csrc/gelu.c``: exact GELU's NumPy passes in one loop, the same bits.

The NumPy passes (``backend/special.py``'s ``_normal_cdf_block`` and ``_normal_cdf_tail``,
and the backward's loop in ``autograd/ops/activation.py``) are the definition, and the path
without a C compiler; the compiled file must give their results bit for bit: the same float32
operations in the same order, with NumPy's exp. (Their accuracy against float64:
``tests/test_erf.py``.)
"""

from __future__ import annotations

import numpy as np
import pytest

from minitorch_amp.autograd.ops.activation import Gelu
from minitorch_amp.backend import host_c, special


@pytest.fixture
def compiled():
    module = host_c.load("gelu")
    if module is None:
        pytest.skip(host_c.status("gelu"))
    return module


class _Ctx:
    """What the dispatcher hands an op: attributes set by forward, read by backward."""


def gelu_both_ways(x, grad, paths: str, monkeypatch):
    """(Phi, x * Phi, the op's forward, its input gradient, normal_cdf) on one path."""
    if paths == "NumPy":
        monkeypatch.setitem(host_c._loaded, "gelu", (None, "NumPy (this test)"))
    else:
        monkeypatch.delitem(host_c._loaded, "gelu", raising=False)
    with np.errstate(all="ignore"):
        cdf, product = special.gelu_float32(x)
        ctx = _Ctx()
        out = Gelu.forward(ctx, x)
        dx = Gelu.backward(ctx, grad)
        alone = special.normal_cdf(x)
    monkeypatch.delitem(host_c._loaded, "gelu", raising=False)
    return cdf, product, out, dx, alone


def inputs(kind: str, size: int) -> np.ndarray:
    rng = np.random.default_rng(size)
    if kind == "bits":  # every kind of float32: NaN, inf, subnormal, huge
        return rng.integers(0, 2**32, size, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = rng.standard_normal(size).astype(np.float32) * np.float32(float(kind))
    x[: min(size, 12)] = [np.nan, np.inf, -np.inf, 20, -3, -14.5, -14.6, 9.5, -1e30, 1.5,
                          -1.5, 0.0][: min(size, 12)]  # fmt: skip
    return x


@pytest.mark.parametrize("kind", ["0.3", "1.0", "3.0", "bits"])
@pytest.mark.parametrize("size", [0, 1, 511, 513, 2 * 65536 + 700])  # chunks and blocks cut
def test_the_compiled_loops_give_the_numpy_passes_bits(compiled, kind, size, monkeypatch):
    x = inputs(kind, size)
    grad = np.random.default_rng(1).standard_normal(size).astype(np.float32)
    numpy = gelu_both_ways(x, grad, "NumPy", monkeypatch)
    ours = gelu_both_ways(x, grad, "compiled", monkeypatch)
    for name, a, b in zip(("cdf", "x * cdf", "forward", "backward", "normal_cdf"), numpy, ours):
        assert a.dtype == b.dtype == np.float32 and a.shape == b.shape, name
        bad = np.flatnonzero(a.view(np.uint32) != b.view(np.uint32))
        assert bad.size == 0, (name, x[bad[:5]], a[bad[:5]], b[bad[:5]])


def test_shapes_and_strided_inputs_take_the_same_path(compiled, monkeypatch):
    x = inputs("1.0", 3 * 64 * 40).reshape(3, 64, 40).transpose(2, 0, 1)  # not C-contiguous
    grad = np.ones(x.shape, np.float32)
    numpy = gelu_both_ways(x, grad, "NumPy", monkeypatch)
    ours = gelu_both_ways(x, grad, "compiled", monkeypatch)
    for a, b in zip(numpy, ours):
        assert a.shape == x.shape
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def call_forward(module, x, body=special._CDF_BODY, out=None):
    out = np.zeros(x.size, np.float32) if out is None else out
    scratch = [np.zeros(x.size, np.float32) for _ in range(3)]
    return module.forward(
        x, body, special._CDF_SPLIT_SQUARED, special._CDF_TAIL, special._CDF_CLIP,
        special._CDF_T, scratch[0], out, scratch[1], scratch[2],
    )  # fmt: skip


def test_wrong_buffers_raise_before_anything_is_written(compiled):
    x = np.ones(8, np.float32)
    out = np.zeros(8, np.float32)
    with pytest.raises(TypeError, match="float32"):
        call_forward(compiled, x.astype(np.float64), out=out)
    with pytest.raises(ValueError, match="elements"):
        call_forward(compiled, x, out=np.zeros(7, np.float32))
    with pytest.raises(ValueError, match="coefficients"):
        call_forward(compiled, x, body=special._CDF_BODY[:1], out=out)
    with pytest.raises(ValueError, match="contiguous"):
        compiled.density_exponent(np.ones(16, np.float32)[::2], out)
    assert not out.any()
    assert call_forward(compiled, x, out=out) == 0 and out.all()  # no tail at 1.0
    s = np.ones(8, np.float32)
    with pytest.raises(TypeError):
        compiled.slope(s, x, x, x)  # c missing
    assert (s == 1).all()


def test_with_the_compiled_file_gelu_runs_through_it(compiled, monkeypatch):
    calls = []

    class Counting:
        def __getattr__(self, name):
            calls.append(name)
            return getattr(compiled, name)

    monkeypatch.setitem(host_c._loaded, "gelu", (Counting(), "compiled C (counted)"))
    x = inputs("3.0", 1000)  # a tail too
    ctx = _Ctx()
    with np.errstate(all="ignore"):
        Gelu.forward(ctx, x)
        Gelu.backward(ctx, np.ones_like(x))
    assert calls == ["forward", "tail_finish", "density_exponent", "slope"]
