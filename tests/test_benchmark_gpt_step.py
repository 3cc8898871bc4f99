"""benchmarks/gpt_step.py's ``--graph``: both GPT steps replayed as CUDA graphs, the learning
rate's schedule stepped between replays. On the CPU the option is refused with what to do,
and our graph-mode step (``graphs.graphed``, which runs eagerly there) trains like the plain
one; on a GPU the step is captured once and replayed.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import minitorch_amp as mt

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def gpt_step(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import gpt_step

    return gpt_step


def test_graph_on_the_cpu_is_refused_and_says_what_it_needs(gpt_step, cpu, capsys):
    with pytest.raises(SystemExit) as exit_info:
        gpt_step.main(["--graph", "--device", "cpu", "--no-torch"])
    assert exit_info.value.code == 2
    assert "--graph replays CUDA graphs and needs a GPU" in capsys.readouterr().err


def test_the_profile_runs_on_the_gpu_stand_in_at_its_size(gpt_step, capsys):
    size = dict(gpt_step.CONFIG)
    gpt_step.main(["--profile", "--gpu-stand-in", "--level", "O2", "--steps", "2", "--block", "1"])
    out = capsys.readouterr().out
    assert out.startswith("GPT step, O2, context 8, width 16, batch 1: gpu:0: a stand-in for")
    assert "| part | O2 µs | O2 % |" in out and "| optimizer |" in out
    assert size == gpt_step.CONFIG and str(mt.get_device()) == "cpu"  # both put back
    with pytest.raises(SystemExit) as exit_info:
        gpt_step.main(["--gpu-stand-in", "--no-torch"])
    assert exit_info.value.code == 2 and "add --profile" in capsys.readouterr().err


def test_then_runs_the_step_then_the_schedule_and_returns_the_loss(gpt_step):
    calls = []
    run = gpt_step.then(
        lambda a, b: calls.append(("step", a, b)) or a + b, lambda: calls.append("after")
    )
    assert run(2, 3) == 5 and run(1, 1) == 2
    assert calls == [("step", 2, 3), "after", ("step", 1, 1), "after"]


def test_the_capture_line_counts_the_eager_calls_after_the_warm_up(gpt_step, cpu):
    """On the CPU graphs.graphed runs every call eagerly: 0 captures, and each call after
    the two warm-up calls is reported as eager (on a GPU the GPU test wants 0 there)."""
    mt.seed(0)
    model = gpt_step.gpt.GPT(20, context=16, width=32, num_layers=1, num_heads=2, dropout=0.0)
    step = gpt_step.ours_training(model, "fp32", 1e-3, graph=True)
    x, y = (mt.to_tensor(np.zeros((2, 16), dtype=np.int64)) for _ in "xy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # graphed's one "graphs need a GPU" on the CPU
        for _ in range(5):
            step(x, y)
    assert gpt_step.capture_line(step) == (
        "ours: 0 capture(s), 0 replays, 3 eager calls after its 2 warm-up calls"
    )


@pytest.mark.parametrize("level", ["fp32", "O2"])
def test_on_the_cpu_the_graph_mode_step_trains_like_the_plain_step(gpt_step, cpu, level):
    gpt = gpt_step.gpt

    def losses(graph: bool) -> list:
        mt.seed(0)
        model = gpt.GPT(20, context=16, width=32, num_layers=1, num_heads=2, dropout=0.0)
        step = gpt_step.ours_training(model, level, 1e-3, graph=graph)
        rng = np.random.default_rng(1)
        out = []
        for _ in range(4):
            x, y = (mt.to_tensor(rng.integers(0, 20, (2, 16))) for _ in "xy")
            out.append(step(x, y).item())
        return out

    plain = losses(False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # graphed's one "graphs need a GPU" on the CPU
        graphed = losses(True)
    assert graphed == plain
    assert len(set(plain)) == 4  # the steps trained (the schedule moved the rate)


@pytest.mark.gpu
def test_on_a_gpu_our_o2_step_is_captured_once_and_replayed(gpt_step, capsys):
    torch = pytest.importorskip("torch")
    argv = ["--device", "gpu", "--graph", "--level", "O2", "--steps", "4", "--warmup", "3"]
    argv += ["--block", "2"] + ([] if torch.cuda.is_available() else ["--no-torch"])
    gpt_step.main(argv)
    out = capsys.readouterr().out
    assert "replayed as CUDA graphs" in out
    assert "ours: 1 capture(s)" in out and "0 eager calls" in out
