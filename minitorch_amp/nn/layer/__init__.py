"""Layer classes: the ``Layer`` base and the built-in layers, one concept per module."""

from .activation import GELU, LogSoftmax, ReLU, Sigmoid, Softmax, Tanh
from .common import Dropout, Embedding, Flatten, Identity, Linear
from .container import LayerDict, LayerList, Sequential
from .hooks import HookRemoveHelper
from .layers import Layer
from .loss import CrossEntropyLoss, MSELoss
from .norm import BatchNorm1D, LayerNorm

__all__ = [
    "GELU",
    "BatchNorm1D",
    "CrossEntropyLoss",
    "Dropout",
    "Embedding",
    "Flatten",
    "HookRemoveHelper",
    "Identity",
    "Layer",
    "LayerDict",
    "LayerList",
    "LayerNorm",
    "Linear",
    "LogSoftmax",
    "MSELoss",
    "ReLU",
    "Sequential",
    "Sigmoid",
    "Softmax",
    "Tanh",
]
