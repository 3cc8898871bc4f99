"""Tensor, the op table, the single dispatch point and the backward engine."""

# tensor first: it imports dispatch and the ops once the Tensor class exists.
from .tensor import Tensor  # isort: skip
from .dispatch import Node, apply
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .op import OP_TABLE, Context, Op

__all__ = [
    "OP_TABLE",
    "Context",
    "Node",
    "Op",
    "Tensor",
    "apply",
    "enable_grad",
    "is_grad_enabled",
    "no_grad",
    "set_grad_enabled",
]
