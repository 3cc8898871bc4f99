"""The ``paddle.io`` spellings that Paddle's own tests use, and PyTorch's where they differ.

* ``RandomSampler(data, replacement=False, num_samples=k)``: ``k`` distinct indices, a random
  subset in a random order (Paddle's ``np.random.choice(n, k, replace=False)``);
  ``k > len(data)`` raises ValueError, a non-bool ``replacement`` TypeError;
* ``BatchSampler(sampler, 32, False)``: PyTorch's positional order (sampler, batch_size,
  drop_last), which Paddle accepts besides its own (dataset, sampler, shuffle, batch_size, ...);
* ``loader()`` is ``iter(loader)`` (Paddle's examples write ``for batch in loader():``);
* ``places=`` is accepted and ignored: batches land on the current device.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp.io import (
    BatchSampler,
    DataLoader,
    Dataset,
    RandomSampler,
    SequenceSampler,
    TensorDataset,
)


class Numbers(Dataset):
    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        return np.array([i], dtype=np.int64)

    def __len__(self):
        return self.n


# ---- RandomSampler(num_samples=k) without replacement -----------------------------------------
def test_num_samples_without_replacement_draws_that_many_distinct_indices():
    mt.seed(0)
    sampler = RandomSampler(Numbers(100), replacement=False, num_samples=80)
    draws = list(sampler)
    assert len(sampler) == 80 == len(draws)
    assert len(set(draws)) == 80 and set(draws) <= set(range(100))


def test_num_samples_without_replacement_is_a_new_subset_every_epoch_and_reaches_every_index():
    mt.seed(1)
    sampler = RandomSampler(range(10), num_samples=3)
    epochs = [tuple(sampler) for _ in range(400)]
    assert all(len(set(e)) == 3 for e in epochs)
    assert len(set(epochs)) > 100  # not one fixed subset
    counts = np.bincount(np.concatenate(epochs), minlength=10)
    assert counts.size == 10 and (counts > 60).all(), counts  # 120 expected per index
    firsts = np.bincount([e[0] for e in epochs], minlength=10)
    assert (firsts > 10).all(), firsts  # the order is random too, not sorted


def test_num_samples_equal_to_the_length_is_a_permutation():
    mt.seed(2)
    assert sorted(RandomSampler(range(7), num_samples=7)) == list(range(7))


def test_num_samples_above_the_length_without_replacement_is_refused_with_both_numbers():
    with pytest.raises(ValueError, match=r"num_samples \(120\) .* 100 samples.*replacement=True"):
        RandomSampler(Numbers(100), False, 120)  # Paddle's test passes them positionally
    assert len(RandomSampler(Numbers(100), True, 120)) == 120  # with replacement it is fine


def test_a_dataset_that_shrank_below_num_samples_says_so_at_iteration():
    data = Numbers(10)
    sampler = RandomSampler(data, num_samples=8)
    data.n = 5
    with pytest.raises(ValueError, match=r"num_samples \(8\) .* 5 samples"):
        iter(sampler)


@pytest.mark.parametrize("replacement", [1, "yes", None])
def test_replacement_must_be_a_bool(replacement):
    with pytest.raises(TypeError, match="replacement must be a bool"):
        RandomSampler(range(3), replacement=replacement)


# ---- BatchSampler: PyTorch's positional order ------------------------------------------------
def test_batch_sampler_takes_pytorchs_positional_sampler_batch_size_drop_last():
    sampler = SequenceSampler(Numbers(100))
    kept = BatchSampler(sampler, 32, False)
    assert kept.sampler is sampler and kept.batch_size == 32 and not kept.drop_last
    batches = list(kept)
    assert len(kept) == 4 == len(batches)
    assert [b[0] for b in batches] == [0, 32, 64, 96] and batches[-1] == [96, 97, 98, 99]
    dropped = BatchSampler(sampler, 32, True)
    assert len(dropped) == 3 == len(list(dropped)) and dropped.drop_last


def test_batch_sampler_positional_form_takes_any_iterable_of_indices_and_keyword_drop_last():
    batches = BatchSampler(range(7), 3, drop_last=True)
    assert list(batches) == [[0, 1, 2], [3, 4, 5]] and len(batches) == 2


def test_batch_sampler_keeps_paddles_keyword_forms():
    assert list(BatchSampler(dataset=range(5), batch_size=2)) == [[0, 1], [2, 3], [4]]
    assert list(BatchSampler(sampler=SequenceSampler(range(3)), batch_size=2)) == [[0, 1], [2]]


def test_a_sampler_given_first_with_keywords_is_used_as_the_sampler_not_as_a_dataset():
    order = [4, 0, 3]

    class Fixed(SequenceSampler):
        def __iter__(self):
            return iter(order)

    batches = BatchSampler(Fixed(range(3)), batch_size=2, drop_last=False)
    assert list(batches) == [[4, 0], [3]]  # its order, not range(len(sampler))
    with pytest.raises(ValueError, match="shuffle goes with a dataset"):
        BatchSampler(Fixed(range(3)), shuffle=True, batch_size=2)


def test_batch_sampler_positional_batch_size_given_twice_is_refused():
    with pytest.raises(ValueError, match="batch size twice"):
        BatchSampler(SequenceSampler(range(5)), 2, batch_size=3)


def test_batch_sampler_positional_form_refuses_a_dataset_where_the_sampler_goes():
    with pytest.raises(ValueError, match=r"BatchSampler\(dataset=data, batch_size=32\)"):
        BatchSampler(Numbers(10), 32)


# ---- DataLoader: callable, and places= ---------------------------------------------------------
def test_calling_a_dataloader_starts_an_epoch_as_iter_does():
    loader = DataLoader(TensorDataset([mt.arange(5)]), batch_size=2)
    epoch = loader()
    assert [b.tolist() for (b,) in epoch] == [[0, 1], [2, 3], [4]]
    assert [b.tolist() for (b,) in loader()] == [[0, 1], [2, 3], [4]]  # a fresh epoch each call


@pytest.mark.parametrize(
    "places",
    ["cpu", "gpu:0", "gpu_pinned", mt.CPUPlace(), mt.CUDAPlace(0), ["cpu"], (mt.CPUPlace(),)],
)
def test_places_is_accepted_and_ignored_batches_land_on_the_current_device(places):
    loader = DataLoader(Numbers(3), places=places, batch_size=2)
    batches = [b.tolist() for b in loader]
    assert batches == [[[0], [1]], [[2]]]
    assert all(str(b.place) == mt.get_device() for b in loader)


@pytest.mark.parametrize("places", [3, ["cpu", 0], {"cpu": 0}])
def test_places_that_names_no_device_is_refused(places):
    with pytest.raises(TypeError, match="places must be a Place, a device string"):
        DataLoader(Numbers(3), places=places)


def test_feed_list_is_still_refused_as_a_static_graph_argument():
    with pytest.raises(ValueError, match="feed_list is a static-graph argument"):
        DataLoader(Numbers(3), feed_list=[mt.zeros([1])])
