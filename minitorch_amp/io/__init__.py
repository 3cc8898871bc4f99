"""Input and output, like ``paddle.io``: checkpoints and data loading.

* ``save`` / ``load`` (:mod:`.checkpoint`) write and read nested state dicts without
  pickling code;
* :class:`Dataset`, :class:`IterableDataset`, :class:`TensorDataset`, the samplers and
  :class:`DataLoader` (:mod:`.data`, :mod:`.dataloader`) batch a dataset into Tensors;
* :mod:`.datasets` builds datasets from datasets (``Subset``, ``random_split``,
  ``ConcatDataset``, ``ComposeDataset``, ``ChainDataset``) and :mod:`.samplers` draws
  indices (``SubsetRandomSampler``, ``WeightedRandomSampler``).
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
from .datasets import ChainDataset, ComposeDataset, ConcatDataset, Subset, random_split
from .samplers import SubsetRandomSampler, WeightedRandomSampler

__all__ = [
    "DEFAULT_MAX_BYTES",
    "BatchSampler",
    "ChainDataset",
    "CheckpointError",
    "ComposeDataset",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "IterableDataset",
    "RandomSampler",
    "Sampler",
    "SequenceSampler",
    "Subset",
    "SubsetRandomSampler",
    "TensorDataset",
    "WeightedRandomSampler",
    "default_collate_fn",
    "load",
    "random_split",
    "save",
]
