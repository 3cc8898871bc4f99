"""The sync debug mode, and the property it proves: after its first iteration, an AMP training
step neither reads the device on the host nor uploads host data.

The NumPy backend declares the same host reads and uploads a GPU would make, at the same
places, so these tests prove on the CPU what holds on the GPU (where CuPy's own detector is
also on in "error" mode; tests/test_graphs_gpu.py runs the same steps there).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from training_steps import MODES, OPTIMIZERS, make_step

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.backend import sync
from minitorch_amp.device import (
    SyncError,
    SyncWarning,
    get_sync_debug_mode,
    set_sync_debug_mode,
    sync_debug_mode,
)
from minitorch_amp.nn import functional as F


@pytest.fixture(autouse=True)
def _default_mode():
    yield
    set_sync_debug_mode("default")


# ---- the switch --------------------------------------------------------------------------------
@pytest.mark.parametrize(("given", "code"), [("default", 0), ("warn", 1), ("error", 2), (2, 2)])
def test_set_and_get_use_pytorchs_names_and_numbers(given, code):
    set_sync_debug_mode(given)
    assert get_sync_debug_mode() == code


@pytest.mark.parametrize("bad", ["errors", 3, True, None, -1])
def test_an_unknown_mode_is_refused_and_the_mode_is_kept(bad):
    set_sync_debug_mode("warn")
    with pytest.raises(ValueError, match="'default', 'warn' or 'error'"):
        set_sync_debug_mode(bad)
    assert get_sync_debug_mode() == 1


def test_the_context_manager_restores_the_previous_mode_even_after_an_error():
    set_sync_debug_mode("warn")
    with pytest.raises(SyncError), sync_debug_mode("error"):
        mt.to_tensor([1.0]).numpy()
    assert get_sync_debug_mode() == 1


# ---- what is reported -------------------------------------------------------------------------
READS = {
    "Tensor.item()": lambda t: t.item(),
    "Tensor.numpy()": lambda t: t.numpy(),
    "Tensor.tolist()": lambda t: t.tolist(),
    "float(Tensor)": float,
    "int(Tensor)": int,
    "bool(Tensor)": bool,
    "Tensor used as an index": lambda t: [0, 1, 2][t.astype("int64")],
    "repr(Tensor)": repr,
    "np.asarray(Tensor)": np.asarray,
    "an axis given as a Tensor": lambda t: mt.ones([2, 2]).sum(axis=t.astype("int64")),
}


@pytest.mark.parametrize("what", sorted(READS))
def test_every_host_read_of_a_tensor_raises_in_error_mode_naming_itself_and_the_caller(what):
    t = mt.to_tensor([1.0])
    with sync_debug_mode("error"), pytest.raises(SyncError) as info:
        READS[what](t)
    message = str(info.value)
    assert message.startswith(what) and "test_sync_debug.py" in message
    READS[what](t)  # the default mode lets it through


def test_warn_mode_warns_at_the_users_line_and_goes_on():
    t = mt.to_tensor([2.0])
    with sync_debug_mode("warn"), pytest.warns(SyncWarning, match=r"Tensor\.item\(\)") as rec:
        assert t.item() == 2.0
    assert rec[0].filename == __file__


@pytest.mark.parametrize(
    "read",
    [
        lambda scaler: scaler.get_loss_scaling(),
        lambda scaler: scaler.state_dict(),
    ],
    ids=["get_loss_scaling", "state_dict"],
)
def test_the_scaler_reads_the_device_only_when_asked_and_says_so(read):
    scaler = amp.GradScaler()
    with sync_debug_mode("error"), pytest.raises(SyncError, match="GradScaler"):
        read(scaler)


def test_synchronize_is_a_synchronisation():
    with sync_debug_mode("error"), pytest.raises(SyncError, match=r"device\.synchronize"):
        mt.device.synchronize()


@pytest.mark.parametrize(
    "op",
    [
        lambda x: F.cross_entropy(x, [0, 1]),
        lambda x: F.mse_loss(x[:, 0], [0.0, 1.0]),
        lambda x: mt.where([[True, False]] * 2, x, x),
    ],
    ids=["cross_entropy", "mse_loss", "where"],
)
def test_host_data_uploaded_inside_an_op_is_reported(op):
    x = mt.ones([2, 2])
    with sync_debug_mode("error"), pytest.raises(SyncError, match="uploads host data"):
        op(x)
    op(x)


def test_indexing_with_a_boolean_mask_reads_its_size():
    x = mt.ones([3])
    with sync_debug_mode("error"), pytest.raises(SyncError, match="boolean mask"):
        x[x > 0]


def test_a_deferred_check_reports_at_the_next_host_read():
    flag = np.zeros(1, bool)
    seen = []
    sync._deferred[("test", 0)] = (flag, lambda value: seen.append(bool(value[0])))
    mt.to_tensor([1.0]).numpy()
    assert seen == [False] and ("test", 0) not in sync._deferred


# ---- the property: training steps after the first one ----------------------------------------
def run(step, steps: int, rng, overflow_at=()):
    with np.errstate(all="ignore"):  # the injected inf overflows on purpose
        for i in range(steps):
            step.feed(rng, overflow=i in overflow_at)
            step()
            step.next_lr()


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@pytest.mark.parametrize("mode", MODES)
def test_after_the_first_step_a_training_step_never_synchronises(mode, optimizer):
    """Forward, scaled backward, unscale, global-norm clip, fused update with skipping, the
    dynamic scale update and an lr scheduler: under "error" mode, nothing raises."""
    step = make_step(mode, optimizer)
    rng = np.random.default_rng(0)
    run(step, 1, rng)  # the first step creates state (masters, moments, tables)
    lr_before = step.opt.get_lr()
    with sync_debug_mode("error"):
        run(step, 2, rng)
    params = [p.numpy().copy() for p in step.model.parameters()]  # (read in default mode)
    with sync_debug_mode("error"):
        run(step, 1, rng, overflow_at=(0,))
    for before, p in zip(params, step.model.parameters()):  # the overflow was skipped
        np.testing.assert_array_equal(p.numpy(), before)
    with sync_debug_mode("error"):
        run(step, 3, rng)
    assert step.opt.get_lr() < lr_before  # the scheduler advanced
    assert [p.numpy().tolist() for p in step.model.parameters()] != [x.tolist() for x in params]
    # clean steps 1-3: grow to 2**11; the inf: back to 2**10; clean steps 5-7: 2**11 again
    assert step.scaler.get_loss_scaling() == 2.0**11


def test_the_mode_catches_a_step_that_reads_the_loss():
    step = make_step("O2", "Adam")
    rng = np.random.default_rng(0)
    run(step, 1, rng)
    with sync_debug_mode("error"), pytest.raises(SyncError, match=r"Tensor\.item"):
        step.feed(rng)
        step().item()


def test_an_optimizer_with_its_own_maths_skips_without_reading_found_inf():
    """No kernel runs MySGD's maths, so its twin commits the step with where(found_inf) on a
    device; nothing in the step reads the flag (on the CPU it is free to read, and read)."""

    class MySGD(mt.optimizer.SGD):
        def _update(self, p, g, state, lr, hyper):  # own maths: no optim.cu kernel
            p -= 2 * lr * g

    assert MySGD._kernel_kind() is None
    model = nn.Linear(4, 2)
    before = [p.numpy().copy() for p in model.parameters()]
    opt = MySGD(0.1, parameters=model.parameters())
    scaler = amp.GradScaler()
    scaler.scale(model(mt.ones([3, 4])).mean()).backward()
    with sync_debug_mode("error"):
        scaler.step(opt)
        scaler.update()
    grads = [p.grad.numpy() for p in model.parameters()]
    for p, b, g in zip(model.parameters(), before, grads):
        np.testing.assert_array_equal(p.numpy(), b - np.float32(2 * 0.1) * g)


def test_a_verbose_scaler_reads_the_device_and_is_caught():
    model = nn.Linear(4, 2)
    opt = mt.optimizer.SGD(0.1, parameters=model.parameters())
    scaler = amp.GradScaler(verbose=True)
    scaler.scale(model(mt.ones([3, 4])).mean()).backward()
    scaler.step(opt)
    with sync_debug_mode("error"), pytest.raises(SyncError, match="verbose"):
        scaler.update()


def test_out_of_range_labels_still_raise_on_the_cpu_naming_the_value():
    with pytest.raises(ValueError, match="label value 7 is out of range"):
        F.cross_entropy(mt.ones([2, 3]), mt.to_tensor([0, 7]))
    with pytest.raises(ValueError, match="id 9 of ids"):
        F.embedding(mt.to_tensor([1, 9]), mt.ones([4, 2]))


def test_the_floor_warning_needs_no_read_of_its_own(monkeypatch):
    """The scale stuck at its floor is checked as a deferred check: on the CPU at once."""
    monkeypatch.setattr("minitorch_amp.amp.grad_scaler._FLOOR_CHECK_EVERY", 2)
    monkeypatch.setattr("minitorch_amp.amp.grad_scaler._FLOOR_WARN_AFTER", 2)
    p = nn.Linear(1, 1)
    opt = mt.optimizer.SGD(0.1, parameters=p.parameters())
    scaler = amp.GradScaler(init_loss_scaling=1.0, min_loss_scaling=1.0)
    with warnings.catch_warnings(record=True) as seen, sync_debug_mode("error"):
        warnings.simplefilter("always")
        for _ in range(2):
            loss = p(mt.to_tensor([[np.inf]]))
            scaler.scale(loss.sum()).backward()
            scaler.step(opt)
            scaler.update()
            opt.clear_grad()
    assert any("floor" in str(w.message) for w in seen)


def test_ops_that_take_host_data_still_take_a_python_list():
    # a list where an op's data goes is a TypeError only where the op could not use it
    x = mt.ones([2, 2])
    assert F.cross_entropy(x, [0, 1]).shape == []
    assert mt.where([[True, False]] * 2, x, x * 2).numpy().tolist() == [[1, 2], [1, 2]]
