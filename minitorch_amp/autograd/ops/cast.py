"""Casts and device copies: recorded ops, so the gradient returns in the source dtype/place."""

from __future__ import annotations

import numpy as np

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
    def forward(ctx, x, dtype, prepared=None):
        """``prepared``: the cast of ``x``, already made (``auto_cast`` casts an op's two
        float32 inputs in one launch, ``backend.cast.cast_pair``); recorded as this cast."""
        ctx.source = x.dtype
        report_cast(x.dtype)
        if prepared is None:
            return cast(x, dtype)  # the raw cast kernel on the GPU, astype on the CPU
        if prepared.shape != x.shape or prepared.dtype != np.dtype(dtype):
            raise ValueError(
                f"cast: a prepared result of {prepared.dtype} {list(prepared.shape)} does not "
                f"fit a cast of {x.dtype} {list(x.shape)} to {np.dtype(dtype)}"
            )
        return prepared

    @staticmethod
    def backward(ctx, grad):
        report_cast(grad.dtype)  # Paddle's cast_grad runs the cast kernel: counted too
        # a parameter's stale .grad buffer (an O1 weight's float32 one): cast straight into it
        buffer = (getattr(ctx, "grad_out", None) or (None,))[0]
        if buffer is not None and buffer.dtype == ctx.source and buffer.shape == grad.shape:
            return cast(grad, ctx.source, out=buffer)
        return cast(grad, ctx.source)


def report_cast(source) -> None:
    """Tell operator statistics (``hooks.counters``) of a cast kernel, by its *source*
    dtype: Paddle's cast kernel is chosen by its input's dtype, and so is its row. Called
    here and wherever else a cast runs that Paddle runs as one (master grads and weights)."""
    for count in _dispatch.hooks.counters:
        count("cast", source)


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


# (imported last: dispatch imports Cast from here)
from .. import dispatch as _dispatch  # noqa: E402
