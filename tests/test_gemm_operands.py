"""matmul's operands on the GPU code path: a transposed view is copied for the GEMM once.

The GEMM kernel reads C-contiguous operands, so ``backend.primitives.matmul`` copies a
transposed view first. ``Matmul`` saves the copies it made for backward (``gemm_ready``), and
makes the incoming gradient contiguous once for both products: attention's heads-first
``q``, ``k`` and ``v`` (views of ``[batch, seq, heads, head_dim]``) are copied once each,
not once per product. Run on ``benchmarks/launch_count.py``'s stand-in for CuPy, with the
GEMM computed by its twin (and softmax by NumPy): the gradients are the CPU's, bit for bit,
and the copies counted.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp.backend import gemm as _gemm
from minitorch_amp.backend import primitives, softmax

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def launch_count():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import launch_count
    finally:
        sys.path.remove(str(BENCHMARKS))
    return launch_count


@pytest.fixture
def twin_gemm(launch_count, monkeypatch):
    """The GEMM kernel, computed by its twin; it refuses operands that are not contiguous."""

    def gemm(a, b, transpose_a=False, transpose_b=False, c=None, **kwargs):
        assert not kwargs, kwargs
        assert a.flags.c_contiguous and b.flags.c_contiguous, "the kernel ignores strides"
        plain = launch_count._plain
        out = _gemm.twin(plain(a), plain(b), transpose_a, transpose_b, out_dtype=a.dtype)
        if c is None:
            return launch_count._wrap(out)
        plain(c)[...] = out
        return c

    monkeypatch.setattr(_gemm, "gemm", gemm)
    monkeypatch.setattr(softmax, "usable", lambda *arrays, axis=-1: False)  # NumPy's maths


def _attention_grads(place: str, arrays):
    """``sdpa(q, k, v).sum()``'s output and input gradients, computed on ``place``."""
    q, k, v = (mt.to_tensor(a, place=place, stop_gradient=False) for a in arrays)
    out = mt.nn.functional.scaled_dot_product_attention(q, k, v)
    out.sum().backward()
    return [np.asarray(t._data).view(np.ndarray).copy() for t in (out, q.grad, k.grad, v.grad)]


def test_attention_copies_each_transposed_view_once(launch_count, twin_gemm):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((2, 5, 3, 8)).astype(np.float16) for _ in range(3)]
    expected = _attention_grads("cpu", arrays)
    with launch_count.stand_in():
        launch_count.counts.clear()
        got = _attention_grads("gpu:0", arrays)
        copies = launch_count.counts["ascontiguousarray (a copy)"]
    for e, g in zip(expected, got):
        np.testing.assert_array_equal(g, e)
    # forward: k and v (q times 8**-0.5, a number float16 cannot hold, is written contiguous
    # in its one float32 pass); backward: the output's gradient (a transposed view), once
    assert copies == 3


def test_gemm_ready_leaves_what_the_gemm_reads_as_it_is(launch_count):
    x = np.arange(24, dtype=np.float16).reshape(2, 3, 4)
    assert np.shares_memory(primitives.gemm_ready(x.swapaxes(1, 2))[0], x)  # NumPy: strides
    with launch_count.stand_in():
        device = x.view(launch_count.DeviceArray)
        view = device.swapaxes(1, 2)
        (made,) = primitives.gemm_ready(view)
        assert made.flags.c_contiguous and not np.shares_memory(made, device)
        np.testing.assert_array_equal(made, view)
        same = primitives.gemm_ready(device, device.astype(np.float32).swapaxes(1, 2))
        assert np.shares_memory(same[0], device)  # contiguous already
        assert not same[1].flags.c_contiguous  # float32: cuBLAS takes strides
