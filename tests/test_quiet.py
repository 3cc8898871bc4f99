"""The library is quiet: importing prints nothing, and float16 overflow warns nobody.

Paddle and PyTorch print nothing at import and treat inf and NaN as values (found by the loss
scaler, or by a tensor checker the user turns on). So does minitorch_amp: the device choice is
logged on the ``minitorch_amp`` logger (silent unless configured), and NumPy's
``RuntimeWarning: overflow encountered`` does not leak out of library code where an overflow
is expected.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import amp, nn

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MINITORCH_AMP_DEVICE"}
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        timeout=120,
    )


def test_import_prints_nothing():
    out = run("-c", "import minitorch_amp, minitorch_amp.nn, minitorch_amp.amp")
    assert out.returncode == 0, out.stderr
    assert (out.stdout, out.stderr) == ("", "")


def test_an_example_help_prints_only_the_help():
    out = run("examples/simple_net.py", "--help")
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert out.stdout.startswith("usage: simple_net.py")


@pytest.fixture
def warnings_are_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def overflowing_step(level: str, optimizer=mt.optimizer.Adam) -> amp.GradScaler:
    """One AMP step whose activations and gradients overflow float16."""
    mt.seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
    opt = optimizer(parameters=model.parameters())
    if level == "O2":
        model, opt = amp.decorate(models=model, optimizers=opt, level="O2")
    scaler = amp.GradScaler(init_loss_scaling=2.0**15)
    x = mt.to_tensor(np.full((2, 4), 6e4, np.float32))
    with amp.auto_cast(level=level):
        loss = (model(x) * 100).sum()  # inf and -inf in float16, NaN once summed
    scaler.scale(loss).backward()
    scaler.minimize(opt, loss)
    opt.clear_grad()
    return scaler


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_an_overflowing_amp_step_skips_without_numpy_warnings(level, warnings_are_errors):
    scaler = overflowing_step(level)
    assert float(scaler.get_loss_scaling()) == 2.0**14  # the overflow was seen, and halved S


def test_float16_arithmetic_overflows_to_inf_without_warnings(warnings_are_errors):
    big = mt.to_tensor([6e4], dtype="float16")
    assert np.isinf((big * 2).numpy()).all()
    assert np.isnan((big * 2 - big * 2).numpy()).all()
    assert np.isinf(mt.exp(mt.to_tensor([20.0], dtype="float16")).numpy()).all()
    assert np.isinf(mt.to_tensor([1e5], dtype="float16").numpy()).all()
    x = mt.to_tensor([300.0], dtype="float16", stop_gradient=False)
    (x * x * x).sum().backward()  # 3 x^2 = 270000: past 65504
    assert np.isinf(x.grad.numpy()).all()


def test_float32_outside_auto_cast_still_follows_numpy():
    # Only float16 and auto_cast regions are quiet; a plain float32 overflow is the user's own
    # NumPy-level surprise, and NumPy's warning is left to tell them.
    with pytest.warns(RuntimeWarning, match="overflow"):
        mt.exp(mt.to_tensor([1000.0]))


def test_with_the_tensor_checker_on_it_alone_reports_nan_and_inf(warnings_are_errors, capsys):
    # Paddle's checker prints its report line; NumPy's warnings would say the same again.
    config = amp.debugging.TensorCheckerConfig(True, amp.debugging.DebugMode.CHECK_NAN_INF)
    amp.debugging.enable_tensor_checker(config)
    try:
        y = mt.to_tensor([1.0, 0.0]) / mt.to_tensor([0.0, 0.0])  # float32: inf, NaN
    finally:
        amp.debugging.disable_tensor_checker()
    assert np.isinf(y.numpy()[0]) and np.isnan(y.numpy()[1])
    assert "num_nan=1, num_inf=1" in capsys.readouterr().out
    with pytest.warns(RuntimeWarning, match="divide by zero"):  # checker off: NumPy's again
        mt.to_tensor([1.0]) / mt.to_tensor([0.0])
