"""SimpleNet's ``--full`` composes with the size flags: a flag given on the command line wins.

``--full`` sets the tutorial's sizes only where the user gave none, so
``--full --batches 4 --epochs 1`` trains 4 batches for 1 epoch at width 4096 (it trained 50
batches for 5 epochs, silently). The same holds for benchmarks/simple_net.py's --width/--batch.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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
