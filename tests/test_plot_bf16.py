"""examples/plot_bf16.py: its data are real and right, and one command writes its two PNGs."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

import plot_amp  # noqa: E402
import plot_bf16  # noqa: E402

from minitorch_amp.testing import bf16  # noqa: E402

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_bf16_fate_follows_round_to_nearest_even_at_both_ends():
    below_overflow = float(np.nextafter(np.float32(bf16.OVERFLOW_THRESHOLD), np.float32(0)))
    values = np.array(
        [
            0.0,  # already zero: not counted
            2.0**-134,  # half the smallest subnormal: a tie, goes to the even 0
            1.5 * 2.0**-134,  # above half: rounds up to 2**-133, a subnormal
            2.0**-130,  # subnormal
            2.0**-126,  # the smallest normal
            bf16.MAX,  # the largest finite bfloat16
            below_overflow,  # rounds down to MAX
            bf16.OVERFLOW_THRESHOLD,  # the tie between MAX and 2**128: inf
        ],
        dtype=np.float32,
    )
    fate = plot_bf16.fate(values, "bfloat16")
    assert fate == pytest.approx(
        {"zero": 1 / 7, "subnormal": 2 / 7, "normal": 3 / 7, "overflow": 1 / 7}
    )


def test_float16_fate_is_plot_amps():
    values = np.abs(np.random.default_rng(0).standard_normal(1000) * 2.0**-20).astype(np.float32)
    assert plot_bf16.fate(values, "float16") == pytest.approx(plot_amp.fp16_fate(values))


def test_simple_net_gradients_that_float16_loses_are_all_normal_in_bfloat16():
    for residual in (None, 1e-3):
        grads = plot_amp.gradient_magnitudes(64, 16, residual=residual)
        assert plot_bf16.fate(grads, "bfloat16") == {
            "zero": 0.0, "subnormal": 0.0, "normal": 1.0, "overflow": 0.0
        }  # fmt: skip
    nearly_fit = plot_amp.gradient_magnitudes(64, 16, residual=1e-3)
    assert plot_bf16.fate(nearly_fit, "float16")["zero"] > 0  # what loss scaling is for


def test_simple_net_curves_are_per_epoch_and_bf16_tracks_fp32():
    curves = plot_bf16.simple_net_curves(plot_bf16.QUICK)
    assert list(curves) == list(plot_bf16.RUNS)
    fp32 = curves[("fp32", "float16")]
    for loss in curves.values():
        assert len(loss) == plot_bf16.QUICK.epochs
        np.testing.assert_allclose(loss, fp32, rtol=1e-2)
    assert curves[("O2", "bfloat16")] != fp32  # it really ran in 16 bits


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("matplotlib") is None or importlib.util.find_spec("sklearn") is None,
    reason="matplotlib and scikit-learn come with the 'examples' extra",
)
def test_one_command_writes_the_two_pngs(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "plot_bf16.py"),
            "--quick",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    for name in ("bf16_number_line.png", "bf16_loss_curves.png"):
        data = (tmp_path / name).read_bytes()
        assert data[:8] == PNG_SIGNATURE, name
        assert 20_000 < len(data) < 400_000, (name, len(data))
    # It says what it is doing while the runs go on, not only at the end.
    lines = out.stdout.splitlines()
    assert lines[0].startswith("gradients of SimpleNet"), lines
    assert any(line.startswith("loss curves: SimpleNet") for line in lines), lines


def test_help_shows_the_defaults(capsys):
    with pytest.raises(SystemExit):
        plot_bf16.main(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "output folder (default: " in shown and "docs/img)" in shown, shown


def test_every_run_of_the_loss_curves_goes_through_a_progress_bar(monkeypatch):
    shown = []

    def recording_progress(iterable, desc=None, **kwargs):
        items = list(iterable)
        shown.append((desc, items))
        return items

    monkeypatch.setattr(plot_bf16, "progress", recording_progress)
    curves = plot_bf16.simple_net_curves(plot_bf16.QUICK)
    desc, items = shown[0]
    assert items == list(plot_bf16.RUNS) == list(curves) and "SimpleNet" in desc
