"""Learning-rate schedulers: each sequence against its formula, and checkpoint round trips."""

from __future__ import annotations

import math

import pytest

from minitorch_amp.optimizer import lr


def sequence(sched, n):
    out = []
    for _ in range(n):
        out.append(sched())
        sched.step()
    return out


def test_step_decay():
    got = sequence(lr.StepDecay(0.5, step_size=3, gamma=0.1), 8)
    assert got == pytest.approx([0.5] * 3 + [0.05] * 3 + [0.005] * 2)


def test_multi_step_decay():
    got = sequence(lr.MultiStepDecay(1.0, milestones=[2, 5], gamma=0.5), 7)
    assert got == pytest.approx([1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25])


def test_exponential_decay():
    assert sequence(lr.ExponentialDecay(2.0, gamma=0.5), 4) == pytest.approx([2, 1, 0.5, 0.25])


def paddle_cosine_recursion(base, t_max, eta_min, n):
    """Paddle's CosineAnnealingDecay.get_lr for consecutive steps (a recursion on last_lr)."""
    values, last = [base], base
    for epoch in range(1, n):
        if (epoch - 1 - t_max) % (2 * t_max) == 0:
            last = last + (base - eta_min) * (1 - math.cos(math.pi / t_max)) / 2
        else:
            ratio = (1 + math.cos(math.pi * epoch / t_max)) / (
                1 + math.cos(math.pi * (epoch - 1) / t_max)
            )
            last = ratio * (last - eta_min) + eta_min
        values.append(last)
    return values


@pytest.mark.parametrize("t_max, eta_min", [(5, 0.0), (4, 0.01), (1, 0.0)])
def test_cosine_matches_the_closed_form_and_paddles_recursion(t_max, eta_min):
    n = 4 * t_max + 3  # past T_max: the schedule rises again, as in Paddle
    got = sequence(lr.CosineAnnealingDecay(0.1, T_max=t_max, eta_min=eta_min), n)
    closed = [eta_min + (0.1 - eta_min) * (1 + math.cos(math.pi * e / t_max)) / 2 for e in range(n)]
    assert got == pytest.approx(closed, rel=1e-12, abs=1e-15)
    assert got == pytest.approx(paddle_cosine_recursion(0.1, t_max, eta_min, n), abs=1e-12)
    assert got[t_max] == pytest.approx(eta_min)


def test_linear_warmup_then_a_constant():
    got = sequence(lr.LinearWarmup(0.5, warmup_steps=4, start_lr=0.0, end_lr=0.4), 6)
    assert got == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.5, 0.5])


def test_linear_warmup_then_a_scheduler():
    inner = lr.StepDecay(1.0, step_size=2, gamma=0.5)
    got = sequence(lr.LinearWarmup(inner, warmup_steps=2, start_lr=0.0, end_lr=1.0), 7)
    assert got == pytest.approx([0.0, 0.5, 1.0, 1.0, 0.5, 0.5, 0.25])


def test_step_to_an_epoch_uses_the_closed_form():
    sched = lr.CosineAnnealingDecay(1.0, T_max=10)
    sched.step(5)
    assert sched.last_epoch == 5 and sched() == pytest.approx(0.5)


@pytest.mark.parametrize(
    "make",
    [
        lambda: lr.StepDecay(0.3, step_size=2),
        lambda: lr.CosineAnnealingDecay(0.3, T_max=7, eta_min=0.01),
        lambda: lr.LinearWarmup(lr.MultiStepDecay(0.3, [3, 6]), 2, 0.0, 0.3),
    ],
)
def test_state_round_trip_resumes_the_sequence(make):
    a = make()
    sequence(a, 4)
    state = a.state_dict()
    assert state["last_epoch"] == 4 and state["last_lr"] == a()
    b = make()
    b.set_state_dict(state)
    assert sequence(b, 6) == sequence(a, 6)


def test_set_state_dict_with_a_missing_key_changes_nothing():
    sched = lr.LinearWarmup(lr.StepDecay(0.3, 2), 2, 0.0, 0.3)
    with pytest.raises(RuntimeError, match="LinearWarmup_LR"):
        sched.set_state_dict({"last_epoch": 5, "last_lr": 1.0})
    with pytest.raises(RuntimeError, match="last_lr"):
        sched.set_state_dict({"last_epoch": 5, "LinearWarmup_LR": {"last_epoch": 3}})
    assert sched.last_epoch == 0 and sched() == 0.0
    with pytest.warns(UserWarning, match="unknown keys"):
        lr.StepDecay(0.1, 1).set_state_dict({"last_epoch": 1, "last_lr": 0.1, "extra": 1})


@pytest.mark.parametrize(
    "make, error",
    [
        (lambda: lr.StepDecay(0.1, step_size=0), ValueError),
        (lambda: lr.StepDecay(0.1, step_size=2, gamma=1.5), ValueError),
        (lambda: lr.StepDecay("0.1", step_size=2), TypeError),
        (lambda: lr.MultiStepDecay(0.1, milestones=[5, 3]), ValueError),
        (lambda: lr.MultiStepDecay(0.1, milestones=3), TypeError),
        (lambda: lr.CosineAnnealingDecay(0.1, T_max=0), ValueError),
        (lambda: lr.CosineAnnealingDecay(0.1, T_max=2.5), ValueError),
        (lambda: lr.LinearWarmup(0.1, warmup_steps=3, start_lr=0.5, end_lr=0.1), ValueError),
        (lambda: lr.LinearWarmup("x", warmup_steps=3, start_lr=0.0, end_lr=0.1), TypeError),
        (lambda: lr.ExponentialDecay(0.1, gamma=0.0), ValueError),
    ],
)
def test_bad_arguments_raise_clear_errors(make, error):
    with pytest.raises(error):
        make()


def test_verbose_prints_each_new_rate(capsys):
    sched = lr.ExponentialDecay(1.0, gamma=0.5, verbose=True)
    sched.step()
    assert capsys.readouterr().out.splitlines() == [
        "Epoch 0: ExponentialDecay set learning rate to 1.0.",
        "Epoch 1: ExponentialDecay set learning rate to 0.5.",
    ]
