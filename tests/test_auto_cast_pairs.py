"""``auto_cast`` casts a white-list op's two float32 inputs in one launch (``cast_pair``).

Fewer launches (issue 24): under O1 a Linear's activation and weight both need a cast to
float16; ``backend.cast.cast_pair`` makes both arrays at once (one kernel on a GPU), and each
is still recorded as its own ``Cast``. These tests hold the fused casts to the unfused ones:
the same values, gradients, cast counts and operator statistics.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.backend import cast as cast_module
from minitorch_amp.backend.cast_counter import cast_counts, reset_cast_counts

auto_cast_module = importlib.import_module("minitorch_amp.amp.auto_cast")  # (amp.auto_cast is
# the context manager; the module is shadowed by it)


@pytest.fixture
def pairs(monkeypatch):
    """The (dtype of a, dtype of b, target) of every cast_pair call."""
    calls, cast_pair = [], cast_module.cast_pair

    def recording(a, b, dtype):
        calls.append((a.shape, b.shape, np.dtype(dtype)))
        return cast_pair(a, b, dtype)

    monkeypatch.setattr(cast_module, "cast_pair", recording)
    return calls


def unfused(monkeypatch):
    monkeypatch.setattr(auto_cast_module, "_cast_together", lambda tensors, dtype: {})


def step(net, x, dtype="float16"):
    """One O1 forward and backward; the output, the gradients and the cast counts."""
    for p in net.parameters():
        p.clear_grad()
    reset_cast_counts()
    with amp.auto_cast(level="O1", dtype=dtype):
        out = net(x)
    (out.astype("float32") ** 2).mean().backward()
    grads = [p.grad.numpy().copy() for p in net.parameters()]
    return out.numpy().copy(), grads, cast_counts()


def model(seed=0):
    mt.seed(seed)
    return nn.Sequential(nn.Linear(10, 12), nn.ReLU(), nn.Linear(12, 4))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_an_o1_linear_casts_its_activation_and_weight_together(pairs, dtype):
    net = model()
    x = mt.randn([6, 10])
    step(net, x, dtype)
    assert pairs == [
        ((6, 10), (10, 12), np.dtype(dtype)),
        ((6, 12), (12, 4), np.dtype(dtype)),
    ]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_fused_casts_give_the_unfused_values_gradients_and_counts(monkeypatch, pairs, dtype):
    net = model()
    x = mt.randn([6, 10])
    fused = step(net, x, dtype)
    unfused(monkeypatch)
    plain = step(net, x, dtype)
    np.testing.assert_array_equal(fused[0], plain[0])
    for a, b in zip(fused[1], plain[1]):
        np.testing.assert_array_equal(a, b)
    assert fused[2] == plain[2] and fused[2]["weight"] == 2 and fused[2]["autocast"] == 2


def test_a_cached_weight_is_not_cast_again(pairs):
    """In one region the second forward finds the weight's cast in the cache: the activation
    alone needs a cast, which goes the plain way."""
    net = nn.Linear(10, 12)
    x = mt.randn([6, 10])
    with amp.auto_cast(level="O1"):
        net(x)
        net(x)
    assert len(pairs) == 1


def test_operator_statistics_count_each_cast(monkeypatch, capsys):
    def counted():
        net = model()
        x = mt.randn([6, 10])
        with amp.debugging.collect_operator_stats(), amp.auto_cast(level="O1"):
            net(x)
        return capsys.readouterr().out

    fused = counted()
    unfused(monkeypatch)
    assert fused == counted() and "cast" in fused


def test_one_tensor_in_both_places_is_cast_twice_not_shared(pairs):
    x = mt.randn([5, 5])
    with amp.auto_cast(level="O1"):
        y = mt.matmul(x, x)
    assert pairs == []  # one tensor: nothing to pair
    expected = x.numpy().astype(np.float16).astype(np.float32)
    np.testing.assert_allclose(y.numpy(), expected @ expected, rtol=2e-3)


def test_a_prepared_cast_that_does_not_fit_is_refused():
    from minitorch_amp.autograd.dispatch import apply
    from minitorch_amp.autograd.ops import Cast

    x = mt.randn([2, 3])
    with pytest.raises(ValueError, match="does not fit a cast"):
        apply(Cast, x, dtype="float16", prepared=np.zeros((3, 2), np.float16))
