"""Padding: ``pad`` (a constant border on any axes) and ``pad3d`` (Paddle's four modes).

Both take the widths per axis of ``x``, in axis order: ``paddings = (before_0, after_0,
before_1, after_1, ...)``; ``nn.functional.pad`` turns Paddle's argument orders into this one.
Paddle records ``pad`` for a constant border given on every axis and ``pad3d`` for the
spatial-axes forms, so these are two ops, as there.

A non-constant border copies input elements: along one axis of size ``n``, output position
``p`` (counted from the first input element, so the border before it has ``p < 0``) reads::

    reflect     p < 0 -> -p,  p >= n -> 2(n - 1) - p     (the edge itself is not repeated)
    replicate   clip(p, 0, n - 1)
    circular    p mod n                                   (wraps as often as needed)

Backward adds each output gradient into the element it was copied from (a scatter-add, in
float32 for half dtypes, rounded once), and the constant border sends nothing back.
"""

from __future__ import annotations

import numpy as np

from ...backend import get_array_module
from ...backend.constants import device_constant
from ...backend.dtypes import accumulation_dtype
from ...backend.primitives import scatter_add
from ..op import GRAY, Op

PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _pairs(paddings, shape, name: str) -> list[tuple[int, int]]:
    """``paddings`` as one ``(before, after)`` per axis, checked."""
    if len(paddings) != 2 * len(shape):
        raise ValueError(
            f"{name}: {len(paddings)} padding widths for an input of shape {list(shape)}; "
            f"give two per axis ({2 * len(shape)})"
        )
    pairs = list(zip(paddings[0::2], paddings[1::2]))
    if any(w < 0 for pair in pairs for w in pair):
        raise ValueError(f"{name}: padding widths must be >= 0, got {list(paddings)}")
    return pairs


def source_index(size: int, before: int, after: int, mode: str) -> np.ndarray:
    """For each output position along one axis, the input position it copies (see above)."""
    p = np.arange(-before, size + after)
    if mode == "reflect":
        return np.where(p < 0, -p, np.where(p >= size, 2 * (size - 1) - p, p))
    if mode == "replicate":
        return np.clip(p, 0, size - 1)
    return p % size  # circular


def _check_copy_mode(mode: str, shape, pairs) -> None:
    """The rules a border made of input elements needs: Paddle's and PyTorch's messages."""
    for axis, ((before, after), size) in enumerate(zip(pairs, shape)):
        if not (before or after):
            continue
        if mode == "reflect" and max(before, after) >= size:
            raise ValueError(
                f"pad: reflect padding ({before}, {after}) on axis {axis} must be smaller than "
                f"the axis's size {size} (input shape {list(shape)}); use mode='replicate' or "
                "'circular' for wider borders"
            )
        if size == 0:
            raise ValueError(
                f"pad: mode {mode!r} cannot pad axis {axis} of size 0 (input shape "
                f"{list(shape)}); use mode='constant'"
            )


class Pad(Op):
    """A constant border: ``out[before_i : before_i + n_i, ...] = x``, ``value`` elsewhere."""

    name = "pad"
    amp = GRAY

    @staticmethod
    def forward(ctx, x, paddings=(), value=0.0):
        return _pad(ctx, x, _pairs(paddings, x.shape, "pad"), "constant", value)

    @staticmethod
    def backward(ctx, grad):
        return _pad_backward(ctx, grad)


class Pad3D(Op):
    """A border of ``value`` or of ``x``: ``reflect`` (mirrored), ``replicate``, ``circular``."""

    name = "pad3d"
    amp = GRAY

    @staticmethod
    def forward(ctx, x, paddings=(), mode="constant", value=0.0):
        if mode not in PAD_MODES:
            raise ValueError(f"pad: mode must be one of {PAD_MODES}, got {mode!r}")
        pairs = _pairs(paddings, x.shape, "pad")
        if mode != "constant":
            _check_copy_mode(mode, x.shape, pairs)
        return _pad(ctx, x, pairs, mode, value)

    @staticmethod
    def backward(ctx, grad):
        return _pad_backward(ctx, grad)


def _pad(ctx, x, pairs, mode, value):
    xp = get_array_module(x)
    ctx.mode, ctx.shape = mode, x.shape
    ctx.inner = tuple(slice(b, b + n) for (b, _), n in zip(pairs, x.shape))
    if mode == "constant":
        out_shape = tuple(n + b + a for (b, a), n in zip(pairs, x.shape))
        out = xp.full(out_shape, value, dtype=x.dtype)
        out[ctx.inner] = x
        return out
    ctx.index = {}  # axis -> source positions, for the axes that get a border
    out = x
    for axis, ((before, after), n) in enumerate(zip(pairs, x.shape)):
        if before or after:
            ctx.index[axis] = device_constant(
                x,
                ("pad source index", n, before, after, mode),
                lambda n=n, before=before, after=after: source_index(n, before, after, mode),
                f"a {mode} pad's source positions",
            )
            out = xp.take(out, ctx.index[axis], axis=axis)
    return out if out is not x else x.copy()


def _pad_backward(ctx, grad):
    if ctx.mode == "constant":
        return grad[ctx.inner]  # a view: the border's gradient goes nowhere
    xp = get_array_module(grad)
    g = grad.astype(accumulation_dtype(grad.dtype), copy=False)
    for axis in sorted(ctx.index, reverse=True):  # undo the takes, last axis first
        moved = xp.moveaxis(g, axis, 0)
        summed = xp.zeros((ctx.shape[axis], *moved.shape[1:]), dtype=g.dtype)
        scatter_add(summed, ctx.index[axis], moved)
        g = xp.moveaxis(summed, 0, axis)
    return g.astype(grad.dtype, copy=False)


__all__ = ["PAD_MODES", "Pad", "Pad3D", "source_index"]
