"""Picking parts of tensors, with Paddle's names and signatures: ``split``, ``chunk``,
``unbind``, ``gather``, ``index_select``, ``take_along_axis``, ``masked_fill``, ``tril``,
``triu`` and ``clone``.

NOTE: Paddle's ``gather(x, index, axis)`` takes whole slices along ``axis`` (it is
``index_select`` that also accepts a 0-D index); PyTorch's ``torch.gather`` is
:func:`take_along_axis` here (``broadcast=False``).

Example:
    >>> import minitorch_amp as mt
    >>> x = mt.to_tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    >>> [p.shape for p in mt.split(x, [1, -1], axis=1)]
    [[2, 1], [2, 2]]
    >>> mt.gather(x, mt.to_tensor([1, 1]), axis=0).numpy()
    array([[4., 5., 6.],
           [4., 5., 6.]], dtype=float32)
"""

from __future__ import annotations

from . import ops as _ops
from .dispatch import Node, apply
from .engine import SlotGrads
from .op import NONE, Context, Op
from .ops.index import check_axis
from .tensor import Tensor


def _tensor(x, fn: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(
            f"{fn} expects a Tensor, got {type(x).__name__}; wrap the data with to_tensor(...)"
        )
    return x


def _int(value, what: str) -> int:
    """An int from an int or a one-element integer Tensor (Paddle takes both)."""
    if isinstance(value, Tensor):
        if value.size != 1 or value.dtype.kind not in "iu":
            raise TypeError(f"{what} must be an int or a one-element integer tensor")
        return int(value.item())
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{what} must be an int, got {value!r}")
    return int(value)


# ---- split, chunk, unbind ------------------------------------------------------------------------
class SplitOutput(Op, register=False):
    """Piece ``index`` of a split: its gradient goes to that entry of the joint's."""

    name = "split_output"
    amp = NONE

    @staticmethod
    def backward(ctx, grad):
        grads = [None] * ctx.count
        grads[ctx.index] = grad
        return SlotGrads(grads)


def _pieces(op, x: Tensor, axis: int, parts: list) -> list[Tensor]:
    """Run the split ``op`` once and hand out its pieces, each recorded as one output."""
    joint = apply(op, x, axis=axis, parts=parts)
    pieces = [Tensor._wrap(a) for a in op.pieces(joint._data, axis, parts)]
    if joint._node is not None:
        for i, piece in enumerate(pieces):
            ctx = Context()
            ctx.index, ctx.count = i, len(pieces)
            piece._node = Node(SplitOutput, ctx, (joint,))
            piece.stop_gradient = False
    return pieces


def _sections(num_or_sections, size: int, axis: int, shape) -> list[int]:
    if not isinstance(num_or_sections, (list, tuple)):
        n = _int(num_or_sections, "split: num_or_sections")
        if n <= 0 or size % n:
            raise ValueError(
                f"split: {n} equal sections do not fit axis {axis} of size {size} (tensor of "
                f"shape {shape}); the number must divide the size, or pass a list of sizes"
            )
        return [size // n] * n
    sections = [_int(s, "split: each section") for s in num_or_sections]
    unknown = [i for i, s in enumerate(sections) if s == -1]
    if len(unknown) > 1 or any(s < -1 for s in sections):
        raise ValueError(
            f"split: sections {sections} may hold one -1 (the rest of the axis) and sizes >= 0"
        )
    known = sum(s for s in sections if s != -1)
    if (known > size) if unknown else (known != size):
        rest = " (before the -1)" if unknown else ""
        raise ValueError(
            f"split: sections {sections} add up to {known}{rest}, but axis {axis} has size "
            f"{size} (tensor of shape {shape})"
        )
    if unknown:
        sections[unknown[0]] = size - known
    return sections


def split(x, num_or_sections, axis=0) -> list[Tensor]:
    """Cut ``x`` along ``axis`` into ``num_or_sections`` equal pieces (an int that divides the
    size) or pieces of the listed sizes (one may be -1: the rest). Paddle's ``paddle.split``;
    one op however many pieces, and each piece gets its gradient.

    Example:
        >>> import minitorch_amp as mt
        >>> a, b = mt.split(mt.arange(6).reshape([2, 3]), [2, 1], axis=1)
        >>> b.numpy()
        array([[2],
               [5]])
    """
    x = _tensor(x, "split")
    if x.ndim == 0:
        raise ValueError("split needs a tensor with at least one dimension, got 0-D")
    axis = check_axis("split", _int(axis, "split: axis"), x.ndim)
    sizes = _sections(num_or_sections, x.shape[axis], axis, x.shape)
    parts, start = [], 0
    for n in sizes:
        parts.append(slice(start, start + n))
        start += n
    return _pieces(_ops.Split, x, axis, parts)


def chunk(x, chunks: int, axis=0) -> list[Tensor]:
    """``chunks`` equal pieces along ``axis``; Paddle requires that ``chunks`` divide the size
    (PyTorch's ``chunk`` would make the last piece smaller)."""
    x = _tensor(x, "chunk")
    chunks = _int(chunks, "chunk: chunks")
    axis = _int(axis, "chunk: axis")
    if x.ndim == 0:
        raise ValueError("chunk needs a tensor with at least one dimension, got 0-D")
    size = x.shape[check_axis("chunk", axis, x.ndim)]
    if chunks <= 0 or size % chunks:
        raise ValueError(
            f"chunk: {chunks} chunks do not divide axis {axis} of size {size} (tensor of "
            f"shape {x.shape}); Paddle needs equal chunks (use split with a list of sizes)"
        )
    return split(x, chunks, axis)


def unbind(input, axis: int = 0) -> list[Tensor]:  # noqa: A002 - Paddle's argument name
    """The slices of ``input`` at each position of ``axis``, that axis removed."""
    x = _tensor(input, "unbind")
    if x.ndim == 0:
        raise ValueError("unbind needs a tensor with at least one dimension, got 0-D")
    axis = check_axis("unbind", _int(axis, "unbind: axis"), x.ndim)
    return _pieces(_ops.Unbind, x, axis, list(range(x.shape[axis])))


# ---- selection by index tensors ------------------------------------------------------------------
def _index(index, fn: str):
    if isinstance(index, Tensor):
        return index
    raise TypeError(f"{fn}: index must be an integer Tensor, got {type(index).__name__}")


def index_select(x, index, axis: int = 0) -> Tensor:
    """``x``'s entries at the 1-D ``index`` along ``axis``; repeats are allowed (their
    gradients add up)."""
    x = _tensor(x, "index_select")
    return apply(_ops.IndexSelect, x, _index(index, "index_select"), axis=_int(axis, "axis"))


def gather(x, index, axis=None) -> Tensor:
    """Paddle's gather: whole slices of ``x`` at ``index`` (0-D or 1-D) along ``axis``
    (default 0); a 0-D index drops the axis. Not ``torch.gather``: see
    :func:`take_along_axis`."""
    x = _tensor(x, "gather")
    axis = 0 if axis is None else _int(axis, "gather: axis")
    return apply(_ops.Gather, x, _index(index, "gather"), axis=axis)


def take_along_axis(arr, indices, axis: int, broadcast: bool = True) -> Tensor:
    """``out[i, j] = arr[i, indices[i, j]]`` along ``axis`` (any rank alike); ``indices`` has
    ``arr``'s rank. ``broadcast=False`` is PyTorch's ``gather``."""
    arr = _tensor(arr, "take_along_axis")
    indices = _index(indices, "take_along_axis")
    axis = _int(axis, "take_along_axis: axis")
    return apply(_ops.TakeAlongAxis, arr, indices, axis=axis, broadcast=bool(broadcast))


# ---- masks and triangles -------------------------------------------------------------------------
def masked_fill(x, mask, value) -> Tensor:
    """``value`` where the bool ``mask`` is true, else ``x`` (``mask`` broadcasts); ``value`` is
    a number or a one-element tensor (which gets a gradient), cast to ``x``'s dtype.

    Example:
        >>> import minitorch_amp as mt
        >>> mask = mt.to_tensor([[False, True], [False, False]])
        >>> mt.masked_fill(mt.ones([2, 2]), mask, -1e9).numpy()
        array([[ 1.e+00, -1.e+09],
               [ 1.e+00,  1.e+00]], dtype=float32)
    """
    x = _tensor(x, "masked_fill")
    mask = _tensor(mask, "masked_fill (mask)")
    if isinstance(value, Tensor) and value.dtype != x.dtype:
        value = value.astype(x.dtype)
    return apply(_ops.MaskedFill, x, mask, value)


def tril(x, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two axes (``diagonal`` > 0 keeps more diagonals above
    the main one, < 0 fewer); the rest is 0.

    Example:
        >>> import minitorch_amp as mt
        >>> mt.tril(mt.ones([3, 3])).numpy()
        array([[1., 0., 0.],
               [1., 1., 0.],
               [1., 1., 1.]], dtype=float32)
    """
    return apply(_ops.Tril, _tensor(x, "tril"), diagonal=_int(diagonal, "tril: diagonal"))


def triu(x, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two axes; the rest is 0 (see :func:`tril`)."""
    return apply(_ops.Triu, _tensor(x, "triu"), diagonal=_int(diagonal, "triu: diagonal"))


def clone(x) -> Tensor:
    """A copy of ``x`` that stays in the graph: gradients flow back to ``x`` (Paddle's
    ``clone``; ``detach()`` is the copy that leaves the graph)."""
    return apply(_ops.Assign, _tensor(x, "clone"))


__all__ = [
    "chunk",
    "clone",
    "gather",
    "index_select",
    "masked_fill",
    "split",
    "take_along_axis",
    "tril",
    "triu",
    "unbind",
]
