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

import itertools
import numbers
from collections.abc import Mapping

import numpy as np

from ..autograd.creation import to_tensor
from ..backend.device import Place
from .data import (
    BatchSampler,
    IterableDataset,
    TensorDataset,
    _to_tensors,
    default_collate_fn,
    is_integer,
    positive_int,
)

__all__ = ["DataLoader"]


class DataLoader:
    """Iterate over ``dataset`` in batches of ``batch_size`` samples, collated into Tensors.

    Each ``iter()`` is one epoch: with ``shuffle=True`` a new permutation is drawn from the
    library's seeded generator (``seed(n)`` makes the order reproducible). ``len()`` is the
    number of batches. Samples are fetched in the calling process, on the current device; a
    :class:`TensorDataset` with the default ``collate_fn`` is batched by one gather per tensor
    (the same batch as stacking its samples).

    A failed batch does not end the epoch: when a sample's ``__getitem__`` (or the
    ``collate_fn``) raises, that ``next()`` raises (the dataset's exception type, its message
    naming the sample's index, the original as ``__cause__``) and the following ``next()``
    yields the next batch. Only an IterableDataset whose own ``__iter__`` raised may end there.

    Args:
        dataset: a :class:`Dataset` (``__getitem__`` + ``__len__``) or an
            :class:`IterableDataset`.
        feed_list: a static-graph argument; must be None.
        places: accepted and ignored (Paddle's places to put batches on): batches land on
            the current device (see ``set_device``). A Place, a device string such as
            ``'gpu:0'``, or a list of them.
        return_list: must be True (batches come as lists, or whatever ``collate_fn`` returns).
        batch_sampler: a sampler yielding lists of indices; then ``batch_size``, ``shuffle``
            and ``drop_last`` must keep their defaults.
        batch_size: samples per batch; None yields the samples one by one, unbatched.
        shuffle: reshuffle the indices at every epoch (map-style datasets only).
        drop_last: drop the last batch when it is smaller than ``batch_size``.
        collate_fn: turns a list of samples into a batch (default :func:`default_collate_fn`);
            NumPy arrays in what it returns become Tensors. With ``batch_size=None`` it is
            called on each sample (Paddle's and PyTorch's rule); without one, the sample's
            arrays and numbers become Tensors.
        num_workers, use_buffer_reader, prefetch_factor, use_shared_memory, timeout,
            worker_init_fn, persistent_workers: Paddle's loading-process options. Loading
            always happens in the calling process here, so they change nothing (no worker
            process, so ``worker_init_fn`` is never called); ``num_workers`` must be >= 0.

    Calling the loader starts an epoch too: ``loader()`` is ``iter(loader)`` (Paddle's
    examples write ``for x, y in loader():``).

    Raises:
        TypeError: ``places`` is not a Place, a device string or a list of them.
        ValueError: ``feed_list``, ``return_list=False``, ``batch_sampler`` together
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
        if feed_list is not None:
            raise ValueError(
                "DataLoader: feed_list is a static-graph argument; leave it None (batches come "
                "as lists of Tensors)"
            )
        _check_places(places)
        if return_list is not True:
            raise ValueError("DataLoader: only return_list=True (dygraph) is supported")
        if not is_integer(num_workers) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers must be an int >= 0, got {num_workers!r}")
        num_workers = int(num_workers)
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
            batch_size = positive_int(batch_size, "DataLoader: batch_size", or_none=True)
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
            getattr(batch_sampler, "batch_size", None) if batch_sampler is not None else batch_size
        )
        self.drop_last, self.return_list = bool(drop_last), True
        self.collate_fn = default_collate_fn if collate_fn is None else collate_fn
        self._sample_fn = _single if collate_fn is None else _collate_one(collate_fn)
        self.num_workers, self.worker_init_fn = num_workers, worker_init_fn
        self._iterable = iterable
        self._options = {  # kept for introspection; no effect here (see the docstring)
            "use_buffer_reader": use_buffer_reader,
            "prefetch_factor": prefetch_factor,
            "use_shared_memory": use_shared_memory,
            "timeout": timeout,
            "persistent_workers": persistent_workers,
        }

    def __iter__(self) -> _Epoch:
        return _Epoch(self)

    def __call__(self) -> _Epoch:
        """A new epoch, as ``iter(loader)`` (Paddle's ``DataLoader.__call__``)."""
        return self.__iter__()

    def __len__(self) -> int:
        if self._iterable:
            raise TypeError("DataLoader over an IterableDataset has no length")
        if self.batch_sampler is None:
            return len(self.dataset)
        return len(self.batch_sampler)


class _Epoch:
    """One epoch of a :class:`DataLoader`: ``next()`` fetches and collates the next batch.

    A batch that fails (a sample's ``__getitem__`` or the ``collate_fn`` raises) raises from
    its ``next()``, and the following ``next()`` goes on with the next batch: the position is
    the sampler's iterator, which a failed batch has already moved past.

    NOTE: this is a class, not a generator, because an exception that passes through a
    generator ends it: the caller who caught it and called ``next()`` again got
    ``StopIteration`` and silently lost the rest of the epoch. An IterableDataset's own
    ``__iter__`` is the user's: if it is a generator that raised, its stream ends there.
    """

    def __init__(self, loader: DataLoader):
        self._loader = loader
        if loader._iterable:
            self._source = iter(loader.dataset)  # samples
        elif loader.batch_sampler is None:
            self._source = iter(range(len(loader.dataset)))  # one index per step
        else:
            self._source = iter(loader.batch_sampler)  # lists of indices
        self._gather = (
            type(loader.dataset) is TensorDataset and loader.collate_fn is default_collate_fn
        )

    def __iter__(self) -> _Epoch:
        return self

    def __next__(self):
        loader = self._loader
        if loader._iterable:
            return self._next_from_stream()
        indices = next(self._source)
        if loader.batch_sampler is None:  # batch_size=None: the samples one by one
            return loader._sample_fn(_fetch(loader.dataset, indices))
        if self._gather:  # the same batch as stacking the samples, in one gather per tensor
            rows = to_tensor(np.asarray(indices, dtype=np.int64))
            return [t[rows] for t in loader.dataset.tensors]
        return _to_tensors(loader.collate_fn([_fetch(loader.dataset, i) for i in indices]))

    def _next_from_stream(self):
        loader = self._loader
        if loader.batch_size is None:
            return loader._sample_fn(next(self._source))
        batch = list(itertools.islice(self._source, loader.batch_size))
        if not batch or (loader.drop_last and len(batch) < loader.batch_size):
            raise StopIteration
        return _to_tensors(loader.collate_fn(batch))


def _check_places(places) -> None:
    """``places`` is None, a Place, a device string, or a non-empty list/tuple of them."""
    items = places if isinstance(places, (list, tuple)) else [places]
    if places is None or (items and all(isinstance(p, (Place, str)) for p in items)):
        return
    raise TypeError(
        "DataLoader: places must be a Place, a device string such as 'gpu:0', or a list of "
        f"them, got {places!r:.60}; it is ignored here (batches land on the current device, "
        "see set_device), so it can also be left out"
    )


def _fetch(dataset, index):
    """``dataset[index]``; an error names the index and keeps the dataset's as its cause."""
    try:
        return dataset[index]
    except Exception as error:
        raise _sample_error(error, index) from error


def _sample_error(error: Exception, index) -> Exception:
    """The dataset's exception type with a message that names the sample (PyTorch's way), or
    a RuntimeError when that type cannot be built from one message.

    NOTE: a StopIteration from ``__getitem__`` becomes a RuntimeError: raised from
    ``__next__`` as itself it would end the epoch silently (PEP 479's reason).
    """
    message = (
        f"DataLoader: dataset[{index!r}] raised {type(error).__name__}: {error}; the batch "
        "holding it is lost, and the next next() goes on with the following batch (fix or "
        "skip that sample in the dataset to keep it)"
    )
    if not isinstance(error, StopIteration):
        try:
            rebuilt = type(error)(message)
            if isinstance(rebuilt, type(error)) and message in str(rebuilt):
                return rebuilt
        except Exception:  # a constructor that wants other arguments
            pass
    return RuntimeError(message)


def _collate_one(collate_fn):
    """What ``batch_size=None`` gives for a sample when the user passed ``collate_fn``."""
    return lambda sample: _to_tensors(collate_fn(sample))


def _single(sample):
    """An unbatched sample with its arrays and numbers as Tensors (``batch_size=None``)."""
    if isinstance(sample, numbers.Number | np.bool_):
        return to_tensor(np.array(sample))
    if isinstance(sample, (list, tuple)):
        return [_single(s) for s in sample]
    if isinstance(sample, Mapping):
        return {key: _single(v) for key, v in sample.items()}
    return _to_tensors(sample)
