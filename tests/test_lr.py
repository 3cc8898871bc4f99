"""Learning-rate schedulers: each sequence against its formula, and checkpoint round trips."""

from __future__ import annotations

import math

import numpy as np
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


# ---- LambdaDecay -------------------------------------------------------------------------------
def test_lambda_decay_multiplies_the_base_rate_by_the_functions_factor():
    got = sequence(lr.LambdaDecay(0.5, lr_lambda=lambda epoch: 0.9**epoch), 4)
    assert got == pytest.approx([0.5, 0.45, 0.405, 0.3645], rel=1e-15)


def test_lambda_decay_step_to_an_epoch_calls_the_function_with_it():
    seen = []
    sched = lr.LambdaDecay(2.0, lr_lambda=lambda epoch: seen.append(epoch) or 1.0 / (epoch + 1))
    sched.step(7)
    assert seen == [0, 7] and sched() == 0.25 and sched.last_epoch == 7


def test_lambda_decay_whose_function_fails_keeps_its_epoch():
    sched = lr.LambdaDecay(1.0, lr_lambda=lambda epoch: [1.0, 0.5][epoch])
    sched.step()
    with pytest.raises(IndexError):
        sched.step()
    assert sched.last_epoch == 1 and sched() == 0.5
    with pytest.raises(TypeError, match=r"lr_lambda\(0\) returned 'fast'"):
        lr.LambdaDecay(1.0, lr_lambda=lambda epoch: "fast")


# ---- OneCycleLR --------------------------------------------------------------------------------
def paddle_one_cycle(max_lr, total, divide, end_lr, pct, strategy, three_phase, steps):
    """Paddle's OneCycleLR tables and get_lr, line by line (python/paddle/optimizer/lr.py)."""
    initial = max_lr / float(divide)
    if three_phase:
        config = [0, pct * total - 1, 2 * pct * total - 2, total - 1, total - 1]
        sizes = [config[1] - config[0], config[2] - config[1], config[3] - config[2]]
        sizes.append(config[3] - config[2])
        lrs = [initial, max_lr, initial, end_lr]
    else:
        config = [0, pct * total - 1, total - 1, total - 1]
        sizes = [config[1] - config[0], config[2] - config[1], config[2] - config[1]]
        lrs = [initial, max_lr, end_lr]

    def anneal(start, stop, p):
        if strategy == "cos":
            return stop + (start - stop) / 2.0 * (math.cos(math.pi * p) + 1)
        return (stop - start) * p + start

    values = []
    for step in range(steps):
        for i, (end_step, size) in enumerate(zip(config[1:], sizes)):
            if step <= end_step or i == len(lrs) - 2:
                values.append(anneal(lrs[i], lrs[i + 1], (step - config[i]) / size))
                break
    return values


def test_one_cycle_by_hand():
    sched = lr.OneCycleLR(max_learning_rate=1.0, total_steps=10)
    got = sequence(sched, 10) + [sched()]
    # initial 1/25; p = 0.3 * 10: up over steps 0..2, down over 2..9; step 10 overshoots 9
    expected = [0.04, 0.52, 1.0]
    expected += [1e-4 + (1.0 - 1e-4) / 2 * (1 + math.cos(math.pi * k / 7)) for k in range(1, 9)]
    assert got == pytest.approx(expected, rel=1e-14)
    assert got[9] == pytest.approx(1e-4) and got[10] > got[9]


def test_one_cycle_three_phases_by_hand():
    sched = lr.OneCycleLR(2.0, 10, divide_factor=4, phase_pct=0.2, anneal_strategy="linear",
                          three_phase=True, end_learning_rate=0.0)  # fmt: skip
    got = sequence(sched, 10)
    assert got == pytest.approx([0.5, 2.0, 0.5] + [0.5 * (1 - k / 7) for k in range(1, 8)])


@pytest.mark.parametrize("strategy", ["cos", "linear"])
@pytest.mark.parametrize("three_phase", [False, True])
@pytest.mark.parametrize("total, pct", [(100, 0.3), (37, 0.25), (7, 0.45), (1, 0.3), (5, 0.0)])
def test_one_cycle_equals_paddles_formulas(strategy, three_phase, total, pct):
    kwargs = dict(divide_factor=10.0, end_learning_rate=1e-3, phase_pct=pct)
    sched = lr.OneCycleLR(0.5, total, anneal_strategy=strategy, three_phase=three_phase, **kwargs)
    expected = paddle_one_cycle(0.5, total, 10.0, 1e-3, pct, strategy, three_phase, total + 1)
    got = sequence(sched, total) + [sched()]  # steps 0 .. total_steps (Paddle's last)
    assert got == expected  # bit for bit: the same float operations


def test_one_cycle_refuses_to_step_past_total_steps_and_keeps_its_state():
    sched = lr.OneCycleLR(1.0, total_steps=4)
    sequence(sched, 4)
    assert sched.last_epoch == 4
    last = sched()
    with pytest.raises(ValueError, match="past total_steps=4"):
        sched.step()
    with pytest.raises(ValueError, match="past total_steps=4"):
        sched.step(9)
    assert sched.last_epoch == 4 and sched() == last


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(max_learning_rate="1"), TypeError, "max_learning_rate"),
        (dict(max_learning_rate=-1.0), ValueError, "max_learning_rate"),
        (dict(total_steps=0), ValueError, "total_steps"),
        (dict(total_steps=10.0), TypeError, "total_steps"),
        (dict(divide_factor=0), ValueError, "divide_factor"),
        (dict(end_learning_rate=-0.1), ValueError, "end_learning_rate"),
        (dict(phase_pct=1), TypeError, "phase_pct"),
        (dict(phase_pct=1.5), ValueError, "phase_pct"),
        (dict(phase_pct=0.5, three_phase=True), ValueError, "below 0.5"),
        (dict(anneal_strategy="exp"), ValueError, "'cos' or 'linear'"),
        (dict(phase_pct=0.1), ValueError, "no length"),  # 0.1 * 10 = 1: Paddle divides by 0
    ],
)
def test_one_cycle_bad_arguments_raise_clear_errors(kwargs, error, match):
    args = dict(max_learning_rate=1.0, total_steps=10) | kwargs
    with pytest.raises(error, match=match):
        lr.OneCycleLR(**args)


@pytest.mark.parametrize(
    "make",
    [
        lambda: lr.LambdaDecay(0.3, lambda epoch: 1.0 / (1 + epoch)),
        lambda: lr.OneCycleLR(0.3, total_steps=12, three_phase=True),
    ],
)
def test_new_schedules_resume_from_their_state_dict(make):
    test_state_round_trip_resumes_the_sequence(make)


def test_an_optimizer_follows_one_cycle():
    import numpy as np

    from minitorch_amp.nn.parameter import Parameter
    from minitorch_amp.optimizer import SGD

    sched = lr.OneCycleLR(1.0, total_steps=5, anneal_strategy="linear")
    opt = SGD(learning_rate=sched, parameters=[Parameter(np.zeros(1, dtype="float32"))])
    seen = []
    for _ in range(5):
        seen.append(opt.get_lr())
        sched.step()
    assert seen == sequence(lr.OneCycleLR(1.0, total_steps=5, anneal_strategy="linear"), 5)


# ---- review of 2026-11-28 (night) -------------------------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda: lr.StepDecay(learning_rate=-0.1, step_size=2),
        lambda: lr.LinearWarmup(0.5, warmup_steps=3, start_lr=-1.0, end_lr=0.5),
        lambda: lr.ReduceOnPlateau(learning_rate=-0.1),
    ],
)
def test_a_negative_learning_rate_is_refused_as_paddle_refuses_it(make):
    with pytest.raises(ValueError, match="invalid learning rate -"):
        make()


class Plateauish(lr.LRScheduler):
    """A user's scheduler written for Paddle: more state, declared through state_keys()."""

    def __init__(self, learning_rate):
        self.bad_epochs = 0
        super().__init__(learning_rate)

    def state_keys(self):
        self.keys = ["last_epoch", "last_lr", "bad_epochs"]

    def get_lr(self):
        return self.base_lr * 0.5**self.bad_epochs


def test_a_subclass_state_keys_hook_saves_and_restores_its_extra_state():
    a = Plateauish(1.0)
    a.bad_epochs = 3
    a.step()
    assert a.state_dict() == {"last_epoch": 1, "last_lr": 0.125, "bad_epochs": 3}
    b = Plateauish(1.0)
    with pytest.raises(RuntimeError, match="bad_epochs"):
        b.set_state_dict({"last_epoch": 1, "last_lr": 0.125})
    b.set_state_dict(a.state_dict())
    b.step()
    assert b.bad_epochs == 3 and b() == 0.125


def test_extra_entries_of_state_keys_are_loaded_back():
    class Counting(Plateauish):
        _state_keys = ("last_epoch", "last_lr", "bad_epochs")
        state_keys = lr.LRScheduler.state_keys

    a = Counting(1.0)
    a.bad_epochs = 2
    b = Counting(1.0)
    b.set_state_dict(a.state_dict())
    assert b.bad_epochs == 2


def paddle_cosine(base, t_max, eta_min, last_epoch, steps, last_lr=None):
    """Paddle's CosineAnnealingDecay: __init__ steps once from last_epoch, get_lr recurses."""
    epoch, lr_, out = last_epoch, base if last_lr is None else last_lr, []
    for _ in range(steps):
        epoch += 1
        if epoch == 0:
            lr_ = base
        elif (epoch - 1 - t_max) % (2 * t_max) == 0:
            lr_ = lr_ + (base - eta_min) * (1 - math.cos(math.pi / t_max)) / 2
        else:
            ratio = (1 + math.cos(math.pi * epoch / t_max)) / (
                1 + math.cos(math.pi * (epoch - 1) / t_max)
            )
            lr_ = ratio * (lr_ - eta_min) + eta_min
        out.append(lr_)
    return out


def test_cosine_resumes_from_last_lr_as_paddle_does_bit_for_bit():
    sched = lr.CosineAnnealingDecay(1.0, T_max=10, eta_min=0.1, last_epoch=4)
    assert sequence(sched, 4) == paddle_cosine(1.0, 10, 0.1, 4, 4)  # epochs 5..8
    resumed = lr.CosineAnnealingDecay(1.0, T_max=3)
    resumed.set_state_dict({"last_epoch": 2, "last_lr": 1.5})  # a rate off this curve
    resumed.step()
    assert sequence(resumed, 8) == paddle_cosine(1.0, 3, 0.0, 2, 8, last_lr=1.5)
    assert sequence(lr.CosineAnnealingDecay(0.3, T_max=2), 9) == paddle_cosine(0.3, 2, 0, -1, 9)


def test_numpy_integers_are_accepted_wherever_an_int_is():
    sched = lr.StepDecay(0.1, step_size=np.int64(2), last_epoch=np.int64(5))
    assert sched.last_epoch == 6 and type(sched.last_epoch) is int
    sched.step(np.int64(3))
    assert sched.last_epoch == 3 and sched() == pytest.approx(0.01)
    assert lr.MultiStepDecay(0.1, milestones=list(np.arange(30, 90, 30))).milestones == [30, 60]
    with pytest.raises(ValueError, match="non-negative integer, got True"):
        sched.step(True)


def test_one_cycle_with_phase_pct_one_names_the_empty_fall():
    with pytest.raises(ValueError, match=r"the fall, from step 9 to step 9.*below 1\.0"):
        lr.OneCycleLR(1.0, 10, phase_pct=1.0)
    with pytest.raises(ValueError, match=r"the rise, from step 0 to step 0.*is not 1"):
        lr.OneCycleLR(1.0, 10, phase_pct=0.1)
