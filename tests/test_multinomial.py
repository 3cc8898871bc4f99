"""multinomial: draws that follow the probabilities, with and without replacement, from the
one seeded generator; and the inputs that have no distribution.

Frequencies are checked against 5 standard deviations of their binomial spread, so a
correct sampler fails about once in 3 million runs; each test seeds the generator anyway.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt

P = np.array([0.1, 0.0, 0.2, 0.7])


def _within_5_sigma(counts, n, p):
    p = np.asarray(p, dtype=np.float64)
    sigma = np.sqrt(n * p * (1 - p))
    assert np.all(np.abs(counts - n * p) <= 5 * sigma + 1e-9), (counts / n, p)


def test_draws_with_replacement_follow_the_unnormalised_probabilities():
    mt.seed(0)
    n = 40000
    draws = mt.multinomial(mt.to_tensor(P * 3.0), num_samples=n, replacement=True).numpy()
    assert draws.shape == (n,) and draws.dtype == np.int64
    _within_5_sigma(np.bincount(draws, minlength=4), n, P)


def test_each_row_draws_from_its_own_probabilities():
    mt.seed(1)
    rows = np.array([[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]])
    draws = mt.multinomial(mt.to_tensor(rows), num_samples=2000, replacement=True).numpy()
    assert draws.shape == (2, 2000)
    assert np.all(draws[0] == 0)
    _within_5_sigma(np.bincount(draws[1], minlength=3), 2000, [0.0, 0.5, 0.5])


def test_without_replacement_a_row_never_repeats_and_the_first_draw_follows_p():
    mt.seed(2)
    n = 20000
    rows = mt.to_tensor(np.tile(P, (n, 1)))
    draws = mt.multinomial(rows, num_samples=3).numpy()
    assert np.all(draws[:, 0] != draws[:, 1]) and np.all(draws[:, 1] != draws[:, 2])
    assert not np.any(draws == 1)  # probability 0: never drawn
    _within_5_sigma(np.bincount(draws[:, 0], minlength=4), n, P)
    # the second draw: P(j second) = sum over i != j of p_i p_j / (1 - p_i)
    second = [sum(P[i] * P[j] / (1 - P[i]) for i in range(4) if i != j) for j in range(4)]
    _within_5_sigma(np.bincount(draws[:, 1], minlength=4), n, second)


def test_seed_makes_the_draws_reproducible():
    p = mt.to_tensor([0.2, 0.3, 0.5])
    mt.seed(7)
    a = mt.multinomial(p, 50, replacement=True).numpy()
    b = mt.multinomial(p, 50, replacement=True).numpy()
    mt.seed(7)
    np.testing.assert_array_equal(mt.multinomial(p, 50, replacement=True).numpy(), a)
    assert not np.array_equal(a, b)


def test_float16_probabilities_are_accepted():
    mt.seed(3)
    draws = mt.to_tensor([0.0, 1.0], dtype="float16").multinomial(4, replacement=True)
    np.testing.assert_array_equal(draws.numpy(), [1, 1, 1, 1])


@pytest.mark.parametrize(
    "x, kwargs, error, message",
    [
        ([0.5, -0.1, 0.6], {}, ValueError, "finite and >= 0"),
        ([0.5, np.nan], {}, ValueError, "finite and >= 0"),
        ([[0.5, 0.5], [0.0, 0.0]], {}, ValueError, "sums to 0"),
        ([0.5, 0.0, 0.5], {"num_samples": 3}, ValueError, "only 2 categories"),
        ([0.5, 0.5], {"num_samples": 0}, ValueError, "at least 1"),
        ([0.5, 0.5], {"num_samples": 1.5}, TypeError, "must be an int"),
        ([[[0.5, 0.5]]], {}, ValueError, r"1-D \[C\] or 2-D \[B, C\]"),
    ],
)
def test_inputs_without_a_distribution_are_refused(x, kwargs, error, message):
    with pytest.raises(error, match=message):
        mt.multinomial(mt.to_tensor(x), **kwargs)


def test_integer_probabilities_are_refused():
    with pytest.raises(TypeError, match="floating probabilities"):
        mt.multinomial(mt.to_tensor([1, 2]))
