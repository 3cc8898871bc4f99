"""Samplers: lengths that match what they yield, and random draws that reach every index.

Two bugs once escaped the suite here: a ``BatchSampler``/``DataLoader`` length of
``n // batch_size + 1`` when ``batch_size`` divides ``n``, and ``RandomSampler(replacement=True)``
never drawing the last index. Each is now held against what the sampler actually yields.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

import minitorch_amp as mt
from minitorch_amp.io import BatchSampler, DataLoader, Dataset, RandomSampler, SequenceSampler


class Numbers(Dataset):
    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        return np.array([i], dtype=np.int64)

    def __len__(self):
        return self.n


@given(
    n=st.integers(0, 60),
    batch_size=st.integers(1, 16),
    drop_last=st.booleans(),
    shuffle=st.booleans(),
)
@example(n=12, batch_size=4, drop_last=False, shuffle=False)  # divides evenly
@example(n=12, batch_size=4, drop_last=True, shuffle=False)
@example(n=13, batch_size=4, drop_last=False, shuffle=False)  # one short batch
@example(n=0, batch_size=3, drop_last=False, shuffle=False)
def test_len_is_the_number_of_batches_yielded(n, batch_size, drop_last, shuffle):
    sampler = BatchSampler(dataset=range(n), batch_size=batch_size, drop_last=drop_last)
    batches = list(sampler)
    assert len(sampler) == len(batches)
    assert all(len(b) == batch_size for b in batches[:-1])
    assert sum(map(len, batches)) == (n - n % batch_size if drop_last else n)
    loader = DataLoader(Numbers(n), batch_size=batch_size, drop_last=drop_last, shuffle=shuffle)
    assert len(loader) == len(list(loader)) == len(batches)


def _chi_square(counts: np.ndarray) -> float:
    expected = counts.sum() / counts.size
    return float(((counts - expected) ** 2 / expected).sum())


def _loose_bound(categories: int) -> float:
    """Far above what uniform draws give (chi-square has mean df and variance 2 df): only a
    sampler that skips or favours an index exceeds it."""
    df = categories - 1
    return df + 12 * math.sqrt(2 * df)


def test_draws_with_replacement_reach_every_index_uniformly():
    mt.seed(0)
    n = 7
    draws = list(RandomSampler(range(n), replacement=True, num_samples=7000))
    counts = np.bincount(draws, minlength=n)
    assert len(draws) == 7000 and counts.size == n  # nothing outside 0 .. n-1
    assert (counts > 0).all(), f"an index is never drawn: {counts}"
    assert _chi_square(counts) < _loose_bound(n), counts


def test_draws_with_replacement_and_the_default_num_samples_reach_every_index():
    mt.seed(1)
    n = 5
    sampler = RandomSampler(range(n), replacement=True)
    epochs = [list(sampler) for _ in range(2000)]  # a fresh draw at every iter()
    assert {len(e) for e in epochs} == {n} and len(sampler) == n
    counts = np.bincount(np.concatenate(epochs), minlength=n)
    assert counts.size == n and (counts > 0).all(), counts
    assert _chi_square(counts) < _loose_bound(n), counts


def test_a_shuffled_epoch_is_a_permutation_and_every_position_is_uniform():
    mt.seed(2)
    n = 6
    firsts = [next(iter(RandomSampler(range(n)))) for _ in range(3000)]
    assert sorted(RandomSampler(range(n))) == list(range(n))
    counts = np.bincount(firsts, minlength=n)
    assert counts.size == n and _chi_square(counts) < _loose_bound(n), counts


def test_a_batch_sampler_over_a_sampler_takes_that_samplers_length():
    sampler = RandomSampler(range(3), replacement=True, num_samples=10)
    batches = BatchSampler(sampler=sampler, batch_size=5)
    assert len(batches) == 2 == len(list(batches))
    assert len(BatchSampler(sampler=SequenceSampler(range(10)), batch_size=5)) == 2


def test_a_batch_sampler_of_unknown_length_drives_a_data_loader():
    """Paddle's Sampler has no __len__ (bucketing by length cannot know it): DataLoader
    never asks for it; before, its truth test called the base class's raising __len__."""
    from minitorch_amp.io import Sampler, TensorDataset

    class Buckets(Sampler):
        def __iter__(self):
            yield [0, 1, 2]
            yield [3, 4]

    data = TensorDataset([mt.arange(5, dtype="float32")])
    loader = DataLoader(data, batch_sampler=Buckets())
    assert [batch[0].tolist() for batch in loader] == [[0.0, 1.0, 2.0], [3.0, 4.0]]
    assert loader.batch_size is None  # the batch sampler's own, which it does not have
