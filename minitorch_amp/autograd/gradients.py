"""``grad`` (``paddle.grad``) and ``autograd.backward``: gradients of several outputs at once.

``grad(outputs, inputs)`` returns d(outputs)/d(inputs) as a list and leaves every ``.grad``
untouched; ``backward(tensors)`` accumulates into ``.grad`` like ``Tensor.backward`` but for
several roots in one pass. Both run the one engine (``engine.run_backward``).
"""

from __future__ import annotations

from ..backend import sync
from . import engine, higher_order
from .seeds import fit_seed
from .tensor import Tensor


def _tensors(value, what: str, allow_none: bool = False) -> list:
    """``value`` (a Tensor or a list/tuple of them) as a list, checked."""
    items = [value] if isinstance(value, Tensor) else value
    if not isinstance(items, (list, tuple)):
        raise TypeError(f"{what} must be a Tensor or a list/tuple of Tensors, got {type(value)}")
    for i, t in enumerate(items):
        if not isinstance(t, Tensor) and not (allow_none and t is None):
            raise TypeError(f"{what}[{i}] must be a Tensor, got {type(t).__name__}")
    return list(items)


def _seeds(outputs: list, grad_outputs, create_graph: bool, what: str) -> list:
    """One seed per output: ones where ``grad_outputs`` gives None (Paddle fills with 1)."""
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    else:
        grad_outputs = _tensors(grad_outputs, what, allow_none=True)
    if len(grad_outputs) != len(outputs):
        raise ValueError(
            f"{what} has {len(grad_outputs)} entries for {len(outputs)} outputs; give one per "
            "output (None for ones)"
        )
    seeds = []
    for i, (out, given) in enumerate(zip(outputs, grad_outputs)):
        data = out._data
        if given is None:
            seed = Tensor._xp_of(data).ones_like(data)
        else:
            given = fit_seed(given, out)  # a [1] for a 0-D output is accepted
            if given.shape != out.shape:
                raise ValueError(
                    f"{what}[{i}] has shape {given.shape} but outputs[{i}] has shape "
                    f"{out.shape}; they must be equal"
                )
            seed = sync.to_device(given._data, data, f"{what}[{i}]").astype(data.dtype, copy=False)
        seeds.append(higher_order.as_seed(seed, given) if create_graph else seed)
    return seeds


def grad(
    outputs,
    inputs,
    grad_outputs=None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    only_inputs: bool = True,
    allow_unused: bool = False,
    no_grad_vars=None,
) -> list:
    """The gradients of ``outputs`` with respect to ``inputs`` (Paddle's ``paddle.grad``).

    Unlike ``backward()``, nothing is accumulated into any ``.grad``: the gradients are
    returned, one per input, as a list. Hooks registered on the tensors still run.

    Args:
        outputs: a Tensor or a list of Tensors to differentiate.
        inputs: a Tensor or a list of Tensors (leaves or intermediate results).
        grad_outputs: d(loss)/d(outputs): None, a Tensor, or a list with one entry per output;
            None (or a None entry) means ones of the output's shape. Each has its output's
            shape (or ``[1]`` for a 0-D output, as Paddle accepts).
        retain_graph: keep the graph for another backward; None means ``create_graph``.
        create_graph: record the computation of the gradients, so they can be differentiated
            again (double backward; the ops that support it are listed in
            ``autograd.higher_order.DOUBLE_BACKWARD``). The returned tensors then have
            ``stop_gradient=False`` (as in Paddle, also a gradient that is constant, such as
            d(2x)/dx); otherwise they are plain values (``stop_gradient=True``).
        only_inputs: must be True (as in Paddle, where False is not supported).
        allow_unused: an input the outputs do not depend on gets None; when False, it is an
            error.
        no_grad_vars: tensors no gradient flows through (as if they were constants).

    Returns:
        A list with the gradient of each input (None for an unused one under allow_unused).

    Raises:
        ValueError: an input the outputs do not depend on (without allow_unused), mismatched
            grad_outputs. RuntimeError: the graph was freed by an earlier backward.
        NotImplementedError: ``create_graph=True`` through an op with no double backward.

    Example:
        >>> import minitorch_amp as mt
        >>> x = mt.to_tensor([3.0], stop_gradient=False)
        >>> y = x * x * x
        >>> (dy,) = mt.grad(y, x, create_graph=True)   # 3 x^2
        >>> (d2y,) = mt.grad(dy, x)                    # 6 x
        >>> dy.numpy(), d2y.numpy(), x.grad
        (array([27.], dtype=float32), array([18.], dtype=float32), None)
    """
    if not only_inputs:
        raise NotImplementedError(
            "grad(only_inputs=False) is not supported (nor is it in Paddle): the gradients of "
            "the inputs are returned and no .grad is written; use backward() for that"
        )
    outputs = _tensors(outputs, "outputs")
    inputs = _tensors(inputs, "inputs")
    blocked = frozenset(id(t) for t in _tensors(no_grad_vars or [], "no_grad_vars"))
    if not outputs or not inputs:
        raise ValueError("grad needs at least one output and one input")
    seeds = _seeds(outputs, grad_outputs, create_graph, "grad_outputs")
    live = [(o, s) for o, s in zip(outputs, seeds) if not o.stop_gradient]
    if retain_graph is None:
        retain_graph = create_graph
    _check_reached(live, inputs, blocked, allow_unused)
    found = engine.run_backward(
        [o for o, _ in live],
        [s for _, s in live],
        retain_graph or create_graph,
        create_graph,
        targets=inputs,
        blocked=blocked,
    )
    result = []
    for t in inputs:
        g = found.get(id(t))
        if g is not None and not create_graph:
            g = Tensor._wrap(g.copy())  # never an array the graph or the caller shares
        elif g is not None and g.stop_gradient:
            # Paddle: differentiable even when constant in the graph (d(2x)/dx); a copy, since
            # g may be the caller's own grad_outputs tensor
            g = Tensor._wrap(g._data.copy())
            g.stop_gradient = False
        result.append(g)
    return result


def _check_reached(live: list, inputs: list, blocked, allow_unused: bool) -> None:
    """Before anything runs: every input must be reachable from the outputs."""
    order = engine._topological_order([o._node for o, _ in live if o._node is not None], blocked)
    reached = {id(o) for o, _ in live}
    for node in order:
        reached.update(id(t) for t in node.inputs if t is not None and id(t) not in blocked)
    for i, t in enumerate(inputs):
        if id(t) in reached or allow_unused:
            continue
        why = (
            " (it has stop_gradient=True: set stop_gradient=False before computing with it)"
            if t.stop_gradient
            else ""
        )
        raise ValueError(
            f"The {i}-th input does not appear in the backward graph{why}. Please check the "
            "input tensor or set allow_unused=True to get None result."
        )


def backward(tensors, grad_tensors=None, retain_graph: bool = False) -> None:
    """Accumulate the gradients of several ``tensors`` into ``.grad`` in one pass
    (``paddle.autograd.backward``). ``grad_tensors``: None, or one Tensor (or None: ones)
    per tensor."""
    tensors = _tensors(tensors, "tensors")
    for i, t in enumerate(tensors):
        if t.stop_gradient:
            raise RuntimeError(
                f"tensors[{i}] has stop_gradient=True: nothing it depends on needs a gradient"
            )
    seeds = _seeds(tensors, grad_tensors, False, "grad_tensors")
    engine.run_backward(tensors, seeds, retain_graph, False)
    engine.after_backward(retain_graph)
