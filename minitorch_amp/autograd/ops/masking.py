"""Ops that keep part of a tensor and replace the rest: triangles (tril, triu), masked_fill.

Each is linear in ``x``, so backward applies the same selection to the gradient: what the
forward replaced gets none.
"""

from __future__ import annotations

import numpy as np

from ...backend import get_array_module, is_array, sync
from ...backend.constants import device_constant
from ..op import GRAY, Op


def _check_matrix(name: str, x) -> None:
    if x.ndim < 2:
        raise ValueError(
            f"{name} needs a tensor with at least 2 dimensions (it works on the last two), "
            f"got shape {list(x.shape)}"
        )


class Tril(Op):
    """The lower triangle of the last two axes (``j - i <= diagonal``); the rest is 0.

    ``diagonal`` > 0 keeps diagonals above the main one. Backward: tril of grad.
    """

    name = "tril"
    amp = GRAY  # Paddle: tril is on no AMP list

    @staticmethod
    def forward(ctx, x, diagonal=0):
        _check_matrix("tril", x)
        ctx.diagonal = diagonal
        return get_array_module(x).tril(x, diagonal)

    @staticmethod
    def backward(ctx, grad):
        return get_array_module(grad).tril(grad, ctx.diagonal)


class Triu(Op):
    """The upper triangle of the last two axes (``j - i >= diagonal``); the rest is 0.

    Backward: triu of grad.
    """

    name = "triu"
    amp = GRAY  # Paddle: triu is on no AMP list

    @staticmethod
    def forward(ctx, x, diagonal=0):
        _check_matrix("triu", x)
        ctx.diagonal = diagonal
        return get_array_module(x).triu(x, diagonal)

    @staticmethod
    def backward(ctx, grad):
        return get_array_module(grad).triu(grad, ctx.diagonal)


class MaskedFill(Op):
    """``value`` where the bool ``mask`` is true, else ``x`` (``mask`` broadcasts with ``x``).

    ``value`` is a Python number or a one-element array of ``x``'s dtype; as an array it is
    an input and gets the sum of the gradient where the mask is true. ``x`` gets the gradient
    where the mask is false.
    """

    name = "masked_fill"
    amp = GRAY  # Paddle: where(mask, value, x), on no AMP list

    @staticmethod
    def forward(ctx, x, mask, value):
        if mask.dtype.kind != "b":
            raise TypeError(
                f"masked_fill: mask must be a bool tensor, got {mask.dtype}; build it with a "
                "comparison (x > 0) or cast it (mask.astype('bool'))"
            )
        mask = sync.to_device(mask, x, "masked_fill's mask")
        xp = get_array_module(x, mask)
        if is_array(value):
            if value.size != 1:
                raise ValueError(
                    f"masked_fill: value must be a number or a tensor with one element, got "
                    f"shape {list(value.shape)}"
                )
        else:
            bits = np.asarray(value, dtype=x.dtype)  # (rounded, overflowed as astype does)
            key = ("masked_fill value", bits.dtype.str, bits.tobytes())
            value = device_constant(x, key, lambda: bits, "masked_fill's value")
        ctx.mask = mask
        try:
            return xp.where(mask, value, x)
        except ValueError:
            raise ValueError(
                f"masked_fill: x of shape {list(x.shape)} and mask of shape {list(mask.shape)} "
                "cannot be broadcast together (trailing dimensions must be equal or 1)"
            ) from None

    @staticmethod
    def backward(ctx, grad):
        mask = ctx.mask
        return grad * ~mask, None, grad * mask


__all__ = ["MaskedFill", "Tril", "Triu"]
