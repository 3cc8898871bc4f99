"""Saved-tensor versions: backward refuses values that changed since the forward pass.

An op's forward saves arrays for its backward (``ctx.x, ctx.y = x, y``). If one of those
arrays is written in place before backward runs, the gradient is computed from the new
values, silently: ``y = x * x``, then ``x.set_value(5)``, then backward gives ``2 * 5``, not
``2 * x``. So every in-place write of a tensor's values bumps its ``_version``
(``Tensor.set_value`` and ``copy_``, ``x[index] = value``, ``Layer.set_state_dict``, an
``nn.initializer``), each
recorded node keeps the version of each Tensor input as the op ran (``dispatch.Node.versions``),
and the engine calls
:func:`check` before running a node's backward. A PyLayer's ``ctx.save_for_backward`` keeps
the versions of its tensors and ``ctx.saved_tensor()`` calls :func:`check_saved`.

A changed version alone is not an error: an op whose backward does not read the input (an
add) computes the right gradient whatever the input holds now, as in PyTorch. The engine
raises when the op's ``ctx`` holds the tensor's array, or a view of the same memory. With
``create_graph`` it also raises for a changed input that gets a gradient: the recorded
backward (``higher_order.py``) reads those tensors themselves.

The check costs one version read per Tensor input when an op is recorded, and one comparison
per input when its backward runs; the search of ``ctx`` happens only for a changed version.
A recorded ``x[index] = value`` moves ``x``'s earlier history onto a stand-in (see
``ops.shape.SetValue``); :func:`check` sends an op that took ``x`` before the write there.

NOTE: a version belongs to a Tensor, not to its memory. A write into a view op's result
(``set_value``, ``copy_``, ``x[index] = value`` on a reshape, transpose, slice or split piece)
gives that tensor its own array first (``Tensor._writable``), so its source is untouched. A
write into a tensor that view ops' results still share (``v = d.reshape([4])``, ``y = w * v``,
then ``d.set_value(...)``) bumps those results' versions too (``view_writes``), so backward
refuses ``v`` as PyTorch does (it shares one counter among views); ``x.detach()`` and ``x``
likewise. Not seen: a write to the raw array (``x.data[...] = ...``).
"""

from __future__ import annotations

from ..backend import is_array
from .ops.shape import SetValue
from .tensor import Tensor
from .view_writes import owner, shares_memory


def check(node, output: Tensor | None, create_graph: bool) -> None:
    """Raise if a tensor ``node``'s op saved was written in place since the op ran.

    ``output`` is the node's result when its version is not 0 (else None): results are made
    at version 0, and an op that saved its result (``exp``, ``tanh``) must see it unchanged.
    """
    versions = node.versions
    if versions is None:  # a PyLayer's node: check_saved checks what it saved
        for i, saved in enumerate(getattr(node.ctx, "input_versions", ())):
            t = node.inputs[i]  # (written by x[index] = v since the call: as it was)
            if t is not None and t._version != saved and getattr(t._node, "op", None) is SetValue:
                _as_it_was(node, i, t, saved)
        return
    inputs = node.inputs
    for i, saved in enumerate(versions):
        if saved is None:  # a constant
            continue
        t = inputs[i]
        if t is None:  # a tensor that gets no gradient, held weakly
            ref, saved = saved
            t = ref()
            if t is None:
                continue  # dead: nothing can have written it
        elif t._version != saved and t._node is not None and t._node.op is SetValue:
            t = _as_it_was(node, i, t, saved)
            inputs = node.inputs
        if t._version != saved and (
            (create_graph and inputs[i] is not None) or _holds(node.ctx, t._data)
        ):
            raise RuntimeError(_message(f"input {i} of '{node.op.name}'", t, saved))
    if output is not None and _holds(node.ctx, output._data):
        raise RuntimeError(_message(f"the result of '{node.op.name}'", output, 0))


def _as_it_was(node, i: int, t: Tensor, saved: int) -> Tensor:
    """Send input ``i`` of ``node`` (``t``, taken at version ``saved``) to ``t`` as it was.

    ``t[index] = value`` recorded a write (``ops.shape.SetValue``) that moved ``t``'s earlier
    history onto a stand-in, the write's input 0. An op that took ``t`` before the write
    must send its gradient there, not through the write: ``node.inputs`` is changed for good
    (the stand-in holds the same array at the version after the write, so the check that
    follows still refuses a saved array that the write changed).
    """
    write = t._node
    while write is not None and write.op is SetValue and write.ctx is not None:
        if saved > write.ctx.before or write.inputs[0] is None:
            break
        t = write.inputs[0]
        write = t._node
    node.inputs = node.inputs[:i] + (t,) + node.inputs[i + 1 :]
    return t


def check_saved(layer: str, tensors: tuple, versions: tuple) -> None:
    """Raise if a tensor given to a PyLayer's ``save_for_backward`` changed since."""
    for i, (t, saved) in enumerate(zip(tensors, versions)):
        if saved is not None and t._version != saved:
            raise RuntimeError(_message(f"saved tensor {i} of PyLayer {layer}", t, saved))


def _holds(ctx, array) -> bool:
    """Whether ``ctx`` (one level into tuples and lists) holds ``array`` or a view of its
    memory."""
    mine = owner(array)
    for value in vars(ctx).values():
        for v in value if isinstance(value, (tuple, list)) else (value,):
            if v is array or (is_array(v) and owner(v) is mine):
                return True
    return False


def _message(what: str, tensor: Tensor, saved: int) -> str:
    named = f" named {tensor.name!r}" if tensor.name else ""
    if shares_memory(tensor):
        named += (
            ", sharing its memory with another tensor (a view op's result: reshape, transpose, "
            "slice, split; or detach()): a write into that tensor writes into it"
        )
    return (
        f"a tensor needed for the gradient was modified in place: {what} (a {tensor.dtype} "
        f"tensor of shape {tensor.shape}{named}) was saved at version {saved} and is now at "
        f"version {tensor._version}, so backward would compute the gradient from the new "
        "values. set_value, copy_ and set_state_dict write in place: make the change after "
        "backward() (after the last backward of a graph kept with retain_graph=True), or run "
        "the forward pass again after it. No .grad was changed."
    )
