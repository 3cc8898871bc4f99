"""Reverse-mode differentiation: walk the recorded graph from a result back to its leaves.

Paddle semantics: gradients accumulate into each leaf's ``.grad`` across ``backward()`` calls
until ``clear_grad()``; intermediate results keep no ``.grad``; the graph is freed after
backward unless ``retain_graph=True``.

One loop (:func:`run_backward`) serves ``backward()`` and ``grad()``: the latter returns the
gradients of chosen tensors instead of accumulating, and skips nodes that lead to none of
them. Gradient hooks (``hooks.py``) run on a node's summed gradient, and on a leaf's once,
before it is accumulated. With ``create_graph`` each node runs its recorded backward
(``higher_order.py``) on Tensors instead of its array backward.
"""

from __future__ import annotations

import numpy as np

from ..backend import dtypes as _dtypes
from ..backend.cast import copy_into
from ..backend.primitives import unbroadcast
from . import cast_fold, relu_fold, seeds, versions, widen_fold
from .dispatch import hooks
from .leaf_writes import LeafWrites
from .ops.cast import Cast, report_cast
from .tensor import Tensor


def _topological_order(roots, blocked=frozenset()) -> list:
    """Nodes reachable from ``roots``, each before every node that feeds it (no recursion).

    The walk does not enter a tensor whose id is in ``blocked`` (``grad``'s no_grad_vars).
    Raises before any gradient is touched if a node was freed by an earlier backward.
    """
    order, visited = [], set()
    stack = [(root, False) for root in reversed(roots)]
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
            parent = None if t is None else t._node
            if parent is not None and parent not in visited and id(t) not in blocked:
                stack.append((parent, False))
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


def _accumulate_leaf(leaf: Tensor, grad, owned: bool, writes: LeafWrites) -> None:
    """Add ``grad`` into ``leaf.grad`` in place; copy first if ``grad`` may be shared.

    A buffer that ``clear_grad()`` left stale is overwritten instead: one copy in place of a
    fill and an add, and the gradient keeps its address from step to step (the optimizer's
    kernel table and a captured CUDA graph rely on that). ``writes`` notes the ``.grad`` as it
    was, and stages an addition into a gradient held from before the pass (``leaf_writes``).
    """
    if writes.holds_old(leaf):
        writes.stage(leaf, grad)
        return
    writes.note(leaf)
    store = leaf._grad_value
    if store is None:
        leaf._grad = Tensor._wrap(grad if owned else grad.copy())
    elif (
        leaf._grad_stale
        and store._data.shape == grad.shape
        and np.can_cast(grad.dtype, store._data.dtype, "safe")  # (a master_grad's float32)
    ):
        copy_into(store._data, grad)  # (a float16 one widened by table: NumPy's is slow)
        leaf._grad_stale = False
        if grad.dtype != store._data.dtype:  # a float16 grad cast into a master grad's buffer
            report_cast(grad.dtype)  # (operator statistics count it: Paddle casts there too)
    elif store._node is not None:  # a recorded gradient: its array belongs to that graph
        leaf._grad = Tensor._wrap(store._data + grad)
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
        if t is None or t._node is not None or not t._grad_stale or id(t) in seen or t._hooks:
            continue
        seen.add(id(t))
        store = t._grad_value._data
        if store.shape == t._data.shape and store.dtype == t._data.dtype:
            dests = dests or [None] * len(inputs)
            dests[i] = store
    return None if dests is None else tuple(dests)


# Functions run after every completed backward(), e.g. AMP's master_grad cast to float32;
# ``graph_kept`` says whether that backward kept its graph (one may follow through it).
post_backward_hooks: list = []
graph_kept = False


def after_backward(kept: bool) -> None:
    """Run the post-backward hooks of a backward that kept its graph or not."""
    global graph_kept
    graph_kept = kept
    for hook in post_backward_hooks:
        hook()


def backward(
    root: Tensor, grad_tensor=None, retain_graph: bool = False, create_graph: bool = False
) -> None:
    """Accumulate d(root)/d(leaf) into ``leaf.grad`` for every leaf that needs a gradient."""
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
    grad_tensor = seeds.fit_seed(grad_tensor, root)
    start = None if grad_tensor is not None or create_graph else seeds.from_ones(root)
    if start is not None:  # the root's op gave its inputs' gradients for the seed of ones
        run_backward(*start, retain_graph, create_graph)
        if not retain_graph:
            root._node.free()
    else:
        seed = seeds.initial_grad(root, grad_tensor)
        if create_graph:
            seed = higher_order.as_seed(seed, grad_tensor)
        # NOTE: the graph built by create_graph refers to this one's tensors: keep it.
        run_backward([root], [seed], retain_graph or create_graph, create_graph)
    after_backward(retain_graph or create_graph)


class SlotGrads:
    """The gradient of a node with several results (a PyLayer's): one entry per result, None
    where none arrived. ``+`` merges two of them entry by entry."""

    __slots__ = ("grads",)

    def __init__(self, grads: list):
        self.grads = grads

    def __add__(self, other: SlotGrads) -> SlotGrads:
        merged = [
            a if b is None else b if a is None else a + b for a, b in zip(self.grads, other.grads)
        ]
        return SlotGrads(merged)


# Backward passes begun so far: ``graphed`` tells a forward graphed alone from a whole step.
backward_passes = 0


def run_backward(roots, seeds, retain_graph, create_graph, targets=None, blocked=frozenset()):
    """The backward pass of ``backward()`` and ``grad()``; see :func:`_run_backward`."""
    global backward_passes
    backward_passes += 1
    # NOTE: a gradient that overflows to inf (or NaN) is a value for the loss scaler to find,
    # as on the GPU; NumPy would also warn about it from inside the library.
    with np.errstate(over="ignore", invalid="ignore"):
        return _run_backward(roots, seeds, retain_graph, create_graph, targets, blocked)


def _run_backward(roots, seeds, retain_graph, create_graph, targets=None, blocked=frozenset()):
    """The backward pass: push ``seeds`` (d/d root) from ``roots`` to the leaves.

    All or nothing: if anything fails (a hook raises, a saved tensor changed, out of memory),
    every ``.grad`` is put back as it was (``leaf_writes``) and the graph is not freed, so
    the pass can be retried or skipped. Leaf hooks all run before any leaf with hooks gets
    its gradient; the graph is freed once the pass has succeeded.

    Args:
        roots, seeds: the tensors to differentiate and their incoming gradients (arrays; with
            ``create_graph``, Tensors).
        retain_graph: keep the nodes (else each is freed at the end).
        create_graph: run the ops' differentiable backward (``higher_order``), recording it.
        targets: None to accumulate into every leaf's ``.grad`` (``backward()``); else the
            tensors whose gradients are wanted (``grad()``): nothing is accumulated, and
            ``{id(target): gradient}`` is returned for those reached.
        blocked: ids of tensors no gradient flows into (``grad``'s no_grad_vars).
    """
    order = _topological_order([r._node for r in roots if r._node is not None], blocked)
    capture = targets is not None
    wanted = {id(t) for t in targets} if capture else ()
    at_node = {t._node: t for t in targets if t._node is not None} if capture else {}
    needed = _needed(order, wanted, blocked) if capture else None
    visited = None if needed is None else needed | at_node.keys()  # its hooks run too
    if create_graph:
        higher_order.check_supported(order if needed is None else needed)
    grads, found, leaves = {}, {}, {}  # per node; per target; per leaf summed before use
    written = {}  # per node: its result, when that was written in place (version not 0)
    writes = LeafWrites()

    def arrive(t: Tensor, g, owned: bool) -> None:  # ``g`` (conformed) reaches tensor ``t``
        if t._node is not None:
            previous = grads.get(t._node)
            if previous is not None:  # a second consumer: a deferred mask or cast is done now
                g = _plain(previous) + _plain(g)
            grads[t._node] = g
            if t._version:
                written[t._node] = t
        elif capture or create_graph or t._hooks:
            if not capture or id(t) in wanted:
                entry = leaves.get(id(t))
                leaves[id(t)] = (t, g if entry is None else entry[1] + g)
        elif t._grad_stale and g is t._grad_value._data:  # written in place by the op
            writes.note(t)
            t._grad_stale = False
        else:
            _accumulate_leaf(t, g, owned, writes)

    try:
        for root, seed in zip(roots, seeds):
            arrive(root, seed, owned=False)
        with higher_order.recording(create_graph):
            for node in order:
                grad = grads.pop(node, None)
                if grad is None or (visited is not None and node not in visited):
                    continue  # (grad(): a branch that leads to no wanted tensor: not run)
                if node.hooks:
                    grad = _plain(grad)  # a hook sees the gradient as it is
                    grad = run_hooks(node.hooks, grad, *_meta(grad), create_graph)
                if node in at_node:
                    found[id(at_node[node])] = grad
                if needed is None or node in needed:
                    versions.check(node, written.get(node), create_graph)
                    leaf = None
                    if node.op is Cast and not (capture or create_graph):
                        if type(grad) is widen_fold.WideGrad:  # widened by the GEMM after it
                            arrive(node.inputs[0], widen_fold.cast_done(grad), owned=True)
                            continue
                        leaf = cast_fold.target(node, grad)
                    if leaf is not None:  # its buffer's copy widens the gradient: no backward
                        arrive(leaf, grad, owned=False)
                    else:
                        _propagate(node, grad, create_graph, capture, blocked, arrive)
            # every leaf's hooks first, then the gradients: a raising hook leaves no .grad
            final = [
                (t, run_hooks(t._hooks, g, t._data.shape, t._data.dtype, create_graph))
                if t._hooks
                else (t, g)
                for t, g in leaves.values()
            ]
            for t, g in final:
                if capture:
                    found[id(t)] = g
                elif create_graph:
                    _accumulate_graph_leaf(t, g, writes)
                else:
                    _accumulate_leaf(t, g, False, writes)
    except BaseException:
        writes.undo()
        raise
    writes.commit()
    if not retain_graph:  # the nodes that ran: grad() leaves the graph below its targets
        for node in order if needed is None else needed:
            node.free()
    return found


def _propagate(node, grad, create_graph: bool, capture: bool, blocked, arrive) -> None:
    """Run ``node``'s backward on ``grad`` and hand each input its gradient."""
    if create_graph:
        node.ctx.grad_out = None
        in_grads = higher_order.backward_graph(node, grad)
    else:
        node.ctx.grad_out = None if capture else _destinations(node.inputs)
        deferred = relu_fold.defer(node, grad, capture)  # a ReLU's mask, left to its producer
        if deferred is not None:
            in_grads = (deferred,)
        elif positions := widen_fold.wanted(node, capture):  # the GEMM does the cast's too
            in_grads = widen_fold.backward(node, positions, lambda: _backward(node, grad), arrive)
        else:
            in_grads = _backward(node, grad)
    if not isinstance(in_grads, tuple):
        in_grads = (in_grads,)
    if hooks.grad_observers:  # the NaN/Inf checker, when on: the gradients that flow
        _observe(node, in_grads, grad)
    for t, g in zip(node.inputs, in_grads):
        if t is None or g is None or id(t) in blocked:
            continue
        if not isinstance(g, (SlotGrads, relu_fold.MaskedGrad, widen_fold.WideGrad)):  # (fit)
            g = higher_order.conform(g, t) if create_graph else _conform(g, t)
        # a fresh array may be adopted as a leaf's .grad; the incoming one or a view may not
        arrive(t, g, owned=not create_graph and g is not grad and getattr(g, "base", 0) is None)


def _plain(g):
    """``g`` with a deferred ReLU mask applied or a folded cast undone: as unfused ops made it."""
    return widen_fold.plain(relu_fold.plain(g))


def _backward(node, grad) -> tuple:
    """``node``'s array backward on ``grad``; a ReLU mask it takes goes in ``ctx.relu_mask``."""
    if type(grad) is not relu_fold.MaskedGrad:
        return node.op.backward(node.ctx, grad)
    if not relu_fold.takes_mask(node):
        return node.op.backward(node.ctx, relu_fold.plain(grad))
    node.ctx.relu_mask = grad.mask
    try:
        return node.op.backward(node.ctx, grad.grad)
    finally:
        node.ctx.relu_mask = None  # a retained graph's next backward may not fold


def _observe(node, in_grads: tuple, grad_out) -> None:
    """Show ``hooks.grad_observers`` the arrays ``node``'s backward returned for its inputs."""
    flowing = []
    for t, g in zip(node.inputs, in_grads):
        if t is None or g is None:
            flowing.append(None)
        elif isinstance(g, SlotGrads):
            flowing.extend(x._data if isinstance(x, Tensor) else x for x in g.grads)
        else:
            flowing.append(g._data if isinstance(g, Tensor) else g)
    hooks.inputs = (grad_out._data if isinstance(grad_out, Tensor) else grad_out,)
    hooks.node = node
    for observe in hooks.grad_observers:
        observe(node.op, tuple(flowing))
    hooks.inputs, hooks.node = (), None


def _meta(grad) -> tuple:
    """(shape, dtype) of a node's gradient: its result's, which the gradient has."""
    data = grad._data if isinstance(grad, Tensor) else grad
    return data.shape, data.dtype


def _needed(order: list, wanted, blocked) -> set:
    """The nodes whose backward leads to a wanted tensor (the rest are skipped)."""
    needed = set()
    for node in reversed(order):  # inputs before the nodes they feed
        for t in node.inputs:
            if t is None or id(t) in blocked:
                continue
            if id(t) in wanted or (t._node is not None and t._node in needed):
                needed.add(node)
                break
    return needed


def _accumulate_graph_leaf(leaf: Tensor, grad: Tensor, writes: LeafWrites) -> None:
    """``backward(create_graph=True)``: ``leaf.grad`` becomes a recorded sum (out of place,
    so it can be differentiated); a stale buffer is replaced."""
    writes.note(leaf)
    store = leaf._grad_value
    if store is None or leaf._grad_stale:
        leaf._grad = grad
    else:
        leaf._grad = store + grad


# (imported last: both use Tensor and this module's SlotGrads)
from . import higher_order  # noqa: E402
from .hooks import run_hooks  # noqa: E402
