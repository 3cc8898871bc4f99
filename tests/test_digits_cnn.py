"""The digits CNN example: Conv2D + BatchNorm2D + pooling through a DataLoader learns the
digits in fp32, O1 and O2, and the three agree on the test set."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

import needs
import pytest
from docs_tables import text_block_after

needs.module("sklearn", "scikit-learn comes with the test extra")
from threadpoolctl import threadpool_limits  # noqa: E402 (installed with scikit-learn)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

import digits_cnn  # noqa: E402

from minitorch_amp import amp  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return digits_cnn.load_data()


@pytest.fixture(scope="module")
def command():
    """``python examples/digits_cnn.py`` (its main, defaults): printed lines, each mode's casts.

    NOTE: one BLAS thread: these GEMMs are small (1024 x 144 by 144 x 32), and OpenBLAS's
    threads made them several times slower on a busy two-core machine. The printed losses and
    accuracies are the same with 1 or 2 threads.
    """
    runs, original = {}, digits_cnn.train

    def train_recording_casts(mode, **kwargs):
        amp.reset_cast_counts()
        result = original(mode, **kwargs)
        runs[mode] = (result, amp.cast_counts())
        return result

    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, threadpool_limits(limits=1, user_api="blas"):
        patch.setattr(digits_cnn, "train", train_recording_casts)
        with contextlib.redirect_stdout(out):
            digits_cnn.main(["--device", "cpu"])
    return out.getvalue().splitlines(), runs


@pytest.fixture(scope="module")
def results(command):
    """Each mode trained once with the example's defaults, and the casts it made."""
    return command[1]


def without_times(lines: list[str]) -> list[str]:
    """The lines with each mode row's train time (a measurement, not a result) left out."""
    return [
        " ".join(words[:1] + words[2:]) if words and words[0] in digits_cnn.MODES else line
        for line, words in ((line, line.split()) for line in lines)
    ]


@pytest.mark.slow
def test_the_examples_page_shows_what_the_default_run_prints(command):
    from precision_runs import BLAS_KERNEL, blas_kernel

    if blas_kernel() != BLAS_KERNEL:  # another kernel classifies one test image differently
        pytest.skip(f"the page's run used OpenBLAS's {BLAS_KERNEL} kernel, this is {blas_kernel()}")
    printed, _ = command
    shown = text_block_after("examples.md", "One run with the defaults on the CPU")
    assert without_times(shown) == without_times(printed), (
        "docs/examples.md's digits CNN output is stale; the command printed:\n" + "\n".join(printed)
    )


@pytest.mark.parametrize("mode", digits_cnn.MODES)
def test_every_mode_reaches_95_percent_test_accuracy(results, mode):
    result, _ = results[mode]
    assert result.accuracy >= 0.95, result
    assert result.loss < 0.1 * result.epoch_losses[0]


def test_amp_modes_agree_with_fp32_within_one_point(results):
    accuracies = [result.accuracy for result, _ in results.values()]
    assert max(accuracies) - min(accuracies) <= 0.01, accuracies


def test_amp_modes_really_ran_in_float16(results):
    # Without this the agreement above could hold because nothing was ever cast.
    fp32, o1, o2 = (results[mode] for mode in digits_cnn.MODES)
    assert fp32[1]["autocast"] == fp32[1]["weight"] == fp32[1]["optimizer"] == 0
    assert o1[1]["weight"] > 0 and o1[1]["optimizer"] == 0  # conv/linear weights cast per step
    assert o2[1]["weight"] == 0 and o2[1]["optimizer"] > 0  # float16 weights, optimize-cast
    assert o1[0].epoch_losses != fp32[0].epoch_losses != o2[0].epoch_losses


def test_o2_keeps_batch_norm_in_float32_and_the_convolutions_in_float16():
    model = amp.decorate(digits_cnn.DigitsCNN(4), level="O2")
    dtypes = {name: str(p.dtype) for name, p in model.named_parameters()}
    assert dtypes["features.0.weight"] == dtypes["classifier.1.weight"] == "float16"
    assert dtypes["features.1.weight"] == dtypes["features.5.bias"] == "float32"


def test_bad_arguments_are_rejected(data):
    with pytest.raises(ValueError, match="mode 'O3' is not available"):
        digits_cnn.train("O3", data=data)
    with pytest.raises(ValueError, match="must be at least 1"):
        digits_cnn.train("fp32", channels=0, data=data)


def test_command_line_help_shows_the_defaults_and_a_run_prints_its_row():
    script = str(ROOT / "examples" / "digits_cnn.py")
    shown = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True)
    assert shown.returncode == 0 and "(default: 8)" in shown.stdout and "DataLoader" in shown.stdout
    out = subprocess.run(
        [sys.executable, script, "--mode", "O2", "--epochs", "1", "--channels", "4", "--verbose"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "O2 epoch 1/1: train loss =" in out.stdout
    lines = out.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("mode"))
    assert [line.split()[0] for line in lines[header + 1 :]] == ["O2"]
