"""The digits MLP example: fp32, O1 and O2 all learn the digits and agree on the test set."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import needs
import pytest

needs.module("sklearn", "scikit-learn comes with the test extra")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

import digits_mlp  # noqa: E402

from minitorch_amp import amp  # noqa: E402
from minitorch_amp.amp import debugging  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return digits_mlp.load_data()


@pytest.fixture(scope="module")
def results(data):
    """Each mode trained once (the example's defaults, half the epochs), with its casts."""
    runs = {}
    for mode in digits_mlp.MODES:
        amp.reset_cast_counts()
        result = digits_mlp.train(mode, epochs=10, data=data, log=None)
        runs[mode] = (result, amp.cast_counts())
    return runs


def test_split_is_fixed_stratified_and_standardised(data):
    assert data.x_train.shape == (1347, 64) and data.x_test.shape == (450, 64)
    assert data.x_train.dtype == "float32" and data.y_train.dtype == "int64"
    assert sorted(set(data.y_test.tolist())) == list(range(10))  # every digit is tested
    assert abs(data.x_train.mean()) < 1e-5
    spread = data.x_train.std(axis=0)
    assert ((abs(spread - 1) < 1e-4) | (spread == 0)).all()  # constant pixels stay at 0
    again = digits_mlp.load_data()
    assert (again.x_test == data.x_test).all() and (again.y_test == data.y_test).all()


@pytest.mark.slow
@pytest.mark.parametrize("mode", digits_mlp.MODES)
def test_every_mode_learns_the_digits(results, mode):
    result, _ = results[mode]
    assert result.accuracy >= 0.9
    assert result.loss < 0.1 * result.epoch_losses[0]
    assert result.seconds > 0


@pytest.mark.slow
def test_amp_modes_agree_with_fp32_within_one_point(results):
    accuracies = [result.accuracy for result, _ in results.values()]
    assert max(accuracies) - min(accuracies) <= 0.01, accuracies


@pytest.mark.slow
def test_amp_modes_really_ran_in_float16(results):
    # Without this the agreement above could hold because nothing was ever cast.
    fp32, o1, o2 = (results[mode] for mode in digits_mlp.MODES)
    assert fp32[1]["autocast"] == fp32[1]["weight"] == fp32[1]["optimizer"] == 0
    assert o1[1]["weight"] > 0 and o1[1]["optimizer"] == 0  # weights cast inside the region
    assert o2[1]["weight"] == 0 and o2[1]["optimizer"] > 0  # float16 weights, optimize-cast
    assert o1[0].epoch_losses != fp32[0].epoch_losses
    assert o2[0].epoch_losses != fp32[0].epoch_losses


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["O1", "O2"])
def test_bf16_learns_the_digits_as_well_as_fp32_without_a_scaler(results, data, mode):
    with debugging.collect_operator_stats() as stats:
        bf16 = digits_mlp.train(mode, epochs=10, data=data, log=None, dtype="bfloat16")
    fp32, _ = results["fp32"]
    assert bf16.accuracy >= 0.9 and abs(bf16.accuracy - fp32.accuracy) <= 0.02
    assert bf16.loss < 0.1 * bf16.epoch_losses[0]
    # its products really ran in bfloat16: at O2 the Linear layers run whole in bfloat16; at
    # O1 their operands are cast to bfloat16, then a float32 bias is added (Paddle's matmul,
    # then add), so the layers count as float32
    ran = stats.counts["linear"] if mode == "O2" else stats.counts["cast"]
    assert ran.get("bf16", 0) > 0
    assert stats.counts["linear"]["fp16"] == 0 and stats.counts["cast"]["fp16"] == 0


def test_a_dtype_that_is_not_a_low_precision_one_is_rejected(data):
    with pytest.raises(
        ValueError, match=r"dtype must be one of \('float16', 'bfloat16', 'float8'\)"
    ):
        digits_mlp.train("O1", data=data, dtype="float32")


def test_same_seed_same_run_different_seed_different_run(data):
    def quick(seed):
        return digits_mlp.train("O2", epochs=1, seed=seed, data=data, log=None).epoch_losses

    assert quick(1) == quick(1)
    assert quick(1) != quick(2)


def test_bad_arguments_are_rejected(data):
    with pytest.raises(ValueError, match="mode 'O3' is not available"):
        digits_mlp.train("O3", data=data)
    with pytest.raises(ValueError, match="must be at least 1"):
        digits_mlp.train("fp32", epochs=0, data=data)


def test_command_line_prints_a_row_per_mode():
    script = str(ROOT / "examples" / "digits_mlp.py")
    out = subprocess.run(
        [sys.executable, script, "--epochs", "3", "--batch-size", "128", "--device", "cpu"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("mode"))
    assert lines[header].split() == [
        "mode",
        "train",
        "time",
        "(s)",
        "train",
        "loss",
        "test",
        "accuracy",
    ]
    rows = [line.split() for line in lines[header + 1 : header + 4]]
    assert [row[0] for row in rows] == ["fp32", "O1", "O2"]
    for row in rows:
        assert re.fullmatch(r"\d+\.\d\d%", row[3]), row
        assert float(row[3].rstrip("%")) >= 80.0  # three epochs already recognise most digits
    assert "test accuracy spread across modes" in lines[header + 4]


def test_command_line_single_mode():
    script = str(ROOT / "examples" / "digits_mlp.py")
    out = subprocess.run(
        [sys.executable, script, "--mode", "O1", "--epochs", "1", "--verbose"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "O1 epoch 1/1: train loss =" in out.stdout
    lines = out.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("mode"))
    assert [line.split()[0] for line in lines[header + 1 :]] == ["O1"]  # one row, no spread line
