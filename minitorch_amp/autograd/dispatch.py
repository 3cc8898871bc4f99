"""``apply``: the single point every op runs through.

It promotes mixed integer/floating inputs (Paddle's rule, :func:`promote`), unwraps tensors
into arrays, runs the op's forward, wraps the result, and, when any input needs a gradient and
grad mode is on, records a :class:`Node` so backward can find its way. AMP casting, operator
statistics and NaN/Inf checks hook in here and nowhere else.
"""

from __future__ import annotations

import contextvars
from weakref import ref as _weak

import numpy as np

from ..backend.cast import cast
from ..backend.dtypes import bfloat16, default_float, float32, result_type
from .grad_mode import _enabled
from .op import NONE, Context, Op
from .ops.cast import Cast
from .tensor import Tensor

# The AMP state of the current context (None: AMP off). ``minitorch_amp.amp.auto_cast`` sets it;
# autograd never imports amp, it only calls the hook amp installs.
autocast_state = contextvars.ContextVar("minitorch_amp_autocast_state", default=None)


class Hooks:
    """What higher layers plug into ``apply`` (installed once, at import of ``minitorch_amp.amp``).

    Attributes:
        autocast: ``autocast(op, inputs, state) -> inputs``, the per-op AMP cast rule; called
            only while ``autocast_state`` is set and for ops whose category is not NONE.
        observers: functions ``observe(op, out)`` run after every forward (operator statistics,
            the NaN/Inf checker). Empty unless a debugging tool is on.
        grad_observers: functions ``observe(op, grads)`` run after every op's backward with
            the gradients it returned, one per input (the NaN/Inf checker's ``*_grad`` ops).
        counters: functions ``count(name, dtype)`` told of the kernels that run outside
            ``apply`` (the optimizer's update ``adamw_``, the scaler's unscale), for operator
            statistics.
        inputs: while observers run, what the op being observed read: after a forward, its
            inputs as the forward saw them (arrays after AMP's casts, or constants); after a
            backward, the gradient of its output (one array). The model properties of
            ``minitorch_amp.testing`` print their ranges next to the first inf/NaN.
        node: while grad observers run, the :class:`Node` whose backward they see (the op
            trace of ``minitorch_amp.testing`` tells AMP's own casts apart by it).
        new_arrays: functions ``release(tensors)`` told of tensors about to get new arrays
            (a ``Layer.to`` conversion): the optimizers drop the step plans holding the old
            ones (``optimizer.state.release_plans``), so the conversion frees them.
    """

    autocast = None
    observers: tuple = ()
    grad_observers: tuple = ()
    counters: tuple = ()
    inputs: tuple = ()
    node = None
    new_arrays: tuple = ()


hooks = Hooks()


class Node:
    """One recorded op application: the op, what its forward saved, and the inputs to grad.

    ``inputs`` holds, per positional input, the Tensor when it needs a gradient, else None.
    ``versions`` holds, per positional input, what backward needs to check that a tensor the
    op saved was not written in place since (``versions.check``): None for a constant, the
    version as the op ran for a Tensor in ``inputs``, ``(weak reference, version)`` for a
    Tensor that gets no gradient (a data batch, a mask: while it lives). A PyLayer's nodes
    have none (its ``save_for_backward`` checks its own). After a successful backward without
    ``retain_graph`` the node is freed: ``ctx`` and ``inputs`` are dropped so the saved arrays
    can be reclaimed. ``hooks`` holds the hooks registered on the node's result with
    ``Tensor.register_hook`` (None when there are none).
    """

    __slots__ = ("op", "ctx", "inputs", "versions", "freed", "hooks")

    def __init__(self, op: type[Op], ctx: Context, inputs: tuple, versions=None):
        self.op = op
        self.ctx = ctx
        self.inputs = inputs
        self.versions = versions
        self.freed = False
        self.hooks = None

    def free(self) -> None:
        self.ctx = None
        self.inputs = None
        self.freed = True

    def __repr__(self) -> str:
        return f"<Node {self.op.name}{' (freed)' if self.freed else ''}>"


def _floating(dtype) -> bool:
    """A floating dtype: kind ``'f'``, or bfloat16 (whose kind is ``'V'``, see backend.dtypes)."""
    return dtype.kind == "f" or dtype == bfloat16


def _integers_to_float(op: type[Op], inputs: tuple, positions) -> bool:
    """Whether integer and bool tensors alone go to the default float dtype: true division,
    or a Python float among the inputs (see :func:`promote`)."""
    if getattr(op, "integers_to_float", False):
        return True
    return any(inputs[i].__class__ is float for i in positions if i < len(inputs))


def promote(op: type[Op], inputs: tuple) -> tuple:
    """Paddle's type promotion of the inputs ``op.promote`` names, by recorded casts.

    =============================  =========================  ==========================
    inputs                         result dtype               example
    =============================  =========================  ==========================
    integer or bool with floating  the (widest) floating one  int64, float16 -> float16
    floating with floating         the widest                 float16, float32 -> float32
    integer or bool only, with a   the default float dtype    int32 / 2 -> float32,
    Python float or divided                                   int64 * 0.5 -> float32
    integer with integer or bool   the widest integer         int32, int64 -> int64
    =============================  =========================  ==========================

    "Divided": an op whose ``integers_to_float`` is True (true division). The third row is
    Paddle's (its ``Tensor`` operators cast integer tensors to float32 there) and PyTorch's.
    NOTE: NumPy agrees on the second and last rows, so only integer and bool inputs are cast
    here; left to NumPy, int64 with float32 gives float64, a dtype AMP never casts, and so do
    ``int32 / 2`` and ``int32 * 0.5``. This runs before AMP's hook, which therefore decides on
    the promoted inputs. Python numbers are not tensors and are not promoted: NumPy treats
    them as weak (``x * 2.5`` stays float16 for a float16 x).
    """
    positions = range(len(inputs)) if op.promote is None else op.promote
    floating = integer = False  # two flags, no lists: this runs for every add and multiply
    for i in positions:
        if i < len(inputs) and isinstance(inputs[i], Tensor):
            if _floating(inputs[i]._data.dtype):
                floating = True
            else:
                integer = True  # or bool
    if not integer or not (floating or _integers_to_float(op, inputs, positions)):
        return inputs
    tensors = [i for i in positions if i < len(inputs) and isinstance(inputs[i], Tensor)]
    if floating:
        dtype = result_type(*(inputs[i].dtype for i in tensors if _floating(inputs[i].dtype)))
    else:
        dtype = default_float()
    promoted = list(inputs)
    for i in tensors:
        if not _floating(inputs[i].dtype):
            promoted[i] = apply(Cast, inputs[i], dtype=dtype)
    return tuple(promoted)


_HALF = np.dtype(np.float16)


@np.errstate(all="ignore")  # (a decorator costs half of a ``with`` each call)
def _forward_quietly(op, ctx, arrays, attrs):
    return op.forward(ctx, *arrays, **attrs)


def apply(op: type[Op], *inputs, **attrs) -> Tensor:
    """Run ``op`` on ``inputs`` (Tensors or plain constants) and record it for backward.

    Only floating results are recorded; an op whose result is integer or bool (a comparison,
    an argmax) returns a tensor with ``stop_gradient=True``.
    """
    if op.promote != ():
        inputs = promote(op, inputs)
    state = autocast_state.get()
    if state is not None and op.amp != NONE:
        inputs = hooks.autocast(op, inputs, state)
    # One pass over the inputs: the arrays, which inputs get a gradient, each tensor's version
    # (for backward's check that what the op saved is unchanged), and whether a 16-bit array
    # is among them (where overflow to inf is expected).
    grad_mode = _enabled.get()
    arrays, wants, versions = [], [], []
    record = half = bf16 = wider = False  # bf16, wider: bfloat16 / other floating tensors
    for x in inputs:
        if isinstance(x, Tensor):
            a = x._data
            dtype = a.dtype
            if dtype is bfloat16:
                bf16 = True
            elif dtype.kind == "f":
                wider = True
            if not grad_mode:  # nothing is recorded: no versions to keep
                wants.append(None)
            elif not x.stop_gradient and (
                dtype.kind == "f" or dtype == bfloat16 or x._node is not None
            ):  # (the last: a PyLayer's integer output, cast back to a float)
                record = True
                wants.append(x)
                versions.append(x._version)
            else:  # weakly: a dead tensor cannot have changed, and its array may be freed
                wants.append(None)
                versions.append((_weak(x), x._version))
        else:
            a = x
            dtype = getattr(x, "dtype", None)
            wants.append(None)
            versions.append(None)
        if dtype is _HALF or dtype is bfloat16:  # their dtypes are one object each
            half = True
        arrays.append(a)
    ctx = Context()
    try:
        if state is not None or hooks.observers or half:
            # NOTE: float16 overflows to inf, and in an auto_cast region float32 ops meet
            # those infs (inf - inf is NaN): values, as on the GPU, that the loss scaler and
            # the tensor checker look for. NumPy would also warn about each one, from inside
            # the library. With a debugging tool on (the tensor checker reports every
            # NaN/Inf) float32 is quiet too.
            out = Tensor._wrap(_forward_quietly(op, ctx, arrays, attrs))
        else:
            out = Tensor._wrap(op.forward(ctx, *arrays, **attrs))
    except AttributeError as exc:  # e.g. "'list' object has no attribute 'shape'"
        if any(x.__class__ is list for x in inputs):  # ops that take host data still do
            raise TypeError(
                f"{op.name}: got a Python list where a Tensor goes; make one first with "
                "minitorch_amp.to_tensor(data) (PyTorch's torch.tensor(data))"
            ) from exc
        raise
    if bf16 and not wider and op is not Cast and out._data.dtype == float32:
        # NOTE: NumPy has no weak bfloat16 scalars: ``bf16_array * 0.5`` is float32
        # (``ml_dtypes`` promotes the Python float like a float32), and so is every constant
        # an op's forward multiplies by. When the floating tensor inputs are all bfloat16,
        # the result is rounded back to bfloat16 here, once, as a GPU kernel computing in
        # float and storing bfloat16 would do. Backward needs no such step: the engine casts
        # each gradient to its input's dtype.
        out._data = cast(out._data, bfloat16)
    if record and _floating(out._data.dtype):
        # keep the inputs that get a gradient: floating Tensors with stop_gradient=False;
        # backward may skip the gradients nobody asked for (the first layer's input grad)
        ctx.needs_grad = tuple(w is not None for w in wants)
        out._node = Node(op, ctx, tuple(wants), versions)
        out.stop_gradient = False
    if hooks.observers:
        hooks.inputs = tuple(arrays)
        for observe in hooks.observers:
            observe(op, out)
        hooks.inputs = ()  # not kept alive
    return out
