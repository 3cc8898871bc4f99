"""Casts and device copies: recorded ops, so the gradient returns in the source dtype/place."""

from __future__ import annotations

from ...backend import place_of, to_place
from ...backend.cast import cast
from ..op import NONE, Op


class Cast(Op):
    """``x.astype(dtype)`` with round-to-nearest-even; backward casts the gradient back.

    This is how an fp32 master parameter receives an fp32 gradient when AMP feeds an fp16
    copy of it to a white-list op.
    """

    name = "cast"
    amp = NONE

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.source = x.dtype
        return cast(x, dtype)  # the raw cast kernel on the GPU, astype on the CPU

    @staticmethod
    def backward(ctx, grad):
        return cast(grad, ctx.source)


class CopyTo(Op):
    """Copy to another device; backward copies the gradient back."""

    name = "copy_to"
    amp = NONE

    @staticmethod
    def forward(ctx, x, place):
        ctx.source = place_of(x)
        return to_place(x, place)

    @staticmethod
    def backward(ctx, grad):
        return to_place(grad, ctx.source)
