"""Tensor, the op table, the single dispatch point and the backward engine.

Also Paddle's ``paddle.autograd`` namespace: ``PyLayer``, ``PyLayerContext``, ``grad`` and
``backward`` (several tensors at once).
"""

# tensor first: it imports dispatch and the ops once the Tensor class exists.
from .tensor import Tensor  # isort: skip
from .dispatch import Node, apply
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .gradients import backward, grad
from .op import OP_TABLE, Context, Op
from .py_layer import PyLayer, PyLayerContext

# (imported for their effect: Tensor.topk, .split, ..., their double backward, and
# PyTorch's requires_grad with hints for the names Tensor lacks)
from . import higher_order_more, tensor_methods, tensor_torch  # isort: skip

__all__ = [
    "OP_TABLE",
    "Context",
    "Node",
    "Op",
    "PyLayer",
    "PyLayerContext",
    "Tensor",
    "apply",
    "backward",
    "enable_grad",
    "grad",
    "is_grad_enabled",
    "no_grad",
    "set_grad_enabled",
]
