"""paddle.io's composed datasets and extra samplers: Subset, random_split, ConcatDataset,
ComposeDataset, ChainDataset, SubsetRandomSampler, WeightedRandomSampler."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp.io import (
    BatchSampler,
    ChainDataset,
    ComposeDataset,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    random_split,
)


class Numbers(Dataset):
    """Sample i: (the float32 array [start + i], the int start + i)."""

    def __init__(self, start, n):
        self.start, self.n = start, n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return np.array([self.start + i], dtype=np.float32), self.start + i

    def __len__(self):
        return self.n


class Stream(IterableDataset):
    def __init__(self, values):
        self.values = values

    def __iter__(self):
        yield from self.values


# ---- Subset and random_split ---------------------------------------------------------------------
def test_subset_reads_the_dataset_at_its_indices_in_their_order():
    sub = Subset(Numbers(10, 5), [4, 0, 4])
    assert len(sub) == 3
    assert [label for _, label in sub] == [14, 10, 14]
    assert list(Subset(range(10, 15), [-1, 1])) == [14, 11]  # negative: as the dataset reads it


@pytest.mark.parametrize(
    "indices, error, match",
    [([0, 5], IndexError, r"indices\[1\] = 5 is outside"), ([-6], IndexError, "outside"),
     ([0.5], TypeError, "ints"), (3, TypeError, "sequence")],
)  # fmt: skip
def test_subset_checks_its_indices_when_made(indices, error, match):
    with pytest.raises(error, match=match):
        Subset(Numbers(0, 5), indices)


def test_random_split_partitions_every_sample_once():
    mt.seed(1)
    parts = random_split(Numbers(0, 10), [3, 7])
    assert [len(p) for p in parts] == [3, 7]
    labels = [label for part in parts for _, label in part]
    assert sorted(labels) == list(range(10)) and labels != list(range(10))


def test_random_split_follows_the_seed():
    mt.seed(5)
    first = [p.indices for p in random_split(range(8), [2, 6])]
    mt.seed(5)
    assert [p.indices for p in random_split(range(8), [2, 6])] == first
    rng = np.random.default_rng(0)
    assert (
        random_split(range(8), [8], generator=rng)[0].indices
        == np.random.default_rng(0).permutation(8).tolist()
    )


@pytest.mark.parametrize(
    "n, fractions, sizes",
    [(10, [0.3, 0.7], [3, 7]), (11, [0.5, 0.5], [6, 5]), (10, [0.25, 0.25, 0.5], [3, 2, 5]),
     (3, [1.0], [3])],
)  # fmt: skip
def test_random_split_takes_fractions_and_deals_the_remainder_round_robin(n, fractions, sizes):
    assert [len(p) for p in random_split(range(n), fractions)] == sizes


def test_random_split_warns_about_an_empty_split():
    with pytest.warns(UserWarning, match="split 1 is empty"):
        parts = random_split(range(2), [0.9, 0.1])
    assert [len(p) for p in parts] == [2, 0]


@pytest.mark.parametrize(
    "lengths, match",
    [([3, 5], "add up to 8, but the dataset has 10"), ([4, -1, 7], r"lengths\[1\]"),
     ([2.0, 8.0], "counts"), ([1.5, -0.5], r"lengths\[1\]"), (["a"], r"lengths\[0\]")],
)  # fmt: skip
def test_random_split_rejects_lengths_that_do_not_partition_the_dataset(lengths, match):
    with pytest.raises(ValueError, match=match):
        random_split(range(10), lengths)


# ---- ConcatDataset, ComposeDataset, ChainDataset ------------------------------------------------
def test_concat_dataset_indexes_across_its_parts():
    data = ConcatDataset([Numbers(0, 3), Numbers(100, 2), Numbers(200, 4)])
    assert len(data) == 9 and data.cumulative_sizes == [3, 5, 9]
    assert [data[i][1] for i in range(9)] == [0, 1, 2, 100, 101, 200, 201, 202, 203]
    assert data[-1][1] == 203 and data[-9][1] == 0 and data[np.int64(3)][1] == 100
    with pytest.raises(IndexError, match="out of range"):
        data[9]
    with pytest.raises(ValueError, match="before the first"):
        data[-10]


def test_concat_dataset_skips_an_empty_part():
    data = ConcatDataset([Numbers(0, 2), Numbers(50, 0), Numbers(100, 1)])
    assert [data[i][1] for i in range(len(data))] == [0, 1, 100]


def test_compose_dataset_puts_the_fields_side_by_side():
    data = ComposeDataset([Numbers(0, 3), Numbers(10, 3), range(20, 23)])
    image, label, image2, label2, plain = data[2]
    assert len(data) == 3 and (label, label2, plain) == (2, 12, 22)
    assert image.tolist() == [2.0] and image2.tolist() == [12.0]


def test_chain_dataset_streams_one_after_the_other():
    chained = ChainDataset([Stream([1, 2]), Stream([]), Stream([3])])
    assert list(chained) == [1, 2, 3]
    assert isinstance(chained, IterableDataset)


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: ConcatDataset([]), ValueError, "non-empty"),
        (lambda: ConcatDataset(Numbers(0, 2)), TypeError, "list of datasets"),
        (lambda: ConcatDataset([Numbers(0, 2), Stream([1])]), TypeError, "dataset 1 is an Iter"),
        (lambda: ComposeDataset([Numbers(0, 2), Numbers(0, 3)]), ValueError, r"\[2, 3\]"),
        (lambda: ComposeDataset([Stream([1])]), TypeError, "IterableDataset"),
        (lambda: ComposeDataset([5]), TypeError, "__getitem__ and __len__"),
        (lambda: ChainDataset([Stream([1]), Numbers(0, 1)]), TypeError, "ConcatDataset"),
        (lambda: ChainDataset([]), ValueError, "non-empty"),
    ],
)
def test_composed_datasets_reject_bad_parts(make, error, match):
    with pytest.raises(error, match=match):
        make()


# ---- SubsetRandomSampler ----------------------------------------------------------------------
def test_subset_random_sampler_permutes_its_indices_anew_each_epoch():
    mt.seed(3)
    sampler = SubsetRandomSampler([10, 20, 30, 40, 50, 60])
    epochs = [list(sampler) for _ in range(4)]
    assert len(sampler) == 6
    assert all(sorted(e) == [10, 20, 30, 40, 50, 60] for e in epochs)
    assert len({tuple(e) for e in epochs}) > 1
    mt.seed(3)
    assert list(sampler) == epochs[0]


def test_subset_random_sampler_needs_indices():
    with pytest.raises(ValueError, match="empty"):
        SubsetRandomSampler([])
    with pytest.raises(TypeError, match="sequence"):
        SubsetRandomSampler(7)


# ---- WeightedRandomSampler --------------------------------------------------------------------
def test_weighted_sampler_draws_in_proportion_to_the_weights():
    mt.seed(0)
    draws = list(WeightedRandomSampler([1.0, 0.0, 3.0], num_samples=40_000))
    counts = np.bincount(draws, minlength=3) / len(draws)
    np.testing.assert_allclose(counts, [0.25, 0.0, 0.75], atol=0.01)


def test_weighted_sampler_without_replacement_draws_each_index_at_most_once():
    mt.seed(0)
    sampler = WeightedRandomSampler(np.array([5.0, 1.0, 0.0, 2.0]), 3, replacement=False)
    for _ in range(20):
        draws = list(sampler)
        assert sorted(draws) == [0, 1, 3]


def test_weighted_sampler_takes_paddles_2d_weights_and_a_tensor():
    mt.seed(0)
    sampler = WeightedRandomSampler(mt.to_tensor([[1.0, 0.0], [0.0, 1.0]]), num_samples=3)
    assert len(sampler) == 6 and list(sampler) == [0, 0, 0, 1, 1, 1]


@pytest.mark.parametrize(
    "weights, num_samples, replacement, match",
    [
        ([1.0, -0.5], 2, True, ">= 0"),
        ([1.0, np.nan], 2, True, "finite"),
        ([1.0, np.inf], 2, True, "finite"),
        ([0.0, 0.0], 2, True, "positive weight"),
        ([], 2, True, "non-empty"),
        ([[[1.0]]], 1, True, "1-D or 2-D"),
        ([1.0, 0.0, 2.0], 3, False, "only 2 positive weights"),
        ([1.0, 2.0], 0, True, "num_samples"),
        ([1.0, 2.0], 2.0, True, "num_samples"),
        ([1.0, 2.0], 2, 1, "replacement"),
        (["a", "b"], 2, True, "numbers"),
    ],
)
def test_weighted_sampler_rejects_bad_weights_and_counts_when_made(
    weights, num_samples, replacement, match
):
    with pytest.raises(ValueError, match=match):
        WeightedRandomSampler(weights, num_samples, replacement)


# ---- with DataLoader --------------------------------------------------------------------------
def test_a_dataloader_batches_a_split_a_concatenation_and_a_composition():
    mt.seed(0)
    train, _ = random_split(Numbers(0, 10), [0.8, 0.2])
    both = ComposeDataset([ConcatDataset([train, Numbers(50, 2)]), range(10)])
    batches = list(DataLoader(both, batch_size=4))
    assert [b[1].shape for b in batches] == [[4], [4], [2]]
    labels = np.concatenate([b[1].numpy() for b in batches]).tolist()
    assert labels[:8] == [train[i][1] for i in range(8)] and labels[8:] == [50, 51]
    assert batches[0][0].shape == [4, 1] and batches[0][0].dtype == mt.float32


def test_a_dataloader_draws_batches_through_the_new_samplers():
    data = TensorDataset([mt.arange(8, dtype="float32")])
    for sampler in (
        SubsetRandomSampler([1, 3, 5]),
        WeightedRandomSampler([0, 1, 0, 0, 0, 0, 0, 1], 6),
    ):
        loader = DataLoader(data, batch_sampler=BatchSampler(sampler=sampler, batch_size=2))
        seen = [v for (batch,) in loader for v in batch.tolist()]
        assert len(loader) == -(-len(sampler) // 2) and len(seen) == len(sampler)
        assert set(seen) <= ({1.0, 3.0, 5.0} if len(sampler) == 3 else {1.0, 7.0})


def test_a_dataloader_streams_a_chain():
    chained = ChainDataset([Stream([np.float32(1), np.float32(2)]), Stream([np.float32(3)])])
    assert [b.tolist() for b in DataLoader(chained, batch_size=2)] == [[1.0, 2.0], [3.0]]
