"""CUDA graphs: the API on every machine, and the capture rules the CPU can check.

On the CPU backend the API exists, ``is_cuda_graph_supported()`` is False and capturing
raises a GraphError that says why. The rules a capture enforces (no new optimizer state, no
new kernel table, host-fed values refreshed before each replay) are checked here against a
stand-in capture; tests/test_graphs_gpu.py captures and replays real steps on a GPU.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from training_steps import make_step

import minitorch_amp as mt
from minitorch_amp import nn
from minitorch_amp.backend import device as _device
from minitorch_amp.backend import graphs, kernels
from minitorch_amp.device.cuda import graphs as cuda_graphs
from minitorch_amp.device.cuda.graphs import (
    CUDAGraph,
    GraphError,
    GraphWarning,
    graph,
    is_cuda_graph_supported,
    wrap_cuda_graph,
)
from minitorch_amp.optimizer import Optimizer

needs_cpu_backend = pytest.mark.skipif(
    _device.cupy is not None, reason="checks the CPU backend's answers"
)


# ---- the API on the CPU ------------------------------------------------------------------------
@needs_cpu_backend
def test_the_cpu_backend_says_graphs_are_unsupported_and_capturing_says_why():
    assert is_cuda_graph_supported() is False
    g = CUDAGraph()
    with pytest.raises(GraphError, match=r"is_cuda_graph_supported\(\) is False.*eagerly"):
        g.capture_begin()
    with pytest.raises(GraphError, match="before capture"):
        g.replay()
    with pytest.raises(GraphError, match="without capture_begin"):
        g.capture_end()


@needs_cpu_backend
def test_the_graph_context_manager_does_not_run_its_body_when_it_cannot_capture():
    ran = []
    with pytest.raises(GraphError), graph(CUDAGraph()):
        ran.append(1)
    assert ran == []


@needs_cpu_backend
def test_a_wrapped_function_warms_up_eagerly_then_refuses_to_capture_on_the_cpu():
    calls = []
    step = wrap_cuda_graph(lambda x: calls.append(x) or x * 2, warmup=2)
    x = mt.ones([2])
    assert step(x).numpy().tolist() == [2.0, 2.0]
    assert step(x).numpy().tolist() == [2.0, 2.0]
    with pytest.raises(GraphError, match="is_cuda_graph_supported"):
        step(x)
    assert len(calls) == 2


def test_a_wrapped_function_refuses_other_arguments_than_it_captured(monkeypatch):
    """A graph replays the captured call: its tensors (also inside lists, tuples and dicts)
    at their addresses, its other arguments as they were. A call with anything else is
    refused, not answered with the captured call's results. (The capture is stood in for:
    the body runs, a replay does nothing.)"""
    monkeypatch.setattr(cuda_graphs, "graph", lambda g: contextlib.nullcontext(g))
    monkeypatch.setattr(CUDAGraph, "replay", lambda self: None)
    batch, other = [mt.to_tensor([1.0])], mt.to_tensor([100.0])
    step = wrap_cuda_graph(lambda xs, scale, flags=None: xs[0] * scale, warmup=1)
    step(batch, 2.0)  # the warm-up
    assert step(batch, 2.0, flags={"a": batch[0]}).numpy().tolist() == [2.0]  # the capture
    assert step(batch, 2.0, flags={"a": batch[0]}).numpy().tolist() == [2.0]  # a replay
    for args, kwargs in (
        (([other], 2.0), {"flags": {"a": batch[0]}}),  # a new tensor in a list
        ((batch, 5.0), {"flags": {"a": batch[0]}}),  # another number
        ((batch, 2.0), {"flags": {"a": other}}),  # a new tensor in a dict
        ((batch, 2.0), {"flags": {"b": batch[0]}}),  # another key
        ((batch, 2.0), {}),  # an argument left out
        ((tuple(batch), 2.0), {"flags": {"a": batch[0]}}),  # a tuple for the list
    ):
        with pytest.raises(GraphError, match="same arguments at every call"):
            step(*args, **kwargs)
    zero = wrap_cuda_graph(lambda x, scale: x * scale, warmup=1)
    zero(batch[0], 0.0)
    zero(batch[0], 0.0)  # the capture
    with pytest.raises(GraphError, match="same arguments"):
        zero(batch[0], -0.0)  # equal to 0.0, but the product's sign is not the capture's


@needs_cpu_backend
def test_wrapping_a_layer_wraps_its_forward():
    layer = nn.Linear(3, 2)
    assert wrap_cuda_graph(layer) is layer
    layer(mt.ones([1, 3]))  # the warm-up call runs eagerly
    with pytest.raises(GraphError):
        layer(mt.ones([1, 3]))


@needs_cpu_backend
@pytest.mark.parametrize("what", ["a layer", "a function"])
def test_wrapping_twice_replaces_the_first_wrapping_with_a_warning_never_nests(what):
    # Paddle's to_static warns "has already been decorated ... redecorated to replace
    # previous one". Nested, the inner wrapper would capture inside the outer's warm-up.
    calls = []
    layer = nn.Linear(3, 2)
    forward = layer.forward
    layer.forward = lambda x: calls.append(1) or forward(x)
    first = wrap_cuda_graph(layer if what == "a layer" else layer.forward, warmup=1)
    with pytest.warns(GraphWarning, match=r"already wrapped.*replac"):
        second = wrap_cuda_graph(first, warmup=3)
    step = layer if what == "a layer" else second
    assert second is first if what == "a layer" else second is not first
    x = mt.ones([1, 3])
    for _ in range(3):  # the second wrapping's three warm-up calls, each run once, eagerly
        step(x)
    assert len(calls) == 3
    with pytest.raises(GraphError, match="is_cuda_graph_supported"):
        step(x)


@pytest.mark.parametrize(
    "call",
    [
        lambda: CUDAGraph(mode="loose"),
        lambda: wrap_cuda_graph(print, mode="loose"),
        lambda: wrap_cuda_graph(print, memory_pool="shared"),
        lambda: wrap_cuda_graph(print, memory_pool=True),
        lambda: wrap_cuda_graph(print, warmup=0),
        lambda: graph(CUDAGraph(), capture_error_mode="loose").__enter__(),
        lambda: graph(CUDAGraph(), pool=1).__enter__(),
    ],
    ids=["mode", "wrap-mode", "pool-name", "pool-bool", "warmup", "error-mode", "pool-arg"],
)
def test_bad_arguments_are_refused_with_the_allowed_values(call):
    with pytest.raises(ValueError, match=r"must be|not supported"):
        call()


def test_graph_needs_a_cuda_graph():
    with pytest.raises(TypeError, match="CUDAGraph"):
        graph("g").__enter__()


def test_the_paddle_and_pytorch_names_are_where_users_look_for_them():
    assert mt.device.cuda.graphs is cuda_graphs
    assert {"CUDAGraph", "graph", "wrap_cuda_graph", "is_cuda_graph_supported"} <= set(
        cuda_graphs.__all__
    )


# ---- the capture rules, against a stand-in capture ----------------------------------------------
class FakeCapture:
    """What backend.graphs keeps of a capture in progress."""

    def __init__(self):
        self.refreshers = {}
        self.keep_alive = []


@pytest.fixture
def capturing(monkeypatch):
    capture = FakeCapture()
    monkeypatch.setattr(graphs, "_active", capture)
    return capture


def test_a_host_fed_value_is_written_eagerly_and_refreshed_by_the_capture():
    lr = graphs.HostFed(_device.CPU, np.float64)
    rate = [0.5]
    lr.follow(lambda: rate[0])
    assert lr.array.tolist() == [0.5]
    capture = FakeCapture()
    graphs._active = capture
    try:
        rate[0] = 0.25
        lr.follow(lambda: rate[0])  # during capture: registered, not written
        assert lr.array.tolist() == [0.5]
        with pytest.raises(GraphError, match="host-fed"):
            graphs.HostFed(_device.CPU, np.float64)
    finally:
        graphs._active = None
    ((buffer, source),) = capture.refreshers.values()
    buffer.write(source())  # what replay() does before every launch
    assert lr.array.tolist() == [0.25]


def test_the_first_step_cannot_be_captured(capturing):
    step = make_step("O2", "Adam")
    step.feed(np.random.default_rng(0))
    with pytest.raises(GraphError, match="run the step eagerly once"):
        step()


def test_a_step_after_the_warm_up_registers_its_learning_rate(capturing, monkeypatch):
    """(the lr buffer a GPU step reads, made to serve the CPU step too)"""
    monkeypatch.setattr(Optimizer, "_base_lr", lambda opt, place: opt._state.lr_buffer(opt, place))
    graphs._active = None
    step = make_step("O2", "Momentum")
    rng = np.random.default_rng(0)
    step.feed(rng)
    step()
    graphs._active = capturing
    step.feed(rng)
    step()  # on the CPU nothing is recorded, but the rules run
    assert [type(buffer) for buffer, _ in capturing.refreshers.values()] == [graphs.HostFed]


def test_a_table_missing_from_the_cache_cannot_be_built_during_capture(capturing, monkeypatch):
    monkeypatch.setattr(kernels, "_tables", type(kernels._tables)())
    with pytest.raises(GraphError, match="kernel table"):
        kernels.device_table(("k",), lambda: np.zeros(2))
    kernels._tables[("k",)] = table = np.zeros(2)
    assert kernels.device_table(("k",), lambda: np.ones(2)) is table
    assert capturing.keep_alive == [table]  # the graph keeps what it reads alive
