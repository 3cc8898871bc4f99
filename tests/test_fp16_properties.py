"""What AMP relies on about float16, stated as properties and checked with the public kit.

This file uses only ``minitorch_amp.testing``, minitorch_amp's public API and NumPy (plus
CPython's own binary16 packing, ``struct``'s ``'e'`` format) as oracles, so it doubles as an
example of property-testing your own fp16 code (see docs/testing.md).

1. The float32 -> float16 cast is IEEE round to nearest even, bit for bit.
2. Overflow happens exactly at 65520: below it finite, at or above it inf.
3. Unscaling by a power-of-two loss scale is exact unless the result underflows.
4. With a loss scale S, gradients with ``2**-24 <= |g * S| <= 65504`` survive the float16
   round trip; the others flush to zero (``|g * S| <= 2**-25``) or overflow
   (``|g * S| >= 65520``) exactly as predicted.
5. GradScaler never applies a step whose gradients hold inf/NaN.
6. GradScaler's scale follows the dynamic rule, written out below, for any sequence of steps.
"""

from __future__ import annotations

import struct

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

import minitorch_amp as mt
from minitorch_amp.testing import assert_bit_equal, fp16
from minitorch_amp.testing.strategies import (
    fp16_values,
    fp32_values_near_fp16_edges,
    gradient_magnitudes,
    shapes,
    tensors,
)

NONFINITE = [np.inf, -np.inf, np.nan]


def numpy_fp16(x) -> np.ndarray:
    """The oracle: NumPy's float32 -> float16 conversion (round to nearest even)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(x, dtype=np.float32).astype(np.float16)


def struct_fp16_bits(x: float) -> int:
    """A second, independent oracle: CPython packs binary16 with round half to even."""
    try:
        return int.from_bytes(struct.pack("<e", x), "little")
    except OverflowError:  # CPython refuses instead of rounding to inf
        return 0xFC00 if x < 0 else 0x7C00


# ---- 1. the cast is round to nearest even ----------------------------------------------------
near_edges_or_any = fp32_values_near_fp16_edges() | st.floats(width=32, allow_nan=False)


@given(
    x=tensors(
        shape=shapes(min_dims=1, max_dims=2, min_side=0, max_side=6), elements=near_edges_or_any
    )
)
def test_fp32_to_fp16_cast_is_round_to_nearest_even_bit_for_bit(x):
    out = x.astype("float16")
    assert_bit_equal(out, numpy_fp16(x.numpy()))
    struct_bits = [struct_fp16_bits(float(v)) for v in x.numpy().ravel()]
    assert out.numpy().ravel().view(np.uint16).tolist() == struct_bits


@given(bits=st.integers(0x7F800001, 0x7FFFFFFF), negative=st.booleans())
def test_a_nan_of_any_payload_stays_nan(bits, negative):
    nan = np.uint32([bits | (0x80000000 if negative else 0)]).view(np.float32)
    assert np.isnan(mt.to_tensor(nan).astype("float16").numpy()).all()


def test_fp16_to_fp32_and_back_is_exact_for_every_one_of_the_65536_patterns():
    every = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    wide = mt.to_tensor(every).astype("float32")
    nan = np.isnan(every)
    assert_bit_equal(wide.numpy()[~nan], every[~nan].astype(np.float32))
    back = wide.astype("float16").numpy()
    assert_bit_equal(back[~nan], every[~nan])
    assert np.isnan(back[nan]).all()


# ---- 2. overflow happens exactly at 65520 ----------------------------------------------------
@given(x=fp32_values_near_fp16_edges() | st.floats(-7e4, 7e4, width=32))
def test_overflow_happens_exactly_at_65520(x):
    out = mt.to_tensor(np.float32([x])).astype("float16").numpy()[0]
    if abs(x) < fp16.OVERFLOW_THRESHOLD:
        assert np.isfinite(out) and abs(out) <= fp16.MAX
    else:
        assert out == np.copysign(np.inf, x)


def test_the_overflow_boundary_itself():
    just_below = np.nextafter(np.float32(65520), np.float32(0))
    x = np.float32([just_below, 65520, -just_below, -65520])
    out = mt.to_tensor(x).astype("float16")
    assert_bit_equal(out, np.float16([fp16.MAX, np.inf, -fp16.MAX, -np.inf]))


# ---- 3. unscaling by a power of two is exact -------------------------------------------------
def unscaled_by_grad_scaler(grads: np.ndarray, scale: float) -> np.ndarray:
    """What ``GradScaler.unscale_`` leaves in a parameter's ``.grad``."""
    p = mt.nn.Parameter(np.zeros(grads.shape, grads.dtype))
    scaler = mt.amp.GradScaler(init_loss_scaling=scale, min_loss_scaling=2.0**-10)
    p.grad = mt.to_tensor(grads)
    scaler.unscale_(mt.optimizer.SGD(learning_rate=0.1, parameters=[p]))
    return p.grad.numpy()


@given(
    g=tensors(shape=(16,), dtype=st.sampled_from(["float16", "float32"])),
    k=st.integers(-4, 24),
)
def test_unscaling_by_a_power_of_two_is_exact_unless_it_underflows(g, k):
    grads = g.numpy()
    unscaled = unscaled_by_grad_scaler(grads, 2.0**k)
    # The implementation's contract, bit for bit: widen to float32, multiply, round back.
    with np.errstate(over="ignore"):
        oracle = (grads.astype(np.float32) * np.float32(2.0**-k)).astype(grads.dtype)
    assert_bit_equal(unscaled, oracle)
    # The property: where the true quotient is a normal number (or zero) in range, it is exact.
    exact = grads.astype(np.float64) * 2.0**-k
    info = np.finfo(grads.dtype)
    no_underflow = (exact == 0) | (np.abs(exact) >= float(info.tiny))
    in_range = np.abs(exact) <= float(info.max)
    keep = no_underflow & in_range
    assert (unscaled[keep].astype(np.float64) == exact[keep]).all()


# ---- 4. which gradients survive a loss scale ------------------------------------------------
@given(
    magnitudes=st.lists(gradient_magnitudes(-50, 20), min_size=1, max_size=24),
    near_edges=st.lists(fp32_values_near_fp16_edges(), max_size=8),
    k=st.integers(0, 24),
)
def test_loss_scaled_gradients_survive_or_flush_exactly_as_predicted(magnitudes, near_edges, k):
    S = 2.0**k
    # near_edges / S puts g * S right on the float16 rounding edges
    g = np.float32([*magnitudes, *(np.float32(x) / np.float32(S) for x in near_edges)])
    scaled = g * np.float32(S)  # exact: S is a power of two and nothing leaves float32's range
    assert (scaled.astype(np.float64) == g.astype(np.float64) * S).all()
    h = mt.to_tensor(scaled).astype("float16")  # the float16 backward pass
    # unscale in float32, as GradScaler does for float32 (master) gradients
    p = mt.nn.Parameter(np.zeros(g.shape, "float32"))
    scaler = mt.amp.GradScaler(init_loss_scaling=S)
    p.grad = h.astype("float32")
    scaler.unscale_(mt.optimizer.SGD(learning_rate=0.1, parameters=[p]))
    u, hv, x = p.grad.numpy().astype(np.float64), h.numpy(), np.abs(scaled.astype(np.float64))

    flushed = x <= fp16.UNDERFLOW_THRESHOLD  # the tie at 2**-25 goes to the even 0
    overflowed = x >= fp16.OVERFLOW_THRESHOLD
    survives = ~flushed & ~overflowed
    assert (hv[flushed] == 0).all() and (np.signbit(hv) == np.signbit(g))[flushed].all()
    assert (hv[overflowed] == np.copysign(np.inf, g[overflowed])).all()
    assert np.isfinite(hv[survives]).all() and (hv[survives] != 0).all()
    # the promised window [2**-24 / S, 65504 / S] lies inside the surviving set
    window = (x >= fp16.SMALLEST_SUBNORMAL) & (x <= fp16.MAX)
    assert survives[window].all()
    # after unscaling, within half a float16 spacing of g (2**-11 relative for normal values)
    err = np.abs(u - g.astype(np.float64))
    bound = np.array([fp16.half_ulp(v) / S if s else 0.0 for v, s in zip(x, survives)])
    assert (err[survives] <= bound[survives]).all()
    normal = survives & (x >= fp16.SMALLEST_NORMAL)
    assert (err[normal] <= fp16.UNIT_ROUNDOFF * np.abs(g[normal])).all()


# ---- 5. a step with inf/NaN gradients changes nothing ----------------------------------------
OPTIMIZERS = {
    "SGD": lambda ps, mp: mt.optimizer.SGD(0.1, parameters=ps, multi_precision=mp),
    "Momentum": lambda ps, mp: mt.optimizer.Momentum(0.1, parameters=ps, multi_precision=mp),
    "Adam": lambda ps, mp: mt.optimizer.Adam(0.01, parameters=ps, multi_precision=mp),
}


@given(
    name=st.sampled_from(sorted(OPTIMIZERS)),
    dtype=st.sampled_from(["float16", "float32"]),
    values=tensors(shape=(2, 5), dtype="float16", elements=fp16_values(allow_nan=False)),
    poison=st.tuples(st.sampled_from([None, *NONFINITE]), st.integers(0, 9)),
    k=st.integers(-4, 16),
)
def test_grad_scaler_never_applies_a_step_with_nonfinite_grads(name, dtype, values, poison, k):
    """The grads hold inf/NaN directly, or finite float16 values that overflow when unscaled
    by a scale below 1; params of either dtype (float16 with float32 master weights)."""
    rng = np.random.default_rng(k + 4)
    params = [mt.nn.Parameter(rng.standard_normal(5).astype(dtype)) for _ in range(2)]
    opt = OPTIMIZERS[name](params, dtype == "float16")
    scaler = mt.amp.GradScaler(init_loss_scaling=2.0**k, min_loss_scaling=2.0**-10)
    grads = values.numpy().astype(dtype)
    if poison[0] is not None:
        grads.reshape(-1)[poison[1]] = poison[0]
    for p, g in zip(params, grads):
        p.grad = mt.to_tensor(g)
    with np.errstate(over="ignore", invalid="ignore"):
        unscaled = (grads.astype(np.float32) * np.float32(2.0**-k)).astype(dtype)
    before = [p.numpy().copy() for p in params]
    scaler.step(opt)
    scaler.update()
    if not np.isfinite(unscaled).all():
        for p, b in zip(params, before):
            assert_bit_equal(p, b)
        assert scaler.get_loss_scaling() == max(2.0**k * 0.5, 2.0**-10)  # and it backs off
    else:
        assert scaler.get_loss_scaling() == 2.0**k  # a clean step: the scale stays


@given(
    grads=tensors(shape=(8,), dtype="float16", elements=fp16_values(allow_nan=False)),
    pick=st.integers(0, 7),
    target=fp32_values_near_fp16_edges(),
)
def test_found_inf_is_exactly_an_unscaled_float16_gradient_rounding_to_inf(grads, pick, target):
    """Any scale, not only powers of two: the one chosen sends ``grads[pick] / S`` onto a
    float16 rounding edge (65520 and its float32 neighbours, ...). The flag must be judged
    after unscaling: a finite gradient can overflow when divided by a scale below 1."""
    g = grads.numpy()
    with np.errstate(over="ignore"):  # a quotient past float32's range is inf: refused below
        S = float(np.float32(abs(float(g[pick]) / float(target)))) if g[pick] and target else 1.0
    if not 0 < S < np.inf:
        S = 1.0  # g[pick] is inf
    p = mt.nn.Parameter(np.zeros(8, "float16"))
    opt = mt.optimizer.SGD(learning_rate=0.1, parameters=[p], multi_precision=True)
    scaler = mt.amp.GradScaler(init_loss_scaling=S, min_loss_scaling=2.0**-126)
    p.grad = mt.to_tensor(g)
    scaler.unscale_(opt)
    inv = np.float32(1.0 / np.float64(np.float32(S)))  # 1/S in float64, then float32
    with np.errstate(over="ignore", invalid="ignore"):
        expected = (g.astype(np.float32) * inv).astype(np.float16)
    assert_bit_equal(p.grad, expected)
    scaler.step(opt)
    scaler.update()
    backed_off = scaler.get_loss_scaling() < np.float32(S)
    assert backed_off == (not np.isfinite(expected).all())


# ---- 6. the scale follows the dynamic rule --------------------------------------------------
def reference_scale_rule(scale, good, bad, found_inf, h):
    """Paddle's dynamic loss scaling with a floor and a ceiling, all in float32."""
    f32 = np.float32
    if found_inf:
        good, bad = 0, bad + 1
        if bad == h["decr_every_n_nan_or_inf"]:  # that many overflowing steps in a row
            scale, bad = max(f32(scale * f32(h["decr_ratio"])), f32(h["min_loss_scaling"])), 0
    else:
        good, bad = good + 1, 0
        if good == h["incr_every_n_steps"]:
            with np.errstate(over="ignore"):
                grown = min(f32(scale * f32(h["incr_ratio"])), f32(h["max_loss_scaling"]))
            scale, good = (grown if np.isfinite(grown) else scale), 0  # never grow into inf
    return scale, good, bad


settings_strategy = st.fixed_dictionaries(
    {
        # near float32's max, growing overflows: the scale must stay, the counter still resets
        "init_loss_scaling": st.sampled_from([1.0, 2.0**16, 3.0, 2.0**126, 2.0**127]),
        "incr_ratio": st.sampled_from([2.0, 1.5, 4.0]),
        "decr_ratio": st.sampled_from([0.5, 0.25, 0.75]),
        "incr_every_n_steps": st.integers(1, 4),
        "decr_every_n_nan_or_inf": st.integers(1, 3),
        "min_loss_scaling": st.sampled_from([1.0, 2.0**-10]),
        "max_loss_scaling": st.sampled_from([np.inf, 2.0**20]),
    }
).filter(lambda h: h["init_loss_scaling"] <= h["max_loss_scaling"])  # else refused (issue 14)
# each step: three float16 gradients, maybe one replaced by inf/NaN
step_strategy = st.tuples(
    st.lists(fp16_values(allow_nan=False, allow_infinity=False), min_size=3, max_size=3),
    st.sampled_from([None, *NONFINITE]),
)


GROWS_INTO_INF = {  # 2**127 * 2 is inf in float32: the scale stays, the counter resets
    "init_loss_scaling": 2.0**127,
    "incr_ratio": 2.0,
    "decr_ratio": 0.5,
    "incr_every_n_steps": 1,
    "decr_every_n_nan_or_inf": 2,
    "min_loss_scaling": 1.0,
    "max_loss_scaling": np.inf,
}


@given(h=settings_strategy, steps=st.lists(step_strategy, max_size=30))
@example(h=GROWS_INTO_INF, steps=[([1.0, 2.0, 3.0], None)] * 2 + [([1.0, 2.0, 3.0], np.inf)] * 3)
def test_grad_scaler_scale_follows_the_reference_rule(h, steps):
    p = mt.nn.Parameter(np.zeros(3, "float16"))
    opt = mt.optimizer.SGD(learning_rate=0.0, parameters=[p], multi_precision=True)
    scaler = mt.amp.GradScaler(**h)
    scale, good, bad = np.float32(h["init_loss_scaling"]), 0, 0
    for finite, poison in steps:
        grads = np.float16(finite)
        if poison is not None:
            grads[1] = poison
        # found_inf, predicted: unscale with the float32 1/S, round to float16, any inf/NaN?
        inv = np.float32(1.0 / np.float64(scale))
        with np.errstate(over="ignore", invalid="ignore"):
            found_inf = not np.isfinite((grads.astype(np.float32) * inv).astype(np.float16)).all()
        p.grad = mt.to_tensor(grads)
        scaler.step(opt)
        scaler.update()
        scale, good, bad = reference_scale_rule(scale, good, bad, found_inf, h)
        state = scaler.state_dict()
        assert (float(state["scale"][0]), state["incr_count"], state["decr_count"]) == (
            float(scale),
            good,
            bad,
        )
