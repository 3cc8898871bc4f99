"""Gradient clipping by the global norm in a few GPU launches: ``cuda/reduction.cu``'s
``sum_squares_tensors``, ``clip_scale`` and ``scale_tensors``.

``nn.ClipGradByGlobalNorm`` computes, over the gradients ``g_i`` it clips::

    total = 0 + s_0 + s_1 + ...       s_i = sum_squares(g_i, float32), added in order
    scale = clip / maximum(sqrt(total), clip)
    out_i = g_i * scale               in float32, rounded once to g_i's dtype

On the GPU that took a ``sum_squares`` launch (two for a large gradient) per gradient, an
addition per gradient, three 0-d launches, and a multiply (with a widening, for 16-bit
gradients) per gradient: 256 launches for the example GPT's 68 gradients at O2.
:func:`clip_into` does the same operations in the same order in ``2 D + 1`` launches, ``D``
the number of gradient dtypes, so its outputs have the per-gradient path's bits. The table
of pointers and sizes each launch reads is built and uploaded once per set of gradients and
outputs (:func:`kernels.device_table`), so a step that clips can be captured as a CUDA graph.

The NumPy twin is the per-gradient path itself (``nn/clip.py``), which the CPU runs.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import device as _device
from . import kernels
from .dtypes import bfloat16, float16, float32

FILE = "reduction.cu"
_TYPES = {float16: "__half", bfloat16: "__nv_bfloat16", float32: "float"}
_SQUARES = {t: f"sum_squares_tensors<{name}>" for t, name in _TYPES.items()}
_SCALE = {t: f"scale_tensors<{name}>" for t, name in _TYPES.items()}
CLIP_SCALE = "clip_scale"
NAMES = (*_SQUARES.values(), *_SCALE.values(), CLIP_SCALE)
KERNELS = kernels.register(FILE, names=NAMES)
TILE = 4096  # kTile in cuda/reduction.cu: elements per partial sum (and per scaled chunk)
THREADS = 256  # kThreads
MAX_BLOCKS = 1024  # blocks stride over tiles past this


def applies(grads, outs) -> bool:
    """Whether :func:`clip_into` takes these gradients: CuPy arrays on one device, raw
    kernels on, each gradient float16, bfloat16 or float32 and C-contiguous, each output
    the same shape and dtype and C-contiguous (anything else keeps the per-gradient path)."""
    cupy = _device.cupy
    if cupy is None or not kernels.enabled() or not grads:
        return False
    device = None
    for g, out in zip(grads, outs):
        if not (isinstance(g, cupy.ndarray) and isinstance(out, cupy.ndarray)):
            return False
        device = g.device.id if device is None else device
        if (
            g.dtype not in _TYPES
            or (out.dtype, out.shape) != (g.dtype, g.shape)
            or not (g.flags.c_contiguous and out.flags.c_contiguous)
            or g.device.id != device
            or out.device.id != device
        ):
            return False
    return True


def clip_into(grads, outs, clip_norm: float) -> None:
    """``outs[i][...] = grads[i] * scale`` with ClipGradByGlobalNorm's ``scale`` for
    ``clip_norm`` (see the module docstring); the caller checked :func:`applies`."""
    plan(grads, outs)(clip_norm)


class Clip(NamedTuple):
    """:func:`clip_into`'s launches for one set of gradients and outputs, decided but for
    ``clip_norm``: a caller that clips the same arrays step after step keeps it and calls
    it (``nn.ClipGradByGlobalNorm`` does)."""

    device: object  # the arrays' CuPy device
    words: object  # the device table (kept alive here: its views below point into it)
    partials: int  # the partial sums, one per tile of every gradient
    per_dtype: tuple  # (sum_squares_tensors name, scale_tensors name, table, count, blocks)
    clip_table: object  # clip_scale's part of the table: every gradient's first partial
    count: np.int32  # the gradients

    def __call__(self, clip_norm: float) -> None:
        kernels.using(self.words)  # (a capture keeps it alive)
        with self.device:
            buffer = _device.cupy.empty(2 + self.partials, float32)  # scale, norm, partials
            out, partials = buffer[:2], buffer[2:]
            for squares, _, table, count, blocks in self.per_dtype:
                kernels.launch(FILE, squares, (blocks,), (THREADS,), (table, count, partials))
            args = (partials, self.clip_table, self.count, np.float32(clip_norm), out)
            kernels.launch(FILE, CLIP_SCALE, (1,), (THREADS,), args)
            for _, scale, table, count, blocks in self.per_dtype:
                kernels.launch(FILE, scale, (blocks,), (THREADS,), (table, count, out))


def plan(grads, outs) -> Clip:
    """The :class:`Clip` of ``grads`` into ``outs`` (the caller checked :func:`applies`):
    its table built and uploaded, or found (:func:`kernels.device_table`)."""
    tiles = [-(-g.size // TILE) for g in grads]
    starts = np.concatenate([[0], np.cumsum(tiles)]).astype(np.int64)
    groups: dict = {}  # dtype -> indices of its gradients, in order
    for i, g in enumerate(grads):
        groups.setdefault(g.dtype, []).append(i)
    with grads[0].device:
        words = kernels.device_table(
            _table_key(grads, outs, groups), lambda: _table(grads, outs, groups, starts)
        )
    per_dtype, offset = [], 0
    for dtype, members in groups.items():
        size = 5 * len(members) + 1
        blocks = min(sum(tiles[i] for i in members), MAX_BLOCKS)
        if blocks:  # (a dtype without a tile: nothing to launch)
            table = words[offset : offset + size]
            per_dtype.append(
                (_SQUARES[dtype], _SCALE[dtype], table, np.int32(len(members)), blocks)
            )
        offset += size
    partials, count = int(starts[-1]), np.int32(len(grads))
    return Clip(grads[0].device, words, partials, tuple(per_dtype), words[offset:], count)


def _table_key(grads, outs, groups) -> tuple:
    """Everything the table holds: the device, each array's address, size and dtype."""
    return (
        "global_norm",
        grads[0].device.id,
        tuple((g.data.ptr, o.data.ptr, g.size, g.dtype.char) for g, o in zip(grads, outs)),
        tuple(len(members) for members in groups.values()),
    )


def _table(grads, outs, groups, starts) -> np.ndarray:
    """The int64 words: per dtype, ``[pointers, output pointers, sizes, first partials,
    first tiles of the dtype (+ its total)]``; then the gradients' first partials over all
    of them (+ the total), for ``clip_scale``."""
    words = []
    for members in groups.values():
        own = np.concatenate([[0], np.cumsum([starts[i + 1] - starts[i] for i in members])])
        words += [grads[i].data.ptr for i in members]
        words += [outs[i].data.ptr for i in members]
        words += [grads[i].size for i in members]
        words += [int(starts[i]) for i in members]
        words += [int(x) for x in own]
    words += [int(x) for x in starts]
    return np.array(words, dtype=np.int64)
