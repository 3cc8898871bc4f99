"""float16 times 2**-k on the bits (backend.pow2_scale): the general path's bits, and the CPU
unscale that uses it."""

import numpy as np
import pytest

from minitorch_amp.backend import host_c, loss_scaling
from minitorch_amp.backend.pow2_scale import MAX_K, power_of_two_exponent, times_power_of_two

EVERY = np.arange(2**16, dtype=np.uint32).astype(np.uint16)
FINITE = EVERY[(EVERY & 0x7FFF) < 0x7C00]  # 63,488 values: every finite float16


@pytest.fixture(autouse=True)
def numpy_paths(monkeypatch):
    """The bits path is the CPU's unscale without a C compiler: with one, csrc/float16.c's
    unscale takes contiguous float16 gradients first (tests/test_loss_scaling.py)."""
    monkeypatch.setitem(host_c._loaded, "float16", (None, "NumPy (this test)"))


def general(bits, k):
    """The general path: widen, multiply by the float32 2**-k, round back (ties to even)."""
    inv = np.float32(2.0**-k)
    return (bits.view(np.float16).astype(np.float32) * inv).astype(np.float16).view(np.uint16)


@pytest.mark.parametrize("k", [*range(1, 41), 64, 99, MAX_K])
def test_every_finite_float16_gets_the_general_paths_bits(k):
    np.testing.assert_array_equal(times_power_of_two(FINITE, k), general(FINITE, k))


@pytest.mark.parametrize("k", [0, MAX_K + 1])
def test_a_k_outside_the_exact_range_is_refused(k):
    with pytest.raises(ValueError, match="k must be from 1 to 100"):
        times_power_of_two(FINITE, k)


@pytest.mark.parametrize("bad", [0x7C00, 0xFC00, 0x7E00, 0x7C01])  # +-inf, quiet and signalling NaN
def test_an_inf_or_nan_among_the_values_leaves_them_to_the_general_path(bad):
    bits = np.array([0x3C00, bad, 0x0001], np.uint16)
    assert times_power_of_two(bits, 3) is None


def test_signed_zeros_ties_and_the_carry_into_the_smallest_normal():
    # -0 and +0 stay; 3 units * 2**-1 = 1.5 units: a tie, to even 2; 5 * 2**-1 = 2.5: to 2;
    # 2**-13 - 1 unit, halved, is 1023.5 units: the tie carries into 0x0400, 2**-14
    bits = np.array([0x8000, 0x0000, 0x0003, 0x0005, 0x07FF], np.uint16)
    assert times_power_of_two(bits, 1).tolist() == [0x8000, 0x0000, 0x0002, 0x0002, 0x0400]


@pytest.mark.parametrize(
    ("value", "k"),
    [(0.5, 1), (2.0**-16, 16), (2.0**-100, 100), (2.0**-101, None), (0.75, None), (1.0, None),
     (2.0, None), (2.0**-127, None), (-0.5, None), (0.0, None), (np.inf, None), (np.nan, None)],
)  # fmt: skip
def test_only_an_exact_normal_power_of_two_below_one_has_an_exponent(value, k):
    assert power_of_two_exponent(np.array([value], np.float32)) == k


def _unscale_both_ways(grads, inv, monkeypatch):
    """unscale_and_check on copies of ``grads``, with the bits path and without it."""
    results = []
    for allowed in (True, False):
        if not allowed:
            monkeypatch.setattr(loss_scaling, "power_of_two_exponent", lambda inv: None)
        copies, found = [g.copy() for g in grads], np.zeros(1, bool)
        loss_scaling.unscale_and_check(copies, np.array([inv], np.float32), found)
        results.append((copies, found))
    return results


def test_the_cpu_unscale_of_float16_grads_by_a_power_of_two_is_the_general_one(monkeypatch):
    rng = np.random.default_rng(0)
    grads = []
    for shape in [(64, 64), (64,), (3, 5), ()]:
        g = rng.standard_normal(shape) * 10.0 ** rng.uniform(-3, 3, shape)
        g = np.where(rng.random(shape) < 0.2, -0.0, g)  # a ReLU's zeros, signed
        grads.append(g.astype(np.float16))
    calls = []
    bits_path = loss_scaling.times_power_of_two
    monkeypatch.setattr(
        loss_scaling, "times_power_of_two", lambda b, k: calls.append(k) or bits_path(b, k)
    )
    (fast, found_fast), (slow, found_slow) = _unscale_both_ways(grads, 2.0**-12, monkeypatch)
    assert calls == [12]  # one run of small tensors, on the bits
    for a, b in zip(fast, slow):
        np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))
    assert not found_fast[0] and not found_slow[0]


def test_an_inf_in_the_grads_is_found_and_unscaled_as_before(monkeypatch):
    grads = [np.array([1024.0, np.inf, 3.0], np.float16), np.array([np.nan], np.float16)]
    (fast, found_fast), (slow, found_slow) = _unscale_both_ways(grads, 2.0**-4, monkeypatch)
    for a, b in zip(fast, slow):
        np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))
    assert found_fast[0] and found_slow[0]
