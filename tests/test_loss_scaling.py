"""The NumPy twins of the loss-scaling kernels (``backend/loss_scaling.py``).

Ported from PyTorch's ``test_grad_scaling_unscale`` and ``test_grad_scaling_update_scale``,
plus the cases Paddle's kernels define: the check after narrowing, the floor, no growth
into inf.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from minitorch_amp.backend import host_c, host_float16
from minitorch_amp.backend.loss_scaling import (
    inverse_scale,
    unscale_and_check,
)
from minitorch_amp.backend.scale_update import update_loss_scaling


# ---- the unscale kernel (PyTorch test_grad_scaling_unscale) ----------------------------------
def _flag():
    return np.zeros(1, dtype=bool)


INV = np.array([0.25], dtype="float32")


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced", "0-d"])
@pytest.mark.parametrize("bad", [None, np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_unscale_and_check_finds_any_non_finite_value_in_any_layout(layout, bad, dtype):
    base = np.full((6, 10), 4.0, dtype=dtype)
    g = {"contiguous": base, "transposed": base.T, "sliced": base[:, :5], "0-d": base[0, 0, ...]}
    grads = [np.full((3,), 4.0, dtype=dtype), g[layout]]
    if bad is not None:
        grads[1][(0,) * grads[1].ndim] = bad
    found = _flag()
    unscale_and_check(grads, INV, found)
    assert found[0] == (bad is not None)
    if bad is None:
        for arr in grads:
            assert arr.dtype == dtype and np.all(arr == 1.0)
        assert (base == 1.0).sum() == g[layout].size  # written through the view, only there


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("bad_at", [None, 0, 4, 7])
def test_unscaling_small_gradients_in_runs_equals_one_tensor_at_a_time(dtype, bad_at, monkeypatch):
    """The twin widens runs of small gradients together; every bit, and the flag, are what
    one tensor at a time gives (views, 0-d and empty arrays included, across run ends)."""
    from minitorch_amp.backend import loss_scaling

    rng = np.random.default_rng(3)
    base = [rng.standard_normal(shape) * 300 for shape in ((3,), (2, 2), (), (0,), (5,), (1,))]
    base += [rng.standard_normal((4, 6)) * 300, rng.standard_normal(7) * 300]

    def grads():
        out = [np.asarray(b).astype(dtype) for b in base]
        out[6] = out[6].T  # a strided view
        if bad_at is not None:
            out[bad_at].reshape(-1)[-1] = np.inf
        return out

    results = []
    for run in (1, 5, 2**20):  # one tensor per run, runs across tensors, everything at once
        monkeypatch.setattr(loss_scaling, "_TWIN_RUN", run)
        gs, flag = grads(), _flag()
        unscale_and_check(gs, np.array([1 / 3], "float32"), flag)
        results.append(([np.asarray(g).tobytes() for g in gs], bool(flag[0])))
    assert results[1] == results[0] and results[2] == results[0]
    assert results[0][1] == (bad_at is not None)


def test_unscale_checks_after_narrowing_so_an_overflow_from_unscaling_is_found():
    # NOTE: 40000 is a finite float16, but 40000 / 0.5 is not; a check before unscaling misses it.
    g = np.array([40000.0, 1.0], dtype="float16")
    found = _flag()
    unscale_and_check([g], np.array([2.0], dtype="float32"), found)
    assert found[0] and np.isinf(g[0]) and g[1] == 2.0


def test_unscale_multiplies_in_float32_and_rounds_once_to_nearest_even():
    g = np.array([3.0, 1000.0, 65504.0, 6e-5], dtype="float16")
    inv = np.array([1 / 3], dtype="float32")
    expected = (g.astype("float32") * inv[0]).astype("float16")
    unscale_and_check([g], inv, _flag())
    assert g.tobytes() == expected.tobytes()


def test_unscale_never_clears_an_earlier_flag_and_rejects_mixed_dtypes():
    found = np.array([True])
    unscale_and_check([np.ones(3, "float32")], INV, found)
    assert found[0]
    with pytest.raises(ValueError, match="same dtype"):
        unscale_and_check([np.ones(2, "float32"), np.ones(2, "float16")], INV, _flag())
    with pytest.raises(ValueError, match="found_inf"):
        unscale_and_check([np.ones(2, "float32")], INV, np.zeros(1, "int32"))


# ---- the update rule (PyTorch test_grad_scaling_update_scale) --------------------------------
def _update(found, scale, good, bad, at_floor, **kw):
    kw = {
        "incr_every_n_steps": 2,
        "decr_every_n_nan_or_inf": 1,
        "incr_ratio": 2.0,
        "decr_ratio": 0.25,
        "min_loss_scaling": 1e-3,
        **kw,
    }
    found = np.array([found]).reshape(scale.shape)
    update_loss_scaling(found, scale, good, bad, at_floor, **kw)
    return float(scale.reshape(-1)[0]), int(good.reshape(-1)[0]), int(bad.reshape(-1)[0])


def _state(scale):
    """scale, good_steps, bad_steps, at_floor."""
    return np.array([scale], "float32"), *(np.zeros(1, "int32") for _ in range(3))


def test_update_grows_after_interval_and_backs_off_on_inf():
    s = _state(4.0)
    assert _update(False, *s) == (4.0, 1, 0)
    assert _update(False, *s) == (8.0, 0, 0)
    assert _update(True, *s) == (2.0, 0, 0)


def test_decr_every_n_counts_consecutive_bad_steps_only():
    s = _state(16.0)
    kw = {"decr_every_n_nan_or_inf": 2, "decr_ratio": 0.5, "incr_every_n_steps": 100}
    assert _update(True, *s, **kw) == (16.0, 0, 1)
    assert _update(False, *s, **kw) == (16.0, 1, 0)  # a good step resets the bad count
    assert _update(True, *s, **kw) == (16.0, 0, 1)
    assert _update(True, *s, **kw) == (8.0, 0, 0)


def test_scale_stays_within_floor_and_ceiling_and_never_grows_into_inf():
    s = _state(4.0)
    for expected in (2.0, 2.0, 2.0):
        assert _update(True, *s, decr_ratio=0.5, min_loss_scaling=2.0)[0] == expected
    s = _state(2.0**127)
    assert _update(False, *s, incr_every_n_steps=1) == (2.0**127, 0, 0)
    s = _state(2.0**23)
    kw = {"incr_every_n_steps": 1, "max_loss_scaling": 2.0**24}
    assert [_update(False, *s, **kw)[0] for _ in range(2)] == [2.0**24, 2.0**24]


@pytest.mark.parametrize(
    "inv",
    [65519.996, 65520.0, 65504.0, 70000.0, 2.0**-30],
)
def test_float16_overflow_is_judged_after_narrowing_at_exactly_65520(inv):
    g = np.array([1.0, -1.0, 0.5], dtype=np.float16)
    with np.errstate(over="ignore"):
        expected = np.float16(g.astype(np.float32) * np.float32(inv))
    found_inf = np.zeros(1, dtype=bool)
    unscale_and_check([g], np.array([inv], dtype=np.float32), found_inf)
    np.testing.assert_array_equal(g, expected)
    assert found_inf[0] == (not np.isfinite(expected).all())


@pytest.mark.parametrize("shape", [(1,), ()], ids=["host update", "array twin"])
def test_the_floor_counter_counts_overflows_that_leave_the_scale_at_the_floor(shape):
    """at_floor counts overflowing updates in a row whose new scale is <= min_loss_scaling;
    a clean update, or an overflow above the floor, resets it. Shape [1] takes the CPU's
    scalar update; 0-d arrays the array twin a GPU runs without raw kernels."""
    s = tuple(a.reshape(shape) for a in _state(4.0))
    kw = {"decr_ratio": 0.5, "min_loss_scaling": 1.0, "decr_every_n_nan_or_inf": 1}
    steps = [
        (True, 2.0, 0),   # above the floor
        (True, 1.0, 1),   # shrunk onto the floor in this very update: counted at once
        (True, 1.0, 2),
        (False, 1.0, 0),  # a clean step
        (True, 1.0, 1),
    ]  # fmt: skip
    for found, scale, count in steps:
        assert _update(found, *s, **kw)[0] == scale
        assert s[3].reshape(-1)[0] == count


def test_the_counters_wrap_at_2_to_the_31_like_numpy_int32():
    s = _state(1.0)
    s[3][0] = 2**31 - 1
    _update(True, *s, min_loss_scaling=1.0)
    assert s[3][0] == -(2**31)


def _nearest_float32_bits(q: Fraction) -> int:
    """The float32 nearest to ``q`` (0 < q < 2**-126), ties to even, as a bit pattern: an
    oracle from exact rationals (``round`` of a Fraction rounds half to even)."""
    return round(q * 2**149)


@pytest.mark.parametrize(
    "bits",
    [0x7E800000, 0x7E800001, 0x7EAAAAAB, 0x7F000000, 0x7F7FFFFF, 0x7F400000, 0x7EC00001],
)
def test_inverse_scale_rounds_the_float64_quotient_once_more_to_the_nearest_subnormal(bits):
    """Scales of 2**126 and more have subnormal inverses: the float64 quotient (Python's
    correctly rounded division) rounded to the nearest float32, ties to even."""
    scale = np.array([bits], np.uint32).view(np.float32)
    out = np.zeros(1, np.float32)
    inverse_scale(scale, out)
    expected = _nearest_float32_bits(Fraction(1.0 / float(scale[0])))
    assert 0 < expected <= 0x00800000
    assert int(out.view(np.uint32)[0]) == expected


@pytest.mark.parametrize(
    ("scale", "inverse"),
    [
        (1024.0, 2.0**-10),
        (-4.0, -0.25),
        (0.0, np.inf),
        (-0.0, -np.inf),
        (np.inf, 0.0),
        (-np.inf, -0.0),
        (2.0**-127, 2.0**127),  # a subnormal scale with a finite inverse
        (2.0**-128, np.inf),  # 2**128 is past float32's max
        (2.0**127, 2.0**-127),  # a subnormal inverse, exact
    ],
)
def test_inverse_scale_edges(scale, inverse):
    out = np.zeros(1, np.float32)
    inverse_scale(np.array([scale], np.float32), out)
    assert float(out[0]) == inverse and np.signbit(out[0]) == np.signbit(inverse)
    out[0] = 0
    inverse_scale(np.array([np.nan], np.float32), out)
    assert np.isnan(out[0])


# ---- the float16 unscale in C (csrc/float16.c's unscale) ---------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize(
    "inv", [2.0**-10, 2.0**-24, 2.0**-100, 0.3, 1 / 65504, 1.0, 3.0, 0.0, np.inf]
)
def test_the_c_unscale_gives_the_twins_bits_and_flag(dtype, inv, monkeypatch):
    """Every float16 bit pattern (NaN payloads, infs, subnormals), or float32 patterns of
    every kind, in three gradients, one of them a strided view (which the twin takes): the
    same bits and the same flag as NumPy."""
    if host_float16.compiled() is None:
        pytest.skip(host_c.status("float16"))
    if dtype == "float16":
        every = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    else:
        every = np.arange(0, 2**32, 65537, dtype=np.uint64).astype(np.uint32).view(np.float32)
    finite = every[np.isfinite(every)]

    def unscaled(path):
        if path == "NumPy":
            monkeypatch.setitem(host_c._loaded, "float16", (None, "NumPy (this test)"))
        grads = [every.copy(), finite.copy(), finite.reshape(-1, 2).copy()[:, 0]]
        results = []
        for gs in (grads, grads[1:]):  # with and without non-finite inputs
            gs = [g.copy() for g in gs] if gs is not grads else gs
            found = np.zeros(1, bool)
            unscale_and_check(gs, np.array([inv], np.float32), found)
            results.append(([g.view(f"u{g.itemsize}").copy() for g in gs], bool(found[0])))
        monkeypatch.delitem(host_c._loaded, "float16", raising=False)
        return results

    for (ours, our_flag), (twin, twin_flag) in zip(unscaled("C"), unscaled("NumPy")):
        assert our_flag == twin_flag
        for a, b in zip(ours, twin):
            np.testing.assert_array_equal(a, b)


def test_the_c_unscale_never_clears_the_flag_and_leaves_strided_views_to_the_twin():
    if host_float16.compiled() is None:
        pytest.skip(host_c.status("float16"))
    found = np.ones(1, bool)
    g = np.array([1.0, 2.0], np.float16)
    unscale_and_check([g], np.array([0.5], np.float32), found)
    assert found[0] and g.tolist() == [0.5, 1.0]
    base = np.array([[2.0, 7.0], [4.0, 9.0]], np.float16)
    found[0] = False
    unscale_and_check(
        [base[:, 0], np.array([60000.0], np.float16)], np.array([2.0], np.float32), found
    )
    assert base.tolist() == [[4.0, 7.0], [8.0, 9.0]] and found[0]  # 120000 overflows
