"""examples/plot_amp.py: its data are real and right, and one command writes the three PNGs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import needs
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

import plot_amp  # noqa: E402

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
FIGURES = ("fp16_number_line.png", "loss_scale_trajectory.png", "loss_curves.png")


def test_fp16_fate_follows_round_to_nearest_even_at_both_ends():
    values = np.array(
        [
            0.0,  # already zero: not counted
            2.0**-26,  # below half the smallest subnormal: 0
            2.0**-25,  # exactly half: a tie, goes to the even neighbour, 0
            1.5 * 2.0**-25,  # above half: rounds up to 2**-24, a subnormal
            2.0**-20,  # subnormal
            2.0**-14,  # the smallest normal
            65504.0,  # the largest finite float16
            65519.0,  # below the halfway point: rounds down to 65504
            65520.0,  # the halfway point to 2**16: a tie, goes to inf
        ],
        dtype=np.float32,
    )
    fate = plot_amp.fp16_fate(values)
    assert fate == pytest.approx(
        {"zero": 2 / 8, "subnormal": 2 / 8, "normal": 3 / 8, "overflow": 1 / 8}
    )


def test_the_landmarks_are_float16s_own():
    info = np.finfo(np.float16)
    assert info.smallest_subnormal == plot_amp.SUBNORMAL_MIN
    assert info.smallest_normal == plot_amp.NORMAL_MIN
    assert info.max == plot_amp.FP16_MAX
    with np.errstate(over="ignore"):
        assert np.isinf(np.float32(plot_amp.OVERFLOW_AT).astype(np.float16))
    assert (
        np.float32(np.nextafter(np.float32(plot_amp.OVERFLOW_AT), 0)).astype(np.float16) == info.max
    )


def test_gradient_magnitudes_cover_every_parameter_and_shrink_near_a_fit():
    width, batch = 64, 16
    start = plot_amp.gradient_magnitudes(width, batch, residual=None)
    nearly_fit = plot_amp.gradient_magnitudes(width, batch, residual=1e-3)
    assert start.shape == nearly_fit.shape == (3 * (width * width + width),)
    assert (start >= 0).all() and (nearly_fit >= 0).all()
    # The residual drives the gradient: a 1e-3 residual gives gradients ~1000x smaller,
    # enough to push a visible part of them below float16's smallest subnormal.
    assert np.median(nearly_fit[nearly_fit > 0]) < 1e-2 * np.median(start[start > 0])
    assert plot_amp.fp16_fate(nearly_fit)["zero"] > plot_amp.fp16_fate(start)["zero"]
    assert np.array_equal(start, plot_amp.gradient_magnitudes(width, batch, residual=None))


def test_scaling_moves_gradients_out_of_the_underflow_region():
    grads = plot_amp.gradient_magnitudes(64, 16, residual=1e-3)
    zero = [plot_amp.fp16_fate(grads * np.float32(s))["zero"] for s in (1, 1024, 65536)]
    assert zero[0] > 0
    assert zero[0] > zero[1] >= zero[2]


def test_trajectory_backs_off_on_overflow_and_grows_after_clean_steps():
    run = plot_amp.scale_trajectory(plot_amp.QUICK)
    assert len(run.scale) == plot_amp.QUICK.trajectory_steps
    assert run.skipped.any() and run.grew.any()
    assert run.skipped[0]  # 2**24 is far too large for these float16 gradients
    assert not (run.skipped & run.grew).any()
    np.testing.assert_array_equal(np.log2(run.scale), np.round(np.log2(run.scale)))
    after = run.scale[1:]
    np.testing.assert_array_equal(after[run.skipped[:-1]], run.scale[:-1][run.skipped[:-1]] / 2)
    np.testing.assert_array_equal(after[run.grew[:-1]], run.scale[:-1][run.grew[:-1]] * 2)
    clean = ~run.skipped[:-1] & ~run.grew[:-1]
    np.testing.assert_array_equal(after[clean], run.scale[:-1][clean])
    assert np.isfinite(run.loss).all()


def test_loss_curves_are_per_step_and_amp_tracks_fp32():
    curves = plot_amp.loss_curves(plot_amp.QUICK)
    assert list(curves) == ["fp32", "O1", "O2"]
    for loss in curves.values():
        assert loss.shape == (plot_amp.QUICK.steps,)
        np.testing.assert_allclose(loss, curves["fp32"], rtol=1e-2)


def test_unknown_mode_is_rejected():
    with pytest.raises(ValueError, match="mode 'O3' is not available"):
        plot_amp.train_per_step("O3", plot_amp.QUICK, steps=1)


def test_one_command_writes_the_three_pngs_into_the_current_folder(tmp_path):
    needs.module("matplotlib", "it comes with the test and examples extras")
    # By default into the current folder: the docs' tracked figures change only with
    # --out docs/img.
    docs_img = {p.name: p.stat().st_mtime_ns for p in (ROOT / "docs" / "img").glob("*.png")}
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "plot_amp.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert docs_img == {p.name: p.stat().st_mtime_ns for p in (ROOT / "docs" / "img").glob("*.png")}
    for name in FIGURES:
        data = (tmp_path / name).read_bytes()
        assert data[:8] == PNG_SIGNATURE, name
        assert 20_000 < len(data) < 400_000, (name, len(data))
