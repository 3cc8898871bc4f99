"""A DataLoader keeps going after a bad sample, and its argument and collate errors say what to do.

A ``__getitem__`` that raises fails its own batch only: the error names the sample's index and
keeps the dataset's exception as its cause, and the next ``next()`` yields the following batch
(the epoch used to end there: a caller that skipped the bad batch silently lost the rest).
"""

from __future__ import annotations

import numpy as np
import pytest

from minitorch_amp.io import (
    BatchSampler,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    default_collate_fn,
)


class Flaky(Dataset):
    """Sample i is the float32 array [i]; the indices in ``bad`` raise ``error``."""

    def __init__(self, n, bad=(), error=ValueError):
        self.n, self.bad, self.error = n, set(bad), error

    def __getitem__(self, i):
        if i in self.bad:
            raise self.error(f"sample {i} is corrupt")
        return np.array([i], dtype=np.float32)

    def __len__(self):
        return self.n


def _values(batch) -> list[int]:
    return [int(v) for v in batch.numpy().ravel()]


def _drain(iterator) -> tuple[list[list[int]], list[BaseException]]:
    """Every batch of one epoch, catching each failed batch's error as a training loop would."""
    batches, errors = [], []
    while True:
        try:
            batches.append(_values(next(iterator)))
        except StopIteration:
            return batches, errors
        except Exception as error:  # the loop under test skips the failed batch
            errors.append(error)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_failing_sample_fails_its_batch_and_the_epoch_goes_on(num_workers):
    loader = DataLoader(Flaky(12, bad={5}), batch_size=4, num_workers=num_workers)
    batches, errors = _drain(iter(loader))
    assert batches == [[0, 1, 2, 3], [8, 9, 10, 11]]  # the batch [4..7] alone is lost
    assert len(errors) == 1 and len(loader) == 3
    assert "dataset[5]" in str(errors[0]) and "sample 5 is corrupt" in str(errors[0])
    assert isinstance(errors[0].__cause__, ValueError)  # the dataset's own exception


def test_the_error_keeps_the_datasets_exception_type_and_the_cause():
    loader = DataLoader(Flaky(4, bad={2}, error=KeyError), batch_size=2)
    iterator = iter(loader)
    assert _values(next(iterator)) == [0, 1]
    with pytest.raises(KeyError, match=r"dataset\[2\] raised KeyError") as caught:
        next(iterator)
    assert isinstance(caught.value.__cause__, KeyError)
    with pytest.raises(StopIteration):
        next(iterator)


def test_an_exception_that_cannot_be_rebuilt_with_a_message_comes_as_a_runtime_error():
    class NeedsTwoError(Exception):
        def __init__(self, a, b):
            super().__init__(a, b)

    class Broken(Flaky):
        def __getitem__(self, i):
            raise NeedsTwoError("x", i)

    with pytest.raises(RuntimeError, match=r"dataset\[0\] raised NeedsTwoError") as caught:
        next(iter(DataLoader(Broken(2), batch_size=2)))
    assert isinstance(caught.value.__cause__, NeedsTwoError)


def test_a_stop_iteration_from_getitem_does_not_end_the_epoch_silently():
    loader = DataLoader(Flaky(4, bad={0}, error=StopIteration), batch_size=2)
    batches, errors = _drain(iter(loader))
    assert batches == [[2, 3]] and type(errors[0]) is RuntimeError
    assert "dataset[0] raised StopIteration" in str(errors[0])


def test_every_bad_sample_is_reported_and_each_good_batch_still_arrives():
    loader = DataLoader(Flaky(10, bad={0, 4, 9}), batch_size=2, drop_last=False)
    batches, errors = _drain(iter(loader))
    assert batches == [[2, 3], [6, 7]]
    assert ["dataset[0]" in str(errors[0]), "dataset[4]" in str(errors[1])] == [True, True]
    assert "dataset[9]" in str(errors[2]) and len(errors) == 3


def test_shuffled_epochs_go_on_and_every_good_sample_arrives_once():
    loader = DataLoader(Flaky(12, bad={5}), batch_size=3, shuffle=True)
    batches, errors = _drain(iter(loader))
    seen = sorted(v for batch in batches for v in batch)
    assert len(errors) == 1 and len(batches) == 3
    assert set(seen) < set(range(12)) - {5} and len(seen) == len(set(seen)) == 9


def test_unbatched_loading_goes_on_after_a_bad_sample():
    batches, errors = _drain(iter(DataLoader(Flaky(4, bad={1}), batch_size=None)))
    assert batches == [[0], [2], [3]] and "dataset[1]" in str(errors[0])


def test_a_collate_error_fails_only_its_batch():
    def collate(samples):
        if any(s[0] == 3 for s in samples):
            raise ValueError("cannot collate 3")
        return np.stack(samples)

    loader = DataLoader(Flaky(6), batch_size=2, collate_fn=collate)
    batches, errors = _drain(iter(loader))
    assert batches == [[0, 1], [4, 5]] and "cannot collate 3" in str(errors[0])


def test_an_iterable_dataset_whose_collate_fails_goes_on_with_the_next_batch():
    class Stream(IterableDataset):
        def __iter__(self):
            return iter(np.array([i], dtype=np.float32) for i in range(6))

    def collate(samples):
        if any(s[0] == 3 for s in samples):
            raise ValueError("cannot collate 3")
        return np.stack(samples)

    batches, errors = _drain(iter(DataLoader(Stream(), batch_size=2, collate_fn=collate)))
    assert batches == [[0, 1], [4, 5]] and len(errors) == 1


# ---- batch_size and the other integer arguments ----------------------------------------------
@pytest.mark.parametrize("size", [np.int64(2), np.int32(2), np.uint8(2)])
def test_batch_size_may_be_any_integer_including_numpy_integers(size):
    loader = DataLoader(Flaky(5), batch_size=size)
    assert len(loader) == 3 and [_values(b) for b in loader] == [[0, 1], [2, 3], [4]]
    assert type(loader.batch_size) is int and loader.batch_size == 2
    sampler = BatchSampler(dataset=range(5), batch_size=size)
    assert type(sampler.batch_size) is int and len(sampler) == 3


@pytest.mark.parametrize(
    "size, message",
    [
        (True, "batch_size must be a positive int or None, got True"),
        (np.bool_(True), "batch_size must be a positive int or None, got True"),
        (2.0, "batch_size must be a positive int or None, got 2.0"),
        ("2", "batch_size must be a positive int or None, got '2'"),
        (np.int64(0), "batch_size must be a positive int or None, got 0"),
    ],
)
def test_batch_size_refuses_bools_non_integers_and_zero(size, message):
    with pytest.raises(ValueError, match=message):
        DataLoader(Flaky(5), batch_size=size)
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        BatchSampler(dataset=range(5), batch_size=size)


def test_num_workers_and_num_samples_take_numpy_integers_too():
    assert DataLoader(Flaky(3), num_workers=np.int64(2)).num_workers == 2
    assert len(RandomSampler(range(3), replacement=True, num_samples=np.int64(7))) == 7
    with pytest.raises(ValueError, match="num_samples must be a positive int"):
        RandomSampler(range(3), replacement=True, num_samples=True)


# ---- collate errors ---------------------------------------------------------------------------
def test_collating_dicts_with_different_keys_names_the_keys():
    batch = [{"x": 1, "y": 2}, {"x": 3, "y": 4}, {"x": 5, "z": 6}]
    with pytest.raises(ValueError, match=r"sample 2 .*missing \['y'\].*extra \['z'\]") as caught:
        default_collate_fn(batch)
    assert "same keys" in str(caught.value) and "collate_fn" in str(caught.value)


@pytest.mark.parametrize("big", [2**70, -(2**63) - 1, 2**63])
def test_collating_an_integer_beyond_int64_names_the_value(big):
    with pytest.raises(
        OverflowError, match=rf"sample 1 is the integer {big}, which int64 cannot hold"
    ) as caught:
        default_collate_fn([1, big])
    assert "float" in str(caught.value) and "collate_fn" in str(caught.value)


def test_collating_integers_at_the_int64_limits_keeps_them_exact():
    out = default_collate_fn([2**63 - 1, -(2**63), np.int64(3)])
    assert out.tolist() == [2**63 - 1, -(2**63), 3] and str(out.dtype) == "int64"
