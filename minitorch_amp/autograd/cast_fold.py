"""An AMP cast's backward folded into the copy into its parameter's gradient buffer.

Under O1 (and OD) a white-list op such as Linear reads a float16 copy of each float32
parameter: ``auto_cast`` records a ``Cast``. Unfolded, the parameter's gradient arrives in
two steps: the cast's backward widens the float16 gradient into a new float32 array (a pass
over the weight: one launch on the GPU), then the engine copies that array into the
``.grad`` buffer ``clear_grad()`` left stale (another pass, another launch). The copy can
widen as it goes (float16 and bfloat16 are exact in float32), so the engine hands the
16-bit gradient straight to the buffer and skips the cast's backward: one pass, one launch
and one node's Python less per parameter, the same bits. Operator statistics still count
the cast (the copy reports it, as Paddle's ``cast_grad`` kernel is counted).

The engine folds a cast node (:func:`target`) only where the copy gives what the cast and
the copy would:

* a plain ``backward()`` (not ``paddle.grad``, not ``create_graph``) with no gradient
  observer installed (the NaN/Inf checker looks at every op's gradients, the cast's too);
* the node is a ``Cast`` from float32, its gradient a 16-bit float array, and its input a
  leaf without hooks whose ``.grad`` is a stale float32 buffer of the leaf's shape.

Everywhere else the cast's backward runs: the first backward of a new parameter (no buffer
yet), an accumulation into a gradient held from an earlier ``backward()``, a hook on the
parameter, a cast the user wrote to another dtype.
"""

from __future__ import annotations

from ..backend.dtypes import bfloat16, float16, float32
from .dispatch import hooks
from .ops.cast import Cast


def target(node, grad):
    """The float32 leaf whose stale ``.grad`` buffer can take ``grad`` (the gradient of the
    ``Cast`` ``node``'s result) as it is, or None: run the cast's backward."""
    if getattr(grad, "dtype", None) not in (float16, bfloat16):  # (a ReLU mask: no dtype)
        return None
    leaf = free_buffer(node)
    return leaf if leaf is not None and leaf._grad_value._data.shape == grad.shape else None


def free_buffer(node):
    """The leaf behind the float32 ``Cast`` ``node`` when its ``.grad`` is a stale float32
    buffer that nothing else sees (no hook, no gradient observer), else None. The buffer
    may take the cast's gradient widened: here by a copy, or straight from the GEMM that
    computes it (``widen_fold``)."""
    if node.op is not Cast or hooks.grad_observers or node.ctx.source != float32:
        return None
    leaf = node.inputs[0]
    if leaf is None or leaf._node is not None or leaf._hooks or not leaf._grad_stale:
        return None
    store = leaf._grad_value._data
    return leaf if store.dtype == float32 and store.shape == leaf._data.shape else None
