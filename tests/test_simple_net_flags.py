"""SimpleNet's ``--full`` composes with the size flags: a flag given on the command line wins.

``--full`` sets the tutorial's sizes only where the user gave none, so
``--full --batches 4 --epochs 1`` trains 4 batches for 1 epoch at width 4096 (it trained 50
batches for 5 epochs, silently). The same holds for benchmarks/simple_net.py's --width/--batch.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from minitorch_amp.device.cuda import graphs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

import simple_net  # noqa: E402


def sizes(*argv: str) -> tuple:
    args = simple_net.parse_args(simple_net.make_parser(), list(argv))
    return args.input_size, args.batch_size, args.batches, args.epochs


def run(script: str, *argv: str) -> str:
    out = subprocess.run(
        [sys.executable, str(ROOT / script), *argv, "--device", "cpu"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_without_flags_the_quick_sizes_and_with_full_the_tutorials():
    assert sizes() == (1024, 64, 20, 5)
    assert sizes("--full") == (4096, 512, 50, 5)


@pytest.mark.parametrize("full", [[], ["--full"]], ids=["alone", "with --full"])
def test_an_explicit_size_flag_wins_over_the_presets(full):
    preset = sizes(*full)
    assert sizes(*full, "--batches", "4", "--epochs", "1") == (*preset[:2], 4, 1)
    assert sizes("--input-size", "16", *full, "--batch-size", "8") == (16, 8, *preset[2:])


def test_full_with_explicit_sizes_trains_exactly_those_sizes():
    out = run(
        "examples/simple_net.py",
        *("--full", "--input-size", "16", "--batch-size", "4", "--batches", "2", "--epochs", "1"),
    )
    assert "width 16, batch 4, 2 batches x 1 epochs" in out
    assert out.count("epoch ") == 1


def test_the_benchmarks_full_keeps_an_explicit_width_and_batch():
    argv = ("--full", "--width", "16", "--batch", "4", "--modes", "fp32", "--no-torch")
    out = run("benchmarks/simple_net.py", *argv, "--steps", "1", "--warmup", "0")
    assert "width 16, batch 4," in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--batches", "0"], "--batches must be at least 1, got 0"),
        (["--epochs", "-1"], "--epochs must be at least 1, got -1"),
        (["--batches", "4", "--accumulate", "5"], "--accumulate (5) is more than --batches (4)"),
    ],
)
def test_sizes_that_cannot_train_are_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as done:
        simple_net.main([*argv, "--device", "cpu"])
    assert done.value.code == 2 and message in capsys.readouterr().err


def test_train_refuses_the_same_sizes():
    with pytest.raises(ValueError, match="must be at least 1"):
        simple_net.train(batches=0)
    with pytest.raises(ValueError, match=r"accumulate \(5\) is more than batches \(4\)"):
        simple_net.train(batches=4, accumulate=5)


@pytest.mark.parametrize("graph", [False, True])
def test_the_warm_up_reaches_a_capture_and_a_replay_when_the_rows_are_graphed(graph, monkeypatch):
    """A timed graph row must not pay for the process's first capture: the warm-up makes the
    graphed wrapper's two eager calls, its capture and one replay."""
    runs = []
    monkeypatch.setattr(simple_net, "train", lambda **run: runs.append(run))
    done = simple_net.warm_up("O2", graph=graph, accumulate=3, input_size=8)
    default = inspect.signature(graphs.graphed).parameters["warmup"].default
    assert default == simple_net.GRAPH_WARMUP  # (the example wraps with graphed's default)
    updates = simple_net.GRAPH_WARMUP + 2 if graph else 2
    assert done == runs[0]["batches"] == 3 * updates and len(runs) == 1  # (one run on the CPU)
