"""Who skips a step on inf/NaN, each path on its own (issue 18's surviving mutants).

* GradScaler.update() ORs found_inf over every optimizer unscaled since the last update:
  an inf in the *first* of two optimizers must shrink the scale too.
* An optimizer that takes neither found_inf nor Paddle's ``_set_auxiliary_var`` is skipped by
  GradScaler itself, after one host read (Paddle's fallback).
* Optimizer.step() skips by itself, on a host flag before anything is prepared, and on a
  device flag without reading it (an optimizer without a kernel: the twin's where-commit).
* unscale_ divides by exactly the scale: ``float32(g / S)`` element for element.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp.amp.grad_scaler import GradScaler
from minitorch_amp.backend import device as _device
from minitorch_amp.backend import sync as _sync
from minitorch_amp.nn.parameter import Parameter
from minitorch_amp.optimizer import SGD, Adam
from minitorch_amp.optimizer.state import OptimizerState

W0 = np.array([0.5, -1.25, 2.0, 0.75], dtype="float32")


def param(values=W0, dtype="float32") -> Parameter:
    return Parameter(np.array(values, dtype=dtype))


def give_grad(p: Parameter, values) -> None:
    p.grad = np.array(values, dtype=p.dtype)


# ---- update() ORs found_inf over every optimizer ---------------------------------------------
@pytest.mark.parametrize("inf_in", [0, 1])
def test_an_inf_in_any_one_of_two_optimizers_shrinks_the_scale(inf_in):
    scaler = GradScaler(init_loss_scaling=1024.0, decr_every_n_nan_or_inf=1)
    params = [param(), param()]
    opts = [SGD(0.1, parameters=[p]) for p in params]
    grads = np.array([8.0, 16.0, 32.0, 64.0], "float32")
    for i, p in enumerate(params):
        give_grad(p, [np.inf if i == inf_in else 8.0, 16.0, 32.0, 64.0])
    for opt in opts:
        scaler.step(opt)
    scaler.update()
    assert scaler.get_loss_scaling() == 512.0  # Paddle's decr_ratio 0.5, after one bad step
    for i, p in enumerate(params):  # each optimizer decided on its own gradients
        if i == inf_in:
            np.testing.assert_array_equal(p.numpy(), W0)
        else:
            np.testing.assert_array_equal(p.numpy(), W0 - np.float32(0.1) * (grads / 1024))


def test_two_clean_optimizers_count_as_one_good_step():
    scaler = GradScaler(init_loss_scaling=1024.0, incr_every_n_steps=1)
    opts = [SGD(0.1, parameters=[param()]) for _ in range(2)]
    for opt in opts:
        give_grad(opt._parameter_list[0], [1.0, 2.0, 3.0, 4.0])
        scaler.step(opt)
    scaler.update()
    assert scaler.get_loss_scaling() == 2048.0


# ---- the fallback: an optimizer GradScaler cannot hand the flag to ---------------------------
class PlainOptimizer:
    """Only what GradScaler needs: ``_parameter_list``, ``step`` and ``minimize``; neither
    ``_step(found_inf)`` nor ``_set_auxiliary_var``."""

    def __init__(self, params):
        self._parameter_list = params
        self.calls = []

    def step(self):
        self.calls.append("step")
        for p in self._parameter_list:
            p._data -= p.grad.numpy()

    def minimize(self, loss):
        self.step()
        self.calls[-1] = "minimize"
        return "minimized", loss


@pytest.mark.parametrize("api", ["step", "minimize"])
def test_an_optimizer_without_set_auxiliary_var_is_not_called_on_inf(api, monkeypatch):
    reads = []
    monkeypatch.setattr(_sync, "host_read", lambda what: reads.append(what))
    p = param()
    opt = PlainOptimizer([p])
    assert not hasattr(opt, "_set_auxiliary_var")
    scaler = GradScaler(init_loss_scaling=4.0)
    give_grad(p, [4.0, np.nan, 4.0, 4.0])
    result = scaler.step(opt) if api == "step" else scaler.minimize(opt, "loss")
    assert opt.calls == []  # skipped by the scaler: the optimizer never saw the step
    assert result == (None if api == "step" else (None, None))
    np.testing.assert_array_equal(p.numpy(), W0)
    assert any("cannot skip on the device" in what for what in reads)  # the declared read


@pytest.mark.parametrize("api", ["step", "minimize"])
def test_an_optimizer_without_set_auxiliary_var_steps_on_finite_grads(api):
    p = param()
    opt = PlainOptimizer([p])
    scaler = GradScaler(init_loss_scaling=4.0)
    give_grad(p, [4.0, 8.0, 12.0, 16.0])
    result = scaler.step(opt) if api == "step" else scaler.minimize(opt, "loss")
    assert opt.calls == [api]
    assert result == (None if api == "step" else ("minimized", "loss"))
    np.testing.assert_array_equal(p.numpy(), W0 - np.array([1, 2, 3, 4], "float32"))


# ---- Optimizer.step() skips on its own --------------------------------------------------------
def test_a_host_flag_stops_step_before_anything_is_prepared(monkeypatch):
    """Not even clipping or creating moments: the step returns at once (PyTorch does not call
    a skipped optimizer at all). The per-group check further down must not be needed."""
    p = param(dtype="float16")
    opt = Adam(0.1, parameters=[p], multi_precision=True)
    give_grad(p, [1.0, 2.0, 3.0, 4.0])

    def must_not_run(*args, **kwargs):
        raise AssertionError("a skipped step went on to update the groups")

    monkeypatch.setattr(OptimizerState, "plan_for", must_not_run)
    opt._set_auxiliary_var("found_inf", np.array([True]))
    opt.step()
    assert opt.state_dict() == {} and opt._master_weights == {} and opt._accumulators == {}
    assert opt._get_auxiliary_var("found_inf") is None


class LoopSGD(SGD):
    """An SGD whose ``_update`` is its own, so optim.cu cannot run it: the twin does."""

    def _update(self, p, g, state, lr, hyper) -> None:
        p -= lr * g


class DeviceFlag(np.ndarray):
    """A NumPy array posing as a CuPy one, so found_inf counts as a device flag."""

    @property
    def device(self):
        return SimpleNamespace(id=0)


@pytest.mark.parametrize("flag", [True, False])
def test_a_device_flag_skips_an_optimizer_without_a_kernel_without_reading_it(flag, monkeypatch):
    """The twin computes the step into copies and commits them with where(found_inf): the
    flag is never read on the host, set or not."""
    fake_cupy = SimpleNamespace(ndarray=DeviceFlag, asnumpy=lambda a: np.array(a).view(np.ndarray))
    monkeypatch.setattr(_device, "cupy", fake_cupy)
    reads = []
    monkeypatch.setattr(_sync, "host_read", lambda what: reads.append(what))
    assert LoopSGD._kernel_kind() is None and SGD._kernel_kind() == "sgd"
    p = param()
    opt = LoopSGD(0.5, parameters=[p])
    give_grad(p, [1.0, 2.0, 3.0, 4.0])
    opt._set_auxiliary_var("found_inf", np.array([flag]).view(DeviceFlag))
    opt.step()
    assert reads == []
    expected = W0 - 0.5 * np.array([1, 2, 3, 4], "float32") if not flag else W0
    np.testing.assert_array_equal(p._data, expected)


# ---- unscale_ divides by the scale, exactly --------------------------------------------------
@pytest.mark.parametrize("scale", [1024.0, 1000.0, 3.0])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_unscale_divides_by_the_scale_and_rounds_once(scale, dtype):
    """``g * float32(1 / S)`` in float32, rounded once to the grad's dtype (PyTorch computes
    the inverse in float64 and rounds it to float32 the same way)."""
    rng = np.random.default_rng(0)
    scaled = (rng.standard_normal(64) * scale).astype(dtype)
    p = param(np.zeros(64), dtype)
    p.grad = scaled.copy()
    scaler = GradScaler(init_loss_scaling=scale)
    scaler.unscale_(SGD(0.1, parameters=[p]))
    inv = np.float32(1.0 / np.float64(np.float32(scale)))
    expected = (scaled.astype(np.float32) * inv).astype(dtype)
    np.testing.assert_array_equal(p.grad.numpy(), expected)


def test_a_scaled_backward_then_unscale_gives_the_fp32_gradient_exactly():
    x = mt.to_tensor([[0.3, -1.7, 2.5, 0.125]])
    loss_of = lambda w: (mt.matmul(x, w) ** 2).sum()  # noqa: E731
    plain, scaled = param(W0.reshape(4, 1)), param(W0.reshape(4, 1))
    loss_of(plain).backward()
    scaler = GradScaler(init_loss_scaling=2.0**14)
    scaler.scale(loss_of(scaled)).backward()
    scaler.unscale_(SGD(0.1, parameters=[scaled]))
    np.testing.assert_array_equal(scaled.grad.numpy(), plain.grad.numpy())  # S a power of 2
