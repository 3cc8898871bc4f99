"""``GradScaler`` in Paddle's form and PyTorch's, ``AmpScaler``, and ``scale`` of lists.

The expectations are those of Paddle's test/amp/test_grad_scaler_out.py (its PyTorch
aliases, positional forms and conflicts) and PyTorch's ``torch.amp.GradScaler``
signature, plus the rule that no argument is ever taken in the wrong slot.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import amp
from minitorch_amp.amp import AmpScaler, GradScaler

FIELDS = (
    "_enable",
    "_init_loss_scaling",
    "_incr_ratio",
    "_decr_ratio",
    "_incr_every_n_steps",
    "_decr_every_n_nan_or_inf",
    "_use_dynamic_loss_scaling",
)


def settings(scaler):
    return tuple(getattr(scaler, f) for f in FIELDS)


DEFAULT = (True, 2.0**16, 2.0, 0.5, 2000, 1, True)


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        ((), {}, DEFAULT),
        ((True, 1024.0, 3.0, 0.25, 500, 2, True), {}, (True, 1024.0, 3.0, 0.25, 500, 2, True)),
        ((1024.0, 3.0, 0.25, 500, True), {}, (True, 1024.0, 3.0, 0.25, 500, 1, True)),
        (("cuda", 1024.0, 3.0, 0.25, 500, True), {}, (True, 1024.0, 3.0, 0.25, 500, 1, True)),
        (("cuda",), {}, DEFAULT),  # the device, never enable="cuda"
        (("cuda", 1024.0), {}, (True, 1024.0, 2.0, 0.5, 2000, 1, True)),
        ((4096.0,), {}, (True, 4096.0, 2.0, 0.5, 2000, 1, True)),
        ((True, 1024.0), {"growth_factor": 5.0}, (True, 1024.0, 5.0, 0.5, 2000, 1, True)),
        ((), {"device": "cuda", "init_scale": 2048.0, "growth_factor": 3.0}, None),
        (
            (),
            {"enabled": True, "init_scale": 1024.0, "growth_factor": 3.0,
             "backoff_factor": 0.25, "growth_interval": 500},
            (True, 1024.0, 3.0, 0.25, 500, 1, True),
        ),
        (
            (),
            {"enable": True, "init_loss_scaling": 1024.0, "growth_factor": 3.0,
             "decr_ratio": 0.25, "growth_interval": 500},
            (True, 1024.0, 3.0, 0.25, 500, 1, True),
        ),
        (
            (),
            {"enabled": True, "init_scale": 2048.0, "decr_every_n_nan_or_inf": 3,
             "use_dynamic_loss_scaling": False},
            (True, 2048.0, 2.0, 0.5, 2000, 3, False),
        ),
    ],
)  # fmt: skip
def test_paddle_and_pytorch_forms(args, kwargs, expected):
    scaler = GradScaler(*args, **kwargs)
    if expected is None:
        expected = (True, 2048.0, 3.0, 0.5, 2000, 1, True)
    assert settings(scaler) == expected


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((1024.0, 2.0, 0.5, 2000, False), {}),
        ((1024.0,), {"enabled": False}),
        ((), {"enabled": False}),
    ],
)
def test_disabled_pytorch_forms(args, kwargs):
    scaler = GradScaler(*args, **kwargs)
    assert not scaler.is_enabled() and scaler._init_loss_scaling == 1.0
    assert scaler.get_scale() == 0.0  # Paddle 3.x (its test_grad_scaler_out.py)


def test_disabled_scaler_getters_answer_as_paddle_and_the_torch_spelling_as_pytorch():
    # Paddle 3.x: get_scale() of a disabled paddle.amp.GradScaler is 0.0, its
    # get_init_loss_scaling() 1.0 (the scale it multiplies by: none).
    paddle_spelled = [GradScaler(enabled=False), GradScaler(False), AmpScaler(enable=False)]
    for scaler in paddle_spelled:
        assert (scaler.get_scale(), scaler.get_init_loss_scaling()) == (0.0, 1.0)
        assert scaler.get_loss_scaling() == 1.0  # what scale() multiplies by
    # torch.cuda.amp.GradScaler(enabled=False).get_scale() is 1.0 in PyTorch: its recipe
    # clip_grad_norm_(params, max_norm * scaler.get_scale()) must not clip to zero.
    torch_spelled = mt.cuda.amp.GradScaler(enabled=False)
    assert (torch_spelled.get_scale(), torch_spelled.get_init_loss_scaling()) == (1.0, 1.0)
    # enabled, both answer the current scale
    assert GradScaler(init_scale=512.0).get_scale() == 512.0
    assert mt.cuda.amp.GradScaler(init_scale=512.0).get_scale() == 512.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"enable": True, "enabled": False},
        {"init_loss_scaling": 1024.0, "init_scale": 2048.0},
        {"incr_ratio": 2.0, "growth_factor": 3.0},
        {"decr_ratio": 0.5, "backoff_factor": 0.25},
        {"incr_every_n_steps": 1000, "growth_interval": 2000},
    ],
)
def test_one_setting_under_both_names_is_a_value_error(kwargs):
    with pytest.raises(ValueError, match="two names of one setting"):
        GradScaler(**kwargs)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((True, 1024.0), {"init_scale": 8.0}, "multiple values for positional"),
        (("cuda",), {"device": "cpu"}, "multiple values for argument 'device'"),
        ((), {"enable": "cuda"}, "enable= must be True or False"),
        ((1024.0, 2.0, 0.5, 2000, "yes"), {}, "'enabled' must be True or False"),
        ((1024.0, 2.0, 0.5, 2000, True, 1), {}, "at most 5 positional"),
        ((True, 1.0, 2.0, 0.5, 1, 1, True, 3), {}, "at most 7 positional"),
        (([1.0],), {}, "first positional argument must be enable"),
        ((), {"growth": 2.0}, "unexpected keyword argument 'growth'"),
    ],
)
def test_arguments_in_the_wrong_slot_are_type_errors(args, kwargs, match):
    with pytest.raises(TypeError, match=match):
        GradScaler(*args, **kwargs)


def test_unknown_device_is_a_value_error():
    with pytest.raises(ValueError, match="unknown device 'xpu9'"):
        GradScaler("xpu9")


def test_amp_scaler_is_paddles_older_class():
    a, g = AmpScaler(), GradScaler()
    assert issubclass(GradScaler, AmpScaler)
    assert (a._init_loss_scaling, a._incr_every_n_steps) == (2.0**15, 1000)
    assert (g._init_loss_scaling, g._incr_every_n_steps) == (2.0**16, 2000)
    assert settings(a)[2:4] == settings(g)[2:4] and a._decr_every_n_nan_or_inf == 1
    with pytest.raises(TypeError, match="enable must be True or False"):
        AmpScaler("cuda")
    assert amp.AmpScaler is AmpScaler


def test_pytorch_getters_and_setters_are_paddles_settings():
    s = GradScaler(init_scale=2048.0, growth_factor=3.0, backoff_factor=0.25, growth_interval=5)
    assert s.get_scale() == 2048.0 and s.is_enabled()
    assert (s.get_growth_factor(), s.get_backoff_factor(), s.get_growth_interval()) == (3, 0.25, 5)
    s.set_growth_factor(5.0)
    s.set_backoff_factor(0.1)
    s.set_growth_interval(100)
    assert (s.get_incr_ratio(), s.get_decr_ratio(), s.get_incr_every_n_steps()) == (5, 0.1, 100)
    with pytest.raises(ValueError):
        s.set_growth_factor(0.5)  # must be > 1: refused, and nothing changed
    assert s.get_growth_factor() == 5.0


def test_paths_to_the_same_class():
    # PyTorch's spelling is a subclass that differs only in its state dict's keys
    assert mt.device.amp.GradScaler is GradScaler and issubclass(mt.cuda.amp.GradScaler, GradScaler)
    s = mt.cuda.amp.GradScaler(backoff_factor=0.3, growth_interval=800)
    assert (s._decr_ratio, s._incr_every_n_steps) == (0.3, 800)


def test_scale_of_nested_lists_and_tuples():
    s = GradScaler(init_scale=4.0)
    a, b = mt.to_tensor([1.0]), mt.to_tensor([2.0, 3.0])
    out = s.scale([a, (b, [a])])
    assert isinstance(out, list) and isinstance(out[1], tuple) and isinstance(out[1][1], list)
    np.testing.assert_array_equal(out[0].numpy(), [4.0])
    np.testing.assert_array_equal(out[1][0].numpy(), [8.0, 12.0])
    np.testing.assert_array_equal(out[1][1][0].numpy(), [4.0])
    with pytest.raises(TypeError, match=r"var\[1\]\[0\] is float"):
        s.scale([a, (1.0, b)])
    disabled = GradScaler(enable=False)
    pair = (a, b)
    assert disabled.scale(pair) is pair
