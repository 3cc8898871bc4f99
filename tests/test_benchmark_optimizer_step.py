"""benchmarks/optimizer_step.py measures real steps: a row per optimizer and tensor count,
every timed step changes the parameters, and a skipped (overflowing) step is refused.

PyTorch is what the benchmark compares against and no dependency of the tests: without it
these tests skip.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # it imports timing.py from beside it
    import optimizer_step

    monkeypatch.setattr(optimizer_step, "SETTLE_S", 0.0)  # no thread pools to settle here
    return optimizer_step


def tiny_table(bench) -> list:
    device = bench.torch_device()
    sizes = {"numel": 8, "repeats": 1, "block": 2, "warmup": 1, "warmup_s": 0.0}
    return bench.measure(bench.OPTIMIZERS, [1, 2], device=device, **sizes)


def test_the_table_has_a_positive_row_per_optimizer_and_tensor_count(bench, cpu, capsys):
    rows = tiny_table(bench)
    assert [(name, tensors) for name, tensors, *_ in rows] == [
        (name, tensors) for name in ("SGD", "Momentum", "Adam", "AdamW") for tensors in (1, 2)
    ]
    for name, tensors, ours, theirs in rows:
        assert ours > 0 and theirs > 0, (name, tensors)
    bench.print_table(rows)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "| optimizer | tensors | ours µs | PyTorch µs | ours/PyTorch |"
    assert len(printed) == 2 + len(rows)


@pytest.mark.parametrize("name", ["SGD", "Momentum", "Adam", "AdamW"])
def test_every_timed_step_changes_every_parameter_of_both_frameworks(bench, cpu, name):
    runs = bench.step_runs(name, tensors=2, numel=8, device=bench.torch_device())
    before = {framework: run.params() for framework, run in runs.items()}
    us = bench.host_us(runs, repeats=1, block=1, warmup=1, warmup_s=0.0)
    assert us["ours"] > 0 and us["torch"] > 0
    for framework, run in runs.items():
        assert run.scale() == bench.INIT_SCALE  # no overflow halved it, no growth yet
        after = run.params()
        assert after[0].dtype == (np.float16 if framework == "ours" else np.float32)
        for a, b in zip(before[framework], after):
            assert not np.array_equal(a, b), framework


@pytest.mark.parametrize("framework", ["ours", "torch"])
def test_reset_refills_the_scaled_gradients_that_a_step_divided(bench, cpu, framework):
    run = bench.step_runs("Momentum", tensors=2, numel=8, device=bench.torch_device())[framework]
    run.reset()
    scaled = run.grads()
    assert scaled[0].dtype == (np.float16 if framework == "ours" else np.float32)
    assert max(np.abs(g).max() for g in scaled) > 100  # 1024 * N(0, 1)
    run.step()  # unscaling divides the gradients in place
    run.reset()
    for g, again in zip(scaled, run.grads()):
        np.testing.assert_array_equal(g, again)


def test_an_overflowing_step_is_refused_not_timed(bench, cpu):
    import minitorch_amp as mt

    runs = bench.step_runs("Adam", tensors=2, numel=8, device=bench.torch_device())
    inf = np.full(8, np.inf, dtype=np.float16)
    runs["ours"].scaled_grads[1].set_value(mt.to_tensor(inf))
    with pytest.raises(RuntimeError, match="left 2 of 2 parameter tensors unchanged"):
        bench.check_step_applies("ours", runs["ours"])
    with pytest.raises(RuntimeError, match="the loss scale fell from 1024 to 512"):
        bench.check_no_overflow("ours", runs["ours"], bench.INIT_SCALE)


def test_help_lists_the_options_with_their_defaults(bench, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--help"])
    text = capsys.readouterr().out
    for option in ("--optimizers", "--tensors", "--numel", "--repeats", "--quick", "--device"):
        assert option in text
    assert "default: 1024" in text
