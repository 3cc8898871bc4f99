"""backend.primitives on the CPU: scatter_add by sorting and column_sums through BLAS, same sums."""

from __future__ import annotations

import numpy as np
import pytest

from minitorch_amp.backend import primitives


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sorted_rows_give_add_at_sums_with_every_repeat_counted(dtype):
    rng = np.random.default_rng(0)
    index = rng.integers(0, 50, 1000)  # every row hit about twenty times, some not at all
    values = rng.standard_normal((1000, 3, 4)).astype(dtype)
    start = rng.standard_normal((60, 3, 4)).astype(dtype)
    got, expected = start.copy(), start.copy()
    primitives.scatter_add(got, index, values)
    np.add.at(expected, index, values)
    # about twenty terms near 1 per element: the two rounding orders agree to a few ULPs of 1
    np.testing.assert_allclose(got, expected, rtol=0, atol=4e-6 if dtype == np.float32 else 1e-14)
    untouched = np.setdiff1d(np.arange(60), index)
    np.testing.assert_array_equal(got[untouched], start[untouched])


def test_the_sorted_path_is_taken_and_negative_or_out_of_range_indices_keep_add_ats_rules(
    monkeypatch,
):
    calls = []
    monkeypatch.setattr(primitives, "_scatter_add_rows", lambda *a: calls.append(a))
    target, values = np.zeros((10, 2), np.float32), np.ones((100, 2), np.float32)
    primitives.scatter_add(target, np.arange(100) % 10, values)
    assert len(calls) == 1
    monkeypatch.undo()
    negative = np.zeros((10, 2), np.float32)
    primitives.scatter_add(negative, np.arange(100) % 10 - 10, values)  # -10..-1: rows 0..9
    np.testing.assert_array_equal(negative, np.full((10, 2), 10.0, np.float32))
    before = negative.copy()
    with pytest.raises(IndexError):
        primitives.scatter_add(negative, np.r_[np.arange(99) % 10, 10], values)
    np.testing.assert_array_equal(negative, before)  # refused before any write


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_column_sums_are_the_sum_over_rows(dtype):
    rows = np.random.default_rng(1).standard_normal((300, 7)).astype(dtype)
    exact = rows.astype(np.float64).sum(axis=0)
    got = primitives.column_sums(rows)
    assert got.dtype == dtype and got.shape == (7,)
    np.testing.assert_allclose(got, exact, rtol=0, atol={np.float16: 0.05}.get(dtype, 1e-4))
    out = np.empty(7, dtype)
    assert primitives.column_sums(rows, out=out) is out
    np.testing.assert_array_equal(out, got)
