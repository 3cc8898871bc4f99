"""benchmarks/launch_count.py: the kernels of one eager step on the GPU code path, counted
with CuPy stood in for by NumPy. Run in a subprocess (the stand-in is the process's CuPy
while it counts); its table in docs/benchmarks.md is the one it prints."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "launch_count.py"


@pytest.fixture(scope="module")
def printed() -> str:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--top", "60"], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def rows(text: str, title: str) -> dict[str, int]:
    """The ``| name | count |`` rows of the table under ``title``."""
    block = text.split(title, 1)[1].split("\n\n", 1)[0]
    return {k: int(v) for k, v in re.findall(r"^\| ([^|]+?) \| (\d+) \|$", block, re.M)}


def test_the_steps_take_the_gpu_code_path(printed):
    o2 = rows(printed, "SimpleNet O2: the 60 most launched")
    assert o2["gemm_f16"] == 8 and o2["bias_grad"] == 3  # the raw kernels, not NumPy's
    assert o2["unscale_and_check"] == 1 and o2["sgd_step"] == 1
    fp32 = rows(printed, "SimpleNet fp32: the 60 most launched")
    assert fp32["matmul"] == 8 and "gemm_f16" not in fp32  # float32: cuBLAS through CuPy


def test_the_gpt_step_clips_in_five_launches(printed):
    gpt = rows(printed, "GPT O2: the 60 most launched")
    assert "sum_squares" not in gpt
    assert (gpt["sum_squares_tensors"], gpt["clip_scale"], gpt["scale_tensors"]) == (2, 1, 2)


@pytest.fixture(scope="module")
def printed_hopper() -> str:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--hopper", "--top", "60"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_on_a_hopper_the_steps_take_the_hopper_gemms(printed_hopper):
    o2 = rows(printed_hopper, "SimpleNet O2: the 60 most launched")
    assert o2["gemm_sm90"] == 8 and "gemm_f16" not in o2
    fp8 = rows(printed_hopper, "SimpleNet O2 FP8: the 60 most launched")
    assert fp8["gemm_fp8_sm90"] == 8 and "matmul" not in fp8  # sm_90a: the FP8 GEMM


def test_the_docs_tables_are_the_ones_it_prints(printed, printed_hopper):
    docs = (ROOT / "docs" / "benchmarks.md").read_text()
    section = docs.split("### Kernels per step on the GPU code path, without a GPU", 1)[1]
    want = rows(printed, "| step | kernels |")
    assert rows(section, "| step | kernels |") == want
    assert want["SimpleNet O2"] <= 30  # issue 24's target, counted this way
    hopper = rows(printed_hopper, "| step | kernels |")
    assert rows(section, "| step | kernels (Hopper) |") == hopper
    assert hopper["SimpleNet O2"] <= 30


def test_time_makes_each_step_again_and_prints_its_host_us():
    """--time builds each step a second time under a new stand-in (the GPT's imports torch
    when it is installed: the stand-in must not unload what was imported inside it)."""
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--time", "--steps", "SimpleNet O2", "GPT O2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    timed = rows(out.stdout, "| step | µs per step |")
    assert set(timed) == {"SimpleNet O2", "GPT O2"} and all(v > 0 for v in timed.values())


def test_the_timed_gpt_step_is_the_stand_in_size_and_its_batches_fit_the_model():
    """--time's GPT is built at ``gpu_stand_in.GPT_SIZE`` (before_after.py's), the example's
    size put back once it is built: its batches keep the model's context."""
    sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "examples")]
    try:
        import gpt_step
        import gpu_stand_in
        import launch_count

        example = dict(gpt_step.CONFIG)
        drawn = []
        real_get_batch = gpt_step.gpt.get_batch

        def get_batch(data, batch, context, rng):
            drawn.append((batch, context))
            return real_get_batch(data, batch, context, rng)

        with launch_count.stand_in(), pytest.MonkeyPatch.context() as patch:
            patch.setattr(gpt_step.gpt, "get_batch", get_batch)
            step = launch_count.SMALL["GPT O2"]()
            assert example == gpt_step.CONFIG  # put back
            step()
            step()
        assert drawn == [(1, gpu_stand_in.GPT_SIZE["context"])] * 2
        assert gpu_stand_in.GPT_SIZE["context"] != example["context"]
    finally:
        del sys.path[:2]
