"""Datasets built from other datasets, with ``paddle.io``'s names: a subset, a random split,
a concatenation, a composition of fields, and a chain of streams.

Example:
    >>> import minitorch_amp as mt
    >>> from minitorch_amp.io import ConcatDataset, Subset, random_split
    >>> both = ConcatDataset([range(3), range(10, 12)])
    >>> len(both), both[3], both[-1]
    (5, 10, 11)
    >>> list(Subset(both, [4, 0]))
    [11, 0]
    >>> mt.seed(0)
    >>> train, val = random_split(both, [0.6, 0.4])
    >>> len(train), len(val), sorted(list(train) + list(val))
    (3, 2, [0, 1, 2, 10, 11])
"""

from __future__ import annotations

import bisect
import itertools
import math
import numbers
import warnings

import numpy as np

from ..backend.random import generator as library_generator
from .data import Dataset, IterableDataset, is_integer

__all__ = ["ChainDataset", "ComposeDataset", "ConcatDataset", "Subset", "random_split"]


def _map_style(dataset, owner: str, position: int):
    """``dataset`` when it has ``__getitem__`` and ``__len__`` and is no IterableDataset."""
    if isinstance(dataset, IterableDataset):
        raise TypeError(
            f"{owner}: dataset {position} is an IterableDataset, which has no indices; "
            "chain streams with ChainDataset"
        )
    if not (hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__")):
        raise TypeError(
            f"{owner}: dataset {position} ({type(dataset).__name__}) needs __getitem__ and "
            "__len__ (a map-style Dataset)"
        )
    return dataset


def _non_empty_list(datasets, owner: str) -> list:
    if isinstance(datasets, (Dataset, str, bytes)) or not hasattr(datasets, "__iter__"):
        raise TypeError(f"{owner} takes a list of datasets, got {type(datasets).__name__}")
    datasets = list(datasets)
    if not datasets:
        raise ValueError(f"{owner} takes a non-empty list of datasets")
    return datasets


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order: ``subset[i]`` is
    ``dataset[indices[i]]`` (an index may repeat).

    Raises:
        TypeError: ``indices`` is not a sequence of integers.
        IndexError: an index is outside ``dataset`` (checked here, not at the first read).
    """

    def __init__(self, dataset, indices):
        if isinstance(indices, (str, bytes)) or not hasattr(indices, "__len__"):
            raise TypeError(f"Subset: indices must be a sequence of ints, got {indices!r:.60}")
        n, found = len(dataset), np.asarray(indices)
        if found.size:  # checked as one array: random_split makes subsets of every sample
            if found.dtype.kind not in "iu" or any(isinstance(i, bool) for i in indices[:1]):
                raise TypeError(f"Subset: indices must be ints, got {indices!r:.60}")
            bad = np.flatnonzero((found < -n) | (found >= n))
            if bad.size:
                raise IndexError(
                    f"Subset: indices[{bad[0]}] = {found.flat[bad[0]]} is outside the dataset "
                    f"of {n} samples"
                )
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, idx):
        return self.dataset[self.indices[idx]]

    def __len__(self) -> int:
        return len(self.indices)


def random_split(dataset, lengths, generator=None) -> list[Subset]:
    """Split ``dataset`` at random into non-overlapping :class:`Subset` s of ``lengths``.

    ``lengths`` are sample counts adding up to ``len(dataset)``, or fractions adding up to 1
    (each split gets ``floor(fraction * len)`` samples, and the samples left over go one
    each to the first splits, in order; an empty split warns). The permutation comes from the
    library's seeded generator (``seed(n)``), or from ``generator`` (a NumPy Generator).

    Raises:
        ValueError: a negative length, a fraction outside [0, 1], or lengths that do not add
            up to the number of samples.
    """
    n = len(dataset)
    lengths = list(lengths)
    for i, length in enumerate(lengths):
        if isinstance(length, bool) or not isinstance(length, numbers.Real) or length < 0:
            raise ValueError(f"random_split: lengths[{i}] is {length!r}; a length is >= 0")
    total = sum(lengths)
    if math.isclose(total, 1) and total <= 1:  # fractions (Paddle's test, [1] included)
        for i, fraction in enumerate(lengths):
            if fraction > 1:
                raise ValueError(f"random_split: fraction {i} ({fraction}) is above 1")
        counts = [math.floor(n * fraction) for fraction in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        for i, count in enumerate(counts):
            if count == 0:
                warnings.warn(f"random_split: split {i} is empty", stacklevel=2)
        lengths = counts
    if any(not is_integer(length) for length in lengths):
        raise ValueError(
            f"random_split: lengths must be counts (ints) or fractions that add up to 1, "
            f"got {lengths}"
        )
    if sum(lengths) != n:
        raise ValueError(
            f"random_split: the lengths {lengths} add up to {sum(lengths)}, but the dataset "
            f"has {n} samples; give counts that add up to {n}, or fractions that add up to 1"
        )
    if generator is not None and not isinstance(generator, np.random.Generator):
        raise TypeError(
            "random_split: generator must be a numpy.random.Generator or None (the library's "
            f"seeded one), got {type(generator).__name__}"
        )
    rng = library_generator(np) if generator is None else generator
    order = rng.permutation(n).tolist()
    ends = itertools.accumulate(lengths)
    return [Subset(dataset, order[end - length : end]) for end, length in zip(ends, lengths)]


class ConcatDataset(Dataset):
    """The samples of several map-style datasets one after the other.

    ``cumulative_sizes[k]`` is the number of samples in the first ``k + 1`` datasets. A
    negative index counts from the end.
    """

    def __init__(self, datasets):
        datasets = _non_empty_list(datasets, "ConcatDataset")
        self.datasets = [_map_style(d, "ConcatDataset", i) for i, d in enumerate(datasets)]
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if not is_integer(idx):
            raise TypeError(f"ConcatDataset takes an int index, got {type(idx).__name__}")
        n = len(self)
        if idx < 0:
            if -idx > n:  # Paddle's type for this one
                raise ValueError(f"ConcatDataset: index {idx} reaches before the first of {n}")
            idx += n
        if idx >= n:
            raise IndexError(f"ConcatDataset: index {idx} is out of range for {n} samples")
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][idx - start]


class ComposeDataset(Dataset):
    """The fields of several map-style datasets of one length, side by side: sample ``i`` is
    the tuple of ``datasets[0][i]``'s fields, then ``datasets[1][i]``'s, and so on (a sample
    that is not a list or tuple is one field)."""

    def __init__(self, datasets):
        datasets = _non_empty_list(datasets, "ComposeDataset")
        self.datasets = [_map_style(d, "ComposeDataset", i) for i, d in enumerate(datasets)]
        sizes = [len(d) for d in self.datasets]
        if len(set(sizes)) != 1:
            raise ValueError(
                f"ComposeDataset: the datasets hold different numbers of samples {sizes}; "
                "compose datasets of one length"
            )

    def __len__(self) -> int:
        return len(self.datasets[0])

    def __getitem__(self, idx):
        fields = []
        for dataset in self.datasets:
            sample = dataset[idx]
            fields.extend(sample if isinstance(sample, (list, tuple)) else [sample])
        return tuple(fields)


class ChainDataset(IterableDataset):
    """Several IterableDatasets, one stream after the other."""

    def __init__(self, datasets):
        datasets = _non_empty_list(datasets, "ChainDataset")
        for i, dataset in enumerate(datasets):
            if not isinstance(dataset, IterableDataset):
                raise TypeError(
                    f"ChainDataset: dataset {i} ({type(dataset).__name__}) is not an "
                    "IterableDataset; concatenate map-style datasets with ConcatDataset"
                )
        self.datasets = datasets

    def __iter__(self):
        for dataset in self.datasets:
            yield from dataset
