"""Ops whose results are positions (int64): argsort, the top-k positions, multinomial draws.

None of them has a gradient. Sorted *values* are ``take_along_axis`` of the input at these
positions (``functions_sort.sort``, ``topk``), and that op carries the gradient back.
"""

from __future__ import annotations

import numpy as np

from ...backend import get_array_module, sync
from ...backend import random as _random
from ...backend.dtypes import bfloat16, float32, is_floating
from ..op import NONE, Op
from .index import check_axis


def stable_argsort(x, axis: int, descending: bool):
    """Positions that sort ``x`` along ``axis``, equal values keeping their order (also when
    descending: the first of two equal values comes first). NaN counts as the largest value
    (Paddle's sort kernels): last when ascending, first when descending.

    Descending is the ascending sort of ``x`` reversed along ``axis``, read backwards: ties
    (and NaNs) come out in their original order, and no key is negated (``-x`` would keep
    NaN last).
    """
    xp = get_array_module(x)
    key = x
    if x.dtype == bfloat16 or x.dtype.kind == "b":  # as a key dtype both backends sort
        key = x.astype(float32 if x.dtype == bfloat16 else np.int8)
    if descending:
        key = xp.flip(key, axis)
    order = np.argsort(key, axis=axis, kind="stable") if xp is np else xp.argsort(key, axis=axis)
    if not descending:  # (CuPy's sort is always stable)
        return order
    return (x.shape[axis] - 1) - xp.flip(order, axis)


class ArgSort(Op):
    """Positions that sort ``x`` along ``axis`` (int64); ties keep their order, NaN is largest."""

    name = "argsort"
    amp = NONE

    @staticmethod
    def forward(ctx, x, axis=-1, descending=False):
        axis = check_axis("argsort", axis, max(x.ndim, 1))  # a 0-D tensor has axis 0 (or -1)
        if x.ndim == 0:
            return get_array_module(x).zeros((), dtype=np.int64)
        return stable_argsort(x, axis, descending).astype(np.int64, copy=False)

    @staticmethod
    def backward(ctx, grad):  # pragma: no cover - integer results are never recorded
        return None


class TopK(Op):
    """Positions (int64) of the ``k`` largest or smallest entries along ``axis``, best first.

    Of equal values the first comes first; NaN counts as the largest value (Paddle).
    """

    name = "topk"
    amp = NONE

    @staticmethod
    def forward(ctx, x, k, axis=-1, largest=True):
        ndim = max(x.ndim, 1)
        axis = check_axis("topk", axis, ndim)
        n = x.shape[axis] if x.ndim else 1
        if not 0 <= k <= n:
            raise ValueError(
                f"topk: k = {k} is out of range for axis {axis} of size {n} "
                f"(tensor of shape {list(x.shape)}); k must be in [0, {n}]"
            )
        if x.ndim == 0:
            return get_array_module(x).zeros((), dtype=np.int64)
        order = stable_argsort(x, axis, descending=largest)
        return order[(slice(None),) * axis + (slice(0, k),)].astype(np.int64, copy=False)

    @staticmethod
    def backward(ctx, grad):  # pragma: no cover - integer results are never recorded
        return None


class Multinomial(Op):
    """Category draws (int64) from each row of the probabilities ``x`` (``[C]`` or ``[B, C]``).

    ``num_samples`` per row; ``x`` need not be normalised. The numbers come from the seeded
    generator of ``backend.random``.

    With replacement each draw inverts the row's cumulative sum at a uniform number; without,
    the categories are ranked by exponential races ``E / p`` (``E`` ~ Exp(1)): the first
    ``num_samples`` finishers are a draw without replacement, in the order drawn.
    """

    name = "multinomial"
    amp = NONE

    @staticmethod
    def forward(ctx, x, num_samples=1, replacement=False):
        if x.ndim not in (1, 2):
            raise ValueError(
                f"multinomial: x must be 1-D [C] or 2-D [B, C] probabilities, got shape "
                f"{list(x.shape)}"
            )
        if not is_floating(x.dtype):
            raise TypeError(f"multinomial: x must hold floating probabilities, got {x.dtype}")
        xp = get_array_module(x)
        rows = x.reshape(-1, x.shape[-1]).astype(np.float64 if xp is np else float32)
        _check_probabilities(xp, rows, num_samples, replacement)
        rng = _random.generator(xp)
        if replacement:
            cdf = xp.cumsum(rows, axis=1)
            u = rng.random((rows.shape[0], num_samples), dtype=cdf.dtype) * cdf[:, -1:]
            last = rows.shape[1] - 1 - xp.argmax(rows[:, ::-1] > 0, axis=1)  # last p > 0
            draws = [xp.searchsorted(c, v, side="right") for c, v in zip(cdf, u)]
            out = xp.stack(draws).astype(np.int64)
            out = xp.minimum(out, last[:, None])  # u * total may round up to the total
        else:
            e = -xp.log1p(-rng.random(rows.shape, dtype=rows.dtype))
            with np.errstate(divide="ignore"):
                races = e / rows  # p = 0 never finishes (inf)
            out = stable_argsort(races, 1, descending=False)[:, :num_samples].astype(np.int64)
        return out.reshape(num_samples) if x.ndim == 1 else out

    @staticmethod
    def backward(ctx, grad):  # pragma: no cover - integer results are never recorded
        return None


def _check_probabilities(xp, rows, num_samples: int, replacement: bool) -> None:
    """Refuse what has no distribution: negative or non-finite entries, an all-zero row,
    more draws without replacement than a row has categories with p > 0."""
    if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)):
        raise TypeError(f"multinomial: num_samples must be an int, got {num_samples!r}")
    if num_samples < 1:
        raise ValueError(f"multinomial: num_samples must be at least 1, got {num_samples}")
    sync.host_read("multinomial's check of the probabilities")
    if not bool(xp.all(xp.isfinite(rows))) or bool(xp.any(rows < 0)):
        raise ValueError("multinomial: every probability must be finite and >= 0")
    nonzero = int((rows > 0).sum(axis=1).min()) if rows.size else 0
    if nonzero == 0:
        raise ValueError("multinomial: a row of probabilities sums to 0; give it some weight")
    if not replacement and num_samples > nonzero:
        raise ValueError(
            f"multinomial: num_samples = {num_samples} draws without replacement, but a row "
            f"has only {nonzero} categories with probability > 0; pass replacement=True or "
            "draw fewer"
        )


__all__ = ["ArgSort", "Multinomial", "TopK", "stable_argsort"]
