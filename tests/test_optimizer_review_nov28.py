"""What a review of the optimizers found (2026-11-28, evening), each pinned as Paddle has it.

Refused scheduler states change nothing; Momentum's ``rescale_grad`` scales a non-L2
regularizer's term; a param group's settings replace a parameter's ``ParamAttr`` ones;
integer parameters are refused when the optimizer is made; ``auto_skip_clip``; small ones.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from minitorch_amp.autograd.tensor import Tensor
from minitorch_amp.nn.clip import ClipGradByGlobalNorm
from minitorch_amp.nn.parameter import Parameter
from minitorch_amp.optimizer import SGD, AdamW, Momentum, lr
from minitorch_amp.regularizer import L1Decay, L2Decay


def weight(values=(1.0,), name=None, dtype="float32") -> Parameter:
    return Parameter(np.array(values, dtype=dtype), name=name)


def step(opt, *pairs) -> None:
    for p, g in pairs:
        p.grad = np.array(g, dtype=p.dtype)
    opt.step()


# ---- 1. a refused scheduler state changes nothing ---------------------------------------------
SCHEDULERS = {
    "step": lambda: lr.StepDecay(0.5, 2),
    "multi_step": lambda: lr.MultiStepDecay(0.5, [2, 4]),
    "exponential": lambda: lr.ExponentialDecay(0.5, 0.9),
    "cosine": lambda: lr.CosineAnnealingDecay(0.5, 10),
    "lambda": lambda: lr.LambdaDecay(0.5, lambda e: 0.9**e),
    "warmup": lambda: lr.LinearWarmup(lr.StepDecay(0.5, 2), 3, 0.0, 0.5),
    "one_cycle": lambda: lr.OneCycleLR(1.0, total_steps=10),
}
BAD_FIELDS = [
    ({"last_lr": None}, TypeError, r"state_dict\['last_lr'\] must be a number, got None"),
    ({"last_lr": "0.1"}, TypeError, r"\['last_lr'\] must be a number"),
    ({"last_lr": float("nan")}, ValueError, r"\['last_lr'\] must be a finite number"),
    ({"last_epoch": 2.5}, TypeError, r"\['last_epoch'\] must be an int"),
    ({"last_epoch": True}, TypeError, r"\['last_epoch'\] must be an int"),
    ({"last_epoch": -3}, ValueError, r"\['last_epoch'\] must be >= 0"),
]


@pytest.mark.parametrize("make", SCHEDULERS.values(), ids=SCHEDULERS.keys())
@pytest.mark.parametrize("bad, error, match", BAD_FIELDS)
def test_a_refused_scheduler_state_leaves_the_scheduler_unchanged(make, bad, error, match):
    sched = make()
    for _ in range(3):
        sched.step()
    before = copy.deepcopy(sched.state_dict())
    good = make().state_dict()
    with pytest.raises(error, match=match):
        sched.set_state_dict({**good, "last_epoch": 5, **bad})
    assert sched.state_dict() == before


def test_a_refused_nested_state_leaves_the_warmup_and_its_scheduler_unchanged():
    inner = lr.StepDecay(0.5, 4)
    sched = lr.LinearWarmup(inner, 5, 0.0, 0.5)
    before = copy.deepcopy(sched.state_dict())
    bad = {"last_epoch": 20, "last_lr": 0.1, "LinearWarmup_LR": {"last_epoch": 3, "last_lr": "x"}}
    with pytest.raises(TypeError, match=r"state_dict\['LinearWarmup_LR'\]\['last_lr'\]"):
        sched.set_state_dict(bad)
    assert sched.state_dict() == before and inner.last_epoch == 0


def test_one_cycle_refuses_a_state_past_its_total_steps():
    sched = lr.OneCycleLR(1.0, total_steps=10)
    with pytest.raises(ValueError, match="past total_steps=10"):
        sched.set_state_dict({"last_epoch": 11, "last_lr": 0.1})
    assert sched.last_epoch == 0


def test_a_refused_scheduler_state_leaves_the_optimizer_unchanged():
    w = weight(np.ones(3), name="bss_w")
    sched = lr.StepDecay(0.1, 4)
    opt = Momentum(sched, 0.9, parameters=[w])
    step(opt, (w, np.ones(3)))
    velocity = opt.state_dict()["bss_w_velocity_0"].numpy().copy()
    bad = {
        "bss_w_velocity_0": np.full(3, 7.0, "float32"),
        "LR_Scheduler": {"last_epoch": 9, "last_lr": None},
    }
    with pytest.raises(TypeError, match=r"LR_Scheduler\['last_lr'\] must be a number, got None"):
        opt.set_state_dict(bad)
    np.testing.assert_array_equal(opt.state_dict()["bss_w_velocity_0"].numpy(), velocity)
    assert sched.state_dict() == {"last_epoch": 0, "last_lr": 0.1}


def test_a_scheduled_optimizer_refuses_a_state_dict_without_lr_scheduler():
    """Paddle reads ``state_dict['LR_Scheduler']`` unconditionally (KeyError)."""
    w = weight(np.ones(2), name="mls_w")
    saved = SGD(0.1, parameters=[w])
    sched = lr.StepDecay(0.1, 2)
    for _ in range(5):
        sched.step()
    opt = Momentum(sched, parameters=[w])
    step(opt, (w, np.ones(2)))
    velocity = opt.state_dict()["mls_w_velocity_0"].numpy().copy()
    with pytest.raises(KeyError, match="no 'LR_Scheduler' entry"):
        opt.set_state_dict({"mls_w_velocity_0": np.zeros(2, "float32"), **saved.state_dict()})
    np.testing.assert_array_equal(opt.state_dict()["mls_w_velocity_0"].numpy(), velocity)
    assert sched.last_epoch == 5


# ---- 2. Momentum's rescale_grad and a regularizer that is not fused ---------------------------
def test_momentum_rescales_the_gradient_after_a_non_l2_regularizer():
    """Paddle: L1Decay is an op before the momentum op, whose kernel scales what it gets:
    ``g = rescale * (g + c * sign(p))``; only L2Decay is fused after the rescale."""
    w, v = weight(name="rl1_w"), weight(name="rl1_v")
    v.regularizer = lambda_regularizer = L1Decay(0.5)  # a parameter's own, too
    opt = Momentum(1.0, 0.9, [w, v], weight_decay=L1Decay(0.5), rescale_grad=0.1)
    step(opt, (w, [2.0]), (v, [2.0]))
    expected = np.float32(1.0) - np.float32(0.1) * (np.float32(2.0) + np.float32(0.5))
    assert w.numpy()[0] == expected == np.float32(0.75)
    assert v.numpy()[0] == expected and v.regularizer is lambda_regularizer


# ---- 3. a param group's settings replace a parameter's own (ParamAttr) -----------------------
def test_a_param_groups_learning_rate_replaces_the_parameters_own():
    w, b = weight(name="glr_w"), weight(name="glr_b")
    w.optimize_attr["learning_rate"] = 2.0  # ParamAttr(learning_rate=2.0)
    b.optimize_attr["learning_rate"] = 2.0
    opt = SGD(0.1, parameters=[{"params": [w], "learning_rate": 0.5}, {"params": [b]}])
    step(opt, (w, [1.0]), (b, [1.0]))
    assert w.numpy()[0] == np.float32(1.0 - 0.05)  # the group's 0.5, not 0.5 * 2.0
    assert b.numpy()[0] == np.float32(1.0 - 0.1)  # a group's default ratio is 1.0
    assert w.optimize_attr["learning_rate"] == 2.0  # the parameter is left alone


@pytest.mark.parametrize(
    "group_decay, optimizer_decay, expected",
    [
        ({"weight_decay": 0.0}, L2Decay(3.0), 1.0),  # the group's 0.0: no decay at all
        ({"weight_decay": 0.5}, None, 1.0 - 0.1 * 0.5),  # the group's L2Decay(0.5)
        ({}, L2Decay(3.0), 1.0 - 0.1 * 3.0),  # the optimizer's, the group's default
        ({}, None, 1.0),  # none: Paddle writes None into param.regularizer
    ],
)
def test_a_param_groups_weight_decay_replaces_the_parameters_regularizer(
    group_decay, optimizer_decay, expected
):
    v = weight(name="gwd_v")
    own = v.regularizer = L2Decay(1.0)  # ParamAttr(regularizer=L2Decay(1.0))
    opt = SGD(0.1, parameters=[{"params": [v], **group_decay}], weight_decay=optimizer_decay)
    step(opt, (v, [0.0]))
    assert v.numpy()[0] == np.float32(expected) and v.regularizer is own


def test_adamw_keeps_a_parameters_regularizer_inside_a_group():
    """Paddle's AdamW._add_param_group writes the learning rate only."""
    v = weight(name="awg_v")
    v.regularizer = L2Decay(1.0)
    opt = AdamW(0.1, parameters=[{"params": [v], "weight_decay": 0.0}])
    step(opt, (v, [0.0]))
    assert v.numpy()[0] < np.float32(0.91)  # Adam's step from g = 0 + 1.0 * p: about -0.1


def test_a_setting_changed_on_the_parameter_after_the_group_took_it_wins():
    """In Paddle the change overwrites the value the group wrote into the parameter."""
    w = weight(name="chg_w")
    opt = SGD(0.1, parameters=[{"params": [w], "learning_rate": 0.5, "weight_decay": 0.0}])
    w.optimize_attr["learning_rate"] = 2.0
    w.regularizer = L2Decay(1.0)
    step(opt, (w, [0.0]))
    assert w.numpy()[0] == np.float32(1.0) - np.float32(0.2) * np.float32(1.0)


# ---- 4. parameters an update cannot write are refused when the optimizer is made -------------
def test_an_integer_parameter_is_refused_at_construction_naming_it():
    f, i = weight([1.0, 1.0], name="f"), Parameter(np.array([1, 2], "int64"), name="int_i")
    with pytest.raises(TypeError, match="parameter 'int_i' is int64"):
        SGD(0.1, parameters=[f, i])
    with pytest.raises(TypeError, match="parameter 'int_i' is int64"):
        Momentum(0.1, parameters=[{"params": [f]}, {"params": [i]}])


def test_minimize_refuses_an_integer_parameter_before_any_write():
    f, i = weight([1.0, 1.0], name="mf"), Parameter(np.array([1, 2], "int64"), name="mi")
    opt = SGD(0.1, parameters=[f])
    f.grad, i.grad = np.ones(2, "float32"), np.ones(2, "int64")
    with pytest.raises(TypeError, match="parameter 'mi' is int64"):
        opt.minimize(None, parameters=[f, i])
    np.testing.assert_array_equal(f.numpy(), [1.0, 1.0])


# ---- 5. ClipGradByGlobalNorm(auto_skip_clip=...) ---------------------------------------------
def test_clip_by_global_norm_takes_paddles_auto_skip_clip():
    p = weight([0.0, 0.0], name="ask_p")
    small = Tensor._wrap(np.array([0.3, 0.4], "float32"))
    [(_, same)] = ClipGradByGlobalNorm(1.0, auto_skip_clip=True)([(p, small)])
    assert same is small  # below clip_norm: not even multiplied
    big = np.array([3.0, 4.0], "float32")
    [(_, skipping)] = ClipGradByGlobalNorm(1.0, auto_skip_clip=True)([(p, big)])
    [(_, always)] = ClipGradByGlobalNorm(1.0, auto_skip_clip=False)([(p, big)])
    np.testing.assert_array_equal(skipping.numpy(), always.numpy())
    np.testing.assert_allclose(skipping.numpy(), [0.6, 0.8], rtol=1e-6)
    with pytest.raises(TypeError, match="auto_skip_clip must be True or False"):
        ClipGradByGlobalNorm(1.0, auto_skip_clip=1)


# ---- 6. small ones ---------------------------------------------------------------------------
def test_adamw_refuses_a_negative_weight_decay_with_a_value_error():
    with pytest.raises(ValueError, match=r"must be >= 0, got -0\.1"):
        AdamW(0.1, parameters=[weight()], weight_decay=-0.1)


def test_step_with_a_closure_says_to_call_it_first_and_updates_nothing():
    w = weight(name="clo_w")
    opt = SGD(0.1, parameters=[w])
    w.grad = np.ones(1, "float32")
    with pytest.raises(TypeError, match=r"loss = closure\(\), then opt.step\(\)"):
        opt.step(lambda: 0.0)
    assert w.numpy()[0] == 1.0
