"""Double backward: each op's backward once more, written with Tensor ops so it is recorded.

``grad(..., create_graph=True)`` and ``backward(create_graph=True)`` run the functions here
instead of the array backward of the op table. A gradient computed that way is itself the
result of recorded ops (multiply, matmul, ...), so it can be differentiated again: a Hessian-
vector product, a gradient penalty, the second derivative of ``tanh``.

Each function takes the node and the incoming gradient (a Tensor) and returns one gradient per
input of the op. An input that needs a gradient is ``node.inputs[i]``, the very tensor of
the forward, so the new graph reaches back into the old one; an input that does not is a
constant built from what the forward saved. Values the array backward reads from the forward
(``tanh``'s output, ``sigmoid``'s) are recomputed from the input tensor: their dependence on it
is what the second derivative is made of.

Ops without an entry (``gelu``, the norms, ``cross_entropy``, ``embedding``) raise before
anything runs; their second derivatives are not written yet. The table is
:data:`DOUBLE_BACKWARD`; ``docs/autograd.md`` lists it.

NOTE: the backward graph is built with AMP off (a float16 op stays float16, a float32 one
float32) and with grad mode on, whatever the caller's context.
"""

from __future__ import annotations

import contextlib
import math

from ..backend import get_array_module, is_array
from ..backend.primitives import scatter_add
from . import ops as O  # the op classes, one namespace
from .dispatch import apply, autocast_state
from .grad_mode import enable_grad
from .op import NONE, Op
from .ops.shape import _is_basic
from .tensor import Tensor

DOUBLE_BACKWARD: dict = {}  # op class -> f(node, grad) -> tuple of Tensors (or None)


def _rule(*ops):
    def register(fn):
        for op in ops:
            DOUBLE_BACKWARD[op] = fn
        return fn

    return register


def _in(node, i: int, saved):
    """The op's i-th input: its tensor if it needs a gradient, else the saved constant."""
    t = node.inputs[i]
    if t is not None:
        return t
    return Tensor._wrap(saved) if is_array(saved) else saved


def _const(array) -> Tensor:
    return Tensor._wrap(array)


def _needs(node, i: int) -> bool:
    return node.inputs[i] is not None


# ---- elementwise --------------------------------------------------------------------------
@_rule(O.Add)
def _add(node, g):
    return g, g


@_rule(O.Subtract)
def _subtract(node, g):
    return g, -g


@_rule(O.Multiply)
def _multiply(node, g):
    x, y = _in(node, 0, node.ctx.x), _in(node, 1, node.ctx.y)
    return (g * y if _needs(node, 0) else None), (g * x if _needs(node, 1) else None)


@_rule(O.Divide)
def _divide(node, g):
    x, y = _in(node, 0, node.ctx.x), _in(node, 1, node.ctx.y)
    gx = g / y
    return gx, (-(gx * x) / y if _needs(node, 1) else None)


@_rule(O.Neg)
def _neg(node, g):
    return -g


@_rule(O.Pow)
def _pow(node, g):
    x, y = _in(node, 0, node.ctx.x), _in(node, 1, node.ctx.y)
    gx = g * y * x ** (y - 1) if _needs(node, 0) else None
    gy = None
    if _needs(node, 1):  # (y is a tensor here)
        gy = g * x**y * (x.log() if isinstance(x, Tensor) else math.log(x))
    return gx, gy


@_rule(O.Square)
def _square(node, g):
    return g * (node.inputs[0] * 2.0)


@_rule(O.Sqrt)
def _sqrt(node, g):
    return g / (node.inputs[0].sqrt() * 2.0)


@_rule(O.Exp)
def _exp(node, g):
    return g * node.inputs[0].exp()


@_rule(O.Log)
def _log(node, g):
    return g / node.inputs[0]


@_rule(O.Abs)
def _abs(node, g):  # sign(x) is piecewise constant: a constant here
    return g * _const(get_array_module(node.ctx.x).sign(node.ctx.x))


@_rule(O.Tanh)
def _tanh(node, g):
    t = node.inputs[0].tanh()
    return g * (1.0 - t * t)


@_rule(O.Sigmoid)
def _sigmoid(node, g):
    s = node.inputs[0].sigmoid()
    return g * s * (1.0 - s)


@_rule(O.Relu)
def _relu(node, g):
    return g * _const((node.ctx.y > 0).astype(node.ctx.y.dtype))


@_rule(O.Clip)
def _clip(node, g):
    return g * _const(node.ctx.mask.astype(g.dtype))


@_rule(O.Dropout)
def _dropout(node, g):
    factor = node.ctx.factor
    return g * (_const(factor.astype(g.dtype)) if is_array(factor) else factor)


@_rule(O.Where)
def _where(node, g):
    keep = node.ctx.condition
    return None, g * _const(keep.astype(g.dtype)), g * _const((~keep).astype(g.dtype))


# ---- reductions, shapes, casts -----------------------------------------------------------
def _expand(g: Tensor, shape, axes, keepdim) -> Tensor:
    """A reduced gradient broadcast back to ``shape`` (recorded: adding zeros broadcasts)."""
    if not keepdim:
        g = g._reshape_to([1 if i in axes else n for i, n in enumerate(shape)])
    if tuple(g.shape) == tuple(shape):
        return g
    return g + _const(get_array_module(g._data).zeros(shape, dtype=g.dtype))


@_rule(O.Sum)
def _sum(node, g):
    return _expand(g, node.ctx.shape, node.ctx.axes, node.ctx.keepdim)


@_rule(O.Mean)
def _mean(node, g):
    return _expand(g / float(node.ctx.count), node.ctx.shape, node.ctx.axes, node.ctx.keepdim)


@_rule(O.Max)
def _max(node, g):
    ctx = node.ctx
    mask = ctx.x == ctx.out  # every tied maximum takes the whole gradient (Paddle's max)
    if not ctx.keepdim:
        g = g._reshape_to(ctx.out.shape)
    return g * _const(mask.astype(g.dtype))


@_rule(O.Reshape)
def _reshape(node, g):
    return g._reshape_to(node.ctx.shape)


@_rule(O.Transpose)
def _transpose(node, g):
    perm = node.ctx.perm
    if perm is None:
        return g.transpose()
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p % len(perm)] = i
    return g.transpose(inverse)


@_rule(O.Cast)
def _cast(node, g):
    return g.astype(node.ctx.source)


@_rule(O.CopyTo)
def _copy_to(node, g):
    return apply(O.CopyTo, g, place=node.ctx.source)


class ScatterGrad(Op, register=False):
    """``zeros(shape)`` with ``grad`` written (added, for repeated indices) at ``index``: the
    backward of ``x[index]``, as an op so that it can be differentiated once more."""

    name = "getitem_grad"
    amp = NONE

    @staticmethod
    def forward(ctx, grad, shape, index):
        ctx.index = index
        full = get_array_module(grad).zeros(shape, dtype=grad.dtype)
        if _is_basic(index):
            full[index] = grad
        else:  # repeated indices must add up
            scatter_add(full, index, grad)
        return full

    @staticmethod
    def backward(ctx, grad):
        return grad[ctx.index]


@_rule(O.GetItem)
def _getitem(node, g):
    return apply(ScatterGrad, g, shape=node.ctx.shape, index=node.ctx.index)


@_rule(ScatterGrad)
def _scatter(node, g):
    return apply(O.GetItem, g, index=node.ctx.index)


@_rule(O.Concat)
def _concat(node, g):
    grads, start, lead = [], 0, (slice(None),) * node.ctx.axis
    for n in node.ctx.sizes:
        grads.append(g[(*lead, slice(start, start + n))])
        start += n
    return tuple(grads)


@_rule(O.Stack)
def _stack(node, g):
    lead = (slice(None),) * node.ctx.axis
    return tuple(g[(*lead, i)] for i in range(node.ctx.count))


# ---- matrix products, softmax, losses -----------------------------------------------------
@_rule(O.Matmul)
def _matmul(node, g):
    x2, y2, tx, ty, out_shape, x_shape, y_shape = node.ctx.saved
    x = _in(node, 0, x2)._reshape_to(x2.shape)
    y = _in(node, 1, y2)._reshape_to(y2.shape)
    g = g._reshape_to(out_shape)
    gx = gy = None
    if _needs(node, 0):
        gx = y.matmul(g, ty, True) if tx else g.matmul(y, False, not ty)
        if len(x_shape) == 1:
            gx = gx._reshape_to(gx.shape[:-2] + gx.shape[-1:])
    if _needs(node, 1):
        gy = g.matmul(x, True, tx) if ty else x.matmul(g, not tx, False)
        if len(y_shape) == 1:
            gy = gy._reshape_to(gy.shape[:-1])
    return gx, gy


@_rule(O.Linear)
def _linear(node, g):
    x, w = _in(node, 0, node.ctx.x), _in(node, 1, node.ctx.weight)
    rows = 1
    for n in x.shape[:-1]:
        rows *= n
    g2 = g._reshape_to([rows, g.shape[-1]])
    gx = g.matmul(w, False, True) if _needs(node, 0) else None
    gw = x._reshape_to([rows, x.shape[-1]]).matmul(g2, True, False) if _needs(node, 1) else None
    gb = g2.sum(axis=0) if len(node.inputs) > 2 and _needs(node, 2) else None
    return gx, gw, gb


@_rule(O.Softmax)
def _softmax(node, g):
    y = apply(O.Softmax, node.inputs[0], axis=node.ctx.axis)
    return y * (g - (g * y).sum(axis=node.ctx.axis, keepdim=True))


@_rule(O.LogSoftmax)
def _log_softmax(node, g):
    y = apply(O.LogSoftmax, node.inputs[0], axis=node.ctx.axis)
    return g - y.exp() * g.sum(axis=node.ctx.axis, keepdim=True)


@_rule(O.MseLoss)
def _mse_loss(node, g):
    ctx = node.ctx
    acc = ctx.diff.dtype
    # The forward kept only input - label. Rebuild it as a tensor that depends on the inputs
    # that need a gradient: each term ``t - t.value`` adds exactly 0 and carries d/dt = 1.
    diff = _const(ctx.diff)
    for i, sign in ((0, 1.0), (1, -1.0)):
        if _needs(node, i):
            t = node.inputs[i].astype(acc)
            diff = diff + (t - _const(t._data)) * sign
    gi = diff * (g.astype(acc) * ctx.scale)
    return (gi if _needs(node, 0) else None), (-gi if _needs(node, 1) else None)


# ---- what the engine calls ----------------------------------------------------------------
def check_supported(nodes) -> None:
    """Refuse, before anything runs, a graph with an op that has no double backward."""
    missing = sorted({n.op.name for n in nodes if n.op not in DOUBLE_BACKWARD})
    if missing:
        have = ", ".join(sorted(op.name for op in DOUBLE_BACKWARD if op.name != "getitem_grad"))
        raise NotImplementedError(
            f"create_graph=True: no double backward for {missing}; ops that have one: {have}. "
            "Differentiate that part once (create_graph=False), or write it as a PyLayer "
            "whose backward uses ops from this list."
        )


def backward_graph(node, grad: Tensor) -> tuple:
    out = DOUBLE_BACKWARD[node.op](node, grad)
    return out if isinstance(out, tuple) else (out,)


def conform(grad: Tensor, tensor: Tensor) -> Tensor:
    """The recorded twin of ``engine._conform``: un-broadcast by summing, then cast."""
    shape = tuple(tensor._data.shape)
    if tuple(grad._data.shape) != shape:
        lead = grad.ndim - len(shape)
        axes = tuple(range(lead)) + tuple(
            lead + i for i, n in enumerate(shape) if n == 1 and grad.shape[lead + i] != 1
        )
        grad = grad.sum(axis=axes)._reshape_to(shape) if axes else grad._reshape_to(shape)
    if grad._data.dtype != tensor._data.dtype:
        grad = grad.astype(tensor._data.dtype)
    return grad


def as_seed(seed, given) -> Tensor:
    """The seed of a recorded backward: ``given`` itself when it is a tensor (so the result
    is differentiable with respect to it too), else the seed array as a constant."""
    if isinstance(given, Tensor):
        return given if given._data.dtype == seed.dtype else given.astype(seed.dtype)
    return Tensor._wrap(seed)


@contextlib.contextmanager
def recording(create_graph: bool):
    """Grad mode on and AMP off while a recorded backward runs; nothing otherwise."""
    if not create_graph:
        yield
        return
    token = autocast_state.set(None)
    try:
        with enable_grad():
            yield
    finally:
        autocast_state.reset(token)
