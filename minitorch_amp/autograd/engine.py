"""Reverse-mode differentiation: walk the recorded graph from a result back to its leaves.

Paddle semantics: gradients accumulate into each leaf's ``.grad`` across ``backward()`` calls
until ``clear_grad()``; intermediate results keep no ``.grad``; the graph is freed after
backward unless ``retain_graph=True``.
"""

from __future__ import annotations

import numpy as np

from ..backend import dtypes as _dtypes
from ..backend import sync
from ..backend.primitives import unbroadcast
from .tensor import Tensor


def _topological_order(root) -> list:
    """Nodes reachable from ``root``, each before every node that feeds it (no recursion).

    Raises before any gradient is touched if a node was freed by an earlier backward.
    """
    order, visited = [], set()
    stack = [(root, False)]
    while stack:
        node, finished = stack.pop()
        if finished:
            order.append(node)
            continue
        if node in visited:
            continue
        if node.freed:
            raise RuntimeError(
                f"backward through a graph that was already freed (op {node.op.name!r}). "
                "The first backward() freed it to save memory; pass retain_graph=True to the "
                "first backward() call if you need to differentiate the same graph again."
            )
        visited.add(node)
        stack.append((node, True))
        for t in node.inputs:
            if t is not None and t._node is not None and t._node not in visited:
                stack.append((t._node, False))
    order.reverse()
    return order


def _conform(grad, tensor: Tensor):
    """Bring ``grad`` to ``tensor``'s shape (un-broadcast) and dtype."""
    data = tensor._data
    if grad.shape != data.shape:
        grad = unbroadcast(grad, data.shape)
    if grad.dtype != data.dtype:
        with np.errstate(over="ignore"):  # a float16 grad past 65504 is inf, as on the GPU
            grad = grad.astype(data.dtype)
    return grad


def _accumulate_leaf(leaf: Tensor, grad, owned: bool) -> None:
    """Add ``grad`` into ``leaf.grad`` in place; copy first if ``grad`` may be shared.

    A buffer that ``clear_grad()`` left stale is overwritten instead: one copy in place of a
    fill and an add, and the gradient keeps its address from step to step (the optimizer's
    kernel table and a captured CUDA graph rely on that).
    """
    store = leaf._grad_value
    if store is None:
        leaf._grad = Tensor._wrap(grad if owned else grad.copy())
    elif (
        leaf._grad_stale
        and store._data.shape == grad.shape
        and np.can_cast(grad.dtype, store._data.dtype, "safe")  # (a master_grad's float32)
    ):
        Tensor._xp_of(grad).copyto(store._data, grad)
        leaf._grad_stale = False
    else:
        leaf._grad._data += grad


def _destinations(inputs) -> tuple | None:
    """Per input, the stale gradient buffer its gradient may be written into, or None.

    ``clear_grad()`` leaves a leaf's buffer stale: the next backward must overwrite it. An
    op's backward may write that input's gradient straight into ``ctx.grad_out[i]`` (the
    GEMM of Linear's weight gradient does) and return that very array; the engine then has
    nothing left to do. Offered only for a buffer of the leaf's own shape and dtype, and once
    per leaf and node. Ops that ignore it return a new array, which the engine copies in.
    """
    dests, seen = None, set()
    for i, t in enumerate(inputs):
        if t is None or t._node is not None or not t._grad_stale or id(t) in seen:
            continue
        seen.add(id(t))
        store = t._grad_value._data
        if store.shape == t._data.shape and store.dtype == t._data.dtype:
            dests = dests or [None] * len(inputs)
            dests[i] = store
    return None if dests is None else tuple(dests)


def _initial_grad(root: Tensor, grad_tensor):
    data = root._data
    if grad_tensor is None:
        if data.size != 1:
            raise RuntimeError(
                f"backward() on a tensor of shape {list(data.shape)} needs grad_tensor: the "
                "gradient is only implied for a single-element result. Reduce it first "
                "(loss.mean(), loss.sum()) or pass grad_tensor of the same shape."
            )
        return Tensor._xp_of(data).ones_like(data)
    g = grad_tensor._data if isinstance(grad_tensor, Tensor) else grad_tensor
    g = sync.to_device(g, data, "backward()'s grad_tensor")
    if g.shape != data.shape:
        raise ValueError(
            f"grad_tensor has shape {list(g.shape)} but the tensor has shape {list(data.shape)}; "
            "they must be equal"
        )
    return g.astype(data.dtype, copy=False)


# Functions run after every completed backward(), e.g. AMP's master_grad cast to float32.
post_backward_hooks: list = []


def backward(root: Tensor, grad_tensor=None, retain_graph: bool = False) -> None:
    """Accumulate d(root)/d(leaf) into ``leaf.grad`` for every leaf that needs a gradient."""
    _backward(root, grad_tensor, retain_graph)
    for hook in post_backward_hooks:
        hook()


def _backward(root: Tensor, grad_tensor, retain_graph: bool) -> None:
    if root.stop_gradient:
        raise RuntimeError(
            "backward() on a tensor with stop_gradient=True: nothing it depends on needs a "
            "gradient. Set stop_gradient=False on the inputs (parameters have it already) "
            "and make sure the computation did not run under no_grad()."
        )
    if not _dtypes.is_floating(root._data.dtype):
        raise RuntimeError(
            f"backward() on a {root.dtype} tensor: only floating tensors have gradients"
        )
    seed = _initial_grad(root, grad_tensor)
    if root._node is None:  # a leaf: d(root)/d(root) = seed
        _accumulate_leaf(root, seed, owned=False)
        return
    order = _topological_order(root._node)
    grads = {root._node: seed}
    for node in order:
        grad = grads.pop(node, None)
        if grad is not None:
            node.ctx.grad_out = _destinations(node.inputs)
            in_grads = node.op.backward(node.ctx, grad)
            if not isinstance(in_grads, tuple):
                in_grads = (in_grads,)
            for t, g in zip(node.inputs, in_grads):
                if t is None or g is None:
                    continue
                g = _conform(g, t)
                parent = t._node
                if parent is None:
                    if t._grad_stale and g is t._grad_value._data:  # written in place
                        t._grad_stale = False
                        continue
                    _accumulate_leaf(t, g, owned=g is not grad and g.base is None)
                else:
                    previous = grads.get(parent)
                    grads[parent] = g if previous is None else previous + g
        if not retain_graph:
            node.free()
