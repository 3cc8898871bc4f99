"""Random samplers over chosen indices or by weight, with ``paddle.io``'s names.

Both draw from the library's seeded generator (``seed(n)`` fixes the order), anew at every
``iter()``. A DataLoader takes them through a :class:`BatchSampler`:
``DataLoader(data, batch_sampler=BatchSampler(sampler=WeightedRandomSampler(w, 64), ...))``.

Example:
    >>> import minitorch_amp as mt
    >>> from minitorch_amp.io import SubsetRandomSampler, WeightedRandomSampler
    >>> mt.seed(0)
    >>> sorted(SubsetRandomSampler([1, 3, 5]))
    [1, 3, 5]
    >>> set(WeightedRandomSampler([0.0, 2.0, 0.0, 1.0], num_samples=20))
    {1, 3}
"""

from __future__ import annotations

import numpy as np

from ..backend.random import generator
from .data import Sampler, is_integer

__all__ = ["SubsetRandomSampler", "WeightedRandomSampler"]


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a random order (each once)."""

    def __init__(self, indices):
        if isinstance(indices, (str, bytes)) or not hasattr(indices, "__len__"):
            raise TypeError(
                f"SubsetRandomSampler: indices must be a sequence of ints, got {indices!r:.60}"
            )
        if len(indices) == 0:
            raise ValueError("SubsetRandomSampler: indices is empty; give at least one index")
        super().__init__(None)
        self.indices = indices

    def __iter__(self):
        order = generator(np).permutation(len(self.indices)).tolist()
        return (self.indices[i] for i in order)

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices in ``[0, len(weights))``, index ``i`` drawn with probability
    ``weights[i] / sum(weights)``; with ``replacement=False`` each index at most once.

    2-D ``weights`` (Paddle's form) draw ``num_samples`` indices per row, one row after the
    other, so ``len()`` is ``num_samples * rows``.

    Args:
        weights: non-negative finite numbers, not necessarily summing to 1: a list, a NumPy
            array or a Tensor, 1-D or 2-D.
        num_samples: how many indices to draw (per row).
        replacement: draw with replacement (an index may come back).

    Raises:
        ValueError: ``num_samples`` is not a positive int, ``replacement`` is not a bool (both
            as Paddle), or the weights are empty, negative, not finite, all zero in a row, or
            have fewer positive entries than ``num_samples`` without replacement (checked
            here; Paddle asserts when iterating).
    """

    def __init__(self, weights, num_samples, replacement=True):
        if not is_integer(num_samples) or num_samples <= 0:
            raise ValueError(
                f"WeightedRandomSampler: num_samples must be a positive int, got {num_samples!r}"
            )
        if not isinstance(replacement, bool):
            raise ValueError(
                f"WeightedRandomSampler: replacement must be True or False, got {replacement!r}"
            )
        table = _weight_table(weights)
        positive = int((table > 0).sum(axis=1).min())
        if not replacement and num_samples > positive:
            raise ValueError(
                f"WeightedRandomSampler: cannot draw {num_samples} distinct indices without "
                f"replacement when a row has only {positive} positive weights; lower "
                "num_samples or pass replacement=True"
            )
        super().__init__(None)
        self.weights, self.num_samples = weights, int(num_samples)
        self.replacement = replacement
        self._probabilities = table / table.sum(axis=1, keepdims=True)

    def __iter__(self):
        rng, n = generator(np), self._probabilities.shape[1]
        draws = [
            rng.choice(n, size=self.num_samples, replace=self.replacement, p=row)
            for row in self._probabilities
        ]
        return iter(np.concatenate(draws).tolist())

    def __len__(self) -> int:
        return self.num_samples * self._probabilities.shape[0]


def _weight_table(weights) -> np.ndarray:
    """``weights`` as a float64 ``[rows, n]`` table, checked (see WeightedRandomSampler)."""
    owner = "WeightedRandomSampler"
    if hasattr(weights, "numpy") and not isinstance(weights, np.ndarray):
        weights = weights.numpy()  # a Tensor
    try:
        table = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{owner}: weights must be numbers, got {weights!r:.60}") from error
    if table.ndim not in (1, 2) or table.shape[-1] == 0 or table.size == 0:
        raise ValueError(
            f"{owner}: weights must be a non-empty 1-D or 2-D array, got shape {table.shape}"
        )
    table = table.reshape(-1, table.shape[-1])
    if not np.isfinite(table).all():
        raise ValueError(f"{owner}: weights must be finite (no inf or NaN)")
    if (table < 0).any():
        raise ValueError(f"{owner}: weights must be >= 0, got {table.min()}")
    if not (table > 0).any(axis=1).all():
        raise ValueError(f"{owner}: every row of weights needs a positive weight (all are 0)")
    return table
