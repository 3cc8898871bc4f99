"""The grads ``apex.scale_loss`` takes away before backward and merges back after the unscale
(apex's "grad copy elision"): backward then writes fresh grads, which are the only ones the
unscale divides, and the stashed ones (unscaled already) are added back afterwards."""

from __future__ import annotations

import numpy as np

from ..backend import device as _device
from ..backend.dtypes import accumulation_dtype

__all__ = ["merge", "restore", "stash_grads"]


def stash_grads(optimizer) -> list:
    """Take the existing grads away (``p._grad = None``) so backward writes fresh ones."""
    stash = []
    for p in optimizer._parameter_list:
        if p._grad is not None:
            stash.append((p, p._grad))
            p._grad = None
    return stash


def restore(stash: list) -> None:
    for p, old in stash:
        p._grad = old


def merge(stash: list, found_inf):
    """``grad = fresh + stashed`` (both unscaled), added in float32 for float16 grads;
    returns ``found_inf`` or'ed with an overflow of a sum, on the device.

    NOTE: two finite float16 grads can add up past 65504 after the unscale's check: that
    step is skipped too (apex sums into fp32 master grads, which cannot overflow).
    """
    xp = _device.get_array_module(found_inf)
    for p, old in stash:
        new = p._grad
        if new is None:
            p._grad = old
            continue
        acc = accumulation_dtype(new.dtype)
        with np.errstate(over="ignore"):
            summed = new._data.astype(acc, copy=False) + old._data.astype(acc, copy=False)
            new._data[...] = summed
        if new.dtype != acc:
            found_inf = xp.logical_or(found_inf, ~xp.isfinite(new._data).all())
    return found_inf
