"""CUDA graphs as a review found them (2026-11-28, night), fixed: each test fails on the old code.

Capturing is checked on the CPU: ``gpu_capture`` stands in for CuPy and a GPU
(``benchmarks/gpu_stand_in.py``) with what stream capture needs (a stream that counts its
captures, a memory pool, ``using_allocator``); nothing is recorded. ``graphed``'s bookkeeping
is checked against :class:`Recorder`, whose capture runs the step and whose replay runs it
again on the same static inputs.
"""

from __future__ import annotations

import contextlib
import gc
import re
import sys
import warnings
import weakref
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import nn
from minitorch_amp.backend import graphs as backend_graphs
from minitorch_amp.device.cuda import graphs
from minitorch_amp.device.cuda.graphs import GraphedFunction, GraphError, GraphWarning
from minitorch_amp.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import gpu_stand_in
import simple_net


# ---- stand-ins ----------------------------------------------------------------------------------
class Stream:
    capturing = 0  # streams capturing now
    modes = ()  # the mode of each capture begun (a list, per test)

    def __init__(self, non_blocking=False):
        self.ptr, self.done, self._capturing = 1, True, False

    def wait_event(self, event):
        pass

    def record(self):
        return SimpleNamespace()

    def begin_capture(self, mode=None):
        self._capturing = True
        Stream.capturing += 1
        Stream.modes.append(mode)

    def end_capture(self):
        assert self._capturing, "end_capture() on a stream that is not capturing"
        self._capturing = False
        Stream.capturing -= 1
        return SimpleNamespace(launch=lambda stream: None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture
def gpu_capture(monkeypatch):
    """A stood-in GPU on which CUDAGraph can begin and end captures; yields the allocators
    installed (a capture installs its pool's)."""
    installed: list = []

    @contextlib.contextmanager
    def using_allocator(malloc):
        installed.append(malloc)
        try:
            yield
        finally:
            installed.pop()

    monkeypatch.setattr(Stream, "capturing", 0)
    monkeypatch.setattr(Stream, "modes", [])
    with gpu_stand_in.stand_in() as stand:
        cuda = stand.cupy.cuda
        cuda.runtime.is_hip = False
        cuda.runtime.CUDARuntimeError = type("CUDARuntimeError", (Exception,), {})
        cuda.MemoryPool = lambda: SimpleNamespace(malloc=lambda size: None)
        cuda.Stream = Stream
        cuda.using_allocator = using_allocator
        cuda.get_current_stream().record = lambda: SimpleNamespace()
        mt.set_device("gpu:0")
        yield installed


def assert_no_capture_left(installed):
    assert backend_graphs.active() is None and Stream.capturing == 0 and installed == []


class Recorder:
    """Captures by running the step; a replay runs it again on the captured arguments and
    writes the results into the tensors the capture returned."""

    def unsupported(self):
        return None

    def capture(self, function, args, kwargs):
        outputs = function(*args, **kwargs)
        replays = []

        def replay():
            replays.append(1)
            if len(replays) == 1:  # the capture ran the step already (a GPU only records it)
                return
            new = function(*args, **kwargs)
            if isinstance(outputs, mt.Tensor):
                outputs.set_value(new)

        return SimpleNamespace(replay=replay, reset=lambda: None), outputs


def fake_graphed(function, **options) -> GraphedFunction:
    return GraphedFunction(function, Recorder(), **options)


@pytest.fixture(autouse=True)
def _on_the_cpu():
    mt.set_device("cpu")


# ---- 1, 2: a capture in progress is never lost -------------------------------------------------
def test_a_refused_second_capture_begin_leaves_the_first_capture_to_be_ended(gpu_capture):
    g = graphs.CUDAGraph()
    g.capture_begin()
    with pytest.raises(GraphError, match=r"in progress; capture_end\(\) it"):
        g.capture_begin()
    g.capture_end()
    assert_no_capture_left(gpu_capture)
    other = graphs.CUDAGraph()
    other.capture_begin()  # the process is not stuck in capture mode
    other.capture_end()


def test_the_graph_context_on_a_graph_being_captured_is_refused_and_the_capture_goes_on(
    gpu_capture,
):
    g = graphs.CUDAGraph()
    g.capture_begin()
    with pytest.raises(GraphError, match="in progress"), graphs.graph(g):
        pass
    g.capture_end()
    assert_no_capture_left(gpu_capture)
    g.replay()


def test_reset_during_a_capture_is_refused_and_the_capture_can_still_end(gpu_capture):
    g = graphs.CUDAGraph()
    g.capture_begin()
    with pytest.raises(GraphError, match=r"reset\(\) during this graph's capture"):
        g.reset()
    g.capture_end()
    assert_no_capture_left(gpu_capture)
    g.reset()
    g.capture_begin()  # captured again after a reset
    g.capture_end()


# ---- 3: a forward graphed alone (and only then) -----------------------------------------------
def test_a_graphed_forward_whose_outputs_need_a_backward_says_to_graph_the_whole_step():
    mt.seed(0)
    forward = fake_graphed(nn.Linear(4, 2), warmup=1)
    with pytest.warns(GraphWarning, match=r"whole training step.*mt.no_grad"):
        forward(mt.ones([3, 4]))


def test_a_graphed_training_step_is_not_told_to_graph_the_whole_step():
    mt.seed(0)
    model = nn.Linear(4, 2)

    def step(x):
        loss = model(x).sum()
        loss.backward()
        return loss

    with warnings.catch_warnings():
        warnings.simplefilter("error", GraphWarning)
        for _ in range(3):
            fake_graphed(step, warmup=1)(mt.ones([3, 4]))


def test_a_whole_step_returning_probabilities_with_its_loss_is_not_told_to_graph_it():
    mt.seed(0)
    model = nn.Linear(4, 3)
    opt = mt.optimizer.SGD(0.1, parameters=model.parameters())

    def step(x, y):
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        opt.clear_grad()
        return loss, F.softmax(logits, axis=-1)  # recorded, never backwarded: for a metric

    graphed = fake_graphed(step, warmup=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GraphWarning)
        for _ in range(3):
            graphed(mt.randn([2, 4]), mt.to_tensor([0, 1]))


def test_simple_net_graphed_with_accumulation_is_not_told_to_graph_the_whole_step(monkeypatch):
    monkeypatch.setattr(simple_net.graphs, "is_cuda_graph_supported", lambda: True)
    monkeypatch.setattr(simple_net.graphs, "graphed", fake_graphed)  # (it returns a sum of losses)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GraphWarning)
        simple_net.train(input_size=8, batch_size=4, batches=6, epochs=1, mode="O2", graph=True,
                         accumulate=2, log=lambda *_: None)  # fmt: skip


# ---- 4: wrap_cuda_graph's warm-up ----------------------------------------------------------
def test_a_wrapped_function_whose_warm_up_raised_warms_up_again_before_capturing(gpu_capture):
    captured = []

    def step(x):
        captured.append(backend_graphs.active() is not None)
        if len(captured) == 1:
            raise ValueError("a bad first batch")
        return x * 2

    wrapped = graphs.wrap_cuda_graph(step)
    x = mt.ones([2])
    with pytest.raises(ValueError, match="bad first batch"):
        wrapped(x)
    wrapped(x)
    wrapped(x)
    assert captured == [False, False, True]  # the failed call was no warm-up


# ---- 5: synchronize(0) -----------------------------------------------------------------------
def test_synchronize_takes_an_int_gpu_as_paddle_and_pytorch_do(gpu_capture):
    mt.device.synchronize(0)
    mt.device.cuda.synchronize(0)
    with pytest.raises(mt.device.DeviceError, match="0 or more"):
        mt.device.synchronize(-1)


# ---- 6: inputs that require grad: used as they are; a new one at each call runs eagerly ---------
NEW_TENSOR = r"requires grad is a new tensor at this call.*stop_gradient=True.*Parameter"


def square_step(x):
    loss = (x * x).sum()
    loss.backward()
    return loss.detach()


def grad_input(i):
    return mt.to_tensor([1.0 + i, 2.0], stop_gradient=False)


def test_new_inputs_that_require_grad_run_eagerly_after_one_warning_that_says_why():
    graphed = fake_graphed(square_step, warmup=2, cache_size=1)
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        for i in range(5):
            x = grad_input(i)
            graphed(x)
            np.testing.assert_array_equal(x.grad.numpy(), 2 * x.numpy())
    assert len(heard) == 1 and re.search(NEW_TENSOR, str(heard[0].message))
    assert graphed.cache_info() == (0, 0, 5, 0, 1)  # eager, holding no variant


def test_a_new_input_that_requires_grad_is_not_kept_by_the_wrapper():
    graphed = fake_graphed(square_step)
    first = grad_input(0)
    graphed(first)
    gone = weakref.ref(first)
    del first
    with pytest.warns(GraphWarning, match=NEW_TENSOR):
        graphed(grad_input(1))
    gc.collect()
    assert gone() is None


def test_a_non_leaf_input_sends_its_gradient_upstream_as_eager():
    scale, eager_scale = (mt.to_tensor([2.0, 3.0], stop_gradient=False) for _ in range(2))
    graphed = fake_graphed(square_step)
    with pytest.warns(GraphWarning, match=NEW_TENSOR):
        for i in range(5):
            raw = mt.to_tensor([1.0 + i, 1.0])
            graphed(raw * scale)  # requires grad, computed from scale: new at each call
            square_step(raw * eager_scale)
            np.testing.assert_array_equal(scale.grad.numpy(), eager_scale.grad.numpy())


def product_step(a, b):
    loss = (a * b).sum()
    loss.backward()
    return loss.detach()


def test_the_same_tensor_passed_twice_at_every_call_gets_both_uses_gradients():
    graphed = fake_graphed(product_step)
    x = grad_input(0)
    for calls in range(1, 6):  # two warm-ups, the capture, two replays
        graphed(x, x)
        np.testing.assert_array_equal(x.grad.numpy(), calls * 2 * x.numpy())
    assert graphed.cache_info().captures == 1


def test_a_new_tensor_passed_twice_gets_both_uses_gradients():
    graphed = fake_graphed(product_step)
    with pytest.warns(GraphWarning, match=NEW_TENSOR):
        for i in range(5):
            x = grad_input(i)
            graphed(x, x)
            np.testing.assert_array_equal(x.grad.numpy(), 2 * x.numpy())


def test_an_inputs_earlier_gradient_is_added_to_as_eager_adds_to_it():
    graphed = fake_graphed(square_step)
    with pytest.warns(GraphWarning, match=NEW_TENSOR):
        for i in range(5):
            x = grad_input(i)
            (x * 10.0).sum().backward()  # a gradient before the step (a penalty term)
            graphed(x)
            np.testing.assert_array_equal(x.grad.numpy(), 10.0 + 2 * x.numpy())


def test_a_step_that_clears_its_inputs_gradient_leaves_it_zero_as_eager():
    def step(x):
        square_step(x)
        moved = (x + 0.1 * x.grad).detach()
        x.clear_grad()  # (Paddle's default: zeros)
        return moved

    graphed = fake_graphed(step)
    with pytest.warns(GraphWarning, match=NEW_TENSOR):
        for i in range(5):
            x = grad_input(i)
            graphed(x)
            np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0])


def test_a_weight_made_by_hand_moves_at_every_call_beside_a_new_input():
    def weights_after_each_call(wrap):
        w = mt.to_tensor([1.0, 1.0], stop_gradient=False)
        opt = mt.optimizer.SGD(0.1, parameters=[w])

        def step(w, x):
            product_step(w, x)
            opt.step()
            opt.clear_grad()

        step = wrap(step)
        return [step(w, grad_input(i)) or w.numpy() for i in range(4)]

    with pytest.warns(GraphWarning, match=NEW_TENSOR):
        graphed = weights_after_each_call(fake_graphed)
    np.testing.assert_array_equal(graphed, weights_after_each_call(lambda step: step))


def test_a_weight_made_by_hand_is_used_as_it_is():
    seen = []
    graphed = fake_graphed(lambda w, x: seen.append(w) or (w * x).detach(), warmup=1)
    w = mt.to_tensor([1.0, 2.0], stop_gradient=False)
    for _ in range(3):
        graphed(w, mt.ones([2]))
    assert all(s is w for s in seen) and graphed.cache_info().captures == 1


# ---- 7: a warm-up's outputs -------------------------------------------------------------------
def test_a_warm_up_output_that_is_an_argument_is_the_callers_tensor_and_keeps_its_values():
    graphed = fake_graphed(lambda x: (x, x[:1], x * 2), warmup=2)
    a = mt.to_tensor([1.0, 2.0])
    same, view, _ = graphed(a)
    graphed(mt.to_tensor([7.0, 8.0]))
    assert same is a
    np.testing.assert_array_equal(view.numpy(), [1.0])


# ---- 8: keyword arguments ---------------------------------------------------------------------
def test_keyword_arguments_in_another_order_replay_the_same_graph():
    graphed = fake_graphed(lambda x, y: x + y, warmup=1)
    for _ in range(2):
        graphed(x=mt.ones([2]), y=mt.ones([2]))
    out = graphed(y=mt.full([2], 3.0), x=mt.ones([2]))
    assert graphed.cache_info().captures == 1 and graphed.cache_info().variants == 1
    np.testing.assert_array_equal(out.numpy(), [4.0, 4.0])


# ---- 9: the rehearsal's warnings --------------------------------------------------------------
def test_the_rehearsal_passes_on_the_steps_warnings_also_when_the_step_raises():
    calls = []

    def step(x):
        calls.append(x)
        warnings.warn(f"call {len(calls)}: an odd batch", UserWarning, stacklevel=1)
        if len(calls) == 2:  # the rehearsal
            raise ValueError("bad batch")
        return x

    graphed = fake_graphed(step, warmup=2)
    with pytest.warns(UserWarning, match="call 1"):
        graphed(mt.ones([2]))
    with pytest.warns(UserWarning, match="call 2: an odd batch"), pytest.raises(ValueError):
        graphed(mt.ones([2]))


# ---- 10: modes and counts are checked before anything is written -------------------------------
def test_a_refused_capture_leaves_the_graphs_mode_as_it_was():
    g = graphs.CUDAGraph(mode="thread_local")
    with pytest.raises(GraphError), graphs.graph(g, capture_error_mode="global"):
        pass
    assert g._mode == "thread_local"


def test_a_capture_error_mode_applies_to_that_capture_only(gpu_capture):
    g = graphs.CUDAGraph(mode="thread_local")
    with graphs.graph(g, capture_error_mode="global"):
        pass
    g.reset()
    g.capture_begin()
    g.capture_end()
    modes = backend_graphs.CAPTURE_MODES
    assert Stream.modes == [modes["global"], modes["thread_local"]]


@pytest.mark.parametrize("bad", [{"warmup": 0}, {"cache_size": 0}, {"warmup": "2"}])
def test_graphed_refuses_a_bad_count_before_it_is_applied(bad):
    with pytest.raises(ValueError, match="must be an int >= 1"):
        graphs.graphed(**bad)
