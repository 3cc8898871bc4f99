"""``graphs.graphed(step)``: a step captured in one line, and its bookkeeping, on the CPU.

On the CPU the wrapped step runs eagerly, says once that graphs need a GPU, and trains
exactly as the step itself. The rest (static input copies, a graph per input signature, the
LRU cache, the fallback to eager with one warning) is checked against :class:`Recorder`, a
stand-in for the CUDA recorder that does on the CPU what a graph does: its capture runs the
step, each later replay runs it again on the same static inputs and writes the results into
the tensors the capture returned. tests/test_graphed_step_gpu.py captures for real.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.backend.graphs import GraphError
from minitorch_amp.device.cuda import graphs
from minitorch_amp.device.cuda.graphs import GraphedFunction, GraphWarning, graphed

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from simple_net import SimpleNet

WIDTH, BATCH, STEPS = 16, 8, 8


@pytest.fixture(autouse=True)
def _on_the_cpu():
    mt.set_device("cpu")  # (conftest restores the device after each test)


# ---- a stand-in recorder ----------------------------------------------------------------------
def tensors_in(value) -> list:
    if isinstance(value, mt.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors_in(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors_in(v)]
    return []


class FakeGraph:
    def __init__(self, function, args, kwargs, outputs):
        self.function, self.args, self.kwargs, self.outputs = function, args, kwargs, outputs
        self.replays = 0
        self.was_reset = False

    def replay(self):
        self.replays += 1
        if self.replays == 1:  # the capture ran the step already (a GPU only records it)
            return
        new = self.function(*self.args, **self.kwargs)
        for captured, value in zip(tensors_in(self.outputs), tensors_in(new), strict=True):
            captured.set_value(value)  # a replay writes into the captured outputs

    def reset(self):
        self.was_reset = True


class Recorder:
    """Captures by running the step; ``refuse(args)`` may return an error to raise instead."""

    def __init__(self, refuse=None):
        self.graphs: list[FakeGraph] = []
        self.refuse = refuse
        self.attempts = 0

    def unsupported(self):
        return None

    def capture(self, function, args, kwargs):
        self.attempts += 1
        error = self.refuse and self.refuse(args)
        if error:
            raise error
        graph = FakeGraph(function, args, kwargs, function(*args, **kwargs))
        self.graphs.append(graph)
        return graph, graph.outputs


def fake_graphed(function, **options) -> GraphedFunction:
    return GraphedFunction(function, Recorder(options.pop("refuse", None)), **options)


# ---- a real training step: SimpleNet, O2, GradScaler, Adam, a scheduler ------------------------
def simple_net_step(seed: int = 0):
    """``(train_step, state, scheduler)``; ``state()`` is everything the step changes."""
    mt.seed(seed)
    model = SimpleNet(WIDTH, WIDTH)
    scheduler = mt.optimizer.lr.StepDecay(learning_rate=0.01, step_size=2, gamma=0.5)
    opt = mt.optimizer.Adam(scheduler, parameters=model.parameters())
    model, opt = amp.decorate(models=model, optimizers=opt, level="O2")
    scaler = amp.GradScaler(init_loss_scaling=2.0**10, incr_every_n_steps=2)
    mse = nn.MSELoss()

    def train_step(x, y):
        with amp.auto_cast(level="O2"):
            loss = mse(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.clear_grad()
        return loss

    def state() -> list:
        arrays = [p.numpy() for p in model.parameters()]
        for value in opt.state_dict().values():
            values = value.values() if isinstance(value, dict) else [value]
            arrays += [v.numpy() for v in values if isinstance(v, mt.Tensor)]
        arrays.append(scaler.state_dict()["scale"])
        return [np.array(a, copy=True) for a in arrays]

    return train_step, state, scheduler


def batches(seed: int = 1, overflow_at=(3,)):
    rng = np.random.default_rng(seed)
    for i in range(STEPS):
        x = rng.standard_normal((BATCH, WIDTH)).astype("float32")
        if i in overflow_at:
            x[0, 0] = np.inf  # a skipped step: the scaler halves its scale
        yield mt.to_tensor(x), mt.to_tensor(rng.standard_normal((BATCH, WIDTH)).astype("f4"))


def train(wrap) -> tuple[list, list]:
    """Losses (read after each call) and the final state of STEPS steps of ``wrap(step)``."""
    step, state, scheduler = simple_net_step()
    step = wrap(step)
    losses = []
    with np.errstate(all="ignore"):
        for x, y in batches():
            losses.append(step(x, y).item())
            scheduler.step()
    return losses, state()


# ---- on the CPU ---------------------------------------------------------------------------------
def test_on_the_cpu_the_step_runs_eagerly_and_says_so_once():
    calls = []
    step = graphed(lambda x: calls.append(x) or x * 2)
    with pytest.warns(GraphWarning, match=r"CUDA graphs need a GPU.*runs eagerly") as heard:
        for i in range(5):
            x = mt.to_tensor([float(i)])
            assert step(x).numpy().tolist() == [2.0 * i]
    assert len([w for w in heard if w.category is GraphWarning]) == 1
    assert all(isinstance(x, mt.Tensor) for x in calls) and len(calls) == 5
    assert heard[0].filename == __file__  # it points at the caller's line
    assert step.cache_info() == (0, 0, 5, 0, 8)


def test_on_the_cpu_a_graphed_o2_adam_step_trains_bit_for_bit_like_the_step():
    eager_losses, eager_state = train(lambda step: step)
    with pytest.warns(GraphWarning):
        losses, state = train(graphed)
    np.testing.assert_array_equal(losses, eager_losses)  # (the overflow step: nan)
    for have, want in zip(state, eager_state, strict=True):
        np.testing.assert_array_equal(have, want)


def test_a_shape_or_dtype_change_on_the_cpu_just_runs():
    step = graphed(lambda x: x.sum())
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        assert step(mt.ones([2])).item() == 2.0
        assert step(mt.ones([3, 2])).item() == 6.0
        assert step(mt.ones([3], dtype="float64")).item() == 3.0
    assert len(heard) == 1


# ---- the bookkeeping, against the stand-in recorder --------------------------------------------
def test_warm_up_then_capture_then_replay_trains_bit_for_bit_like_the_step():
    eager_losses, eager_state = train(lambda step: step)
    recorders = []

    def wrap(step):
        recorders.append(fake_graphed(step))
        return recorders[0]

    losses, state = train(wrap)
    np.testing.assert_array_equal(losses, eager_losses)  # (the overflow step: nan)
    for have, want in zip(state, eager_state, strict=True):
        np.testing.assert_array_equal(have, want)
    # calls 1-2 eager (the second a rehearsal), call 3 captured and replayed, then replays
    assert recorders[0].cache_info() == (1, STEPS - 2, 2, 1, 8)


def test_each_call_copies_its_inputs_in_and_returns_the_captured_outputs():
    seen = []

    def step(x):
        seen.append(x)
        return x + 1

    graphed_step = fake_graphed(step, warmup=1)
    outputs = [graphed_step(mt.to_tensor([float(i)])) for i in range(4)]
    values = [o.numpy().copy() for o in outputs]
    assert outputs[1] is outputs[2] is outputs[3]  # the tensor the capture returned ...
    assert outputs[1].numpy().tolist() == [4.0]  # ... overwritten by the latest replay
    assert [v.tolist() for v in values] == [[1.0], [4.0], [4.0], [4.0]]
    static = seen[0]
    assert all(x is static for x in seen)  # the step always reads the static copy
    assert static.numpy().tolist() == [3.0]  # into which each call's batch was copied


def test_inputs_are_found_inside_lists_tuples_and_dicts():
    Pair = namedtuple("Pair", "x y")
    seen = []

    def step(pairs, extra):
        seen.append((pairs, extra))
        return sum(p.x.sum() + p.y.sum() for p in pairs) + extra["z"].sum()

    graphed_step = fake_graphed(step, warmup=1)
    for i in range(3):
        pairs = [Pair(mt.full([2], i), mt.full([2], 10 * i)), Pair(mt.ones([1]), mt.ones([1]))]
        total = graphed_step(pairs, {"z": mt.full([3], 100 * i)})
        assert total.item() == 2 * i + 20 * i + 2 + 300 * i
    (pairs, extra), *_ = seen
    assert type(pairs) is list and type(pairs[0]) is Pair and list(extra) == ["z"]
    assert all(s[0][0].x is pairs[0].x for s in seen)  # static copies, not the arguments


def test_a_new_shape_or_dtype_is_warmed_up_and_captured_once_more():
    recorder = Recorder()
    step = GraphedFunction(lambda x: x * 2, recorder, warmup=1)
    for shape, dtype in [([2], "float32")] * 3 + [([3], "float32")] * 3 + [([2], "float64")]:
        step(mt.ones(shape, dtype=dtype))
    step(mt.ones([2]))  # back to the first signature: a replay, no capture
    assert [g.args[0].shape for g in recorder.graphs] == [[2], [3]]
    assert step.cache_info() == (2, 5, 3, 3, 8)  # float64 [2]: its warm-up so far


def test_other_arguments_are_part_of_the_signature_by_value():
    recorder = Recorder()
    step = GraphedFunction(lambda x, scale, how="sum": x * scale, recorder, warmup=1)
    x = mt.ones([2])
    for scale in (2.0, 2.0, 2.0, 3.0, 3.0, 2.0):
        assert step(x, scale).numpy().tolist() == [scale, scale]
    step(x, 2.0, how="mean")
    assert [g.args[1] for g in recorder.graphs] == [2.0, 3.0]
    assert step.cache_info().variants == 3


def test_an_unhashable_argument_is_refused_and_says_what_to_pass():
    step = fake_graphed(lambda x: x)
    with pytest.raises(TypeError, match=r"ndarray.*mt.to_tensor"):
        step(np.ones(2))
    with pytest.raises(TypeError, match="ndarray"):
        graphed(lambda x: x)({"batch": np.ones(2)})  # on the CPU too, before anything runs


def test_a_tensor_that_requires_grad_is_used_as_it_is():
    seen = []
    step = fake_graphed(lambda w, x: seen.append(w) or (w * x).detach(), warmup=1)
    w = mt.ones([2])
    w.stop_gradient = False
    for _ in range(3):
        step(w, mt.ones([2]))
    assert all(s is w for s in seen)
    other = mt.ones([2])
    other.stop_gradient = False
    with pytest.warns(GraphWarning, match="requires grad is a new tensor at this call"):
        step(other, mt.ones([2]))  # another one: eager (a graph keeps the tensors it captured)
    assert seen[-1] is other
    step(w, mt.ones([2]))  # w's graph still replays
    assert step.cache_info()[:4] == (1, 3, 2, 1)
    step(nn.Parameter(mt.ones([2])), mt.ones([2]))  # a Parameter: another signature
    assert step.cache_info().variants == 2


def test_the_least_recently_used_graph_goes_with_one_warning_and_comes_back_captured_anew():
    recorder = Recorder()
    step = GraphedFunction(lambda x: x + 1, recorder, warmup=1, cache_size=2)
    with pytest.warns(GraphWarning, match=r"cache_size=2.*least recently used") as heard:
        for n in (1, 1, 2, 2, 1, 3, 3, 1, 2, 2):  # 3 evicts 2 (1 was used after 2), 2 evicts 3
            assert step(mt.ones([n])).numpy().tolist() == [2.0] * n
    assert len(heard) == 1
    assert [g.args[0].shape[0] for g in recorder.graphs] == [1, 2, 3, 2]
    assert [g.was_reset for g in recorder.graphs] == [False, True, True, False]
    assert step.cache_info().variants == 2


def test_a_step_that_cannot_be_captured_runs_eagerly_for_that_signature_after_one_warning():
    def refuse(args):
        if args[0].shape == [3]:
            return GraphError("a float32 matmul cannot be captured in a CUDA graph: cuBLAS")

    recorder = Recorder(refuse)
    step = GraphedFunction(lambda x: x * 3, recorder, warmup=1)
    with pytest.warns(GraphWarning, match=r"float32\[3\].*until reset\(\).*cuBLAS") as heard:
        for _ in range(4):
            assert step(mt.ones([3])).numpy().tolist() == [3.0] * 3
            assert step(mt.ones([2])).numpy().tolist() == [3.0] * 2
    assert len(heard) == 1
    assert recorder.attempts == 2  # [3] is not tried again
    assert step.cache_info() == (1, 3, 5, 1, 8)  # [3]: 1 warm-up + 3 eager; [2]: captured
    step.reset()
    with pytest.warns(GraphWarning, match="cuBLAS"):  # reset() tries again, and says so
        step(mt.ones([3]))
        step(mt.ones([3]))


def test_a_warm_up_call_that_raises_is_not_counted():
    """Only a completed call warms up: the capture still comes after ``warmup`` of them (a
    first call cut short has not built the step's one-time state)."""
    calls = []

    def step(x):
        calls.append(x)
        if len(calls) == 1:
            raise RuntimeError("a bad batch")
        return x * 2

    recorder = Recorder()
    graphed_step = GraphedFunction(step, recorder, warmup=2)
    with pytest.raises(RuntimeError, match="a bad batch"):
        graphed_step(mt.ones([2]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", GraphWarning)
        for _ in range(4):
            assert graphed_step(mt.ones([2])).numpy().tolist() == [2.0, 2.0]
    assert graphed_step.cache_info() == (1, 2, 3, 1, 8)  # the raising call and 2 warm-ups
    assert recorder.attempts == 1


def test_numbers_enter_the_signature_by_their_bits():
    step = fake_graphed(lambda x, s: x * s, warmup=1)
    for s in (0.0, -0.0, 0.0, -0.0, np.float32(-0.0)):
        signs = np.signbit(step(mt.ones([2]), s).numpy())
        assert signs.all() == np.signbit(s), s  # -0.0 == 0.0, but the product's sign differs
    assert step.cache_info().variants == 3
    nan = fake_graphed(lambda x, s: x + s, warmup=1, cache_size=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GraphWarning)  # (no eviction: NaN finds its graph)
        for _ in range(4):
            assert np.isnan(nan(mt.ones([1]), float("nan")).numpy()).all()
    assert nan.cache_info().captures == 1


def test_inputs_off_the_current_gpu_run_eagerly_after_one_warning(monkeypatch):
    """A graph records the current GPU's work only: a replay would give back the capture's
    results for inputs elsewhere. Such calls run eagerly, after one warning that says so."""
    from minitorch_amp.backend import device as backend_device
    from minitorch_amp.device.cuda import graphed as graphed_module

    gpu = backend_device.Place("gpu", 0)
    fake = type("Device", (), {})()
    fake.current_place, fake.place_of = (lambda: gpu), backend_device.place_of
    monkeypatch.setattr(graphed_module, "_device", fake)
    recorder = Recorder()
    step = GraphedFunction(lambda x: x * 3, recorder, warmup=1)
    with pytest.warns(GraphWarning, match=r"is on cpu, not on the current device gpu:0") as heard:
        for value in (1.0, 2.0, 3.0):
            assert step(mt.to_tensor([value])).numpy().tolist() == [3 * value]
        step(mt.ones([2]))  # another signature, the same reason: no second warning
    assert len(heard) == 1
    assert recorder.attempts == 0 and step.cache_info().eager_calls == 4


def test_a_host_read_in_the_step_is_found_by_the_rehearsal_before_any_capture():
    step, state, _ = simple_net_step()
    eager_step, eager_state, _ = simple_net_step()
    read = []

    def logging_step(x, y):
        loss = step(x, y)
        read.append(loss.item())  # a host read: cannot be replayed
        return loss

    recorder = Recorder()
    graphed_step = GraphedFunction(logging_step, recorder)
    with pytest.warns(GraphWarning, match=r"rehearsal.*Tensor.item\(\) synchronises") as heard:
        for x, y in batches(overflow_at=()):
            assert graphed_step(x, y).item() == eager_step(x, y).item()
    assert len(heard) == 1 and "set_sync_debug_mode is" not in str(heard[0].message)
    assert "test_graphed_step.py" in str(heard[0].message)  # the line of the read
    assert recorder.graphs == [] and len(read) == STEPS
    for have, want in zip(state(), eager_state(), strict=True):
        np.testing.assert_array_equal(have, want)


def test_without_a_rehearsal_a_host_read_fails_the_capture_and_the_call_runs_eagerly():
    step = fake_graphed(lambda x: float(x.sum()) * x, warmup=1)
    with pytest.warns(GraphWarning, match=r"Tensor.__float__\(\)|synchronises") as heard:
        values = [step(mt.full([2], float(i))).numpy().tolist() for i in range(4)]
    assert values == [[2.0 * i * i] * 2 for i in range(4)]
    assert len(heard) == 1 and step.cache_info().captures == 0


def test_the_rehearsal_passes_the_steps_other_warnings_on():
    def step(x):
        warnings.warn("from the step", UserWarning, stacklevel=1)
        return x

    graphed_step = fake_graphed(step)
    with pytest.warns(UserWarning, match="from the step") as heard:
        for _ in range(3):
            graphed_step(mt.ones([1]))
    assert [str(w.message) for w in heard] == ["from the step"] * 3  # the rehearsal's too


# ---- the CUDA recorder's errors, on the CPU ------------------------------------------------------
def test_the_cuda_recorder_reports_a_refused_capture_as_a_fallback(monkeypatch):
    monkeypatch.setattr(graphs._CUDARecorder, "unsupported", lambda self: None)
    step = graphed(lambda x: x + 1, warmup=1)
    with pytest.warns(GraphWarning, match=r"run eagerly until reset\(\): CUDA graphs need a GPU"):
        values = [step(mt.ones([2])).numpy().tolist() for _ in range(3)]
    assert values == [[2.0, 2.0]] * 3  # capture_begin refused it on the CPU: eager


def test_cupys_own_refusals_during_a_capture_become_a_fallback(monkeypatch):
    """CuPy raises NotImplementedError for cuBLAS during a capture, not a GraphError."""
    capturing = []

    @contextlib.contextmanager
    def graph(cuda_graph):  # a capture that records nothing, and lets the step know
        capturing.append(True)
        try:
            yield cuda_graph
        finally:
            capturing.clear()

    def step(x):
        if capturing:
            raise NotImplementedError("calling cuBLAS API during stream capture is unsupported")
        return x * 2

    monkeypatch.setattr(graphs._CUDARecorder, "unsupported", lambda self: None)
    monkeypatch.setattr(graphs, "graph", graph)
    graphed_step = graphed(step, warmup=1)
    with pytest.warns(GraphWarning, match=r"CuPy refused a call: NotImplementedError: calling"):
        values = [graphed_step(mt.ones([1])).item() for _ in range(3)]
    assert values == [2.0] * 3 and graphed_step.cache_info().captures == 0


# ---- the forms ----------------------------------------------------------------------------------
def test_the_call_form_the_decorator_and_the_decorator_with_options():
    def double(x):
        """Doubles."""
        return x * 2

    assert isinstance(graphed(double), GraphedFunction)
    assert graphed(double).__name__ == "double" and graphed(double).__doc__ == "Doubles."
    assert graphed(double).__wrapped__ is double and repr(graphed(double)) == "graphed(double)"

    @graphed(warmup=3, cache_size=2)
    def triple(x):
        return x * 3

    assert isinstance(triple, GraphedFunction) and triple.cache_info().maxsize == 2
    assert triple._warmup == 3


def test_a_graphed_method_takes_its_instance_as_an_argument():
    class Model:
        def __init__(self, k):
            self.k = k

        @graphed
        def step(self, x):
            return x * self.k

    with pytest.warns(GraphWarning):
        assert Model(2).step(mt.ones([1])).item() == 2.0
        assert Model(5).step(mt.ones([1])).item() == 5.0


@pytest.mark.parametrize(
    "options",
    [dict(warmup=0), dict(warmup=True), dict(cache_size=0), dict(cache_size=1.5), dict(mode="x")],
    ids=["warmup-0", "warmup-bool", "cache-0", "cache-float", "mode"],
)
def test_bad_options_are_refused_with_the_allowed_values(options):
    with pytest.raises(ValueError, match="must be"):
        graphed(print, **options)


def test_a_non_callable_is_refused():
    with pytest.raises(TypeError, match="callable"):
        graphed(3)


def test_the_helper_is_where_users_look_for_it():
    assert mt.device.cuda.graphs.graphed is graphed
    assert {"graphed", "GraphedFunction", "GraphWarning", "CacheInfo"} <= set(graphs.__all__)
