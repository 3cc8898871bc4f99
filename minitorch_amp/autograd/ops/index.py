"""Ops that pick parts of a tensor by position: split/unbind, index_select/gather,
take_along_axis, and the copy ``clone`` makes (``assign``).

Backward puts the gradient back where the forward took it; picks that may repeat a position
(index_select, gather, take_along_axis) add up there, in float32 for 16-bit gradients.

``split`` and ``unbind`` have several results but are one op, as in Paddle: the recorded op
returns ``x`` itself (a joint that users never see), and ``functions_index.split`` hands out
its pieces, each recorded as a ``SplitOutput`` of the joint. Their gradients meet at the
joint (``engine.SlotGrads``), whose backward assembles them into one array: one allocation
however many pieces there are.
"""

from __future__ import annotations

import numpy as np

from ...backend import get_array_module, sync
from ...backend.dtypes import accumulation_dtype
from ...backend.primitives import scatter_add
from ..op import GRAY, Op


def check_axis(name: str, axis: int, ndim: int) -> int:
    """``axis`` as a non-negative axis of an ``ndim``-dimensional tensor, or a ValueError."""
    if not -ndim <= axis < ndim:
        raise ValueError(
            f"{name}: axis {axis} is out of range for a tensor with {ndim} dimensions "
            f"(valid: {-ndim} to {ndim - 1})"
        )
    return axis % ndim


def _along(axis: int, part) -> tuple:
    """The index that takes ``part`` (a slice, an int or an index array) on ``axis``."""
    return (slice(None),) * axis + (part,)


def _scatter_back(grad, shape, index):
    """``zeros(shape)`` with ``grad`` added at ``index`` (repeats add up, in float32 for 16-bit
    gradients, rounded once)."""
    acc = accumulation_dtype(grad.dtype)
    full = get_array_module(grad).zeros(shape, dtype=acc)
    scatter_add(full, index, grad.astype(acc, copy=False))
    return full.astype(grad.dtype, copy=False)


# ---- split / unbind: one op, several results ---------------------------------------------------
class Split(Op):
    """Cut ``x`` along ``axis`` into the pieces ``parts`` (slices); the op's result is ``x``.

    Backward gets the pieces' gradients together (one ``SlotGrads``) and writes them into one
    array of ``x``'s shape, zeros where a piece got none.
    """

    name = "split"
    amp = GRAY  # Paddle: split is on no AMP list

    @staticmethod
    def forward(ctx, x, axis, parts):
        ctx.shape, ctx.indexes = x.shape, [_along(axis, p) for p in parts]
        return x.view()

    @staticmethod
    def backward(ctx, grad):
        grads = grad.grads
        present = next(g for g in grads if g is not None)
        xp = get_array_module(present)
        full = (xp.empty if all(g is not None for g in grads) else xp.zeros)(
            ctx.shape, dtype=present.dtype
        )
        for index, g in zip(ctx.indexes, grads):
            if g is None:
                continue
            full[index] = g
        return full

    @staticmethod
    def pieces(joint, axis, parts) -> list:
        """The arrays of the pieces: views of the joint (``x``)."""
        return [joint[_along(axis, p)] for p in parts]


class Unbind(Split):
    """:class:`Split` into single positions (``parts`` are ints): each piece drops ``axis``."""

    name = "unbind"


# ---- selection by an index tensor --------------------------------------------------------------
def _checked_index(name: str, index, x, axis: int, ranks: tuple[int, ...]):
    """``index`` on ``x``'s device, checked: integer, of an allowed rank, in range (CPU)."""
    if index.dtype.kind not in "iu":
        raise TypeError(
            f"{name}: index must be an int32 or int64 tensor, got {index.dtype}; "
            "cast it with index.astype('int64')"
        )
    if index.ndim not in ranks:
        allowed = " or ".join(f"{r}-D" for r in ranks)
        raise ValueError(f"{name}: index must be {allowed}, got shape {list(index.shape)}")
    index = sync.to_device(index, x, f"{name}'s index")
    n = x.shape[axis]
    # NOTE: checked on the CPU only, where it needs no device synchronisation; CuPy's take
    # wraps an out-of-range index instead of failing.
    if isinstance(index, np.ndarray) and index.size:
        low, high = int(index.min()), int(index.max())
        if low < 0 or high >= n:
            raise IndexError(
                f"{name}: index values must be in [0, {n}) for axis {axis} of a tensor of "
                f"shape {list(x.shape)}, got values from {low} to {high}"
            )
    return index


class IndexSelect(Op):
    """The slices of ``x`` at the 1-D integer ``index`` along ``axis`` (repeats allowed).

    ``out[..., i, ...] = x[..., index[i], ...]``; backward adds the gradient back at ``index``.
    """

    name = "index_select"
    amp = GRAY  # Paddle: index_select is on no AMP list
    ranks: tuple[int, ...] = (1,)

    @classmethod
    def _forward(cls, ctx, x, index, axis):
        if x.ndim == 0:
            raise ValueError(f"{cls.name} needs a tensor with at least one dimension, got 0-D")
        axis = check_axis(cls.name, axis, x.ndim)
        index = _checked_index(cls.name, index, x, axis, cls.ranks)
        ctx.shape, ctx.index = x.shape, _along(axis, index)
        return get_array_module(x).take(x, index, axis=axis)

    @staticmethod
    def forward(ctx, x, index, axis=0):
        return IndexSelect._forward(ctx, x, index, axis)

    @staticmethod
    def backward(ctx, grad):
        return _scatter_back(grad, ctx.shape, ctx.index), None


class Gather(IndexSelect):
    """Paddle's ``gather``: :class:`IndexSelect` that also takes a 0-D ``index``.

    A 0-D ``index`` drops ``axis``. Not PyTorch's ``gather``: that one is
    :class:`TakeAlongAxis`.
    """

    name = "gather"
    ranks = (0, 1)

    @staticmethod
    def forward(ctx, x, index, axis=0):
        return Gather._forward(ctx, x, index, axis)


class TakeAlongAxis(Op):
    """``out[i, j, k] = arr[i, indices[i, j, k], k]`` for ``axis=1`` (any rank alike).

    With ``broadcast`` (Paddle's default) ``arr`` and ``indices`` broadcast in the other axes;
    without it ``indices`` may be smaller there and picks from the leading part (PyTorch's
    ``gather``). Backward adds the gradient back at the picked positions.
    """

    name = "take_along_axis"
    amp = GRAY  # Paddle: take_along_axis is on no AMP list

    @staticmethod
    def forward(ctx, arr, indices, axis, broadcast=True):
        name = "take_along_axis"
        if indices.ndim != arr.ndim:
            raise ValueError(
                f"{name}: indices ({list(indices.shape)}) must have as many dimensions as arr "
                f"({list(arr.shape)})"
            )
        axis = check_axis(name, axis, max(arr.ndim, 1))
        indices = _checked_index(name, indices, arr, axis, (arr.ndim,))
        xp = get_array_module(arr)
        out_shape = list(indices.shape)
        for d, (a, i) in enumerate(zip(arr.shape, indices.shape)):
            if d == axis:
                continue
            if broadcast and a != i and 1 not in (a, i):
                raise ValueError(
                    f"{name}: arr {list(arr.shape)} and indices {list(indices.shape)} cannot be "
                    f"broadcast together in axis {d}"
                )
            if not broadcast and i > a:
                raise ValueError(
                    f"{name}: with broadcast=False indices ({list(indices.shape)}) must not be "
                    f"larger than arr ({list(arr.shape)}) in axis {d}"
                )
            out_shape[d] = max(a, i) if broadcast else i
        index = []
        for d, n in enumerate(out_shape):
            shape = [1] * len(out_shape)
            shape[d] = n
            if d == axis:
                index.append(xp.broadcast_to(indices, out_shape))
            else:  # a size-1 axis of arr is read again and again (broadcast)
                pick = xp.arange(n) if arr.shape[d] == n or not broadcast else xp.zeros(n, int)
                index.append(pick.reshape(shape))
        ctx.shape, ctx.index = arr.shape, tuple(index)
        return arr[ctx.index]

    @staticmethod
    def backward(ctx, grad):
        return _scatter_back(grad, ctx.shape, ctx.index), None


class Assign(Op):
    """A copy of ``x`` (Paddle's ``assign``, which ``clone`` runs); the gradient passes."""

    name = "assign"
    amp = GRAY

    @staticmethod
    def forward(ctx, x):
        return x.copy()

    @staticmethod
    def backward(ctx, grad):
        return grad


__all__ = [
    "Assign",
    "Gather",
    "IndexSelect",
    "Split",
    "TakeAlongAxis",
    "Unbind",
    "check_axis",
]
