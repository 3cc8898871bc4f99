"""backend/constants.py: host-built arrays an op reads, uploaded once per device and key.

The ops that used to upload such an array in every call (average pooling's window counts,
adaptive pooling's matrices, a reflect pad's positions, masked_fill's value) find it again
from their second call on, so a convolutional training step uploads nothing after its first
iteration (the sync debug mode hears the NumPy backend declare the same uploads a GPU would
make) and can be captured as a CUDA graph (the GPU test at the end).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import minitorch_amp as mt
import minitorch_amp.nn.functional as F
from minitorch_amp import amp, nn
from minitorch_amp.backend import constants
from minitorch_amp.device import SyncError, SyncWarning, sync_debug_mode


@pytest.fixture(autouse=True)
def _empty_cache(monkeypatch):
    monkeypatch.setattr(constants, "_cache", type(constants._cache)())


def test_an_array_is_built_and_declared_once_per_key_and_is_read_only():
    like, builds = np.zeros(2, np.float32), []

    def build():
        builds.append(1)
        return np.arange(4.0)

    with sync_debug_mode("warn"), pytest.warns(SyncWarning, match="a test table uploads"):
        first = constants.device_constant(like, ("t", 4), build, "a test table")
    with sync_debug_mode("error"):  # found again: nothing to upload
        again = constants.device_constant(like, ("t", 4), build, "a test table")
    assert again is first and len(builds) == 1
    np.testing.assert_array_equal(first, np.arange(4.0))
    with pytest.raises(ValueError, match="read-only"):
        first[0] = 1.0
    with sync_debug_mode("error"), pytest.raises(SyncError, match="another table uploads"):
        constants.device_constant(like, ("t", 5), build, "another table")
    assert len(builds) == 1  # the error came before the build and the upload


def test_the_least_recently_used_array_is_dropped_past_the_cache_size(monkeypatch):
    monkeypatch.setattr(constants, "CACHE_SIZE", 2)
    like = np.zeros(1)
    arrays = {k: constants.device_constant(like, (k,), lambda: np.zeros(1), "t") for k in "ab"}
    assert constants.device_constant(like, ("a",), lambda: np.ones(1), "t") is arrays["a"]
    constants.device_constant(like, ("c",), lambda: np.zeros(1), "t")  # drops b, not a
    assert constants.device_constant(like, ("a",), lambda: np.ones(1), "t") is arrays["a"]
    rebuilt = constants.device_constant(like, ("b",), lambda: np.ones(1), "t")
    assert rebuilt is not arrays["b"] and rebuilt[0] == 1.0


class _ConvNet(nn.Layer):
    """Every op that keeps a device constant, in one small convolutional network."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2D(2, 4, 3, padding=1, padding_mode="circular")
        self.norm = nn.BatchNorm2D(4)
        self.head = nn.Linear(4 * 2 * 2 + 4 * 3 * 3, 3)

    def forward(self, x):
        x = F.pad(x, [1, 1, 1, 1], mode="reflect")  # [N, 2, 10, 10]
        x = F.max_pool2d(F.relu(self.norm(self.conv(x))), 2)  # [N, 4, 5, 5]
        x = F.avg_pool2d(x, 2, stride=1, padding=1)  # exclusive counts: [N, 4, 6, 6]
        even = F.adaptive_avg_pool2d(x, 2)  # 6 = 2 * 3: a mean over equal windows
        uneven = F.adaptive_avg_pool2d(x[:, :, :5, :5], 3)  # 5 over 3: averaging matrices
        features = mt.concat([even.flatten(1), uneven.flatten(1)], axis=1)
        return self.head(features.masked_fill(features < -10.0, -10.0))


@pytest.mark.parametrize("level", ["fp32", "O1", "O2"])
def test_a_conv_step_uploads_in_its_first_iteration_only(cpu, level):
    mt.seed(0)
    model = _ConvNet()
    opt = mt.optimizer.Adam(learning_rate=1e-3, parameters=model.parameters())
    if level == "O2":
        model, opt = amp.decorate(models=model, optimizers=opt, level="O2")
    scaler = amp.GradScaler(enable=level != "fp32")
    rng = np.random.default_rng(0)
    heard = []
    for step in range(3):
        x = mt.to_tensor(rng.standard_normal((2, 2, 8, 8)).astype("float32"))
        y = mt.to_tensor(rng.integers(0, 3, 2))
        with (
            sync_debug_mode("warn" if step == 0 else "error"),
            warnings.catch_warnings(record=True) as caught,
        ):
            warnings.simplefilter("always")
            with amp.auto_cast(enable=level != "fp32", level=level if level != "fp32" else "O1"):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.clear_grad()
        heard.append([str(w.message) for w in caught if issubclass(w.category, SyncWarning)])
    first = " ".join(heard[0])
    for what in (
        "reflect pad",
        "circular padding's positions",
        "window counts",
        "averaging matrix",
        "masked_fill's value",
    ):
        assert what in first  # the first step declares each upload once
    assert heard[1:] == [[], []]


def test_adaptive_pooling_over_equal_windows_is_the_mean_and_its_gradient(cpu):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 6, 4)).astype("float32")
    g = rng.standard_normal((2, 3, 3, 2)).astype("float32")
    t = mt.to_tensor(x, stop_gradient=False)
    out = F.adaptive_avg_pool2d(t, [3, 2])
    out.backward(mt.to_tensor(g))
    want = x.astype(np.float64).reshape(2, 3, 3, 2, 2, 2).mean(axis=(3, 5))
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)
    spread = np.repeat(np.repeat(g.astype(np.float64) / 4, 2, axis=2), 2, axis=3)
    np.testing.assert_allclose(t.grad.numpy(), spread, rtol=1e-6)


@pytest.mark.gpu
def test_on_a_gpu_the_digits_cnn_o2_step_is_captured_and_replays_its_eager_losses(monkeypatch):
    """examples/digits_cnn.py's network (conv, batch norm, max and average pooling) trained at
    O2 through graphs.graphed: captured once, no eager fallback, the eager run's losses."""
    from pathlib import Path

    from minitorch_amp.device.cuda import graphs
    from minitorch_amp.device.cuda.graphed import GraphWarning

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "examples"))
    import digits_cnn

    def run(graph: bool):
        mt.seed(0)
        model = digits_cnn.DigitsCNN(8)
        opt = mt.optimizer.SGD(learning_rate=0.05, parameters=model.parameters())
        model, opt = amp.decorate(models=model, optimizers=opt, level="O2")
        scaler = amp.GradScaler()

        def step(x, y):
            with amp.auto_cast(level="O2"):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.clear_grad()
            return loss

        step = graphs.graphed(step) if graph else step
        rng = np.random.default_rng(3)
        losses = []
        for _ in range(6):
            x = mt.to_tensor(rng.standard_normal((16, 1, 8, 8)).astype("float32"))
            losses.append(step(x, mt.to_tensor(rng.integers(0, 10, 16))).item())
        return losses, step

    eager, _ = run(graph=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GraphWarning)  # an eager fallback warns: fail on it
        losses, graphed_step = run(graph=True)
    np.testing.assert_allclose(losses, eager, rtol=1e-3)
    captures, replays = graphed_step.cache_info()[:2]
    assert captures == 1 and replays == 4
