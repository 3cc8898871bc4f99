"""Input and output, like ``paddle.io``: checkpoints and data loading.

* ``save`` / ``load`` (:mod:`.checkpoint`) write and read nested state dicts without
  pickling code;
* :class:`Dataset`, :class:`IterableDataset`, :class:`TensorDataset`, the samplers and
  :class:`DataLoader` (:mod:`.data`, :mod:`.dataloader`) batch a dataset into Tensors.
"""

from .checkpoint import DEFAULT_MAX_BYTES, CheckpointError, load, save
from .data import (
    BatchSampler,
    Dataset,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequenceSampler,
    TensorDataset,
    default_collate_fn,
)
from .dataloader import DataLoader

__all__ = [
    "DEFAULT_MAX_BYTES",
    "BatchSampler",
    "CheckpointError",
    "DataLoader",
    "Dataset",
    "IterableDataset",
    "RandomSampler",
    "Sampler",
    "SequenceSampler",
    "TensorDataset",
    "default_collate_fn",
    "load",
    "save",
]
