"""The schedulers ported from Paddle's lr.py: each sequence over three periods against Paddle's
formula as its source writes it (bit for bit), checkpoint round trips, refused arguments."""

from __future__ import annotations

import math

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp.nn.parameter import Parameter
from minitorch_amp.optimizer import SGD, lr


def sequence(sched, n):
    out = []
    for _ in range(n):
        out.append(sched())
        sched.step()
    return out


def noam(e):
    return 0.5 * (64**-0.5) * min(1 if e == 0 else e**-0.5, 4**-1.5 * e)


def polynomial(e, cycle):
    steps = 4
    if cycle:
        steps = 4 * (1 if e == 0 else math.ceil(float(e) / float(4)))
    else:
        e = min(e, 4)
    return (0.5 - 0.01) * ((1 - float(e) / float(steps)) ** 2.0) + 0.01


def multiplicative(e):
    cur = 0.5
    for k in range(1, e + 1):
        cur = cur * (0.9 if k % 2 else 0.8)
    return cur


def linear_lr(n):  # a recursion on last_lr
    out = [0.6 * 0.25]
    for e in range(1, n):
        if e > 4:
            out.append(out[-1])
        else:
            factor = 1.0 + (1.0 - 0.25) / (4 * 0.25 + (e - 1) * (1.0 - 0.25))
            out.append(out[-1] * factor)
    return out


def cyclic(e, up, down, scale):
    size = float(up) + float(down)
    cycle = 1 + e // size
    pct = 1.0 + e / size - cycle
    up_pct = float(up) / size
    h = pct / up_pct if pct <= up_pct else (1 - pct) / (1 - up_pct)
    return 0.1 + (1.0 - 0.1) * h * scale(cycle, e)


def warm_restarts(n, t_0, t_mult):
    out, t_cur, t_i = [], 0, t_0
    for _ in range(n):
        out.append(0.01 + (0.5 - 0.01) * (1 + math.cos(math.pi * t_cur / t_i)) / 2)
        t_cur += 1
        if t_cur >= t_i:
            t_cur, t_i = t_cur - t_i, t_i * t_mult
    return out


CASES = {
    "noam": (lambda: lr.NoamDecay(64, 4, learning_rate=0.5), [noam(e) for e in range(12)]),
    "piecewise": (
        lambda: lr.PiecewiseDecay([3, 6, 9], [0.4, 0.3, 0.2, 0.1]),
        [0.4] * 3 + [0.3] * 3 + [0.2] * 3 + [0.1] * 3,
    ),
    "natural_exp": (
        lambda: lr.NaturalExpDecay(0.5, gamma=0.3),
        [0.5 * math.exp(-1 * 0.3 * e) for e in range(12)],
    ),
    "inverse_time": (
        lambda: lr.InverseTimeDecay(0.5, gamma=0.3),
        [0.5 / (1 + 0.3 * e) for e in range(12)],
    ),
    "polynomial": (
        lambda: lr.PolynomialDecay(0.5, 4, end_lr=0.01, power=2.0),
        [polynomial(e, False) for e in range(12)],
    ),
    "polynomial_cycle": (
        lambda: lr.PolynomialDecay(0.5, 4, end_lr=0.01, power=2.0, cycle=True),
        [polynomial(e, True) for e in range(12)],
    ),
    "multiplicative": (
        lambda: lr.MultiplicativeDecay(0.5, lambda e: 0.9 if e % 2 else 0.8),
        [multiplicative(e) for e in range(12)],
    ),
    "linear_lr": (lambda: lr.LinearLR(0.6, 4, start_factor=0.25), linear_lr(12)),
    "triangular": (
        lambda: lr.CyclicLR(0.1, 1.0, 3, 1),
        [cyclic(e, 3, 1, lambda c, i: 1.0) for e in range(12)],
    ),
    "triangular2": (
        lambda: lr.CyclicLR(0.1, 1.0, 2, mode="triangular2"),
        [cyclic(e, 2, 2, lambda c, i: 1 / (2.0 ** (c - 1))) for e in range(12)],
    ),
    "exp_range": (
        lambda: lr.CyclicLR(0.1, 1.0, 2, mode="exp_range", exp_gamma=0.9),
        [cyclic(e, 2, 2, lambda c, i: 0.9**i) for e in range(12)],
    ),
    "scale_fn_iterations": (
        lambda: lr.CyclicLR(0.1, 1.0, 2, scale_fn=lambda x: 1 / (1 + x), scale_mode="iterations"),
        [cyclic(e, 2, 2, lambda c, i: 1 / (1 + i)) for e in range(12)],
    ),
    "warm_restarts": (
        lambda: lr.CosineAnnealingWarmRestarts(0.5, T_0=4, eta_min=0.01),
        warm_restarts(12, 4, 1),
    ),
    "warm_restarts_mult": (
        lambda: lr.CosineAnnealingWarmRestarts(0.5, T_0=2, T_mult=2, eta_min=0.01),
        warm_restarts(14, 2, 2),
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_each_sequence_over_three_periods_equals_paddles_formula(name):
    make, expected = CASES[name]
    assert sequence(make(), len(expected)) == expected


@pytest.mark.parametrize("name", CASES)
def test_a_state_round_trip_resumes_the_same_sequence(name):
    make, expected = CASES[name]
    a = make()
    sequence(a, 5)
    b = make()
    b.set_state_dict(a.state_dict())
    assert sequence(b, len(expected) - 5) == expected[5:]


def test_warm_restarts_loads_a_paddle_state_without_its_period():
    a = lr.CosineAnnealingWarmRestarts(0.5, T_0=2, T_mult=2, eta_min=0.01)
    sequence(a, 9)
    b = lr.CosineAnnealingWarmRestarts(0.5, T_0=2, T_mult=2, eta_min=0.01)
    b.set_state_dict({"last_epoch": 9, "last_lr": a()})  # Paddle saves only these two
    assert (b.T_cur, b.T_i) == (3, 8) and sequence(b, 5) == warm_restarts(14, 2, 2)[9:]


@pytest.mark.parametrize(
    "make, error",
    [
        (lambda: lr.NoamDecay(0, 4), ValueError),
        (lambda: lr.PiecewiseDecay([], [0.1]), ValueError),
        (lambda: lr.PiecewiseDecay([3, 6], [0.1, 0.2]), ValueError),
        (lambda: lr.NaturalExpDecay(0.5, gamma=0.0), ValueError),
        (lambda: lr.InverseTimeDecay(0.5, gamma="0.1"), TypeError),
        (lambda: lr.PolynomialDecay(0.5, decay_steps=2.0), ValueError),
        (lambda: lr.PolynomialDecay(0.5, 4, power=0.0), ValueError),
        (lambda: lr.MultiplicativeDecay(0.5, 0.9), TypeError),
        (lambda: lr.LinearLR(0.5, 4, start_factor=0.0), ValueError),
        (lambda: lr.LinearLR(0.5, 4, end_factor=1.5), ValueError),
        (lambda: lr.LinearLR(0.5, 0), ValueError),
        (lambda: lr.CyclicLR(0.1, -1.0, 2), ValueError),
        (lambda: lr.CyclicLR(0.1, 1.0, 0), ValueError),
        (lambda: lr.CyclicLR(0.1, 1.0, 2, exp_gamma=1), TypeError),
        (lambda: lr.CyclicLR(0.1, 1.0, 2, mode="saw"), ValueError),
        (lambda: lr.CyclicLR(0.1, 1.0, 2, scale_mode="epoch"), ValueError),
        (lambda: lr.CosineAnnealingWarmRestarts(0.5, T_0=0), ValueError),
        (lambda: lr.CosineAnnealingWarmRestarts(0.5, T_0=2, T_mult=0), ValueError),
        (lambda: lr.ReduceOnPlateau(0.5, mode="lowest"), ValueError),
        (lambda: lr.ReduceOnPlateau(0.5, factor=1.0), ValueError),
        (lambda: lr.ReduceOnPlateau(0.5, threshold_mode="pct"), ValueError),
    ],
)
def test_bad_arguments_are_refused_with_a_clear_error(make, error):
    with pytest.raises(error):
        make()


# ---- ReduceOnPlateau ---------------------------------------------------------------------------
def plateau_rates(losses, mode="min", threshold_mode="rel", **kw):
    sched = lr.ReduceOnPlateau(1.0, mode=mode, threshold_mode=threshold_mode, **kw)
    out = []
    for loss in losses:
        sched.step(loss)
        out.append(sched())
    return out


def test_reduce_on_plateau_cuts_after_patience_then_cools_down():
    losses = [5.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 3.0, 3.0, 3.0, 3.0]
    got = plateau_rates(losses, factor=0.5, patience=2, cooldown=2, min_lr=0.2)
    # bad epochs 1, 2, 3 > patience: cut at the 5th step; 2 steps of cooldown; count again
    assert got == [1.0] * 4 + [0.5] * 4 + [0.5, 0.5, 0.5, 0.25]
    assert plateau_rates([1.0] * 40, factor=0.5, patience=0, min_lr=0.2)[-1] == 0.2


@pytest.mark.parametrize(
    "mode, threshold_mode, losses, cut",
    [
        ("min", "rel", [1.0, 0.99995, 0.9], True),  # 0.99995 is not below 1 - 1e-4
        ("min", "abs", [1.0, 0.95, 0.85], True),  # 0.95 is not below 1 - 0.1
        ("min", "abs", [1.0, 0.85, 0.7], False),
        ("max", "rel", [1.0, 1.00005, 1.1], True),
        ("max", "abs", [1.0, 1.15, 1.3], False),
    ],
)
def test_reduce_on_plateau_modes_and_thresholds(mode, threshold_mode, losses, cut):
    kw = dict(patience=0, threshold=0.1 if threshold_mode == "abs" else 1e-4)
    assert (plateau_rates(losses, mode, threshold_mode, **kw)[1] < 1.0) is cut


def test_reduce_on_plateau_takes_tensors_and_numpy_values_and_refuses_arrays():
    sched = lr.ReduceOnPlateau(1.0, patience=0)
    for metric in (mt.to_tensor(np.float32(2.0)), mt.to_tensor([1.5]), np.float64(1.0), 1):
        sched.step(metric)
    assert sched.best == 1.0 and sched.last_epoch == 4
    with pytest.raises(ValueError, match="one number"):
        sched.step(np.ones(2))
    with pytest.raises(TypeError, match="metrics"):
        sched.step("0.5")
    assert sched.last_epoch == 4 and sched.num_bad_epochs == 0


def test_reduce_on_plateau_state_round_trip_and_refused_state():
    a = lr.ReduceOnPlateau(1.0, factor=0.5, patience=1, cooldown=1)
    for loss in [3.0, 3.0, 3.0, 2.0]:
        a.step(loss)
    state = a.state_dict()
    assert set(state) == {"cooldown_counter", "best", "num_bad_epochs", "last_epoch", "last_lr"}
    b = lr.ReduceOnPlateau(1.0, factor=0.5, patience=1, cooldown=1)
    with pytest.raises(ValueError, match="num_bad_epochs"):
        b.set_state_dict(state | {"num_bad_epochs": -1})
    assert b.best is None and b.last_epoch == 0
    b.set_state_dict(state)
    for loss in [2.0, 2.0, 2.0]:
        a.step(loss)
        b.step(loss)
        assert (b(), b.best, b.num_bad_epochs) == (a(), a.best, a.num_bad_epochs)


@pytest.mark.parametrize("name", ["polynomial_cycle", "exp_range", "warm_restarts_mult"])
def test_an_optimizer_follows_the_scheduler_and_round_trips_it(name):
    make, expected = CASES[name]
    sched = make()
    opt = SGD(learning_rate=sched, parameters=[Parameter(np.zeros(1, dtype="float32"))])
    seen = []
    for _ in range(6):
        seen.append(opt.get_lr())
        sched.step()
    assert seen == expected[:6]
    other = make()
    opt2 = SGD(learning_rate=other, parameters=[Parameter(np.zeros(1, dtype="float32"))])
    opt2.set_state_dict(opt.state_dict())
    assert sequence(other, 3) == expected[6:9]


def test_an_optimizer_follows_reduce_on_plateau():
    sched = lr.ReduceOnPlateau(1.0, factor=0.5, patience=0)
    opt = SGD(learning_rate=sched, parameters=[Parameter(np.zeros(1, dtype="float32"))])
    sched.step(1.0)
    sched.step(1.0)
    assert opt.get_lr() == 0.5
    other = lr.ReduceOnPlateau(1.0, factor=0.5, patience=0)
    opt2 = SGD(learning_rate=other, parameters=[Parameter(np.zeros(1, dtype="float32"))])
    opt2.set_state_dict(opt.state_dict())
    assert (other(), other.best, other.last_epoch) == (0.5, 1.0, 2)


def test_reduce_on_plateau_takes_a_bfloat16_loss_and_a_paddle_state_with_an_array_best():
    sched = lr.ReduceOnPlateau(1.0)
    sched.step(mt.to_tensor([2.5]).astype("bfloat16"))  # a loss under bfloat16 auto_cast
    assert sched.best == 2.5
    state = dict(sched.state_dict(), best=np.array([1.5], "float32"))  # as Paddle saves it
    sched.set_state_dict(state)
    assert sched.best == 1.5


def test_cyclic_checks_and_converts_its_base_rate_as_the_others_do():
    assert type(lr.CyclicLR(np.float32(0.1), 1.0, 3)()) is float  # (a np.float32 before)
    with pytest.raises(TypeError, match="'base_learning_rate' must be a float or int"):
        lr.CyclicLR(None, 1.0, 3)


def test_a_saved_state_is_a_snapshot_of_a_tensor_entry():
    class Scaled(lr.StepDecay):
        def state_keys(self):
            self.keys = ["last_epoch", "last_lr", "scale"]

    sched = Scaled(0.1, step_size=2)
    sched.scale = mt.to_tensor([2.0])
    saved = sched.state_dict()
    sched.scale.set_value(np.array([7.0], "float32"))
    assert saved["scale"] == 2.0 and type(saved["scale"]) is float


def test_multiplicative_decay_recomputes_its_product_after_a_reload():
    factors = {"f": 0.5}
    sched = lr.MultiplicativeDecay(1.0, lambda epoch: factors["f"])
    for _ in range(3):
        sched.step()
    state = sched.state_dict()
    factors["f"] = 0.25  # the function changed before resuming: the product starts again
    sched.set_state_dict(state)
    sched.step()
    assert sched() == 0.25**4
