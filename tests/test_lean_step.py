"""A lean eager step: gradients are written, not added to zeros, and keep their buffers.

``clear_grad()`` marks gradients stale instead of filling them; backward writes the first
gradient into the same buffer (Linear's weight and bias gradients straight from the GEMM and
the reduction), so a step's gradients have the same addresses every iteration. That saves
kernels on a GPU (no fill, no add, no copy) and is what the fused optimizer's cached table
and a captured CUDA graph rely on.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import nn
from minitorch_amp.autograd import engine
from minitorch_amp.backend import primitives


def _model():
    mt.seed(0)
    return nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))


def _backward(model, x):
    model(x).sum().backward()


def test_after_clear_grad_a_read_sees_zeros_and_backward_overwrites_the_same_buffer():
    model = _model()
    x = mt.randn([5, 4])
    _backward(model, x)
    grads = [p.grad for p in model.parameters()]
    arrays = [g._data for g in grads]
    first = [a.copy() for a in arrays]
    model.clear_gradients()
    assert all(not p.grad.numpy().any() for p in model.parameters())  # a read: zeros
    _backward(model, x)  # (buffers were materialised by the read: this one adds into zeros)
    model.clear_gradients()
    _backward(model, x)  # stale buffers: written
    for p, grad, array, want in zip(model.parameters(), grads, arrays, first):
        assert p.grad is grad and p.grad._data is array
        np.testing.assert_array_equal(array, want)  # the same gradient, not twice it


def test_without_a_clear_grad_backward_accumulates():
    model = _model()
    x = mt.randn([5, 4])
    _backward(model, x)
    once = [p.grad.numpy().copy() for p in model.parameters()]
    _backward(model, x)
    for p, g in zip(model.parameters(), once):
        np.testing.assert_allclose(p.grad.numpy(), 2 * g, rtol=1e-6)


def test_linear_writes_its_parameter_gradients_into_their_buffers(monkeypatch):
    model = _model()
    x = mt.randn([5, 4])
    _backward(model, x)
    model.clear_gradients()
    calls = []
    real = engine._accumulate_leaf
    monkeypatch.setattr(engine, "_accumulate_leaf", lambda *a, **k: (calls.append(a), real(*a)))
    _backward(model, x)
    assert calls == []  # every parameter gradient was written in place by its op
    model.clear_gradients()
    monkeypatch.setattr(engine, "_accumulate_leaf", real)
    reference = _model()
    _backward(reference, x)
    _backward(model, x)
    for p, q in zip(model.parameters(), reference.parameters()):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())


def test_a_parameter_used_twice_gets_the_sum_of_both_gradients():
    mt.seed(0)
    shared = nn.Linear(3, 3)
    x = mt.randn([2, 3])
    shared(shared(x)).sum().backward()
    want = [p.grad.numpy().copy() for p in shared.parameters()]
    shared.clear_gradients()
    shared(shared(x)).sum().backward()
    for p, w in zip(shared.parameters(), want):
        np.testing.assert_allclose(p.grad.numpy(), w, rtol=1e-6)


def test_clipping_writes_into_buffers_that_keep_their_addresses():
    clip = nn.ClipGradByGlobalNorm(1.0)
    p = nn.Linear(3, 2).weight
    first = clip([(p, np.full((3, 2), 5.0, "float32"))])[0][1]._data
    second = clip([(p, np.full((3, 2), 7.0, "float32"))])[0][1]._data
    assert second is first
    np.testing.assert_allclose(np.linalg.norm(second), 1.0, rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_relu_backward_keeps_a_nan_gradient_where_the_unit_is_off(dtype):
    y = np.array([0.0, 2.0, 0.0], dtype)
    grad = np.array([np.nan, 3.0, -1.0], dtype)
    out = primitives.relu_backward(y, grad)
    assert np.isnan(out[0]) and out[1] == 3.0 and out[2] == 0.0
