"""The O1 weight-cast cache and the cast counter."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import amp, nn


@pytest.fixture(autouse=True)
def _fresh_counts():
    amp.reset_cast_counts()
    yield
    amp.reset_cast_counts()


def mlp():
    mt.seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def weights(model):
    """The parameters AMP casts: the matmuls' weights (float32 biases are added in float32)."""
    return [p for p in model.parameters() if p.ndim == 2]


def test_o1_casts_each_weight_once_per_region():
    model, x = mlp(), mt.randn([3, 4])
    # The 2 weights feed the white matmul; the float32 biases are added in float32 (Paddle's
    # F.linear adds them in a gray add after the float16 matmul), so they are never cast.
    n_weights = 2
    with amp.auto_cast():
        model(x)
        model(x)
        model(x)
    counts = amp.cast_counts()
    assert counts["weight"] == n_weights
    assert counts["cache_hit"] == 2 * n_weights
    # per forward: the data x, and the first layer's float32 output into the second matmul
    assert counts["autocast"] == 3 * 2
    with amp.auto_cast():  # a new region casts again: the cache was dropped on exit
        model(x)
    assert amp.cast_counts()["weight"] == 2 * n_weights


def test_nested_regions_share_the_outermost_cache():
    model, x = mlp(), mt.randn([3, 4])
    with amp.auto_cast():
        model(x)
        with amp.auto_cast(level="O1", custom_black_list=["exp"]):
            model(x)
    assert amp.cast_counts()["weight"] == len(weights(model))


def test_cached_casts_give_the_same_gradients_as_fresh_ones():
    model, x = mlp(), mt.randn([3, 4])
    with amp.auto_cast():
        loss = model(x).astype("float32").mean() + model(x).astype("float32").mean()
    loss.backward()
    cached = [p.grad.numpy().copy() for p in model.parameters()]
    assert all(p.grad.dtype == np.float32 for p in model.parameters())

    model2 = mlp()
    with amp.auto_cast():
        first = model2(x).astype("float32").mean()
    with amp.auto_cast():  # separate regions: no cache sharing
        second = model2(x).astype("float32").mean()
    (first + second).backward()
    for a, p in zip(cached, model2.parameters()):
        np.testing.assert_array_equal(a, p.grad.numpy())


def test_no_grad_casts_are_not_cached_so_later_training_still_reaches_the_weights():
    model, x = mlp(), mt.randn([3, 4])
    with amp.auto_cast():
        with mt.no_grad():
            model(x)  # eval pass: casts without a graph
        loss = model(x).astype("float32").mean()
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())
    assert amp.cast_counts()["weight"] == 2 * len(weights(model))


def test_a_training_loop_inside_one_region_casts_each_weight_once_per_forward():
    """A backward frees the cached casts' graph: the next forward casts again, and its
    backward reaches the weights (it raised AttributeError once)."""
    model, x = mlp(), mt.randn([3, 4])
    sgd = mt.optimizer.SGD(learning_rate=0.1, parameters=model.parameters())
    losses = []
    with amp.auto_cast():
        for _ in range(3):
            loss = model(x).astype("float32").mean()
            loss.backward()
            sgd.step()
            sgd.clear_grad()
            losses.append(loss.item())
    assert amp.cast_counts()["weight"] == 3 * len(weights(model))
    fresh = mlp()
    fresh_sgd = mt.optimizer.SGD(learning_rate=0.1, parameters=fresh.parameters())
    expected = []
    for _ in range(3):  # one region per step: the usual loop
        with amp.auto_cast():
            loss = fresh(x).astype("float32").mean()
        loss.backward()
        fresh_sgd.step()
        fresh_sgd.clear_grad()
        expected.append(loss.item())
    assert losses == expected


def test_a_forward_after_a_backward_in_one_region_casts_again_and_reaches_the_weights():
    """No write in between (an evaluation pass, gradient accumulation): the backward freed
    the cached casts' graph, so they are made again, not reused."""
    model, x = mlp(), mt.randn([3, 4])
    with amp.auto_cast():
        model(x).astype("float32").mean().backward()
        first = [p.grad.numpy().copy() for p in model.parameters()]
        model(x).astype("float32").mean().backward()  # accumulates: twice the first
    for p, g in zip(model.parameters(), first):
        np.testing.assert_array_equal(p.grad.numpy(), 2 * g)
    assert amp.cast_counts()["weight"] == 2 * len(weights(model))


def test_a_weight_written_inside_the_region_is_cast_again():
    model, x = mlp(), mt.randn([3, 4])
    with amp.auto_cast():
        model(x)
        for p in weights(model):
            p.set_value(np.zeros(p.shape, "float32"))
        out = model(x)
    assert amp.cast_counts()["weight"] == 2 * len(weights(model))
    bias = model[2].bias.numpy()  # zero weights: only the last bias is left
    np.testing.assert_array_equal(out.numpy(), np.broadcast_to(bias, out.shape).astype(out.dtype))


def test_a_retained_graph_keeps_its_cached_casts():
    model, x = mlp(), mt.randn([3, 4])
    with amp.auto_cast():
        model(x).astype("float32").mean().backward(retain_graph=True)
        model(x)
    counts = amp.cast_counts()
    assert counts["weight"] == len(weights(model)) and counts["cache_hit"] == len(weights(model))


def test_frozen_parameters_and_data_are_not_cached():
    model, x = mlp(), mt.randn([3, 4])
    for p in model.parameters():
        p.stop_gradient = True
    with amp.auto_cast():
        model(x)
        model(x)
    counts = amp.cast_counts()
    assert counts["weight"] == 0 and counts["cache_hit"] == 0
    # per forward: x, the first layer's float32 output, and the two frozen weights
    assert counts["autocast"] == 2 * (2 + len(weights(model)))


def test_counter_reports_and_resets():
    from minitorch_amp.backend import cast_counter

    cast_counter.count_cast("optimizer", 3)
    assert amp.cast_counts()["optimizer"] == 3
    amp.reset_cast_counts()
    assert set(amp.cast_counts().values()) == {0}
    with pytest.raises(ValueError, match="unknown cast reason"):
        cast_counter.count_cast("magic")
