"""Properties of GradScaler under random sequences of clean and overflowing steps.

1. The scale (and Paddle's two counters) follow the dynamic rule, written out again here in
   plain Python, independently of ``backend/loss_scaling.py``.
2. A skipped step changes nothing: every parameter, master weight and optimizer accumulator
   (moments, velocities, beta pows) is bit-identical before and after it.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from minitorch_amp import optimizer
from minitorch_amp.amp.grad_scaler import GradScaler
from minitorch_amp.nn.parameter import Parameter


def reference_trajectory(steps, init, incr_ratio, decr_ratio, incr_n, decr_n, floor):
    """The scale after each step, and the final (good, bad) counters: Paddle's rule + floor."""
    scale, good, bad, out = np.float32(init), 0, 0, []
    for overflow in steps:
        if overflow:
            good, bad = 0, bad + 1
            if bad == decr_n:  # decr_n overflows *in a row*
                scale, bad = max(np.float32(scale * np.float32(decr_ratio)), np.float32(floor)), 0
        else:
            good, bad = good + 1, 0
            if good == incr_n:
                with np.errstate(over="ignore"):  # growing past float32's max gives inf
                    grown = np.float32(scale * np.float32(incr_ratio))
                scale, good = (grown if math.isfinite(grown) else scale), 0
        out.append(float(scale))
    return out, good, bad


hyper = st.fixed_dictionaries(
    {
        "init": st.sampled_from([1.0, 3.0, 2.0**10, 2.0**16, 2.0**126]),
        "incr_ratio": st.sampled_from([2.0, 1.5, 4.0]),
        "decr_ratio": st.sampled_from([0.5, 0.25, 0.9]),
        "incr_n": st.integers(1, 4),
        "decr_n": st.integers(1, 3),
        "floor": st.sampled_from([1.0, 0.5, 2.0**-10]),
    }
)


@given(steps=st.lists(st.booleans(), max_size=40), h=hyper, nan=st.booleans())
def test_scale_follows_the_reference_rule(steps, h, nan):
    p = Parameter(np.zeros(3, "float32"))
    opt = optimizer.SGD(learning_rate=0.1, parameters=[p])
    scaler = GradScaler(
        init_loss_scaling=h["init"],
        incr_ratio=h["incr_ratio"],
        decr_ratio=h["decr_ratio"],
        incr_every_n_steps=h["incr_n"],
        decr_every_n_nan_or_inf=h["decr_n"],
        min_loss_scaling=h["floor"],
    )
    expected, good, bad = reference_trajectory(steps, **h)
    got = []
    for overflow in steps:
        p.grad = np.array([1.0, np.nan if nan else np.inf, 2.0] if overflow else [1.0] * 3, "f4")
        scaler.step(opt)
        scaler.update()
        got.append(scaler.get_loss_scaling())
    assert got == expected
    sd = scaler.state_dict()
    assert (sd["incr_count"], sd["decr_count"]) == (good, bad)


# ---- a skipped step is invisible ------------------------------------------------------------
OPTIMIZERS = {
    "SGD": lambda ps, mp: optimizer.SGD(0.1, parameters=ps, multi_precision=mp),
    "Momentum": lambda ps, mp: optimizer.Momentum(
        0.1, momentum=0.9, parameters=ps, use_nesterov=True, multi_precision=mp
    ),
    "Adam": lambda ps, mp: optimizer.Adam(0.01, parameters=ps, multi_precision=mp),
    "AdamW": lambda ps, mp: optimizer.AdamW(0.01, parameters=ps, multi_precision=mp),
}


def _everything(params, opt) -> dict:
    """Bytes of every parameter and every piece of optimizer state, by a stable key."""
    state = {f"param{i}": p.numpy().tobytes() for i, p in enumerate(params)}
    for i, p in enumerate(params):
        for name, array in opt._accumulators.get(id(p), {}).items():
            state[f"param{i}.{name}"] = np.asarray(array).tobytes()
    for name, master in getattr(opt, "_master_weights", {}).items():
        state[f"master.{name}"] = master.numpy().tobytes()
    for key, value in opt.state_dict().items():
        state[f"state_dict.{key}"] = (
            repr(value) if isinstance(value, dict) else value.numpy().tobytes()
        )
    return state


@given(
    name=st.sampled_from(sorted(OPTIMIZERS)),
    dtype=st.sampled_from(["float32", "float16"]),
    clean_steps_before=st.integers(0, 3),
    bad_param=st.integers(0, 1),
    bad_index=st.integers(0, 5),
    bad_value=st.sampled_from([np.inf, -np.inf, np.nan]),
    use_minimize=st.booleans(),
    data=st.data(),
)
def test_a_skipped_step_leaves_params_and_optimizer_state_bit_identical(
    name, dtype, clean_steps_before, bad_param, bad_index, bad_value, use_minimize, data
):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    params = [Parameter(rng.standard_normal(6).astype(dtype)) for _ in range(2)]
    opt = OPTIMIZERS[name](params, dtype == "float16")
    scaler = GradScaler(init_loss_scaling=2.0**10)

    def set_grads(bad: bool):
        for i, p in enumerate(params):
            g = (rng.standard_normal(6) * 2.0**10).astype(dtype)  # grads as the scaled loss gives
            if bad and i == bad_param:
                g[bad_index] = bad_value
            p.grad = g

    for _ in range(clean_steps_before):  # so that moments and beta pows are not fresh
        set_grads(bad=False)
        scaler.step(opt)
        scaler.update()
    before = _everything(params, opt)
    set_grads(bad=True)
    if use_minimize:
        scaler.minimize(opt, None)
    else:
        scaler.step(opt)
        scaler.update()
    assert _everything(params, opt) == before
    assert opt._get_auxiliary_var("found_inf") is None, "the optimizer clears the flag"
    set_grads(bad=False)  # and the next clean step does update
    scaler.step(opt)
    assert _everything(params, opt) != before
