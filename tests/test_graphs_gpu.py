"""Whole AMP training steps captured as CUDA graphs: N replays equal N eager steps, bit for bit.

Skipped without a GPU (tests/test_graphs.py checks the API and the capture rules on the CPU,
tests/test_sync_debug.py that the same steps never synchronise).
"""

from __future__ import annotations

import numpy as np
import pytest
from training_steps import MODES, OPTIMIZERS, make_step

import minitorch_amp as mt
from minitorch_amp.backend import graphs
from minitorch_amp.device import SyncError, sync_debug_mode
from minitorch_amp.device.cuda.graphs import CUDAGraph, GraphError, graph, wrap_cuda_graph

pytestmark = pytest.mark.gpu

STEPS = 8
OVERFLOW_AT = (3,)  # an inf in this batch: the step must be skipped by the graph too


def eager_run(mode, optimizer):
    step = make_step(mode, optimizer)
    rng = np.random.default_rng(1)
    losses = []
    with np.errstate(all="ignore"):
        for i in range(STEPS):
            step.feed(rng, overflow=i in OVERFLOW_AT)
            losses.append(float(step()))
            step.next_lr()
    return step, losses


def graphed_run(mode, optimizer):
    """Step 0 eagerly (the warm-up), capture once, then replay steps 1..N-1."""
    step = make_step(mode, optimizer)
    rng = np.random.default_rng(1)
    losses = []
    with np.errstate(all="ignore"):
        step.feed(rng)
        losses.append(float(step()))
        step.next_lr()
        g = CUDAGraph()
        with graph(g):
            loss = step()  # recorded, not run
        for i in range(1, STEPS):
            step.feed(rng, overflow=i in OVERFLOW_AT)
            g.replay()
            losses.append(float(loss))
            step.next_lr()
    return step, losses


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@pytest.mark.parametrize("mode", [m for m in MODES if m != "fp32"])
def test_replays_equal_eager_steps_bit_for_bit(mode, optimizer):
    """Parameters, fp32 masters, moments, beta pows, loss scale and counters, after an
    overflow injected through the batch and an lr that a scheduler halves between replays."""
    eager, eager_losses = eager_run(mode, optimizer)
    graphed, graphed_losses = graphed_run(mode, optimizer)
    np.testing.assert_array_equal(graphed_losses, eager_losses)
    for have, want in zip(graphed.state(), eager.state(), strict=True):
        np.testing.assert_array_equal(have, want)
    assert eager.opt.get_lr() == graphed.opt.get_lr() < 0.05


def test_a_float32_step_cannot_be_captured_and_says_why():
    step = make_step("fp32", "SGD")
    rng = np.random.default_rng(0)
    step.feed(rng)
    step()
    with pytest.raises(GraphError, match="cuBLAS"), graph(CUDAGraph()):
        step()
    assert graphs.active() is None  # the failed capture was dropped
    step.feed(rng)
    step()  # and eager steps go on


def test_the_first_step_cannot_be_captured():
    step = make_step("O2", "Adam")
    step.feed(np.random.default_rng(0))
    with pytest.raises(GraphError, match="eagerly once"), graph(CUDAGraph()):
        step()


@pytest.mark.parametrize("mode", MODES)
def test_on_the_gpu_a_step_after_the_first_never_synchronises(mode):
    """The CPU suite proves it through the declared reads; here CuPy's detector is on too."""
    step = make_step(mode, "AdamW")
    rng = np.random.default_rng(0)
    step.feed(rng)
    step()
    with sync_debug_mode("error"), np.errstate(all="ignore"):
        for i in range(3):
            step.feed(rng, overflow=i == 1)
            step()
            step.next_lr()
    with sync_debug_mode("error"), pytest.raises(SyncError):
        step().item()


def test_a_wrapped_step_replays_and_returns_the_same_loss_tensor():
    step = make_step("O2", "Momentum")
    rng = np.random.default_rng(0)
    graphed = wrap_cuda_graph(step)
    losses = []
    for _ in range(4):
        step.feed(rng)
        losses.append(graphed())
    assert losses[1] is losses[2] is losses[3]  # the captured output, rewritten per replay
    assert losses[0] is not losses[1]


def test_a_wrapped_function_refuses_new_input_tensors():
    double = wrap_cuda_graph(lambda x: x * 2)
    x = mt.ones([2])
    double(x)  # warm-up
    assert double(x).numpy().tolist() == [2.0, 2.0]  # captured and replayed
    x.set_value(np.array([3.0, 4.0], "float32"))
    assert double(x).numpy().tolist() == [6.0, 8.0]
    with pytest.raises(GraphError, match="same input tensors"):
        double(mt.ones([2]))


def captured(mode: str, optimizer: str):
    """A step run eagerly once, then captured: ``(step, rng, graph)``."""
    step = make_step(mode, optimizer)
    rng = np.random.default_rng(0)
    step.feed(rng)
    step()
    g = CUDAGraph()
    with graph(g):
        step()
    return step, rng, g


def test_memory_allocated_after_the_capture_is_never_clobbered_by_a_replay():
    step, rng, g = captured("O2", "SGD")
    kept = [mt.full([4096], float(i)) for i in range(64)]  # allocated after the capture
    for _ in range(5):
        step.feed(rng)
        g.replay()
    mt.device.synchronize()
    for i, t in enumerate(kept):
        assert (t.numpy() == i).all()


def test_reset_forgets_the_graph_and_allows_a_new_capture():
    step, _, g = captured("O2", "Adam")
    g.replay()
    with pytest.raises(GraphError, match="captured already"):
        g.capture_begin()
    g.reset()
    with pytest.raises(GraphError, match="before capture"):
        g.replay()
    with graph(g):
        step()
    g.replay()
