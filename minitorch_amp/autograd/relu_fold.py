"""A ReLU's backward folded into the backward of the Linear layer before it.

Unfused, ``relu(linear(x, w, b))`` differentiates in two steps: ReLU's backward masks the
gradient, ``grad * (y > 0)`` (a pass over the activation: one launch on the GPU), then
Linear's backward sums the masked gradient over the rows for the bias (``bias_grad``, one
kernel) and multiplies it by ``w`` and ``x``. ``bias_grad`` can apply the mask itself as it
reads the gradient, so the engine hands Linear the unmasked gradient and the ReLU's output
instead, and the mask costs no launch of its own: one launch less per Linear + ReLU pair.
The bits do not change: the mask is the same multiply, applied to the same array.

The engine defers a ReLU's mask (:func:`defer`) only when nothing but that Linear can see
the masked gradient, checked when the ReLU's backward would run:

* a plain ``backward()`` (not ``paddle.grad``, not ``create_graph``) with no gradient
  observer installed (the NaN/Inf checker looks at every op's gradients);
* the ReLU's input is the result of an op that takes a mask (:func:`takes_mask`: Linear,
  when its bias wants a gradient) and the gradient has that result's shape and dtype.

Everything else that might see the deferred gradient makes it plain first (:func:`plain`):
a second consumer of the Linear's result (the engine sums their gradients), a hook on it,
or a producer that does not take it.
"""

from __future__ import annotations

from typing import NamedTuple

from ..backend.primitives import relu_backward
from .dispatch import hooks


class MaskedGrad(NamedTuple):
    """A ReLU input's gradient, ``grad * (mask > 0)``, with the multiply not yet done."""

    grad: object  # the gradient of the ReLU's output
    mask: object  # the ReLU's output


def plain(g):
    """``g`` itself, or a :class:`MaskedGrad`'s product (the ReLU backward it deferred)."""
    return relu_backward(g.mask, g.grad) if type(g) is MaskedGrad else g


def takes_mask(node) -> bool:
    """Whether ``node``'s op can take a ReLU's mask into its backward (``takes_relu_mask``)."""
    wants = getattr(node.op, "takes_relu_mask", None)
    return wants is not None and wants(node.ctx)


def defer(node, grad, capture: bool):
    """A :class:`MaskedGrad` for a ReLU ``node``'s input, or None to run its backward."""
    if capture or hooks.grad_observers or not getattr(node.op, "defers_mask", False):
        return None
    t = node.inputs[0]
    producer = None if t is None else t._node
    if producer is None or not takes_mask(producer):
        return None
    if grad.shape != t._data.shape or grad.dtype != t._data.dtype:
        return None
    return MaskedGrad(grad, node.ctx.y)
