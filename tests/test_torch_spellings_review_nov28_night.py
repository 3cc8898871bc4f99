"""The review of the PyTorch and apex spellings (2026-11-28, night), one test per finding:
an overflow never grows a loss scale that sits below its floor (every implementation of the
update), float64 parameters step with a float64 learning rate, apex counts a fixed scale's
steps, and PyTorch spellings that failed without naming what to write.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import nn
from minitorch_amp.amp import apex as amp
from minitorch_amp.backend.scale_update import update_loss_scaling

# ---- an overflow never grows the scale ------------------------------------------------------
RULE = dict(incr_every_n_steps=2, decr_every_n_nan_or_inf=1, incr_ratio=2.0, decr_ratio=0.5,
            min_loss_scaling=1.0)  # fmt: skip


def _overflowing_step(scaler) -> None:
    p = mt.to_tensor(np.zeros(2, np.float32), stop_gradient=False)
    opt = mt.optimizer.SGD([p], lr=0.1)
    x = mt.to_tensor(np.array([np.inf, 1.0], np.float32))
    with np.errstate(invalid="ignore"):
        scaler.scale((p * x).sum()).backward()
    scaler.step(opt)
    scaler.update()


def test_an_overflow_holds_a_scale_set_below_the_floor():
    scaler = mt.amp.GradScaler("cpu", init_scale=0.25)  # legal; under the floor 1.0
    _overflowing_step(scaler)
    assert scaler.get_scale() == 0.25  # Paddle's max(0.25 * 0.5, 1) would give 1.0


def test_a_pytorch_checkpoint_below_the_floor_is_not_raised_by_an_overflow():
    scaler = mt.cuda.amp.GradScaler()
    scaler.load_state_dict({"scale": 0.0078125, "growth_factor": 2.0, "backoff_factor": 0.5,
                            "growth_interval": 2000, "_growth_tracker": 0})  # fmt: skip
    _overflowing_step(scaler)
    assert scaler.get_scale() == 0.0078125


def test_the_branch_free_twin_holds_a_scale_below_the_floor_and_still_backs_off_above():
    for start, want in ((0.25, 0.25), (1.5, 1.0), (8.0, 4.0)):
        # 0-d arrays: not the [1] host path, the xp.where form the CuPy fallback runs
        scale, counters = np.array(start, np.float32), [np.array(0, np.int32) for _ in "gba"]
        update_loss_scaling(np.array(True), scale, *counters, **RULE)
        assert float(scale) == want


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    import emulated_gpu

    return emulated_gpu.build("amp_emulator.cpp", tmp_path_factory.mktemp("emulator"))


def test_the_kernel_holds_a_scale_below_the_floor_as_its_twin_does(emulator, monkeypatch):
    import emulated_gpu
    from test_amp_kernel_emulator import on_device
    from test_amp_kernels import update_both

    launches = emulated_gpu.install(emulator, monkeypatch, "amp.cu", block=1)
    scale, *_, at_floor = update_both(on_device, [True, True], 0.25, RULE)  # same bits
    assert launches == [("update_loss_scaling", (1,))] * 2
    assert (scale[0], at_floor[0]) == (0.25, 2)  # held, and counted as stuck at the floor


# ---- float64 parameters: a float64 learning rate ---------------------------------------------
@pytest.mark.parametrize("size", [1, 1 << 17])  # the flat twin and the in-place path
def test_a_float64_parameter_steps_with_the_learning_rate_in_float64(size):
    p = mt.to_tensor(np.zeros(size), stop_gradient=False)
    opt = mt.optimizer.SGD(learning_rate=0.1, parameters=[p])
    (p * 10.0).sum().backward()
    opt.step()
    assert (p.numpy() == -1.0).all()  # float32(0.1) * 10 is -1.0000000149011612


def test_float64_momentum_and_adamw_match_float64_maths():
    q = mt.to_tensor(np.array([1.0]), stop_gradient=False)
    m = mt.optimizer.Momentum(learning_rate=0.1, momentum=0.9, parameters=[q])
    (q * 10.0).sum().backward()
    m.step()
    assert q.numpy()[0] == 0.0
    w = mt.to_tensor(np.array([1.0]), stop_gradient=False)
    a = mt.optimizer.AdamW(learning_rate=0.1, parameters=[w], weight_decay=0.01)
    (w * 10.0).sum().backward()
    a.step()
    assert w.numpy()[0] == (1.0 - 0.1 * 0.01) - 0.1 * 10.0 / (10.0 + 1e-8)


# ---- apex: a fixed loss_scale counts unskipped -----------------------------------------------
@pytest.fixture
def _apex_state():
    amp._amp_state.reset()
    yield
    amp._amp_state.reset()


def _apex_run(steps: int, loss_scale):
    model = nn.Linear(4, 2)
    opt = mt.optimizer.SGD(model.parameters(), lr=0.01)
    model, opt = amp.initialize(model, opt, opt_level="O1", loss_scale=loss_scale)
    for _ in range(steps):
        loss = model(mt.ones([3, 4])).astype("float32").mean()
        with amp.scale_loss(loss, opt) as scaled:
            scaled.backward()
        opt.step()
        opt.clear_grad()


def test_a_fixed_apex_scale_counts_every_step_as_unskipped(_apex_state):
    _apex_run(3, 64.0)
    assert amp.state_dict() == {"loss_scaler0": {"loss_scale": 64.0, "unskipped": 3}}


def test_an_apex_checkpoint_of_a_long_fixed_scale_run_loads_and_a_dynamic_one_is_checked(
    _apex_state,
):
    _apex_run(0, 64.0)
    amp.load_state_dict({"loss_scaler0": {"loss_scale": 64.0, "unskipped": 5000}})
    assert amp.state_dict() == {"loss_scaler0": {"loss_scale": 64.0, "unskipped": 5000}}
    _apex_run(0, "dynamic")  # 5000 clean steps cannot be pending under a window of 2000
    with pytest.raises(ValueError, match=r"\[0, 2000\)"):
        amp.load_state_dict({"loss_scaler0": {"loss_scale": 64.0, "unskipped": 5000}})


# ---- PyTorch spellings that now name what to write -------------------------------------------
def test_zero_fills_in_place_and_is_a_write_a_saved_graph_sees():
    p = mt.ones([2]).requires_grad_()
    a = mt.ones([2])
    y = (p * a).sum()  # saves a for p's gradient
    assert a.zero_() is a and a.numpy().tolist() == [0.0, 0.0]
    with pytest.raises(RuntimeError):
        y.backward()  # a changed after it was saved
    (p * 2.0).sum().backward()
    p.grad.zero_()  # PyTorch's and Paddle's spelling
    assert p.grad.numpy().tolist() == [0.0, 0.0]


def test_pytorchs_transpose_and_sum_forms_name_paddles():
    x = mt.ones([2, 3, 4])
    with pytest.raises(TypeError, match=r"x\.transpose\(\[1, 0, 2\]\)"):
        x.transpose(0, 1)
    with pytest.raises(TypeError, match="full permutation"):
        x.transpose(1)
    assert x.transpose([1, 0, 2]).shape == [3, 2, 4] and x.T.shape == [4, 3, 2]
    with pytest.raises(TypeError, match="dim= is axis="):
        x.sum(dim=0)
    assert x.sum(axis=0).shape == [3, 4]


def test_missing_pytorch_names_say_what_to_use():
    cases = [
        (lambda: mt.ones([2]).bfloat16(), "astype('bfloat16')"),
        (lambda: nn.Linear(2, 2).requires_grad_(False), "stop_gradient = True"),
        (lambda: mt.set_autocast_enabled(False), "auto_cast(enable=False)"),
        (lambda: mt.optimizer.lr_scheduler, "mt.optimizer.lr"),
        (lambda: mt.amp.custom_fwd, "auto_cast(enable=False)"),
    ]
    for lookup, hint in cases:
        with pytest.raises(AttributeError) as info:
            lookup()
        assert hint in str(info.value)


def test_scaler_update_with_a_scale_and_step_with_a_closure_change_nothing():
    scaler = mt.amp.GradScaler("cpu", init_scale=8.0)
    p = mt.to_tensor(np.ones(2, np.float32), stop_gradient=False)
    opt = mt.optimizer.SGD([p], lr=0.1)
    scaler.scale(p.sum()).backward()
    with pytest.raises(TypeError, match="no closure"):
        scaler.step(opt, lambda: None)
    assert p.numpy().tolist() == [1.0, 1.0]
    scaler.step(opt)  # not marked stepped by the refused call
    with pytest.raises(TypeError, match=r"set_init_loss_scaling"):
        scaler.update(2.0)
    assert scaler.get_scale() == 8.0
    scaler.update()


SCALER_SETTINGS = {  # id: (the call, the name its message must start with)
    "growth_interval=": (lambda: mt.amp.GradScaler(growth_interval=2.0), "growth_interval"),
    "init_scale-positional": (lambda: mt.amp.GradScaler("cuda", 0.0), "init_scale"),
    "backoff_factor=": (lambda: mt.amp.GradScaler(backoff_factor=1.5), "backoff_factor"),
    "incr_every_n_steps=": (lambda: mt.amp.GradScaler(incr_every_n_steps=0), "incr_every_n_steps"),
    "set_growth_factor": (lambda: mt.amp.GradScaler().set_growth_factor(1.0), "growth_factor"),
    "set_growth_interval": (lambda: mt.amp.GradScaler().set_growth_interval(0), "growth_interval"),
}


@pytest.mark.parametrize("case", SCALER_SETTINGS)
def test_a_bad_scaler_setting_is_refused_under_the_name_it_was_given(case):
    make, named = SCALER_SETTINGS[case]
    with pytest.raises(ValueError, match=f"^{named} must be"):
        make()


def test_train_false_says_eval_and_leaves_the_mode():
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    with pytest.raises(TypeError, match=r"model\.eval\(\)"):
        model.train(False)
    assert all(layer.training for layer in model.sublayers(include_self=True))


def test_zero_in_a_recorded_graph_sends_no_gradient_back_and_refuses_a_leaf():
    a = mt.to_tensor([1.0, 2.0], stop_gradient=False)
    y = a * 2
    y.zero_()  # Paddle's inplace fill_, recorded: the zeros depend on nothing
    (y * 3).sum().backward()
    assert a.grad.numpy().tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="leaf tensor that needs a gradient"):
        a.zero_()
    with mt.no_grad():
        a.zero_()
    assert a.numpy().tolist() == [0.0, 0.0]
