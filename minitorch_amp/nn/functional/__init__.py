"""Stateless neural-network functions (Paddle's ``paddle.nn.functional``, imported as ``F``).

Each function checks its arguments and runs one op of the op table through ``apply``, so AMP
sees every call. Layers in :mod:`minitorch_amp.nn` are thin wrappers around these.

Example:
    >>> import minitorch_amp as mt
    >>> import minitorch_amp.nn.functional as F
    >>> F.relu(mt.to_tensor([-1.0, 2.0])).numpy()
    array([0., 2.], dtype=float32)
"""

from .activation import gelu, log_softmax, relu, sigmoid, softmax, tanh
from .common import dropout, embedding, linear
from .loss import cross_entropy, mse_loss
from .norm import batch_norm, layer_norm

__all__ = [
    "batch_norm",
    "cross_entropy",
    "dropout",
    "embedding",
    "gelu",
    "layer_norm",
    "linear",
    "log_softmax",
    "mse_loss",
    "relu",
    "sigmoid",
    "softmax",
    "tanh",
]
