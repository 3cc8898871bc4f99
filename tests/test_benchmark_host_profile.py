"""benchmarks/host_profile.py splits a training step's host time into parts and ops: every
part is there and they add up to the step, every op is counted as often as the step runs it,
time spent inside one op lands in that op and in its part, and nothing stays patched.

The profile is timed on the CPU (the GPU test needs CuPy and a device), on a tiny SimpleNet.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

import pytest

import minitorch_amp as mt
from minitorch_amp.autograd import dispatch, ops, relu_fold, widen_fold
from minitorch_amp.autograd.ops.cast import Cast

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
WIDTH, BATCH = 16, 4


@pytest.fixture
def hp(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # it imports timing.py from beside it
    import host_profile

    return host_profile


def profile(hp, mode: str, steps: int = 4):
    step = hp.build_step(mode, WIDTH, BATCH)
    return hp.profile_mode(step, steps, block=2, warmup=1, warmup_s=0.0)


def dispatched(hp, mode: str) -> tuple[Counter, Counter]:
    """``(forward ops, recorded ops)`` of one step, counted by the observer hook of ``apply``."""
    step = hp.build_step(mode, WIDTH, BATCH)
    step()  # the first step builds the optimizer's state
    forward, recorded = Counter(), Counter()

    def observe(op, out):
        forward[op.name] += 1
        if out._node is not None and not folded(op, out._node):
            recorded[f"{op.name} backward"] += 1  # recorded: backward runs it once
        if getattr(op, "ones_backward", None) is not None:  # the scaled loss, backward's
            recorded[f"{op.name} backward"] -= 1  # root: its scale seeds the pass instead
        for i in () if out._node is None else widen_fold.wanted(out._node, capture=False):
            if not folded(Cast, out._node.inputs[i]._node):  # an activation's cast: its
                recorded["cast backward"] -= 1  # backward is this op's GEMM's (widen_fold)

    def folded(op, node) -> bool:
        """Whether the engine skips this node's backward (its work done elsewhere)."""
        source = node.inputs[0]
        if op.name == "cast":  # a parameter's: its .grad buffer widens it (cast_fold and
            # widen_fold: a copy into it, or the weight-gradient GEMM writing it)
            return source._node is None and not source.stop_gradient
        producer = source._node if source is not None else None
        defers = getattr(op, "defers_mask", False)  # a ReLU whose mask the Linear applies
        return defers and producer is not None and relu_fold.takes_mask(producer)

    saved = dispatch.hooks.observers
    dispatch.hooks.observers = (observe,)
    try:
        step()
    finally:
        dispatch.hooks.observers = saved
    return forward, +recorded  # (+: without the ops whose every backward was folded away)


@pytest.mark.parametrize("mode", ["fp32", "O1", "O2"])
def test_every_part_is_there_and_the_parts_add_up_to_the_step(hp, mode):
    r = profile(hp, mode)
    assert list(r.parts) == [*hp.PARTS, hp.OTHER]
    assert sum(r.parts.values()) == pytest.approx(r.total, rel=1e-9)
    assert r.total == pytest.approx(r.raw - r.wrapped_calls * r.cost.per_call * 1e6)
    assert r.cost.per_call > 0 and r.cost.inside > 0
    assert r.parts["launch"] > 0 and r.parts["dispatch"] > 0 and r.parts["engine"] > 0
    amp_parts = ("amp", "scaler")
    for part in amp_parts:
        assert (r.parts[part] != 0) == (mode != "fp32"), part
    assert r.plain_median > 0 and r.gpu is None  # the CPU has no CUDA events
    assert _wrappers(hp) == []  # both layers of wrappers are gone after the blocks


@pytest.mark.parametrize("mode", ["fp32", "O1", "O2"])
def test_each_op_is_counted_as_often_as_the_step_dispatches_it(hp, mode):
    forward, recorded = dispatched(hp, mode)
    r = profile(hp, mode)
    calls = {op: round(row["calls"]) for op, row in r.ops.items() if not op.startswith("(")}
    assert {op: n for op, n in calls.items() if not op.endswith(" backward")} == forward
    assert {op: n for op, n in calls.items() if op.endswith(" backward")} == recorded
    assert r.functions["dispatch.apply"]["calls"] == sum(forward.values())
    if mode == "O1":  # the three Linears' weights and inputs are cast to float16
        assert forward["cast"] == 6


def test_time_spent_inside_one_op_lands_in_that_op_and_its_part(hp, monkeypatch):
    forward = ops.Relu.forward
    pause = 0.02  # long against a shared machine's hiccups (a 2 ms pause once landed beside)

    def slow_relu(ctx, x):
        end = time.perf_counter() + pause
        while time.perf_counter() < end:
            pass
        return forward(ctx, x)

    monkeypatch.setattr(ops.Relu, "forward", staticmethod(slow_relu))
    r = profile(hp, "fp32")
    relu, linear = r.ops["relu"], r.ops["linear"]
    assert relu["launch"] / relu["calls"] >= pause * 1e6
    assert relu["dispatch"] < pause * 1e6 / 4  # not the op's dispatch: its forward
    assert sum(v for k, v in linear.items() if k != "calls") < pause * 1e6 / 4
    assert r.parts["launch"] >= 2 * pause * 1e6
    assert r.plain_median >= 2 * pause * 1e6


def _owners() -> list:
    """Every minitorch_amp module, and every class and object the profile patches."""
    import sys

    from minitorch_amp import amp, nn
    from minitorch_amp.autograd.op import Op
    from minitorch_amp.autograd.tensor import Tensor
    from minitorch_amp.optimizer.optimizer import Optimizer

    def subclasses(cls):
        return [cls] + [c for sub in cls.__subclasses__() for c in subclasses(sub)]

    owners = [m for n, m in sys.modules.items() if n.startswith("minitorch_amp")]
    owners += [Tensor, amp.AmpScaler, amp.auto_cast, dispatch.hooks]
    return owners + subclasses(Op) + subclasses(nn.Layer) + subclasses(Optimizer)


def _wrappers(hp) -> list:
    """``(owner, name)`` of every attribute that is one of the profile's wrappers."""
    profile = hp.HostProfile()
    codes = {profile.wrap(len, "x").__code__, profile.wrap_apply(len).__code__}
    found = []
    for owner in _owners():
        for name, value in list(vars(owner).items()):
            fn = getattr(value, "__func__", value)  # a staticmethod's or classmethod's function
            if getattr(fn, "__code__", None) in codes:
                found.append((owner, name))
    return found


def test_the_profile_patches_the_library_and_puts_everything_back(hp):
    assert _wrappers(hp) == []
    before = {(id(o), name): v for o in _owners() for name, v in list(vars(o).items())}
    profile = hp.HostProfile()
    patches = hp.install(profile)
    try:
        patched = _wrappers(hp)
        assert (dispatch, "apply") in patched and (ops.Relu, "backward") in patched
        assert (ops.DepthwiseConv2D, "forward") in patched  # inherited from Conv2D
        profile.run_step(lambda: mt.ones([2]) + mt.ones([2]))
        assert profile.log == []
    finally:
        patches.undo()
    assert _wrappers(hp) == []
    after = {(id(o), name): v for o in _owners() for name, v in list(vars(o).items())}
    assert after.keys() == before.keys()
    assert [key for key, value in after.items() if value is not before[key]] == []


def test_the_command_prints_the_device_line_then_the_tables(hp, capsys):
    results = hp.main(["--sizes", "tiny", "--steps", "2", "--warmup", "0", "--top", "3"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("cpu: ")
    assert "| part | fp32 µs | fp32 % | O1 µs | O1 % | O2 µs | O2 % |" in out
    first = out.index("| part | fp32 µs | fp32 % | O1 µs | O1 % | O2 µs | O2 % |")
    rows = [line.split(" | ") for line in out[first + 2 : first + 4 + len(hp.PARTS)]]
    assert [row[0].strip("| ") for row in rows] == [*hp.PARTS, hp.OTHER, "total"]
    for column in (1, 3, 5):  # every mode's µs: the printed parts add up to the printed total
        printed = [float(row[column]) for row in rows]
        assert sum(printed[:-1]) == pytest.approx(printed[-1], abs=0.5 * len(printed))
    assert len([line for line in out if re.match(r"^(fp32|O1|O2): the top 3 ops", line)]) == 3
    assert set(results["tiny"]) == {"fp32", "O1", "O2"}


@pytest.mark.gpu
def test_on_a_gpu_the_launches_and_the_gpu_time_are_counted(hp):
    mt.set_device("gpu:0")
    r = profile(hp, "O2")
    assert r.gpu is not None and r.gpu > 0
    assert r.functions[hp.LAUNCH]["calls"] > 0  # the raw kernels: casts, GEMMs, optim.cu
    assert r.parts["allocation"] > 0  # CuPy's pool allocations are wrapped too
