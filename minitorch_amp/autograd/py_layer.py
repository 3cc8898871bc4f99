"""``PyLayer``: a custom op written in Python, its forward and backward given by the user.

Paddle's ``paddle.autograd.PyLayer``::

    class Cube(PyLayer):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, dy):
            (x,) = ctx.saved_tensor()
            return dy * 3 * x * x

    y = Cube.apply(x)

The rules, Paddle's:

* ``forward(ctx, *args, **kwargs)`` runs with grad mode off; its Tensor arguments (positional
  or keyword) are the op's inputs, its Tensor results the op's outputs (a Tensor, or a
  tuple/list holding at least one Tensor; other values pass through).
* ``backward(ctx, *grads)`` gets one gradient per Tensor output, in that output's dtype (zeros
  for an output that received none, unless ``ctx.set_materialize_grads(False)``: then None),
  and returns one gradient per Tensor input, in order: a Tensor, or None. An input with
  ``stop_gradient=True`` must get None. Each gradient is cast to its input's dtype.
* ``backward`` runs with grad mode off, unless the backward is itself being recorded
  (``create_graph=True``): then its ops are recorded, and a PyLayer is twice differentiable
  when its backward is written with differentiable ops.
* AMP: a PyLayer is not in any AMP list, so ``auto_cast`` does not cast its inputs; the ops
  *inside* ``forward`` are cast as usual. ``backward`` runs under the AMP state current at
  backward time (normally none, since backward is called outside ``auto_cast``).

How it is recorded: one node for the call (:class:`PyLayerOp`, whose result is a hidden
tensor holding nothing) and, per differentiable output, one :class:`PickOp` node taking that
hidden tensor; gradients meet at the call node as ``engine.SlotGrads``, one entry per output.
"""

from __future__ import annotations

from ..backend.dtypes import is_floating
from . import engine, higher_order, versions
from .dispatch import Node
from .grad_mode import _enabled, no_grad
from .op import NONE, Context, Op
from .tensor import Tensor


class PyLayerContext:
    """The ``ctx`` that ``forward`` and ``backward`` receive; any attribute may be set on it."""

    container = None
    not_inplace_tensors: tuple = ()
    non_differentiable: tuple = ()
    materialize_grads = True
    _layer = "PyLayer"  # the subclass's name, set by apply (for messages)
    _saved_versions: tuple = ()

    def save_for_backward(self, *tensors) -> None:
        """Keep ``tensors`` for ``backward`` (call it once, in ``forward``), and their
        versions: :meth:`saved_tensor` refuses one written in place since."""
        self.container = tensors
        self._saved_versions = tuple(getattr(t, "_version", None) for t in tensors)

    def saved_tensor(self):
        """The tensors given to :meth:`save_for_backward` (a tuple), or None.

        Raises:
            RuntimeError: one of them was written in place (``set_value``, ...) since it was
                saved: backward would compute from the new values.
        """
        if self.container is not None:
            versions.check_saved(self._layer, self.container, self._saved_versions)
        return self.container

    def mark_not_inplace(self, *tensors) -> None:
        """Inputs that ``forward`` returns as they are come back as new tensors (sharing the
        data) rather than being rewired in place."""
        self.not_inplace_tensors = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        """Outputs that get no gradient (``stop_gradient=True``); ``backward`` still receives
        a gradient for each of them: zeros."""
        self.non_differentiable = tensors

    def set_materialize_grads(self, value: bool) -> None:
        """False: ``backward`` gets None instead of zeros for an output without a gradient."""
        self.materialize_grads = bool(value)


class PyLayer:
    """Subclass it with static ``forward(ctx, ...)`` and ``backward(ctx, ...)``; call
    ``apply(...)``. See the module docstring for the rules.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp.autograd import PyLayer
        >>> class Cube(PyLayer):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         return x * x * x
        ...     @staticmethod
        ...     def backward(ctx, dy):
        ...         (x,) = ctx.saved_tensor()
        ...         return dy * 3 * x * x
        >>> x = mt.to_tensor([2.0], stop_gradient=False)
        >>> Cube.apply(x).backward()
        >>> x.grad.numpy()
        array([12.], dtype=float32)
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for PyLayer.")

    @staticmethod
    def backward(ctx, *args):
        raise NotImplementedError("You must implement the backward function for PyLayer.")

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run ``forward`` on the arguments and record the call for backward."""
        inputs = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)]
        _refuse_nested(cls, (*args, *kwargs.values()), "arguments")
        ctx = PyLayerContext()
        ctx._layer = cls.__name__
        with no_grad():
            result = cls.forward(ctx, *args, **kwargs)
        items = list(result) if isinstance(result, (tuple, list)) else [result]
        _refuse_nested(cls, items, "outputs")
        if not any(isinstance(t, Tensor) for t in items):
            raise ValueError(  # (Paddle's InvalidArgument, as the checks of backward's result)
                f"{cls.__name__}: At least one output of `PyLayer.forward` is a Tensor: return "
                f"a Tensor, or a tuple/list holding one (forward returned {result!r:.60})"
            )
        wants = tuple(
            None if t.stop_gradient or not is_floating(t._data.dtype) else t for t in inputs
        )
        record = _enabled.get() and any(w is not None for w in wants)
        for i, out in enumerate(items):
            if not isinstance(out, Tensor):
                continue
            if not any(out is t for t in inputs) and out._node is None:
                continue  # a new tensor, as forward normally returns
            leaf = out._node is None and not out.stop_gradient
            if record and leaf and not any(out is t for t in ctx.not_inplace_tensors):
                raise ValueError(
                    f"{cls.__name__}: Leaf Var that doesn't stop gradient can't use inplace "
                    "strategy: forward returned its input as it is. Call "
                    "ctx.mark_not_inplace(x) in forward, or return a new tensor."
                )
            items[i] = Tensor._wrap(out._data)  # a new tensor on the same data
        if record:
            _record(cls, ctx, wants, items)
        if isinstance(result, (tuple, list)):
            return type(result)(items)
        return items[0]


def _refuse_nested(cls, values, what: str) -> None:
    for v in values:
        if isinstance(v, (tuple, list)) and any(isinstance(t, Tensor) for t in v):
            raise TypeError(
                f"{cls.__name__}: a list or tuple of Tensors among the {what} is not supported "
                "here (Paddle treats it as one slot); pass the Tensors as separate "
                f"{'arguments' if what == 'arguments' else 'outputs'}"
            )


def _record(cls, ctx: PyLayerContext, wants: tuple, items: list) -> None:
    """Attach the call node and one pick node per differentiable output."""
    tensors = [t for t in items if isinstance(t, Tensor)]
    call = Context()
    call.layer, call.user = cls, ctx
    call.metas = [(t._data.shape, t._data.dtype, Tensor._xp_of(t._data)) for t in tensors]
    call.inputs = [(w is not None, w) for w in wants]
    call.input_versions = tuple(None if w is None else w._version for w in wants)
    hidden = Tensor._wrap(call.metas[0][2].empty((0,), dtype=tensors[0].dtype))  # a joint only
    hidden._node = Node(PyLayerOp, call, wants)
    hidden.stop_gradient = False
    for j, t in enumerate(tensors):
        # NOTE: an integer or bool output keeps the graph too (Paddle): cast back to a float,
        # it carries a gradient to backward, in its own dtype
        if any(t is n for n in ctx.non_differentiable):
            t.stop_gradient = True
            continue
        pick = Context()
        pick.index, pick.count = j, len(tensors)
        t._node = Node(PickOp, pick, (hidden,))
        t.stop_gradient = False


class PickOp(Op, register=False):
    """Output ``index`` of a PyLayer call: its gradient goes to that entry of the call's."""

    name = "py_layer_output"
    amp = NONE

    @staticmethod
    def backward(ctx, grad):
        grads = [None] * ctx.count
        grads[ctx.index] = grad
        return engine.SlotGrads(grads)


class PyLayerOp(Op, register=False):
    """A PyLayer call: runs the user's ``backward`` on the gathered output gradients."""

    name = "py_layer"
    amp = NONE

    @staticmethod
    def backward(ctx, grad):
        grads = [None if g is None else Tensor._wrap(g) for g in grad.grads]
        with no_grad():
            result = _call_backward(ctx, grads)
        # a view: the engine copies it before making it anyone's .grad (the user may have
        # returned an array they still hold, such as a saved tensor)
        return tuple(None if g is None else g._data.view() for g in result)


def _call_backward(call: Context, grads: list) -> tuple:
    """The user's backward on ``grads`` (zeros where None, if materialized), checked."""
    name, user = call.layer.__name__, call.user
    for j, (shape, dtype, xp) in enumerate(call.metas):
        if grads[j] is None and user.materialize_grads:
            grads[j] = Tensor._wrap(xp.zeros(shape, dtype=dtype))
    result = call.layer.backward(user, *grads)
    result = list(result) if isinstance(result, (tuple, list)) else [result]
    if len(result) > len(call.inputs):
        raise ValueError(
            f"{name}: The number of outputs of `PyLayer.backward` should be "
            f"{len(call.inputs)} (one per Tensor input of forward), but received {len(result)}."
        )
    out = []
    for i, (wanted, t) in enumerate(call.inputs):
        g = result[i] if i < len(result) else None
        if not wanted:
            if g is not None and i < len(result):
                raise ValueError(
                    f"{name}'s backward function should return None at {i} position, because "
                    "it's forward Tensor's stopgradient is true."
                )
            out.append(None)
            continue
        if i >= len(result):
            raise ValueError(
                f"{name}'s backward function should not return empty at {i} position: "
                "return one gradient (or None) per Tensor input of forward"
            )
        if g is not None and not isinstance(g, Tensor):
            raise ValueError(
                f"{name}: We can only support Tensor or None for backward output, but got "
                f"{type(g).__name__} at position {i}: return one gradient Tensor (or None) per "
                "Tensor input of forward"
            )
        if g is not None and g.shape != t.shape:
            raise ValueError(
                f"{name}: backward returned a gradient of shape {g.shape} at position {i} for "
                f"an input of shape {t.shape}; they must be equal"
            )
        out.append(g)
    return tuple(out)


# Under create_graph the engine hands Tensors, with grad mode on: the user's backward is
# recorded as it runs, so the same two functions serve.
higher_order.DOUBLE_BACKWARD[PickOp] = lambda node, grad: PickOp.backward(node.ctx, grad)
higher_order.DOUBLE_BACKWARD[PyLayerOp] = lambda node, grad: _call_backward(
    node.ctx, list(grad.grads)
)
