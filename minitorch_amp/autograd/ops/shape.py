"""Ops that move elements around without arithmetic: reshape, transpose, indexing."""

from __future__ import annotations

from ...backend import get_array_module, sync
from ...backend.dtypes import accumulation_dtype
from ...backend.primitives import scatter_add, unbroadcast
from ..op import GRAY, NONE, Op


class Reshape(Op):
    """Reshape to ``shape`` (``-1`` infers one dimension); Tensor.reshape resolves Paddle's 0s."""

    name = "reshape"
    amp = GRAY

    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = x.shape
        try:
            return x.reshape(shape)
        except ValueError:
            raise ValueError(
                f"cannot reshape a tensor of shape {list(x.shape)} ({x.size} elements) "
                f"into {list(shape)}"
            ) from None

    @staticmethod
    def backward(ctx, grad):
        return grad.reshape(ctx.shape)


class Transpose(Op):
    """Permute axes by ``perm`` (reverse them when ``perm`` is None)."""

    name = "transpose"
    amp = GRAY

    @staticmethod
    def forward(ctx, x, perm=None):
        nd = x.ndim
        if perm is not None and (
            any(not -nd <= p < nd for p in perm) or sorted(p % nd for p in perm) != list(range(nd))
        ):
            raise ValueError(
                f"transpose: perm {list(perm)} is not a permutation of the {nd} axes of a "
                f"tensor of shape {list(x.shape)}: name each axis once, as an int in "
                f"[{-nd}, {nd})"
            )
        ctx.perm = perm
        return x.transpose(perm)

    @staticmethod
    def backward(ctx, grad):
        if ctx.perm is None:
            return grad.transpose()
        inverse = [0] * len(ctx.perm)
        for i, p in enumerate(ctx.perm):
            inverse[p % len(ctx.perm)] = i
        return grad.transpose(inverse)


def _is_basic(index) -> bool:
    """Basic indexing (ints, slices, None, ...) selects each element at most once."""
    parts = index if isinstance(index, tuple) else (index,)
    return all(isinstance(p, (int, slice)) or p is None or p is Ellipsis for p in parts)


def _has_mask(index) -> bool:
    parts = index if isinstance(index, tuple) else (index,)
    return any(getattr(getattr(p, "dtype", None), "kind", None) == "b" for p in parts)


class GetItem(Op):
    """``x[index]`` for basic and integer-array indexing."""

    name = "getitem"
    amp = GRAY

    @staticmethod
    def forward(ctx, x, index):
        ctx.shape, ctx.index = x.shape, index
        if _has_mask(index):  # the result's size depends on the mask's values
            sync.host_read("indexing with a boolean mask")
        try:
            out = x[index]
        except IndexError as exc:
            raise IndexError(
                f"index {index!r} is invalid for a tensor of shape {list(x.shape)}: {exc}"
            ) from None
        xp = get_array_module(x)
        return out if isinstance(out, xp.ndarray) else xp.asarray(out)

    @staticmethod
    def backward(ctx, grad):
        xp = get_array_module(grad)
        if _is_basic(ctx.index):
            full = xp.zeros(ctx.shape, dtype=grad.dtype)
            full[ctx.index] = grad
            return full
        # Repeated indices must add up. NOTE: in float32 for float16 grads, rounded once: adding
        # in float16 rounds after every add, and a sum that cancels keeps those errors.
        full = xp.zeros(ctx.shape, dtype=accumulation_dtype(grad.dtype))
        scatter_add(full, ctx.index, grad.astype(full.dtype, copy=False))
        return full.astype(grad.dtype, copy=False)


class SetValue(Op, register=False):
    """``x[index] = value`` written into ``x``'s own array (Paddle's ``set_value`` op).

    ``Tensor.__setitem__`` checks and prepares everything (``value`` is already in ``x``'s
    dtype, on its device, and broadcasts to ``x[index]``), runs this op only when a gradient
    is involved, and moves the node onto ``x``: ``x``'s history continues through the write.
    Its input 0 is a stand-in for ``x`` as it was (its earlier history, the same array);
    ``before`` is ``x``'s version before the write: an op that took ``x`` at that version or
    earlier is sent to the stand-in by ``versions.check``. Backward: ``x`` gets the gradient
    with the written positions zeroed, ``value`` the gradient at them (the engine sums it
    back to ``value``'s shape). Not in the op table: users reach it only through ``x[i] = v``.
    """

    name = "set_value"
    amp = NONE  # AMP never casts it: the write goes into x's own array

    @staticmethod
    def forward(ctx, x, value, index, before):
        ctx.index, ctx.before = index, before
        x[index] = value
        return x

    @staticmethod
    def backward(ctx, grad):
        grad_x = grad_value = None
        if ctx.needs_grad[0]:
            grad_x = grad.copy()
            grad_x[ctx.index] = 0
        if ctx.needs_grad[1]:
            grad_value = grad[ctx.index]
        return grad_x, grad_value


class Expand(Op):
    """Broadcast ``x`` to ``shape`` (NumPy's rule, aligned on the right), as a new array.

    Backward sums the gradient over the broadcast axes (in float32 for float16).
    """

    name = "expand"
    amp = GRAY  # Paddle: expand_v2 and expand_as_v2 are on no AMP list

    @staticmethod
    def forward(ctx, x, shape):
        xp = get_array_module(x)
        try:
            out = xp.broadcast_to(x, tuple(shape))
        except ValueError:
            raise ValueError(
                f"expand: a tensor of shape {list(x.shape)} cannot be expanded to {list(shape)}: "
                "each dimension must be 1 or equal to the target's (aligned on the right)"
            ) from None
        ctx.shape = x.shape
        return out.copy()

    @staticmethod
    def backward(ctx, grad):
        return unbroadcast(grad, ctx.shape) if tuple(grad.shape) != ctx.shape else grad


class ExpandAs(Expand):
    """Broadcast ``x`` to another tensor's ``shape``: :class:`Expand` under Paddle's name
    ``expand_as_v2``, an op of its own because AMP treats it apart (Paddle has no float16
    or bfloat16 kernel for it, so it runs in float32; see ``amp/op_lists.py``)."""

    name = "expand_as"
