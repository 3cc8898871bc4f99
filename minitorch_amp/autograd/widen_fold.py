"""An AMP cast's backward folded into the GEMM that computes its gradient.

``auto_cast`` casts a Linear's float32 input to float16 (O1's activations; at O2 a float32
one such as a transformer's residual stream after LayerNorm): it records a ``Cast``.
Unfolded, that input's gradient costs two launches on the GPU: the Linear's backward GEMM
stores ``dx`` in float16, then the cast's backward widens it to float32 (a pass over the
activation). The GEMM's epilogue can round to float16 and store the value in float32
(``backend.gemm``'s ``product_dtype``: the same rounding, widened exactly), so the engine
asks the Linear for ``dx`` widened and skips the cast's backward: one launch and one node's
Python less per such Linear, the same bits. Operator statistics still count the cast (the
fold reports it, as Paddle's ``cast_grad`` kernel is counted).

The engine folds (:func:`wanted`) only where nothing else can see the 16-bit gradient:

* a plain ``backward()`` (not ``paddle.grad``, not ``create_graph``) with no gradient
  observer installed (the NaN/Inf checker looks at every op's gradients);
* the op can return that input's gradient widened (``widen_positions`` and
  ``widens_grad``: a Linear's input and weight, when they share a 16-bit dtype), and the
  input is the result of a ``Cast`` from float32 with no hook on it.

The folded gradient travels as a :class:`WideGrad`. A second consumer of the cast's result
(the two gradients are summed in 16 bits before the cast's backward, as unfolded) narrows
it back first (:func:`plain`: exact), and the cast's backward then runs on the sum.

An O1 weight's cast is folded the same way, one step further: where ``cast_fold`` would
copy the weight gradient into the parameter's stale float32 ``.grad`` buffer (widening it),
the weight-gradient GEMM writes it there itself, rounded and widened: no copy, no cast
(3 launches fewer in the SimpleNet O1 step). Only for a cast one op reads (``auto_cast``
counts its readers: a weight read twice in a region has its 16-bit gradients summed before
the cast's backward), and the gradient reaches the parameter at once, so that another of
its gradients (a tied weight also read directly) is added to it, not written over it.
"""

from __future__ import annotations

from typing import NamedTuple

from ..backend.cast import cast
from ..backend.dtypes import float32
from . import cast_fold
from .dispatch import hooks
from .ops.cast import Cast, report_cast


class WideGrad(NamedTuple):
    """A 16-bit gradient held widened to float32 (exactly): its cast's backward, done."""

    array: object  # float32 values, each exact in ``narrow``
    narrow: object  # the 16-bit dtype of the cast's result, whose gradient this is


def plain(g):
    """``g`` itself, or a :class:`WideGrad` rounded back to its 16-bit dtype (exact)."""
    return cast(g.array, g.narrow) if type(g) is WideGrad else g


def wanted(node, capture: bool) -> tuple:
    """The positions of ``node``'s inputs whose gradients its backward should return
    widened (none: run it as it is). An op names the inputs it can widen in
    ``widen_positions`` and says in ``widens_grad(ctx)`` whether this call can."""
    positions = getattr(node.op, "widen_positions", ())
    if not positions or capture or hooks.grad_observers:
        return ()
    found = ()
    for i in positions:
        t = node.inputs[i]  # (None where the input wants no gradient)
        producer = None if t is None else t._node
        if (
            producer is not None
            and producer.op is Cast
            and not producer.hooks
            and producer.ctx.source == float32
        ):
            found += (i,)
    return found if found and node.op.widens_grad(node.ctx) else ()


def backward(node, positions: tuple, run, arrive) -> tuple:
    """``run()``, the backward of a ``node`` that :func:`wanted` chose, with
    ``ctx.widen_grad`` holding ``positions``; their gradients come back as
    :class:`WideGrad`.

    A position whose cast is an O1 weight's, read by this op alone, from a parameter whose
    ``.grad`` is a stale float32 buffer (``cast_fold.free_buffer``), gets that buffer in
    ``ctx.grad_out``: the GEMM writes the gradient there, and it ``arrive``s at the
    parameter at once (the cast reported), before any other gradient of the parameter can
    reach the buffer (a tied weight read directly elsewhere: that one is added to it)."""
    ctx, inputs = node.ctx, node.inputs
    written = []
    for i in positions:
        cast_node = inputs[i]._node
        alone = getattr(cast_node.ctx, "readers", 0) == 1  # (a weight read twice: no)
        leaf = cast_fold.free_buffer(cast_node) if alone else None
        if leaf is not None:
            out = list(ctx.grad_out or (None,) * len(inputs))
            out[i] = leaf._grad_value._data
            ctx.grad_out = tuple(out)
            written.append((i, leaf))
    ctx.widen_grad = positions
    try:
        grads = list(run())
    finally:
        ctx.widen_grad = ()  # a retained graph's next backward may not fold
    for i, leaf in written:
        if grads[i] is leaf._grad_value._data:  # (in the buffer: the cast's backward, done)
            report_cast(inputs[i]._data.dtype)
            arrive(leaf, grads[i], owned=False)
            grads[i] = None
    for i in positions:
        if grads[i] is not None:
            grads[i] = WideGrad(grads[i], inputs[i]._data.dtype)
    return tuple(grads)


def cast_done(grad: WideGrad):
    """The cast's backward for a folded gradient: its float32 array, the cast reported."""
    report_cast(grad.narrow)
    return grad.array
