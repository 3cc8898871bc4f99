"""``graphs.graphed(step)`` on a GPU: captured steps equal eager steps bit for bit, and the
steps that cannot be captured run eagerly after one warning that says why.

Skipped without a GPU (tests/test_graphed_step.py checks the bookkeeping on the CPU).
"""

from __future__ import annotations

import numpy as np
import pytest
from test_graphed_step import BATCH, STEPS, WIDTH, simple_net_step, train

import minitorch_amp as mt
from minitorch_amp import nn
from minitorch_amp.device.cuda.graphs import GraphWarning, graphed

pytestmark = pytest.mark.gpu


def graphed_keeping(wrapped: list):
    """``graphed``, keeping what it returns in ``wrapped`` (to read its cache_info)."""

    def wrap(step):
        wrapped.append(graphed(step))
        return wrapped[-1]

    return wrap


def test_a_graphed_o2_adam_step_equals_the_eager_step_bit_for_bit():
    """SimpleNet, O2, GradScaler, Adam, an lr that a scheduler halves every 2 steps, and a
    batch with an inf (a skipped step, replayed)."""
    eager_losses, eager_state = train(lambda step: step)
    wrapped: list = []
    losses, state = train(graphed_keeping(wrapped))
    np.testing.assert_array_equal(losses, eager_losses)
    for have, want in zip(state, eager_state, strict=True):
        np.testing.assert_array_equal(have, want)
    assert wrapped[0].cache_info() == (1, STEPS - 2, 2, 1, 8)


def test_a_new_batch_size_is_captured_again_and_trains_like_the_eager_step():
    def run(wrap):
        step, state, scheduler = simple_net_step()
        step = wrap(step)
        rng = np.random.default_rng(2)
        losses = []
        for rows in [BATCH] * 4 + [BATCH // 2] * 4 + [BATCH] * 2:
            x = mt.to_tensor(rng.standard_normal((rows, WIDTH)).astype("float32"))
            y = mt.to_tensor(rng.standard_normal((rows, WIDTH)).astype("float32"))
            losses.append(step(x, y).item())
            scheduler.step()
        return losses, state()

    eager_losses, eager_state = run(lambda step: step)
    wrapped: list = []
    losses, state = run(graphed_keeping(wrapped))
    np.testing.assert_array_equal(losses, eager_losses)
    for have, want in zip(state, eager_state, strict=True):
        np.testing.assert_array_equal(have, want)
    assert wrapped[0].cache_info()[:2] == (2, 2 + 2 + 2)


def test_the_returned_loss_is_the_captured_tensor_overwritten_by_each_replay():
    step = graphed(simple_net_step()[0])
    rng = np.random.default_rng(0)
    losses, values = [], []
    for _ in range(5):
        x, y = (mt.to_tensor(rng.standard_normal((BATCH, WIDTH)).astype("f4")) for _ in "xy")
        losses.append(step(x, y))
        values.append(losses[-1].item())
    assert losses[2] is losses[3] is losses[4]
    assert losses[0] is not losses[2] and losses[1] is not losses[2]  # warm-ups: eager
    assert losses[2].item() == values[4] != values[3]


def fp32_step():
    mt.seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, 32), nn.ReLU(), nn.Linear(32, WIDTH))
    opt = mt.optimizer.SGD(0.1, parameters=model.parameters())
    mse = nn.MSELoss()

    def train_step(x, y):
        loss = mse(model(x), y)
        loss.backward()
        opt.step()
        opt.clear_grad()
        return loss

    return train_step, model


def test_a_float32_step_runs_eagerly_after_one_warning_naming_cublas():
    eager, eager_model = fp32_step()
    step, model = fp32_step()
    step = graphed(step)
    rng = np.random.default_rng(0)
    with pytest.warns(GraphWarning, match=r"cannot be captured.*float32 matmul.*cuBLAS") as heard:
        for _ in range(5):
            x, y = (mt.to_tensor(rng.standard_normal((BATCH, WIDTH)).astype("f4")) for _ in "xy")
            assert step(x, y).item() == eager(x, y).item()
    assert len(heard) == 1
    assert step.cache_info()[:3] == (0, 0, 5)
    for have, want in zip(model.parameters(), eager_model.parameters(), strict=True):
        np.testing.assert_array_equal(have.numpy(), want.numpy())


def test_a_host_read_inside_the_step_is_found_before_anything_is_captured():
    inner, state = simple_net_step()[:2]
    eager, eager_state = simple_net_step()[:2]

    def logging_step(x, y):
        loss = inner(x, y)
        logging_step.last = loss.item()  # a host read: a graph would replay a stale value
        return loss

    step = graphed(logging_step)
    rng = np.random.default_rng(0)
    with pytest.warns(GraphWarning, match=r"rehearsal.*Tensor.item\(\)") as heard:
        for _ in range(5):
            x, y = (mt.to_tensor(rng.standard_normal((BATCH, WIDTH)).astype("f4")) for _ in "xy")
            assert step(x, y).item() == eager(x, y).item()
    assert len(heard) == 1 and step.cache_info().captures == 0
    for have, want in zip(state(), eager_state(), strict=True):
        np.testing.assert_array_equal(have, want)
