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
* the op can return its first input's gradient widened (``widens_grad``: a Linear whose
  input and weight share a 16-bit dtype), and that input is the result of a ``Cast`` from
  float32 with no hook on it.

The folded gradient travels as a :class:`WideGrad`. A second consumer of the cast's result
(the two gradients are summed in 16 bits before the cast's backward, as unfolded) narrows
it back first (:func:`plain`: exact), and the cast's backward then runs on the sum.
"""

from __future__ import annotations

from typing import NamedTuple

from ..backend.cast import cast
from ..backend.dtypes import float32
from .dispatch import hooks
from .ops.cast import Cast, report_cast


class WideGrad(NamedTuple):
    """A 16-bit gradient held widened to float32 (exactly): its cast's backward, done."""

    array: object  # float32 values, each exact in ``narrow``
    narrow: object  # the 16-bit dtype of the cast's result, whose gradient this is


def plain(g):
    """``g`` itself, or a :class:`WideGrad` rounded back to its 16-bit dtype (exact)."""
    return cast(g.array, g.narrow) if type(g) is WideGrad else g


def wanted(node, capture: bool) -> bool:
    """Whether ``node``'s backward should return its first input's gradient widened."""
    widens = getattr(node.op, "widens_grad", None)
    if widens is None or capture or hooks.grad_observers or not widens(node.ctx):
        return False
    t = node.inputs[0]
    producer = None if t is None else t._node
    return (
        producer is not None
        and producer.op is Cast
        and not producer.hooks
        and producer.ctx.source == float32
    )


def backward(node, run) -> tuple:
    """``run()``, the backward of a ``node`` that :func:`wanted` chose, with
    ``ctx.widen_grad`` set; the first input's gradient comes back as a :class:`WideGrad`."""
    node.ctx.widen_grad = True
    try:
        grads = run()
    finally:
        node.ctx.widen_grad = False  # a retained graph's next backward may not fold
    if grads[0] is None:
        return grads
    return (WideGrad(grads[0], node.inputs[0]._data.dtype), *grads[1:])


def cast_done(grad: WideGrad):
    """The cast's backward for a folded gradient: its float32 array, the cast reported."""
    report_cast(grad.narrow)
    return grad.array
