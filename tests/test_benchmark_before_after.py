"""benchmarks/before_after.py: two versions of the package in one process, taking turns.

Each run is a subprocess: the script swaps the package's modules in ``sys.modules``, which a
test process must not see."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "before_after.py"

pytestmark = pytest.mark.skipif(
    not (ROOT / ".git").exists(), reason="needs a git clone (the earlier version is git archive'd)"
)


def run(*args: str, code: str | None = None):
    command = [sys.executable, *(["-c", code] if code else [str(SCRIPT), *args])]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_the_table_has_a_row_per_mode():
    done = run("--before", "HEAD", "--modes", "fp32", "O2", "--steps", "4", "--warmup", "1")
    assert done.returncode == 0, done.stderr
    head = subprocess.run(
        ["git", "log", "-1", "--format=%h"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    assert f"before {head} " in done.stdout and "median of 4 steps each" in done.stdout
    rows = re.findall(r"^\| (\w+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", done.stdout, re.M)
    assert [row[0] for row in rows] == ["fp32", "O2"]
    for _, before, after, ratio in rows:  # the rounds' median ratio: near the medians' one
        assert 0 < float(ratio) < 10 and float(before) > 0 and float(after) > 0


def test_the_gpu_stand_in_runs_both_versions_on_the_gpu_path():
    done = run("--before", "HEAD", "--gpu-stand-in", "--modes", "O2", "--steps", "4")
    assert done.returncode == 0, done.stderr
    assert "on the GPU path, CuPy and the GPU stood in for: before " in done.stdout
    assert re.search(r"^\| O2 \| [\d.]+ \| [\d.]+ \| [\d.]+ \|$", done.stdout, re.M)


def test_the_gpu_stand_in_runs_the_gpt_o2_step_of_both_versions():
    done = run(
        "--before", "HEAD", "--gpu-stand-in", "--workload", "gpt", "--steps", "2", "--block", "1"
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    label = "GPT O2 (context 8, width 16, batch 1) on the GPU path, CuPy and the GPU stood in for"
    assert label in done.stdout
    assert re.search(r"^\| GPT O2 \| [\d.]+ \| [\d.]+ \| [\d.]+ \|$", done.stdout, re.M)


def test_the_fp8_workload_times_the_fp8_step_of_both_versions():
    done = run("--before", "HEAD", "--workload", "fp8", "--steps", "4", "--warmup", "1")
    assert done.returncode == 0, done.stderr
    label = "SimpleNet O2 with FP8 GEMMs (bfloat16, width 64, batch 16, SGD) on the CPU"
    assert label in done.stdout
    assert re.search(r"^\| O2 FP8 \| [\d.]+ \| [\d.]+ \| [\d.]+ \|$", done.stdout, re.M)


def test_a_revision_that_is_not_there_is_refused_with_the_reason():
    done = run("--before", "no-such-revision-here")
    assert done.returncode == 1
    assert "--before 'no-such-revision-here': not a revision of this checkout" in done.stderr


def test_each_version_runs_with_its_own_modules():
    """After ``use``, every import (a lazy one inside a function included) finds that
    version's package: the earlier one from its archive, the current one from the checkout."""
    code = textwrap.dedent(
        f"""
        import sys, tempfile
        from pathlib import Path
        sys.path.insert(0, {str(ROOT / "benchmarks")!r})
        import before_after as ba

        def build(script):
            import minitorch_amp
            return minitorch_amp.__file__

        with tempfile.TemporaryDirectory() as scratch:
            ba.extract("HEAD", Path(scratch))
            old_file, old = ba.load(Path(scratch), build)
            new_file, new = ba.load(ba.ROOT, build)
            assert old_file.startswith(scratch) and not new_file.startswith(scratch)
            for modules, where in ((old, scratch), (new, str(ba.ROOT))):
                ba.use(modules)
                import minitorch_amp.backend.cast as cast  # what a lazy import finds
                assert cast.__file__.startswith(where), (cast.__file__, where)
                assert sys.modules["minitorch_amp"] is modules["minitorch_amp"]
        print("ok")
        """
    )
    done = run(code=code)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_the_simple_net_workload_takes_a_size_and_an_optimizer():
    done = run(
        "--before", "HEAD", "--modes", "fp32", "--steps", "2", "--warmup", "0",
        "--width", "16", "--batch", "4", "--optimizer", "SGD",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("SimpleNet (width 16, batch 4, SGD) on the CPU")
    assert re.search(r"^\| fp32 \| [\d.]+ \| [\d.]+ \| [\d.]+ \|$", done.stdout, re.M)
    refused = run("--before", "HEAD", "--width", "0")
    assert refused.returncode != 0 and "--width and --batch must be at least 1" in refused.stderr


def test_control_times_a_second_copy_of_the_working_tree_beside_the_two():
    done = run("--before", "HEAD", "--modes", "fp32", "--steps", "3", "--warmup", "0", "--control")
    assert done.returncode == 0, done.stderr
    assert "| after / control (no change: the noise) |" in done.stdout
    row = re.search(r"^\| fp32 \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$",
                    done.stdout, re.M)  # fmt: skip
    assert row is not None, done.stdout
    assert all(0 < float(value) < 10 for value in row.groups())


def test_each_version_goes_first_as_often_as_any_other(monkeypatch):
    """Three versions rotate: over three rounds each takes each place once (a version always
    in the middle would always follow another's turn)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import before_after as ba

    monkeypatch.setattr(ba, "use", lambda modules: None)
    monkeypatch.setattr(ba, "SETTLE_S", 0.0)
    turns = []

    def steps_of(version):
        return {"step": lambda: turns.append(version)}

    versions = {v: (steps_of(v), {}) for v in ("before", "after", "control")}
    ba.measure(versions, ["step"], steps=3, warmup=0, block=1)
    firsts = [turns[i] for i in range(0, len(turns), 6)]  # each turn: one wake-up, one timed
    assert sorted(firsts) == ["after", "before", "control"]
