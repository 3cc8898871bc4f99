"""Data loading with ``paddle.io``'s names: datasets, samplers, and the DataLoader that batches.

A map-style :class:`Dataset` has ``__getitem__`` and ``__len__``; an :class:`IterableDataset`
yields samples from ``__iter__``. A :class:`DataLoader` takes batches of indices from a
:class:`BatchSampler` (in order, or shuffled), fetches the samples and collates them into
Tensors (:func:`default_collate_fn`). Everything runs in the calling process.

Shuffling draws from the library's seeded generator, so ``seed(n)`` fixes the batch order
together with the initial weights and the dropout masks. (Paddle draws from NumPy's global
generator, which ``np.random.seed`` sets.)

Example:
    >>> import minitorch_amp as mt
    >>> from minitorch_amp.io import DataLoader, TensorDataset
    >>> data = TensorDataset([mt.arange(10, dtype="float32").reshape([5, 2]), mt.arange(5)])
    >>> loader = DataLoader(data, batch_size=2, drop_last=True)
    >>> len(loader), [[x.shape, y.tolist()] for x, y in loader]
    (2, [[[2, 2], [0, 1]], [[2, 2], [2, 3]]])
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence

import numpy as np

from ..autograd.creation import to_tensor
from ..autograd.functions import stack
from ..autograd.tensor import Tensor
from ..backend.random import generator

__all__ = [
    "BatchSampler",
    "Dataset",
    "IterableDataset",
    "RandomSampler",
    "Sampler",
    "SequenceSampler",
    "TensorDataset",
    "default_collate_fn",
]


def is_integer(value) -> bool:
    """An int or a NumPy integer, but not a bool (``True`` is an ``int`` to Python)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def positive_int(value, what: str, or_none: bool = False) -> int:
    """``value`` as a Python int when it is an integer > 0 (NumPy integers too; not a bool).

    Raises:
        ValueError: ``value`` is a bool, not an integer, or not positive; ``what`` names it.
    """
    if is_integer(value) and value > 0:
        return int(value)
    shown = value.item() if isinstance(value, np.generic) else value
    kind = "int or None" if or_none else "int"
    raise ValueError(f"{what} must be a positive {kind}, got {shown!r} (for example 32)")


class Dataset:
    """A map-style dataset: subclass it and implement ``__getitem__`` and ``__len__``."""

    def __getitem__(self, idx):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__(idx)")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must implement __len__()")


class IterableDataset(Dataset):
    """A stream of samples: subclass it and implement ``__iter__``. It has no length and no
    indices, so a DataLoader over it cannot shuffle."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__()")

    def __getitem__(self, idx):
        raise TypeError(f"{type(self).__name__} is an IterableDataset: iterate over it")

    def __len__(self) -> int:
        raise TypeError(f"{type(self).__name__} is an IterableDataset and has no length")


class TensorDataset(Dataset):
    """Sample ``i`` is ``(tensors[0][i], tensors[1][i], ...)``.

    Args:
        tensors: a list of Tensors with the same first dimension (the number of samples).
    """

    def __init__(self, tensors):
        if not isinstance(tensors, (list, tuple)) or not tensors:
            raise TypeError("TensorDataset takes a non-empty list of Tensors")
        for t in tensors:
            if not isinstance(t, Tensor) or t.ndim == 0:
                raise TypeError(
                    f"TensorDataset takes Tensors of at least one dimension, got {t!r:.60}; "
                    "wrap arrays with to_tensor(...)"
                )
        sizes = [t.shape[0] for t in tensors]
        if len(set(sizes)) != 1:
            raise ValueError(
                f"TensorDataset: the tensors hold different numbers of samples {sizes} "
                "(their first dimensions must agree)"
            )
        self.tensors = list(tensors)

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Sampler:
    """Yields dataset indices; subclasses implement ``__iter__`` (and ``__len__``)."""

    def __init__(self, data_source=None):
        self.data_source = data_source

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__()")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must implement __len__()")


class SequenceSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1`` in order."""

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """Indices in a random order, from the library's seeded generator, drawn anew at every
    ``iter()``: a permutation of all of them; with ``num_samples`` and no ``replacement`` the
    first ``num_samples`` of a permutation (distinct indices, Paddle's
    ``np.random.choice(n, k, replace=False)``); with ``replacement`` ``num_samples`` (default
    ``len(data_source)``) independent draws.

    Raises:
        TypeError: ``replacement`` is not a bool (Paddle's check).
        ValueError: ``num_samples`` is not a positive int, or exceeds ``len(data_source)``
            without ``replacement`` (also at ``iter()``, when the dataset has shrunk since).
    """

    def __init__(self, data_source, replacement: bool = False, num_samples: int | None = None):
        if not isinstance(replacement, (bool, np.bool_)):
            raise TypeError(f"RandomSampler: replacement must be a bool, got {replacement!r:.60}")
        if num_samples is not None:
            num_samples = positive_int(num_samples, "RandomSampler: num_samples")
        super().__init__(data_source)
        self.replacement, self._num_samples = bool(replacement), num_samples
        self._check_size(len(data_source))

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def _check_size(self, n: int) -> None:
        if not self.replacement and self.num_samples > n:
            raise ValueError(
                f"RandomSampler: num_samples ({self.num_samples}) is more than the "
                f"{n} samples of data_source, and without replacement each index comes at "
                "most once; lower num_samples or pass replacement=True"
            )

    def __iter__(self):
        rng, n = generator(np), len(self.data_source)
        if self.replacement:
            return iter(rng.integers(0, n, size=self.num_samples).tolist())
        self._check_size(n)
        return iter(rng.permutation(n)[: self.num_samples].tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` (or of ``dataset``, in order or shuffled) into lists
    of ``batch_size``; the last, shorter batch is kept unless ``drop_last``.

    Paddle's order is ``(dataset, sampler, shuffle, batch_size, drop_last)``; PyTorch's
    positional ``BatchSampler(sampler, batch_size, drop_last)`` works too (Paddle accepts it
    as well): an integer in the second place is the batch size. A :class:`Sampler` given
    first, with the rest as keywords, is used as the sampler (Paddle would batch
    ``range(len(sampler))``, losing the sampler's order).

    Example:
        >>> list(BatchSampler(dataset=range(5), batch_size=2))
        [[0, 1], [2, 3], [4]]
        >>> list(BatchSampler(SequenceSampler(range(5)), 2, True))
        [[0, 1], [2, 3]]

    Raises:
        ValueError: neither or both of a dataset and a sampler; ``shuffle`` with a sampler;
            a bad ``batch_size``; the batch size given twice; a Dataset where PyTorch's
            order puts the sampler; an IterableDataset.
    """

    def __init__(
        self, dataset=None, sampler=None, shuffle: bool = False, batch_size: int = 1,
        drop_last: bool = False,
    ):  # fmt: skip
        if is_integer(sampler):  # PyTorch's order: BatchSampler(sampler, batch_size, drop_last)
            if batch_size != 1:
                raise ValueError(
                    f"BatchSampler: got the batch size twice ({sampler} in PyTorch's "
                    f"positional place, batch_size={batch_size!r}); give it once"
                )
            if isinstance(dataset, Dataset):
                raise ValueError(
                    "BatchSampler(sampler, batch_size, drop_last) is PyTorch's order and takes "
                    f"a sampler first, got the dataset {type(dataset).__name__}; write "
                    "BatchSampler(dataset=data, batch_size=32) to batch a dataset"
                )
            dataset, sampler, batch_size = None, dataset, sampler
            shuffle, drop_last = False, bool(shuffle) or bool(drop_last)
        elif isinstance(dataset, Sampler) and sampler is None:  # BatchSampler(s, batch_size=8)
            dataset, sampler = None, dataset
        if (dataset is None) == (sampler is None):
            raise ValueError("BatchSampler takes either a dataset or a sampler, not both")
        batch_size = positive_int(batch_size, "BatchSampler: batch_size")
        if sampler is not None and shuffle:
            raise ValueError("BatchSampler: shuffle goes with a dataset; shuffle in the sampler")
        if isinstance(dataset, IterableDataset):
            raise ValueError(
                "BatchSampler needs a map-style dataset; an IterableDataset has no indices"
            )
        if sampler is None:
            sampler = RandomSampler(dataset) if shuffle else SequenceSampler(dataset)
        self.sampler, self.shuffle = sampler, bool(shuffle)
        self.batch_size, self.drop_last = batch_size, bool(drop_last)

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


def default_collate_fn(batch):
    """Stack a list of samples into one batch, field by field (Paddle's rule).

    Tensors are stacked, NumPy arrays stacked into a Tensor, Python and NumPy numbers
    become a 1-D Tensor (``np.array``'s dtype: int64 for Python ints, float64, bool, and a
    NumPy scalar's own int32/int64/float16/float32/float64; NumPy int8/uint8/int16/uint16/
    uint32 scalars, which no Tensor holds, become int64), strings stay a list;
    dicts are collated per key and lists/tuples per position (a list comes back).

    Raises:
        ValueError: the dicts of a batch have different keys (the error names them).
        OverflowError: an integer that int64 cannot hold (NumPy would keep it as an object,
            or round it to float64).
        RuntimeError: the lists or tuples of a batch have different lengths.
    """
    sample = batch[0]
    if isinstance(sample, Tensor):
        return stack(list(batch), axis=0)
    if isinstance(sample, np.ndarray):
        return to_tensor(np.stack(batch, axis=0))
    if isinstance(sample, (numbers.Number, np.bool_)):
        return to_tensor(_numbers_array(batch))
    if isinstance(sample, (str, bytes)):
        return list(batch)
    if isinstance(sample, Mapping):
        _check_same_keys(batch)
        return {key: default_collate_fn([d[key] for d in batch]) for key in sample}
    if isinstance(sample, Sequence):
        if any(len(s) != len(sample) for s in batch):
            raise RuntimeError("default_collate_fn: the samples of a batch have different lengths")
        return [default_collate_fn(list(fields)) for fields in zip(*batch)]
    raise TypeError(
        "a batch can hold Tensors, NumPy arrays, numbers, strings, dicts and lists, got "
        f"{type(sample).__name__}; pass a collate_fn that handles it"
    )


_INT64 = np.iinfo(np.int64)


def _numbers_array(batch) -> np.ndarray:
    """``np.array(batch)``, refusing integers int64 cannot hold (NumPy would make an object
    array, or round them to float64 silently)."""
    if all(is_integer(v) for v in batch):
        for i, v in enumerate(batch):
            if not _INT64.min <= v <= _INT64.max:
                raise OverflowError(
                    f"default_collate_fn: sample {i} is the integer {int(v)}, which int64 "
                    f"cannot hold ({_INT64.min} .. {_INT64.max}); return it as a float or a "
                    "string from the dataset, or pass a collate_fn that handles it"
                )
        array = np.array(batch)
        if array.dtype in (np.int32, np.int64):  # np.array's own: kept, as in Paddle
            return array
        return np.array([int(v) for v in batch], dtype=np.int64)
    return np.array(batch)


def _check_same_keys(batch) -> None:
    """Every dict of a batch has the first one's keys, or an error names the difference."""
    keys = list(batch[0])
    for i, d in enumerate(batch[1:], start=1):
        if not isinstance(d, Mapping) or d.keys() != batch[0].keys():
            if not isinstance(d, Mapping):
                found = f"is a {type(d).__name__}"
            else:
                missing = [k for k in keys if k not in d]
                extra = [k for k in d if k not in batch[0]]
                found = f"has keys {list(d)} (missing {missing}, extra {extra})"
            raise ValueError(
                f"default_collate_fn: sample 0 is a dict with keys {keys}, but sample {i} "
                f"{found}; give every sample the same keys, or pass a collate_fn that merges "
                "them"
            )


def _to_tensors(value):
    """NumPy arrays inside a collated batch become Tensors (what a custom collate_fn returns)."""
    if isinstance(value, np.ndarray):
        return to_tensor(value)
    if isinstance(value, Mapping):
        return {key: _to_tensors(v) for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_tensors(v) for v in value)
    return value
