"""``DataLoader``: batches of a dataset as Tensors, with Paddle's signature and checks.

Example:
    >>> import minitorch_amp as mt
    >>> from minitorch_amp.io import DataLoader, TensorDataset
    >>> mt.seed(0)
    >>> data = TensorDataset([mt.arange(6)])
    >>> [batch.tolist() for (batch,) in DataLoader(data, batch_size=4, shuffle=True)]
    [[3, 2, 5, 4], [0, 1]]
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import numpy as np

from ..autograd.creation import to_tensor
from .data import BatchSampler, IterableDataset, TensorDataset, _to_tensors, default_collate_fn

__all__ = ["DataLoader"]


class DataLoader:
    """Iterate over ``dataset`` in batches of ``batch_size`` samples, collated into Tensors.

    Each ``iter()`` is one epoch: with ``shuffle=True`` a new permutation is drawn from the
    library's seeded generator (``seed(n)`` makes the order reproducible). ``len()`` is the
    number of batches. Samples are fetched in the calling process, on the current device; a
    :class:`TensorDataset` with the default ``collate_fn`` is batched by one gather per tensor
    (the same batch as stacking its samples).

    Args:
        dataset: a :class:`Dataset` (``__getitem__`` + ``__len__``) or an
            :class:`IterableDataset`.
        feed_list, places: static-graph arguments; must be None.
        return_list: must be True (batches come as lists, or whatever ``collate_fn`` returns).
        batch_sampler: a sampler yielding lists of indices; then ``batch_size``, ``shuffle``
            and ``drop_last`` must keep their defaults.
        batch_size: samples per batch; None yields the samples one by one, unbatched.
        shuffle: reshuffle the indices at every epoch (map-style datasets only).
        drop_last: drop the last batch when it is smaller than ``batch_size``.
        collate_fn: turns a list of samples into a batch (default :func:`default_collate_fn`);
            NumPy arrays in what it returns become Tensors.
        num_workers, use_buffer_reader, prefetch_factor, use_shared_memory, timeout,
            worker_init_fn, persistent_workers: Paddle's loading-process options. Loading
            always happens in the calling process here, so they change nothing (no worker
            process, so ``worker_init_fn`` is never called); ``num_workers`` must be >= 0.

    Raises:
        ValueError: a static-graph argument, ``return_list=False``, ``batch_sampler`` together
            with ``batch_size``/``shuffle``/``drop_last``, a bad ``batch_size``, or ``shuffle``
            with an IterableDataset.
    """

    def __init__(
        self,
        dataset,
        feed_list=None,
        places=None,
        return_list: bool = True,
        batch_sampler=None,
        batch_size: int | None = 1,
        shuffle: bool = False,
        drop_last: bool = False,
        collate_fn=None,
        num_workers: int = 0,
        use_buffer_reader: bool = True,
        prefetch_factor: int = 2,
        use_shared_memory: bool = True,
        timeout: int = 0,
        worker_init_fn=None,
        persistent_workers: bool = False,
    ):
        if feed_list is not None or places is not None:
            raise ValueError(
                "DataLoader: feed_list and places are static-graph arguments; leave them None "
                "(batches land on the current device: see set_device)"
            )
        if return_list is not True:
            raise ValueError("DataLoader: only return_list=True (dygraph) is supported")
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers must be an int >= 0, got {num_workers!r}")
        iterable = isinstance(dataset, IterableDataset)
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or drop_last:
                raise ValueError(
                    "DataLoader: batch_size, shuffle and drop_last belong to the batch_sampler "
                    "when one is given; leave them at their defaults"
                )
            if iterable:
                raise ValueError("DataLoader: an IterableDataset takes no batch_sampler")
        elif batch_size is not None:
            if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
                raise ValueError(
                    f"DataLoader: batch_size must be a positive int or None, got {batch_size!r}"
                )
            if iterable and shuffle:
                raise ValueError(
                    "DataLoader: an IterableDataset cannot be shuffled (it has no indices); "
                    "shuffle inside its __iter__"
                )
            if not iterable:
                batch_sampler = BatchSampler(
                    dataset=dataset, shuffle=shuffle, batch_size=batch_size, drop_last=drop_last
                )
        self.dataset, self.batch_sampler = dataset, batch_sampler
        self.batch_size = (
            getattr(batch_sampler, "batch_size", None) if batch_sampler else batch_size
        )
        self.drop_last, self.return_list = bool(drop_last), True
        self.collate_fn = default_collate_fn if collate_fn is None else collate_fn
        self.num_workers, self.worker_init_fn = num_workers, worker_init_fn
        self._iterable = iterable
        self._options = {  # kept for introspection; no effect here (see the docstring)
            "use_buffer_reader": use_buffer_reader,
            "prefetch_factor": prefetch_factor,
            "use_shared_memory": use_shared_memory,
            "timeout": timeout,
            "persistent_workers": persistent_workers,
        }

    def __iter__(self):
        if self._iterable:
            yield from self._iterate_stream()
        elif self.batch_sampler is None:  # batch_size=None: the samples one by one
            for index in range(len(self.dataset)):
                yield _single(self.dataset[index])
        else:
            gather = type(self.dataset) is TensorDataset and self.collate_fn is default_collate_fn
            for indices in self.batch_sampler:
                if gather:  # the same batch as stacking the samples, in one gather per tensor
                    rows = to_tensor(np.asarray(indices, dtype=np.int64))
                    yield [t[rows] for t in self.dataset.tensors]
                else:
                    yield _to_tensors(self.collate_fn([self.dataset[i] for i in indices]))

    def _iterate_stream(self):
        if self.batch_size is None:
            for sample in self.dataset:
                yield _single(sample)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield _to_tensors(self.collate_fn(batch))
                batch = []
        if batch and not self.drop_last:
            yield _to_tensors(self.collate_fn(batch))

    def __len__(self) -> int:
        if self._iterable:
            raise TypeError("DataLoader over an IterableDataset has no length")
        if self.batch_sampler is None:
            return len(self.dataset)
        return len(self.batch_sampler)


def _single(sample):
    """An unbatched sample with its arrays and numbers as Tensors (``batch_size=None``)."""
    if isinstance(sample, numbers.Number | np.bool_):
        return to_tensor(np.array(sample))
    if isinstance(sample, (list, tuple)):
        return [_single(s) for s in sample]
    if isinstance(sample, Mapping):
        return {key: _single(v) for key, v in sample.items()}
    return _to_tensors(sample)
