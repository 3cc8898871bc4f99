"""Double backward of the indexing, sorting, triangle, einsum and scan ops (``higher_order``'s
table, :data:`DOUBLE_BACKWARD`, extended): each op's backward once more, with recorded ops.

All but ``rsqrt`` are linear in their differentiable inputs, so the recorded backward is
the array backward written with ops: a split's pieces meet in a concat, a selection's
gradient is added back with ``ScatterGrad`` (itself twice differentiable), a running sum's
gradient is the running sum the other way.
"""

from __future__ import annotations

from ..backend import get_array_module
from . import ops as O  # the op classes, one namespace
from .dispatch import apply
from .functions_index import SplitOutput
from .higher_order import DOUBLE_BACKWARD, ScatterGrad, _const, _in, _needs, _rule
from .ops.einsum import grad_plan


@_rule(O.Tril, O.Triu)
def _triangle(node, g):
    return apply(node.op, g, diagonal=node.ctx.diagonal)


@_rule(O.MaskedFill)
def _masked_fill(node, g):
    mask = node.ctx.mask
    gx = apply(O.MaskedFill, g, _const(mask), 0.0) if _needs(node, 0) else None
    gv = apply(O.MaskedFill, g, _const(~mask), 0.0) if _needs(node, 2) else None
    return gx, None, gv


@_rule(SplitOutput)
def _split_output(node, g):
    return SplitOutput.backward(node.ctx, g)


@_rule(O.Split, O.Unbind)
def _split(node, slots):
    ctx = node.ctx
    present = next(g for g in slots.grads if g is not None)
    zeros = get_array_module(present._data).zeros
    full = _const(zeros(ctx.shape, dtype=present.dtype))
    for index, g in zip(ctx.indexes, slots.grads):
        if g is not None:  # adding a scattered piece keeps it differentiable
            full = full + apply(ScatterGrad, g, shape=ctx.shape, index=index)
    return full


@_rule(O.IndexSelect, O.Gather, O.TakeAlongAxis)
def _select(node, g):
    return apply(ScatterGrad, g, shape=node.ctx.shape, index=node.ctx.index), None


@_rule(O.Assign)
def _assign(node, g):
    return g


@_rule(O.Cumsum)
def _cumsum(node, g):
    if g.ndim == 0:
        return g
    return apply(O.Cumsum, g, axis=node.ctx.axis, reverse=not node.ctx.reverse)


@_rule(O.Rsqrt)
def _rsqrt(node, g):  # d/dx x^(-1/2) = -x^(-1/2) / (2x)
    x = node.inputs[0]
    return g * apply(O.Rsqrt, x) / x * -0.5


@_rule(O.Einsum)
def _einsum(node, g):
    plan, grads = node.ctx.plan, []
    operands = [_in(node, j, a)._reshape_to(a.shape) for j, a in enumerate(node.ctx.arrays)]
    for i in range(len(plan.terms)):
        if not _needs(node, i):
            grads.append(None)
            continue
        equation, others, shape = grad_plan(plan, i)
        t = apply(O.Einsum, g, *(operands[j] for j in others), equation=equation)
        t = t._reshape_to(shape)
        if tuple(shape) != plan.reduced[i]:  # letters summed in operand i alone: broadcast
            t = apply(O.Expand, t, shape=plan.reduced[i])
        grads.append(t._reshape_to(plan.shapes[i]))
    return tuple(grads)


DOUBLE_BACKWARD[O.Bmm] = DOUBLE_BACKWARD[O.Matmul]  # the same saved values and formulas
