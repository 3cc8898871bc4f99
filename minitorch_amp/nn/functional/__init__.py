"""Stateless neural-network functions (Paddle's ``paddle.nn.functional``, imported as ``F``).

Each function checks its arguments and runs one op of the op table through ``apply``, so AMP
sees every call. Layers in :mod:`minitorch_amp.nn` are thin wrappers around these.

Example:
    >>> import minitorch_amp as mt
    >>> import minitorch_amp.nn.functional as F
    >>> F.relu(mt.to_tensor([-1.0, 2.0])).numpy()
    array([0., 2.], dtype=float32)
"""

from .activation import gelu, leaky_relu, log_softmax, relu, sigmoid, silu, softmax, tanh
from .attention import scaled_dot_product_attention
from .common import dropout, embedding, linear, pad
from .conv import conv1d, conv2d
from .loss import cross_entropy, l1_loss, mse_loss
from .norm import batch_norm, layer_norm, normalize, rms_norm
from .pooling import adaptive_avg_pool2d, avg_pool2d, max_pool2d

__all__ = [
    "adaptive_avg_pool2d",
    "avg_pool2d",
    "batch_norm",
    "conv1d",
    "conv2d",
    "cross_entropy",
    "dropout",
    "embedding",
    "gelu",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "linear",
    "log_softmax",
    "max_pool2d",
    "mse_loss",
    "normalize",
    "pad",
    "relu",
    "rms_norm",
    "scaled_dot_product_attention",
    "sigmoid",
    "silu",
    "softmax",
    "tanh",
]
