"""GradScaler checkpoints: Paddle's keys and PyTorch's, both loaded, every value checked.

``amp.GradScaler`` (Paddle's) saves Paddle's eight keys; ``cuda.amp.GradScaler`` (PyTorch's
spelling) saves PyTorch's five (``scale``, ``growth_factor``, ``backoff_factor``,
``growth_interval``, ``_growth_tracker``), plus the Paddle settings PyTorch lacks where they
differ from PyTorch's fixed behaviour. Either scaler loads either form. Every loaded value
meets the constructor's rules (no ``"1024"``, no ``True`` for a number), and a refused dict
changes nothing.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import amp
from minitorch_amp.nn.parameter import Parameter

PADDLE_KEYS = [
    "scale", "incr_ratio", "decr_ratio", "incr_every_n_steps",
    "decr_every_n_nan_or_inf", "incr_count", "decr_count", "use_dynamic_loss_scaling",
]  # fmt: skip
TORCH_KEYS = ["scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"]


def trained(scaler, grads=((1.0,), (1.0,))):
    """``scaler`` after one unscale and update per gradient in ``grads`` (inf: an overflow)."""
    p = Parameter(np.zeros(1, "float32"))
    opt = mt.optimizer.SGD(learning_rate=0.0, parameters=[p])
    for grad in grads:
        p.grad = np.array(grad, "float32")
        scaler.unscale_(opt)
        scaler.update()
    return scaler


def settings(scaler) -> dict:
    """Everything a load may change, read through the public getters."""
    return {
        "scale": scaler.get_loss_scaling(),
        "init": scaler.get_init_loss_scaling(),
        "incr_ratio": scaler.get_incr_ratio(),
        "decr_ratio": scaler.get_decr_ratio(),
        "incr_every_n_steps": scaler.get_incr_every_n_steps(),
        "decr_every_n_nan_or_inf": scaler.get_decr_every_n_nan_or_inf(),
        "dynamic": scaler.is_use_dynamic_loss_scaling(),
        "counters": scaler._counters.tolist(),
    }


def paddle_dict() -> dict:
    return trained(
        amp.GradScaler(init_loss_scaling=64.0, incr_every_n_steps=5, decr_every_n_nan_or_inf=3)
    ).state_dict()


def torch_dict() -> dict:
    return {
        "scale": 32.0,
        "growth_factor": 3.0,
        "backoff_factor": 0.25,
        "growth_interval": 7,
        "_growth_tracker": 4,
    }


# ---- every loaded value meets the constructor's rules ---------------------------------------
BAD_SCALES = ["1024", True, np.True_, None, [1024.0], np.array(["1024"]), np.array([True])]


@pytest.mark.parametrize("value", BAD_SCALES, ids=repr)
@pytest.mark.parametrize("form", [paddle_dict, torch_dict])
def test_a_scale_that_is_not_a_number_is_refused_as_the_constructor_refuses_it(form, value):
    with pytest.raises((ValueError, TypeError)):
        amp.GradScaler(init_loss_scaling=value)
    scaler = trained(amp.GradScaler(init_loss_scaling=8.0))
    before = settings(scaler)
    with pytest.raises(ValueError, match=r"'scale'.*Nothing was loaded"):
        scaler.load_state_dict({**form(), "scale": value})
    assert settings(scaler) == before


BAD_FIELDS = [
    ("incr_ratio", True), ("incr_ratio", "2.0"), ("decr_ratio", np.array(0.5)),
    ("incr_every_n_steps", True), ("incr_every_n_steps", 5.0), ("incr_every_n_steps", "5"),
    ("decr_every_n_nan_or_inf", np.True_), ("incr_count", True), ("incr_count", 1.0),
    ("decr_count", "0"), ("use_dynamic_loss_scaling", 1), ("use_dynamic_loss_scaling", "True"),
    ("growth_factor", True), ("growth_factor", "2"), ("backoff_factor", False),
    ("growth_interval", 7.0), ("growth_interval", True), ("_growth_tracker", True),
    ("_growth_tracker", 2.0), ("_growth_tracker", -1), ("_growth_tracker", 7),
]  # fmt: skip


@pytest.mark.parametrize(("key", "value"), BAD_FIELDS, ids=repr)
def test_every_field_is_checked_and_a_bad_one_loads_nothing(key, value):
    form = torch_dict() if key in TORCH_KEYS else paddle_dict()
    scaler = trained(amp.GradScaler(init_loss_scaling=8.0))
    before = settings(scaler)
    with pytest.raises(ValueError, match=rf"'{key}'.*Nothing was loaded"):
        scaler.load_state_dict({**form, key: value})  # the scale, which comes first, is fine
    assert settings(scaler) == before


def test_numpy_numbers_and_a_one_element_scale_array_or_tensor_load():
    scaler = amp.GradScaler()
    values = {**torch_dict(), "scale": mt.to_tensor([16.0]), "_growth_tracker": np.int64(2)}
    scaler.load_state_dict({**values, "growth_factor": np.float32(4.0)})
    assert settings(scaler)["scale"] == 16.0 and scaler.get_growth_factor() == 4.0
    assert scaler.state_dict()["incr_count"] == 2
    scaler.load_state_dict({**torch_dict(), "scale": np.array(1024, "int64")})
    assert scaler.get_loss_scaling() == 1024.0


# ---- PyTorch's form -------------------------------------------------------------------------
def test_paddles_scaler_loads_a_pytorch_state_dict():
    scaler = amp.GradScaler(decr_every_n_nan_or_inf=4, use_dynamic_loss_scaling=False)
    scaler.load_state_dict(torch_dict())
    assert settings(scaler) == {
        "scale": 32.0,
        "init": 32.0,
        "incr_ratio": 3.0,
        "decr_ratio": 0.25,
        "incr_every_n_steps": 7,
        "decr_every_n_nan_or_inf": 1,  # PyTorch backs off on every overflow
        "dynamic": True,  # and its scale is always dynamic
        "counters": [4, 0, 0],
    }
    assert list(scaler.state_dict()) == PADDLE_KEYS


def test_the_pytorch_spelled_scaler_saves_pytorchs_keys():
    scaler = trained(mt.cuda.amp.GradScaler(init_scale=16.0, growth_factor=3.0, growth_interval=5))
    state = scaler.state_dict()
    assert state == {
        "scale": 16.0,
        "growth_factor": 3.0,
        "backoff_factor": 0.5,
        "growth_interval": 5,
        "_growth_tracker": 2,
    }
    assert type(state["scale"]) is float and type(state["_growth_tracker"]) is int
    assert isinstance(scaler, amp.GradScaler)
    assert list(amp.GradScaler().state_dict()) == PADDLE_KEYS  # Paddle's scaler: unchanged
    assert mt.cuda.amp.GradScaler(enabled=False).state_dict() == {}


def test_either_scaler_loads_either_form_and_round_trips_both_ways():
    paddle_scaler = trained(
        amp.GradScaler(init_loss_scaling=64.0, incr_every_n_steps=5), [(1.0,), (np.inf,), (1.0,)]
    )
    paddle_scaler.set_init_loss_scaling(32.0)  # a load sets it to the scale (as Paddle)
    torch_scaler = mt.cuda.amp.GradScaler()
    torch_scaler.load_state_dict(paddle_scaler.state_dict())
    assert settings(torch_scaler) == settings(paddle_scaler)
    back = amp.GradScaler()
    back.load_state_dict(torch_scaler.state_dict())
    assert settings(back) == settings(paddle_scaler)
    again = mt.cuda.amp.GradScaler()
    again.load_state_dict(back.state_dict())
    assert again.state_dict() == torch_scaler.state_dict()


def test_paddle_settings_pytorch_lacks_travel_beside_its_keys_only_when_they_differ():
    scaler = trained(
        mt.cuda.amp.GradScaler(decr_every_n_nan_or_inf=3, use_dynamic_loss_scaling=False),
        [(np.inf,)],
    )
    state = scaler.state_dict()
    assert list(state) == [
        *TORCH_KEYS, "decr_every_n_nan_or_inf", "decr_count", "use_dynamic_loss_scaling"
    ]  # fmt: skip
    fresh = mt.cuda.amp.GradScaler()
    fresh.load_state_dict(state)
    assert settings(fresh) == settings(scaler)


def test_a_dict_that_mixes_the_two_forms_or_lacks_keys_is_refused():
    scaler = trained(amp.GradScaler(init_loss_scaling=8.0))
    before = settings(scaler)
    bad_dicts = [
        {**torch_dict(), "incr_ratio": 2.0},
        {k: v for k, v in torch_dict().items() if k != "_growth_tracker"},
        {**paddle_dict(), "growth_factor": 2.0},
    ]
    for bad in bad_dicts:
        with pytest.raises(ValueError, match=r"PyTorch's.*Nothing was loaded"):
            scaler.load_state_dict(bad)
        assert settings(scaler) == before


# ---- against PyTorch itself -----------------------------------------------------------------
def torch_scaler_after_steps(torch):
    """A real ``torch.amp.GradScaler`` on the CPU after three clean steps and one overflow."""
    scaler = torch.amp.GradScaler(
        "cpu", init_scale=64.0, growth_factor=4.0, backoff_factor=0.25, growth_interval=5
    )
    w = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([w], lr=0.0)
    for grad in (1.0, float("inf"), 1.0, 1.0):
        scaler.scale(w.sum()).backward()
        w.grad.fill_(grad)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
    return scaler


def test_a_real_pytorch_state_dict_loads_and_ours_loads_into_pytorch():
    torch = pytest.importorskip("torch")
    theirs = torch_scaler_after_steps(torch)
    state = theirs.state_dict()
    assert list(state) == TORCH_KEYS and state["_growth_tracker"] == 2  # a real, used one
    ours = mt.cuda.amp.GradScaler()
    ours.load_state_dict(state)
    assert ours.state_dict() == state
    paddle_scaler = amp.GradScaler()
    paddle_scaler.load_state_dict(state)
    assert paddle_scaler.get_loss_scaling() == 16.0 and settings(paddle_scaler)["counters"][0] == 2

    fresh = torch.amp.GradScaler("cpu")
    fresh.load_state_dict(ours.state_dict())
    assert fresh.state_dict() == state
