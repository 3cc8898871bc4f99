"""Optimizers against their update rules written out by hand in float64 NumPy.

Parameters are plain ``Parameter``s with hand-set gradients, so these tests need no layers.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp.autograd.tensor import Tensor
from minitorch_amp.nn.clip import (
    ClipGradByGlobalNorm,
    ClipGradByNorm,
    ClipGradByValue,
    clip_grad_norm_,
    clip_grad_value_,
)
from minitorch_amp.nn.parameter import Parameter
from minitorch_amp.optimizer import SGD, Adam, AdamW, Momentum, lr
from minitorch_amp.regularizer import L1Decay, L2Decay

P0 = np.array([[0.5, -1.0, 2.0], [1.5, -0.25, 0.0]])
G1 = np.array([[0.1, 0.2, -0.3], [0.4, -0.5, 0.6]])
G2 = np.array([[-0.2, 0.1, 0.05], [0.3, 0.3, -0.1]])


def param(values=P0, dtype="float32", name=None) -> Parameter:
    return Parameter(np.array(values, dtype=dtype), name=name)


def set_grad(p, values) -> None:
    p._grad = Tensor._wrap(np.array(values, dtype=p.dtype))


def run(opt, p, grads) -> None:
    for g in grads:
        set_grad(p, g)
        opt.step()


def close(p, expected, rtol=1e-6, atol=1e-7):
    np.testing.assert_allclose(p.numpy().astype(np.float64), expected, rtol=rtol, atol=atol)


# ---- one update equals the formula ----------------------------------------------------------
@pytest.mark.parametrize("wd", [None, 0.1])
def test_sgd_step_is_p_minus_lr_g(wd):
    p = param()
    run(SGD(learning_rate=0.1, parameters=[p], weight_decay=wd), p, [G1])
    close(p, P0 - 0.1 * (G1 + (wd or 0.0) * P0))


@pytest.mark.parametrize("nesterov", [False, True])
@pytest.mark.parametrize("wd", [None, 0.01])
def test_momentum_two_steps(nesterov, wd):
    p = param()
    opt = Momentum(0.1, momentum=0.9, parameters=[p], use_nesterov=nesterov, weight_decay=wd)
    run(opt, p, [G1, G2])
    ref, v = P0.copy(), np.zeros_like(P0)
    for g in (G1, G2):
        g = g + (wd or 0.0) * ref
        v = 0.9 * v + g
        ref = ref - 0.1 * (g + 0.9 * v) if nesterov else ref - 0.1 * v
    close(p, ref)
    np.testing.assert_allclose(opt.state_dict()[f"{p.name}_velocity_0"].numpy(), v, rtol=1e-6)


def test_momentum_rescale_grad_is_applied_before_weight_decay():
    p = param()
    run(Momentum(0.1, 0.9, [p], weight_decay=0.5, rescale_grad=0.25), p, [G1])
    close(p, P0 - 0.1 * (0.25 * G1 + 0.5 * P0))


def adam_reference(p, grads, lr_=0.01, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, decoupled=0.0):
    """Adam in float64, except the beta powers: float32 accumulators, as in Paddle."""
    m, v = np.zeros_like(p), np.zeros_like(p)
    b1p, b2p = np.float32(b1), np.float32(b2)
    for g in grads:
        p = p * (1 - lr_ * decoupled)
        g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        lr_t = lr_ * np.sqrt(1 - b2p) / (1 - b1p)
        p = p - lr_t * m / (np.sqrt(v) + eps * np.sqrt(1 - b2p))
        b1p, b2p = b1p * np.float32(b1), b2p * np.float32(b2)
    return p, m, v, b1p, b2p


@pytest.mark.parametrize("wd", [None, 0.1])
def test_adam_two_steps_and_beta_pow_accumulators(wd):
    p = param(name="linear_0.w_0")
    opt = Adam(0.01, beta1=0.8, beta2=0.95, epsilon=1e-6, parameters=[p], weight_decay=wd)
    run(opt, p, [G1, G2])
    ref, m, v, b1p, b2p = adam_reference(P0, [G1, G2], 0.01, 0.8, 0.95, 1e-6, wd or 0.0)
    close(p, ref)
    state = opt.state_dict()
    assert sorted(state) == [
        "linear_0.w_0_beta1_pow_acc_0",
        "linear_0.w_0_beta2_pow_acc_0",
        "linear_0.w_0_moment1_0",
        "linear_0.w_0_moment2_0",
    ]
    np.testing.assert_allclose(state["linear_0.w_0_moment1_0"].numpy(), m, rtol=1e-6)
    np.testing.assert_allclose(state["linear_0.w_0_moment2_0"].numpy(), v, rtol=1e-6)
    # After two updates the pows hold beta**3: the power for the *next* step.
    assert state["linear_0.w_0_beta1_pow_acc_0"].shape == [1]
    np.testing.assert_allclose(state["linear_0.w_0_beta1_pow_acc_0"].numpy(), [b1p], rtol=1e-6)
    assert b1p == pytest.approx(0.8**3)
    np.testing.assert_allclose(state["linear_0.w_0_beta2_pow_acc_0"].numpy(), [b2p], rtol=1e-6)


def test_adams_epsilon_inside_the_bias_corrected_step_is_pytorchs_epsilon_rounded_apart():
    """docs/porting.md: eps * sqrt(1 - beta2^t) added to sqrt(v) is algebraically
    eps added to sqrt(v_hat) (PyTorch's form); in float32 the two differ in the last bits."""
    p = param(name="eps_probe")
    opt = Adam(0.01, beta1=0.8, beta2=0.95, epsilon=0.1, parameters=[p])
    run(opt, p, [G1, G2])
    torch_form, m, v = P0.astype("float64"), 0.0, 0.0
    for t, g in enumerate([G1, G2], start=1):
        m, v = 0.8 * m + 0.2 * g, 0.95 * v + 0.05 * g * g
        m_hat, v_hat = m / (1 - 0.8**t), v / (1 - 0.95**t)
        torch_form = torch_form - 0.01 * m_hat / (np.sqrt(v_hat) + 0.1)
    np.testing.assert_allclose(p.numpy(), torch_form, rtol=1e-6)  # the same step
    close(p, adam_reference(P0, [G1, G2], 0.01, 0.8, 0.95, 0.1, 0.0)[0])  # Paddle's form


@pytest.mark.parametrize("coeff", [0.0, 0.1])
def test_adamw_decays_the_parameter_not_the_gradient(coeff):
    p = param()
    run(AdamW(0.01, parameters=[p], weight_decay=coeff), p, [G1, G2])
    close(p, adam_reference(P0, [G1, G2], decoupled=coeff)[0])


def test_adamw_apply_decay_param_fun_and_lr_ratio():
    w, b = param(name="fc.w_0"), param(name="fc.b_0")
    opt = AdamW(
        0.01,
        parameters=[w, b],
        weight_decay=0.5,
        apply_decay_param_fun=lambda name: not name.endswith("b_0"),
        lr_ratio=lambda p: 0.5 if p.name == "fc.b_0" else 1.0,
    )
    set_grad(w, G1)
    set_grad(b, G1)
    opt.step()
    close(w, adam_reference(P0, [G1], lr_=0.01, decoupled=0.5)[0])
    close(b, adam_reference(P0, [G1], lr_=0.005)[0])


def test_per_parameter_learning_rate_multiplies_the_rate():
    p, q = param(), param()
    q.optimize_attr["learning_rate"] = 0.5
    set_grad(p, G1)
    set_grad(q, G1)
    SGD(0.1, parameters=[p, q]).step()
    close(p, P0 - 0.1 * G1)
    close(q, P0 - 0.05 * G1)


def test_param_groups_override_rate_decay_and_hyper_parameters():
    p, q = param(), param()
    opt = Momentum(
        0.1,
        momentum=0.9,
        parameters=[
            {"params": [p]},
            {"params": [q], "learning_rate": 0.5, "momentum": 0.0, "weight_decay": L2Decay(1.0)},
        ],
    )
    run(opt, p, [G1])
    set_grad(q, G1)
    set_grad(p, G1)
    opt.step()  # p: second step; q: first step with momentum 0
    close(p, P0 - 0.1 * G1 - 0.1 * (0.9 * G1 + G1))
    close(q, P0 - 0.05 * (G1 + P0))


def test_parameter_regularizer_wins_over_the_optimizers():
    p = param()
    p.regularizer = L1Decay(0.5)
    run(SGD(0.1, parameters=[p], weight_decay=L2Decay(10.0)), p, [G1])
    close(p, P0 - 0.1 * (G1 + 0.5 * np.sign(P0)))


@pytest.mark.filterwarnings("ignore:Accumulating with FP16")
def test_float16_params_update_with_float32_maths():
    # g * g * (1 - beta2) = 1e-9 underflows to 0 in float16, and epsilon=1e-8 is 0 there too:
    # float16 Adam maths would divide by zero. Float32 maths gives a normal first step.
    g = np.full((2, 3), 1e-3)
    assert np.float16(1e-3) * np.float16(1e-3) * np.float16(1 - 0.999) == 0
    p = param(dtype="float16")
    opt = Adam(0.01, parameters=[p])
    run(opt, p, [g])
    assert p.dtype == np.float16
    p16 = P0.astype(np.float16).astype(np.float64)
    expected = adam_reference(p16, [g.astype(np.float16).astype(np.float64)])[0]
    assert np.isfinite(p.numpy()).all() and (p.numpy() != P0.astype(np.float16)).all()
    np.testing.assert_allclose(p.numpy().astype(np.float64), expected, rtol=1e-3)
    assert all(t.dtype == np.float32 for t in opt.state_dict().values())


@pytest.mark.filterwarnings("ignore:Accumulating with FP16")
def test_float16_sgd_rounds_once_from_float32():
    p = param(dtype="float16")
    run(SGD(0.3, parameters=[p], weight_decay=0.7), p, [G1])
    p16 = P0.astype(np.float16).astype(np.float32)
    g32 = G1.astype(np.float16).astype(np.float32)
    expected = (p16 - np.float32(0.3) * (g32 + np.float32(0.7) * p16)).astype(np.float16)
    np.testing.assert_array_equal(p.numpy(), expected)


def test_update_is_in_place_and_skips_frozen_or_gradless_params():
    p, frozen, nograd = param(), param(), param()
    frozen.stop_gradient = True
    set_grad(frozen, G1)
    data = p._data
    opt = Adam(0.1, parameters=[p, frozen, nograd])
    run(opt, p, [G1])
    assert p._data is data
    np.testing.assert_array_equal(frozen.numpy(), P0.astype(np.float32))
    np.testing.assert_array_equal(nograd.numpy(), P0.astype(np.float32))
    assert not any(k.startswith((frozen.name + "_", nograd.name + "_")) for k in opt.state_dict())


# ---- clipping -------------------------------------------------------------------------------
def test_grad_clip_is_applied_before_the_update_and_leaves_grad_alone():
    p = param([[0.0, 0.0]])
    set_grad(p, [[3.0, 4.0]])
    SGD(1.0, parameters=[p], grad_clip=ClipGradByGlobalNorm(1.0)).step()
    close(p, [[-0.6, -0.8]])
    np.testing.assert_array_equal(p.grad.numpy(), [[3.0, 4.0]])


def test_clip_by_global_norm_ignores_params_with_need_clip_false():
    p, q, r = param([0.0, 0.0]), param([0.0]), param([0.0])
    q.need_clip = False
    pairs = [
        (p, Tensor._wrap(np.array([3.0, 0.0], "float32"))),
        (q, Tensor._wrap(np.array([100.0], "float32"))),
        (r, Tensor._wrap(np.array([4.0], "float32"))),
    ]
    out = ClipGradByGlobalNorm(2.5)(pairs)
    assert all(a is b for (a, _), (b, _) in zip(out, pairs))
    np.testing.assert_allclose(out[0][1].numpy(), [1.5, 0.0], rtol=1e-6)
    assert out[1][1] is pairs[1][1]
    np.testing.assert_allclose(out[2][1].numpy(), [2.0], rtol=1e-6)
    # Below the limit nothing changes.
    np.testing.assert_array_equal(ClipGradByGlobalNorm(10.0)(pairs)[0][1].numpy(), [3.0, 0.0])


def test_clip_by_global_norm_of_float16_grads_squares_in_float32():
    p = param([0.0, 0.0], dtype="float16")
    [(_, g)] = ClipGradByGlobalNorm(1.0)([(p, Tensor._wrap(np.array([300, 400], "float16")))])
    assert g.dtype == np.float16
    np.testing.assert_allclose(g.numpy().astype(np.float32), [0.6, 0.8], rtol=1e-3)


def test_clip_by_norm_is_per_tensor():
    p, q = param([0.0, 0.0]), param([0.0, 0.0])
    out = ClipGradByNorm(1.0)(
        [
            (p, Tensor._wrap(np.array([3.0, 4.0], "float32"))),
            (q, Tensor._wrap(np.array([0.3, 0.4], "float32"))),
        ]
    )
    np.testing.assert_allclose(out[0][1].numpy(), [0.6, 0.8], rtol=1e-6)
    np.testing.assert_allclose(out[1][1].numpy(), [0.3, 0.4], rtol=1e-6)


def test_clip_grad_norm_scales_in_place_and_returns_the_norm():
    p, q = param([0.0, 0.0]), param([0.0, 0.0], dtype="float16")
    set_grad(p, [3.0, 0.0])
    set_grad(q, [0.0, 400.0])  # 400**2 overflows float16: the norm must be summed in float32
    grad_array = p.grad._data
    total = clip_grad_norm_([p, q], max_norm=5.0)
    assert isinstance(total, Tensor) and total.dtype == np.float32
    np.testing.assert_allclose(float(total), np.hypot(3.0, 400.0), rtol=1e-6)
    coef = 5.0 / (np.hypot(3.0, 400.0) + 1e-6)
    assert p.grad._data is grad_array
    np.testing.assert_allclose(p.grad.numpy(), [3.0 * coef, 0.0], rtol=1e-6)
    np.testing.assert_allclose(q.grad.numpy().astype(np.float32), [0.0, 400 * coef], rtol=1e-3)


def test_clip_grad_norm_inf_norm_and_small_norms_untouched():
    p = param([0.0, 0.0, 0.0])
    set_grad(p, [1.0, -4.0, 2.0])
    assert float(clip_grad_norm_(p, max_norm=2.0, norm_type=float("inf"))) == 4.0
    expected = np.array([1.0, -4.0, 2.0]) * 2 / (4 + 1e-6)
    np.testing.assert_allclose(p.grad.numpy(), expected, rtol=1e-6)
    set_grad(p, [0.1, 0.2, 0.2])
    np.testing.assert_allclose(float(clip_grad_norm_(p, 1.0, norm_type=1)), 0.5, rtol=1e-6)
    np.testing.assert_allclose(p.grad.numpy(), [0.1, 0.2, 0.2], rtol=1e-6)


def test_clip_grad_norm_nonfinite_error_changes_nothing():
    p, q = param([0.0, 0.0]), param([0.0])
    set_grad(p, [np.inf, 1.0])
    set_grad(q, [2.0])
    with pytest.raises(RuntimeError, match="error_if_nonfinite"):
        clip_grad_norm_([p, q], 1.0, error_if_nonfinite=True)
    np.testing.assert_array_equal(p.grad.numpy(), [np.inf, 1.0])
    np.testing.assert_array_equal(q.grad.numpy(), [2.0])
    with pytest.raises(ValueError, match="norm_type"):
        clip_grad_norm_([p], 1.0, norm_type=-1)


def test_clip_grad_norm_scales_a_nonfinite_norm_quietly_as_asked():
    """error_if_nonfinite=False: inf * 0 is NaN, as in PyTorch, with no NumPy warning."""
    p = param([0.0, 0.0])
    set_grad(p, [np.inf, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        total = clip_grad_norm_([p], 1.0)
    assert np.isinf(total.numpy()) and p.grad.numpy().tolist()[1] == 0.0


def test_clip_by_value_and_clip_grad_value_():
    p = param([0.0, 0.0, 0.0])
    [(_, g)] = ClipGradByValue(1.0)([(p, Tensor._wrap(np.array([-3.0, 0.5, 2.0], "float32")))])
    np.testing.assert_array_equal(g.numpy(), [-1.0, 0.5, 1.0])
    set_grad(p, [-3.0, 0.5, 2.0])
    clip_grad_value_([p], 0.25)
    np.testing.assert_array_equal(p.grad.numpy(), [-0.25, 0.25, 0.25])


# ---- construction, minimize, clear_grad -------------------------------------------------------
@pytest.mark.parametrize("parameters", [None, [], [{"params": []}]])
def test_an_optimizer_without_parameters_says_what_to_pass(parameters):
    with pytest.raises(ValueError, match=r"parameters=model.parameters\(\)"):
        SGD(0.1, parameters=parameters)


@pytest.mark.parametrize(
    "make, error",
    [
        (lambda p: Adam(0.1, beta1=1.0, parameters=[p]), ValueError),
        (lambda p: Adam(0.1, epsilon=-1.0, parameters=[p]), ValueError),
        (lambda p: SGD("0.1", parameters=[p]), TypeError),
        (lambda p: SGD(0.1, parameters=[p, p]), ValueError),
        (lambda p: SGD(0.1, parameters=p), TypeError),
        (lambda p: SGD(0.1, parameters=[{"params": [p], "lr": 0.1}]), ValueError),
        (lambda p: SGD(0.1, parameters=[p], weight_decay="l2"), TypeError),
        (lambda p: Momentum(0.1, momentum=-0.5, parameters=[p]), ValueError),
        (lambda p: AdamW(0.1, parameters=[p], weight_decay=L2Decay(0.1)), TypeError),
    ],
)
def test_bad_arguments_raise_clear_errors(make, error):
    with pytest.raises(error):
        make(param())


def test_minimize_applies_existing_grads_and_does_not_run_backward():
    p = param([1.0, 2.0])
    opt = SGD(0.5, parameters=[p])
    loss = (p * p).sum()
    ops, params_grads = opt.minimize(loss)
    assert p.grad is None and params_grads == [] and ops == []
    np.testing.assert_array_equal(p.numpy(), [1.0, 2.0])
    loss.backward()
    _, params_grads = opt.minimize(loss)
    assert len(params_grads) == 1 and params_grads[0][0] is p
    close(p, [0.0, 0.0])  # p - 0.5 * 2p
    set_grad(p, [1.0, 1.0])
    opt.minimize(loss, no_grad_set={p})
    close(p, [0.0, 0.0])


def test_minimize_refuses_a_parameter_given_twice_and_updates_nothing():
    """Listed twice, a parameter was updated once by small buckets and twice by the in-place
    ones (65536 elements and up): refused, as the constructor refuses it."""
    p, q = param([1.0, 2.0]), param([3.0, 4.0])
    opt = SGD(0.5, parameters=[p, q])
    set_grad(p, [1.0, 1.0])
    set_grad(q, [1.0, 1.0])
    with pytest.raises(ValueError, match="appears twice in parameters"):
        opt.minimize(None, parameters=[q, p, q])
    close(p, [1.0, 2.0])
    close(q, [3.0, 4.0])
    opt.minimize(None, parameters=[q, p])
    close(p, [0.5, 1.5])


def test_clear_grad_zeroes_in_place_or_drops():
    p = param()
    set_grad(p, G1)
    grad = p.grad
    opt = SGD(0.1, parameters=[p])
    opt.clear_grad()
    assert p.grad is grad and not p.grad.numpy().any()
    opt.clear_grad(set_to_zero=False)
    assert p.grad is None


# ---- learning-rate schedulers ----------------------------------------------------------------
def test_scheduler_drives_the_learning_rate():
    p = param([0.0])
    sched = lr.StepDecay(1.0, step_size=1, gamma=0.5)
    opt = SGD(sched, parameters=[p])
    for expected in (1.0, 0.5, 0.25):
        assert opt.get_lr() == expected
        run(opt, p, [[1.0]])
        sched.step()
    close(p, [-1.75])
    with pytest.raises(RuntimeError, match="LRScheduler"):
        opt.set_lr(0.1)
    assert opt.state_dict()["LR_Scheduler"] == {"last_epoch": 3, "last_lr": 0.125}


def test_set_lr_changes_a_float_rate():
    opt = SGD(0.1, parameters=[param()])
    opt.set_lr(0.01)
    assert opt.get_lr() == 0.01
    with pytest.raises(TypeError):
        opt.set_lr("fast")


# ---- checkpoints ------------------------------------------------------------------------------
def test_momentum_state_dict_uses_paddle_names():
    p = param(name="linear_0.w_0")
    opt = Momentum(0.1, parameters=[p])
    assert opt.state_dict() == {}  # accumulators are created at the first update
    run(opt, p, [G1])
    assert list(opt.state_dict()) == ["linear_0.w_0_velocity_0"]


@pytest.mark.parametrize(
    "make",
    [
        lambda ps, s: Adam(s, parameters=ps, weight_decay=0.01),
        lambda ps, s: AdamW(s, parameters=ps),
        lambda ps, s: Momentum(s, parameters=ps, use_nesterov=True),
    ],
)
def test_state_dict_round_trip_continues_training_identically(make, tmp_path):
    def build():
        ps = [param(name="w"), param(P0[0], name="b")]
        sched = lr.CosineAnnealingDecay(0.05, T_max=4)
        return ps, sched, make(ps, sched)

    grads = [(G1, G2[0]), (G2, G1[0]), (G1 * 2, G2[1]), (G2 * 3, G1[1])]

    def train(ps, sched, opt, steps):
        for gw, gb in steps:
            set_grad(ps[0], gw)
            set_grad(ps[1], gb)
            opt.step()
            sched.step()

    ps_a, sched_a, opt_a = build()
    train(ps_a, sched_a, opt_a, grads[:2])
    mt.save({"opt": opt_a.state_dict(), "w": [p.numpy() for p in ps_a]}, tmp_path / "ckpt")
    train(ps_a, sched_a, opt_a, grads[2:])

    ps_b, sched_b, opt_b = build()
    ckpt = mt.load(tmp_path / "ckpt")
    for p, saved in zip(ps_b, ckpt["w"]):
        p._data[...] = saved
    opt_b.set_state_dict(ckpt["opt"])
    assert sched_b.last_epoch == 2
    train(ps_b, sched_b, opt_b, grads[2:])
    for a, b in zip(ps_a, ps_b):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_set_state_dict_with_a_wrong_shape_changes_nothing():
    p, q = param(name="w"), param(P0[0], name="b")
    sched = lr.StepDecay(0.1, step_size=1)
    opt = Adam(sched, parameters=[p, q])
    set_grad(p, G1)
    set_grad(q, G1[0])
    opt.step()
    before = {
        k: (v.numpy().copy() if isinstance(v, Tensor) else v) for k, v in opt.state_dict().items()
    }
    bad = {k: (v.numpy() * 0 + 7 if isinstance(v, Tensor) else v) for k, v in before.items()}
    bad["LR_Scheduler"] = {"last_epoch": 9, "last_lr": 1.0}
    bad["b_moment2_0"] = np.zeros((2, 2), "float32")
    with pytest.raises(ValueError, match="b_moment2_0"):
        opt.set_state_dict(bad)
    after = opt.state_dict()
    for k, v in before.items():
        if k == "LR_Scheduler":
            assert after[k] == v
        else:
            np.testing.assert_array_equal(after[k].numpy(), v)
    del bad["b_moment2_0"]
    with pytest.raises(ValueError, match="missing"):
        opt.set_state_dict(bad)
    assert sched.last_epoch == 0


def test_set_state_dict_warns_about_entries_that_match_no_parameter():
    p = param(name="w")
    opt = Momentum(0.1, parameters=[p])
    with pytest.warns(UserWarning, match="match no parameter"):
        opt.set_state_dict({"other_velocity_0": np.zeros(3, "float32")})
    assert opt.state_dict() == {}
