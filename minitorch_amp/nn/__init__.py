"""Neural-network building blocks with Paddle's names (``paddle.nn``).

* :class:`Layer`, the base class, and the built-in layers (:mod:`.layer`);
* :class:`Parameter` and :class:`ParamAttr`, trainable tensors and how to create them;
* :mod:`.functional`, the stateless functions layers call; :mod:`.initializer`;
* gradient clipping: :class:`ClipGradByGlobalNorm`, :class:`ClipGradByNorm`,
  :class:`ClipGradByValue`, ``nn.utils.clip_grad_norm_`` and ``nn.utils.clip_grad_value_``.

Example:
    >>> import minitorch_amp as mt
    >>> from minitorch_amp import nn
    >>> mt.seed(0)
    >>> model = nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 1))
    >>> loss = nn.MSELoss()(model(mt.ones([3, 2])), mt.zeros([3, 1]))
    >>> loss.backward()
    >>> model[0].weight.grad.shape
    [2, 4]
"""

from . import functional, initializer, utils
from .clip import ClipGradByGlobalNorm, ClipGradByNorm, ClipGradByValue
from .layer import (
    GELU,
    AdaptiveAvgPool2D,
    AvgPool2D,
    BatchNorm,
    BatchNorm1D,
    BatchNorm2D,
    BatchNorm3D,
    Conv1D,
    Conv2D,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    Flatten,
    Identity,
    L1Loss,
    Layer,
    LayerDict,
    LayerList,
    LayerNorm,
    LeakyReLU,
    Linear,
    LogSoftmax,
    MaxPool2D,
    MSELoss,
    Pad1D,
    Pad2D,
    Pad3D,
    ReLU,
    RMSNorm,
    Sequential,
    Sigmoid,
    SiLU,
    Softmax,
    Tanh,
)
from .layer.attention import MultiHeadAttention
from .layer.transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from .param_attr import ParamAttr
from .parameter import Parameter

__all__ = [
    "GELU",
    "AdaptiveAvgPool2D",
    "AvgPool2D",
    "BatchNorm",
    "BatchNorm1D",
    "BatchNorm2D",
    "BatchNorm3D",
    "ClipGradByGlobalNorm",
    "ClipGradByNorm",
    "ClipGradByValue",
    "Conv1D",
    "Conv2D",
    "CrossEntropyLoss",
    "Dropout",
    "Embedding",
    "Flatten",
    "Identity",
    "L1Loss",
    "Layer",
    "LayerDict",
    "LayerList",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "LogSoftmax",
    "MSELoss",
    "MaxPool2D",
    "MultiHeadAttention",
    "Pad1D",
    "Pad2D",
    "Pad3D",
    "ParamAttr",
    "Parameter",
    "RMSNorm",
    "ReLU",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Tanh",
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
    "functional",
    "initializer",
    "utils",
]


def __getattr__(name: str):
    """A PyTorch name this package spells differently raises an AttributeError that says
    what to use (``minitorch_amp.pytorch_hints``); called only for names not found."""
    from ..pytorch_hints import missing

    raise missing("minitorch_amp.nn", name, names=globals())
