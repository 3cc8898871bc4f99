"""minitorch_amp.io data loading: Dataset, TensorDataset, samplers and DataLoader (paddle.io)."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp.io import (
    BatchSampler,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequenceSampler,
    TensorDataset,
    default_collate_fn,
)


class Squares(Dataset):
    """Sample i: (a float32 array [i, i], the int i**2), as a user's Dataset would return."""

    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        return np.array([i, i], dtype=np.float32), i * i

    def __len__(self):
        return self.n


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        for i in range(self.n):
            yield np.array([float(i)], dtype=np.float32)


def _indices(loader) -> list[int]:
    return [int(v) for _, y in loader for v in np.sqrt(y.numpy())]


def test_batches_are_collated_into_tensors_in_order():
    loader = DataLoader(Squares(5), batch_size=2)
    batches = list(loader)
    assert len(loader) == len(batches) == 3  # the last, shorter batch is kept
    x, y = batches[0]
    assert isinstance(x, mt.Tensor) and x.dtype == mt.float32 and x.shape == [2, 2]
    assert y.dtype == mt.int64 and y.tolist() == [0, 1]  # Python ints: np.array -> int64
    assert batches[-1][0].shape == [1, 2]
    assert _indices(loader) == [0, 1, 2, 3, 4]


def test_drop_last_drops_the_short_batch_and_len_counts_it():
    loader = DataLoader(Squares(5), batch_size=2, drop_last=True)
    assert len(loader) == 2 and _indices(loader) == [0, 1, 2, 3]


def test_shuffle_draws_a_new_order_every_epoch_from_the_seeded_generator():
    loader = DataLoader(Squares(20), batch_size=6, shuffle=True)
    mt.seed(7)
    first, second = _indices(loader), _indices(loader)
    assert sorted(first) == sorted(second) == list(range(20))
    assert first != second and first != list(range(20))
    mt.seed(7)
    assert _indices(loader) == first  # seed() fixes the order, as it fixes the weights


def test_tensor_dataset_samples_and_batches():
    x, y = mt.randn([7, 3]), mt.arange(7)
    data = TensorDataset([x, y])
    assert len(data) == 7
    sample = data[2]
    assert isinstance(sample, tuple) and sample[0].shape == [3] and sample[1].item() == 2
    xb, yb = next(iter(DataLoader(data, batch_size=4)))
    np.testing.assert_array_equal(xb.numpy(), x.numpy()[:4])
    assert yb.tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match=r"different numbers of samples \[7, 6\]"):
        TensorDataset([x, mt.arange(6)])
    with pytest.raises(TypeError, match="wrap arrays with to_tensor"):
        TensorDataset([np.zeros(3)])


def test_tensor_dataset_batches_are_the_stacked_samples():
    # The loader gathers a TensorDataset's rows at once; the result is the generic path's.
    data = TensorDataset([mt.randn([9, 2, 3]), mt.arange(9), mt.randn([9])])
    mt.seed(3)
    fast = list(DataLoader(data, batch_size=4, shuffle=True))
    mt.seed(3)
    stacking = lambda batch: default_collate_fn(batch)  # noqa: E731 - not the default: stacks
    generic = list(DataLoader(data, batch_size=4, shuffle=True, collate_fn=stacking))
    assert len(fast) == len(generic) == 3
    for a, b in zip(fast, generic):
        assert [t.shape for t in a] == [t.shape for t in b]
        assert [t.dtype for t in a] == [t.dtype for t in b]
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_collate_handles_dicts_strings_numbers_and_nested_lists():
    batch = [{"x": np.ones(2), "name": "a", "w": 0.5}, {"x": np.zeros(2), "name": "b", "w": 1.5}]
    out = default_collate_fn(batch)
    assert out["x"].shape == [2, 2] and out["name"] == ["a", "b"]
    assert out["w"].dtype == mt.float64 and out["w"].tolist() == [0.5, 1.5]  # np.array's dtype
    assert [t.tolist() for t in default_collate_fn([[1, [2, 3]], [4, [5, 6]]])[1]] == [
        [2, 5],
        [3, 6],
    ]
    with pytest.raises(RuntimeError, match="different lengths"):
        default_collate_fn([[1, 2], [3]])
    with pytest.raises(TypeError, match="pass a collate_fn"):
        default_collate_fn([object()])


def test_custom_collate_fn_and_numpy_results_become_tensors():
    loader = DataLoader(Squares(4), batch_size=2, collate_fn=lambda b: np.array([s[1] for s in b]))
    assert [t.tolist() for t in loader] == [[0, 1], [4, 9]]


def test_batch_size_none_yields_single_samples():
    loader = DataLoader(Squares(3), batch_size=None)
    samples = list(loader)
    assert len(loader) == 3 and samples[2][0].shape == [2] and samples[2][1].item() == 4


def test_iterable_dataset_batches_without_length_or_shuffle():
    loader = DataLoader(Stream(5), batch_size=2, drop_last=False)
    assert [b.shape for b in loader] == [[2, 1], [2, 1], [1, 1]]
    assert [b.shape for b in DataLoader(Stream(5), batch_size=2, drop_last=True)] == [[2, 1]] * 2
    with pytest.raises(TypeError, match="no length"):
        len(loader)
    with pytest.raises(ValueError, match="cannot be shuffled"):
        DataLoader(Stream(5), batch_size=2, shuffle=True)


def test_samplers():
    assert list(SequenceSampler(range(3))) == [0, 1, 2]
    mt.seed(1)
    perm = list(RandomSampler(range(10)))
    assert sorted(perm) == list(range(10))
    draws = list(RandomSampler(range(3), replacement=True, num_samples=50))
    assert len(draws) == 50 and set(draws) <= {0, 1, 2}
    sampler = BatchSampler(sampler=SequenceSampler(range(7)), batch_size=3, drop_last=True)
    assert list(sampler) == [[0, 1, 2], [3, 4, 5]] and len(sampler) == 2
    loader = DataLoader(Squares(7), batch_sampler=sampler)
    assert len(loader) == 2 and loader.batch_size == 3 and _indices(loader) == list(range(6))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"batch_size": 0}, "batch_size must be a positive int or None"),
        ({"feed_list": [mt.zeros([1])]}, "static-graph"),
        ({"return_list": False}, "return_list=True"),
        ({"num_workers": -1}, "num_workers must be an int >= 0"),
        (
            {"batch_sampler": BatchSampler(dataset=range(3)), "batch_size": 2},
            "belong to the batch_sampler",
        ),
    ],
)
def test_dataloader_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DataLoader(Squares(3), **kwargs)


def test_sampler_and_dataset_base_classes_say_what_to_implement():
    with pytest.raises(NotImplementedError, match="must implement __getitem__"):
        Dataset()[0]
    with pytest.raises(ValueError, match="either a dataset or a sampler"):
        BatchSampler()
    with pytest.raises(ValueError, match="lower num_samples or pass replacement=True"):
        RandomSampler(range(3), num_samples=4)


def test_io_still_exports_the_checkpoint_functions():
    import minitorch_amp.io as io

    assert io.save is mt.save and io.load is mt.load and io.DEFAULT_MAX_BYTES == 16 * 2**30
    assert io.CheckpointError.__module__ == "minitorch_amp.io.checkpoint"
