"""GradScaler and its kernels' NumPy twins: a specification by example.

The core acceptance pattern is PyTorch's ``_run_scaling_case``: a control model trained in
fp32 without a scaler, and the same model trained through the scaler with an inf injected
into one gradient at ``SKIP_ITER`` (the control skips that step). Loss scales here are
powers of two, so scaling and unscaling are exact and the two must agree to the bit.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import nn, optimizer
from minitorch_amp.amp.grad_scaler import GradScaler
from minitorch_amp.nn.parameter import Parameter

SKIP_ITER = 2
ITERS = 4


def _model():
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))


def _twin_models():
    control = _model()
    scaled = _model()
    scaled.set_state_dict(control.state_dict())
    return control, scaled


def _data():
    return [(mt.randn([4, 8]), mt.randn([4, 8])) for _ in range(ITERS)]


def _loss(out, target):
    return ((out - target) ** 2).mean()


def _inject_inf(model):
    model[2].weight.grad._data[0, 0] = np.inf


def _run_scaling_case(run, unskipped: int, skipped: int, atol: float = 0.0, n_models: int = 1):
    """Train a control and a scaled copy with ``run``; compare the scale and the params."""
    for enabled in (True, False):
        data = _data()
        pairs = [_twin_models() for _ in range(n_models)]
        controls = [c for c, _ in pairs]
        scaled = [s for _, s in pairs]

        def sgd(models):
            return [optimizer.SGD(learning_rate=0.5, parameters=m.parameters()) for m in models]

        # PyTorch's recipes, with PyTorch's spelling of the scaler: disabled, its get_scale()
        # is 1.0 (Paddle's is 0.0), which the scaled-threshold clipping multiplies by.
        scaler = mt.cuda.amp.GradScaler(
            enable=enabled, init_loss_scaling=128.0, incr_ratio=2.0, incr_every_n_steps=1
        )
        run(data, controls, sgd(controls), scaler, use_scaler=False)
        run(data, scaled, sgd(scaled), scaler, use_scaler=True)
        expected = 128.0 * 2.0**unskipped * 0.5**skipped if enabled else 1.0
        assert scaler.get_loss_scaling() == expected
        for c, s in zip(controls, scaled):
            for pc, ps in zip(c.parameters(), s.parameters()):
                np.testing.assert_allclose(ps.numpy(), pc.numpy(), rtol=0, atol=atol)


# ---- _run_scaling_case variants (PyTorch test_grad_scaling_*) -------------------------------
@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # clipping an inf grad
@pytest.mark.parametrize(
    "clip, api",
    [(None, "step"), ("scaled_grads", "step"), ("after_unscale_", "step"), (None, "minimize")],
)
def test_scaling_one_model(clip, api):
    max_norm = 0.2

    def run(data, models, opts, scaler, use_scaler):
        (model,), (opt,) = models, opts
        for i, (x, t) in enumerate(data):
            opt.clear_grad()
            loss = _loss(model(x), t)
            if not use_scaler:
                loss.backward()
                if clip:
                    nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                if not scaler.is_enable() or i != SKIP_ITER:
                    opt.step()
                continue
            scaled = scaler.scale(loss)
            scaled.backward()
            if clip == "scaled_grads":  # clip the scaled grads with a scaled threshold
                nn.utils.clip_grad_norm_(model.parameters(), max_norm * scaler.get_scale())
            if i == SKIP_ITER and scaler.is_enable():
                _inject_inf(model)
            if clip == "after_unscale_":  # the recipe: unscale_, clip, step
                scaler.unscale_(opt)
                nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            if api == "minimize":
                ops, params_grads = scaler.minimize(opt, scaled)
                assert ops == [] and len(params_grads) == 4
            else:
                scaler.step(opt)
                scaler.update()

    # clip's eps (1e-6) is added to the scaled norm, so those coefficients differ slightly
    _run_scaling_case(run, unskipped=3, skipped=1, atol=1e-5 if clip == "scaled_grads" else 0)


def test_scaling_gradient_accumulation():
    every = 2

    def run(data, models, opts, scaler, use_scaler):
        (model,), (opt,) = models, opts
        for i, (x, t) in enumerate(data):
            loss = _loss(model(x), t) / every
            (scaler.scale(loss) if use_scaler else loss).backward()
            if (i + 1) % every == 0:
                if use_scaler:
                    scaler.step(opt)
                    scaler.update()
                else:
                    opt.step()
                opt.clear_grad()

    _run_scaling_case(run, unskipped=2, skipped=0)


def test_scaling_two_models_two_losses_two_optimizers():
    def run(data, models, opts, scaler, use_scaler):
        (m0, m1), (opt0, opt1) = models, opts
        for i, (x, t) in enumerate(data):
            opt0.clear_grad()
            opt1.clear_grad()
            out0, out1 = m0(x), m1(x)
            loss0 = _loss(0.3 * out0 + 0.7 * out1, t)
            loss1 = _loss(0.6 * out0 - 0.4 * out1, t)
            if use_scaler:
                scaler.scale(loss0).backward(retain_graph=True)
                scaler.scale(loss1).backward()
                if i == SKIP_ITER and scaler.is_enable():
                    _inject_inf(m1)
                scaler.unscale_(opt0)  # a separate unscale_ for one optimizer only
                scaler.step(opt0)
                scaler.step(opt1)
                scaler.update()
            else:
                loss0.backward(retain_graph=True)
                loss1.backward()
                opt0.step()  # each optimizer decides on its own grads
                if not scaler.is_enable() or i != SKIP_ITER:
                    opt1.step()

    _run_scaling_case(run, unskipped=3, skipped=1, n_models=2)


# ---- unscale_ through the scaler: dtype buckets, non-contiguous grads --------------------------
def _mixed_params():
    shapes = [(4, 5), (5,), (3, 2)]
    params = [Parameter(np.zeros(s, dtype)) for s in shapes for dtype in ("float32", "float16")]
    for p in params:
        base = np.full(p.shape[:-1] + [2 * p.shape[-1]], 4.0, p.dtype)
        p.grad = base[..., : p.shape[-1]]  # non-contiguous grads
    return params


def test_scaler_buckets_fp16_and_fp32_grads_and_finds_inf_at_every_position():
    for bad_param in range(6):
        for bad_value in (np.inf, np.nan):
            params = _mixed_params()
            opt = optimizer.SGD(learning_rate=1.0, parameters=params)
            scaler = GradScaler(init_loss_scaling=4.0)
            params[bad_param].grad._data[..., -1] = bad_value
            scaler.unscale_(opt)
            for i, p in enumerate(params):
                g = p.grad.numpy()
                assert g.dtype == p.dtype
                assert np.all(g[..., :-1] == 1.0) and (i == bad_param or np.all(g == 1.0))
            scaler.step(opt)
            assert all(np.all(p.numpy() == 0) for p in params), "the step must be skipped"
            scaler.update()
            assert scaler.get_loss_scaling() == 2.0


# ---- the state machine: Paddle's messages, and a misuse changes nothing -------------------
def _one_param_setup(grad=(8.0, 8.0), **scaler_kw):
    p = Parameter(np.array([1.0, 2.0], "float32"))
    p.grad = np.array(grad, "float32")
    opt = optimizer.SGD(learning_rate=1.0, parameters=[p])
    return p, opt, GradScaler(init_loss_scaling=4.0, **scaler_kw)


def _snapshot(p, scaler):
    sd = scaler.state_dict()
    return (
        p.numpy().copy(),
        p.grad.numpy().copy(),
        {k: np.asarray(v).tolist() for k, v in sd.items()},
    )


def _assert_same(a, b):
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert a[2] == b[2]


@pytest.mark.parametrize(
    "calls, message",
    [
        (
            ["unscale_", "unscale_"],
            "unscale_() has already been called on this optimizer since the last update().",
        ),
        (["step", "unscale_"], "unscale_() is being called after step()."),
        (["step", "step"], "step() has already been called since the last update()."),
        (
            ["unscale_", "step", "minimize"],
            "minimize() is being called after step() since the last update().",
        ),
    ],
)
def test_misordered_calls_raise_paddles_errors_and_change_nothing(calls, message):
    p, opt, scaler = _one_param_setup()
    for name in calls[:-1]:
        getattr(scaler, name)(opt)
    before = _snapshot(p, scaler)
    with pytest.raises(RuntimeError) as info:
        getattr(scaler, calls[-1])(opt)
    assert str(info.value) == message
    _assert_same(_snapshot(p, scaler), before)
    scaler.update()  # and the scaler carries on normally
    scaler.unscale_(opt)


def test_update_without_any_unscale_or_step_says_the_expected_order():
    _, _, scaler = _one_param_setup()
    with pytest.raises(RuntimeError, match=r"scaler.step\(optimizer\), scaler.update\(\)"):
        scaler.update()


def test_unscale_then_step_unscales_once_and_steps_once():
    p, opt, scaler = _one_param_setup()
    scaler.unscale_(opt)
    np.testing.assert_array_equal(p.grad.numpy(), [2.0, 2.0])
    scaler.step(opt)
    np.testing.assert_array_equal(p.numpy(), [-1.0, 0.0])
    scaler.update()
    assert scaler.get_loss_scaling() == 4.0


def test_static_scale_still_skips_on_inf_and_update_is_optional():
    p, opt, scaler = _one_param_setup(grad=(np.inf, 8.0), use_dynamic_loss_scaling=False)
    scaler.step(opt)
    np.testing.assert_array_equal(p.numpy(), [1.0, 2.0])
    p.grad = np.array([8.0, 8.0], "float32")
    scaler.step(opt)  # no update() in between: allowed with a static scale
    np.testing.assert_array_equal(p.numpy(), [-1.0, 0.0])
    scaler.update()
    assert scaler.get_loss_scaling() == 4.0 and not scaler.is_use_dynamic_loss_scaling()


def test_static_scale_step_does_not_forget_another_optimizers_unscale_():
    p0, opt0, _ = _one_param_setup()
    p1, opt1, _ = _one_param_setup()
    scaler = GradScaler(init_loss_scaling=4.0, use_dynamic_loss_scaling=False)
    scaler.unscale_(opt1)
    scaler.step(opt0)
    scaler.step(opt1)  # must not unscale opt1's grads a second time
    np.testing.assert_array_equal(p1.grad.numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(p1.numpy(), p0.numpy())


def test_disabled_scaler_is_a_pass_through():
    p, opt, _ = _one_param_setup(grad=(np.inf, 8.0))
    scaler = GradScaler(enable=False)
    loss = mt.to_tensor(3.0, stop_gradient=False)
    assert scaler.scale(loss) is loss
    scaler.unscale_(opt)
    np.testing.assert_array_equal(p.grad.numpy(), [np.inf, 8.0])  # untouched
    scaler.step(opt)  # opt.step() as is: the inf goes in
    assert np.isinf(p.numpy()[0])
    scaler.update()
    assert scaler.minimize(opt, loss)[0] == []
    assert scaler.get_loss_scaling() == 1.0 and scaler.state_dict() == {}
    assert not scaler.is_enable() and not scaler.is_use_dynamic_loss_scaling()
    scaler.load_state_dict({})  # a no-op, as Paddle


def test_scale_multiplies_in_float32_keeps_the_shape_and_is_differentiable():
    scaler = GradScaler(init_loss_scaling=1024.0)
    x = mt.to_tensor(np.array([1.0, 2.0], "float16"), stop_gradient=False)
    loss = (x * x).sum()
    scaled = scaler.scale(loss)
    assert scaled.dtype == "float32" and scaled.shape == loss.shape == []
    assert scaled.item() == 5.0 * 1024
    scaled.backward()
    assert x.grad.dtype == "float16"
    np.testing.assert_array_equal(x.grad.numpy(), [2048.0, 4096.0])
    with pytest.raises(TypeError, match="Tensor"):
        scaler.scale(3.0)


def test_verbose_prints_paddles_decrease_message(capsys):
    _, opt, scaler = _one_param_setup(grad=(np.nan, 1.0), verbose=True)
    scaler.step(opt)
    scaler.update()
    assert (
        capsys.readouterr().out == "Found inf or nan, current scale is: 4.0, decrease to: 4.0*0.5\n"
    )


def test_floor_warning_fires_once_and_only_for_overflow_at_the_floor():
    p, opt, _ = _one_param_setup()
    scaler = GradScaler(init_loss_scaling=2.0, min_loss_scaling=2.0)
    with pytest.warns(RuntimeWarning, match="floor") as record:
        for _ in range(300):
            p.grad = np.array([np.inf, 1.0], "float32")
            scaler.unscale_(opt)
            scaler.update()
    assert len([w for w in record if "floor" in str(w.message)]) == 1
    assert scaler.get_loss_scaling() == 2.0
    calm = GradScaler(init_loss_scaling=2.0, min_loss_scaling=2.0, incr_every_n_steps=10**6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(300):  # at the floor, but a clean step every 50: nothing to report
            p.grad = np.array([np.inf if i % 50 else 1.0, 1.0], "float32")
            calm.unscale_(opt)
            calm.update()


# ---- checkpoints, getters and setters ---------------------------------------------------------
def _trained_scaler():
    p, opt, scaler = _one_param_setup(
        incr_ratio=4.0, incr_every_n_steps=3, decr_every_n_nan_or_inf=2
    )
    for grad in ([1.0, 1.0], [np.inf, 1.0], [1.0, 1.0], [1.0, 1.0]):
        p.grad = np.array(grad, "float32")
        scaler.step(opt)
        scaler.update()
    return scaler


def test_state_dict_has_paddles_keys_and_round_trips():
    sd = _trained_scaler().state_dict()
    assert list(sd) == [
        "scale", "incr_ratio", "decr_ratio", "incr_every_n_steps",
        "decr_every_n_nan_or_inf", "incr_count", "decr_count", "use_dynamic_loss_scaling",
    ]  # fmt: skip
    assert isinstance(sd["scale"], np.ndarray) and sd["scale"].shape == (1,)
    assert sd["scale"].dtype == "float32" and sd["scale"][0] == 4.0
    assert (sd["incr_count"], sd["decr_count"], sd["incr_ratio"]) == (2, 0, 4.0)
    fresh = GradScaler()
    fresh.load_state_dict(sd)
    assert {k: np.asarray(v).tolist() for k, v in fresh.state_dict().items()} == {
        k: np.asarray(v).tolist() for k, v in sd.items()
    }
    assert fresh.get_init_loss_scaling() == fresh.get_loss_scaling() == 4.0


def test_load_state_dict_rejects_empty_and_malformed_dicts_without_changing_anything():
    scaler = GradScaler(init_loss_scaling=8.0)
    with pytest.raises(RuntimeError) as info:
        scaler.load_state_dict({})
    assert str(info.value) == (
        "The input state dict is empty, possibly because it was saved from a disabled "
        "instance of GradScaler."
    )
    good = _trained_scaler().state_dict()
    before = scaler.state_dict()
    bad_dicts = [
        {k: v for k, v in good.items() if k != "incr_ratio"},
        {**good, "growth_factor": 2.0},
        {**good, "incr_ratio": 0.5},
        {**good, "scale": np.array([np.inf], "float32")},
        {**good, "scale": np.array([1.0, 2.0], "float32")},
        {**good, "incr_count": 3},  # must stay below incr_every_n_steps=3
        {**good, "decr_count": -1},
        {**good, "use_dynamic_loss_scaling": "yes"},
    ]
    for bad in bad_dicts:
        with pytest.raises(ValueError):
            scaler.load_state_dict(bad)
        assert scaler.state_dict().keys() == before.keys()
        assert scaler.get_loss_scaling() == 8.0 and scaler.get_incr_ratio() == 2.0


@pytest.mark.parametrize(
    "name, bad, ok",
    [
        ("init_loss_scaling", [0.0, -1.0, np.inf, "1"], 8.0),
        ("incr_ratio", [1.0, 0.5, np.inf, True], 3.0),
        ("decr_ratio", [1.0, 0.0, 1.5], 0.25),
        ("incr_every_n_steps", [0, -1, 2.5, True], 5),
        ("decr_every_n_nan_or_inf", [0, 1.0, None], 3),
    ],
)
def test_setters_validate_with_value_errors(name, bad, ok):
    scaler = GradScaler()
    for value in bad:
        with pytest.raises(ValueError, match=name):
            getattr(scaler, f"set_{name}")(value)
        with pytest.raises(ValueError, match=name):
            GradScaler(**{name: value})
    getattr(scaler, f"set_{name}")(ok)
    assert getattr(scaler, f"get_{name}")() == ok
    if name == "init_loss_scaling":  # the setter also resets the current scale (Paddle)
        assert scaler.get_loss_scaling() == ok


@pytest.mark.parametrize("lower", ["incr_every_n_steps", "decr_every_n_nan_or_inf"])
def test_a_step_count_lowered_below_its_counter_acts_at_the_next_step_and_saves_loadably(lower):
    """5 steps counted, then the limit lowered to 3: the counter is held at 2, so the next
    step of its kind changes the scale (past the limit, ``count + 1 == limit`` would never
    hold again), and the state dict loads back into the scaler and a fresh one."""
    p, opt, scaler = _one_param_setup(incr_every_n_steps=10, decr_every_n_nan_or_inf=10)
    grad = [1.0, 1.0] if lower == "incr_every_n_steps" else [np.inf, 1.0]
    for _ in range(5):
        p.grad = np.array(grad, "float32")
        scaler.step(opt)
        scaler.update()
    scale = scaler.get_loss_scaling()
    getattr(scaler, f"set_{lower}")(3)
    state = scaler.state_dict()
    assert state["incr_count" if lower == "incr_every_n_steps" else "decr_count"] == 2
    for target in (scaler, GradScaler()):
        target.load_state_dict(state)
    p.grad = np.array(grad, "float32")
    scaler.step(opt)
    scaler.update()
    factor = 2.0 if lower == "incr_every_n_steps" else 0.5
    assert scaler.get_loss_scaling() == scale * factor
