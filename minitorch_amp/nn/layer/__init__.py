"""Layer classes: the ``Layer`` base and the built-in layers, one concept per module."""

from .activation import GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh
from .common import Dropout, Embedding, Flatten, Identity, Linear
from .container import LayerDict, LayerList, Sequential
from .conv import Conv1D, Conv2D
from .hooks import HookRemoveHelper
from .layers import Layer
from .loss import CrossEntropyLoss, L1Loss, MSELoss
from .norm import BatchNorm, BatchNorm1D, BatchNorm2D, BatchNorm3D, LayerNorm
from .padding import Pad1D, Pad2D, Pad3D
from .pooling import AdaptiveAvgPool2D, AvgPool2D, MaxPool2D
from .rms_norm import RMSNorm

__all__ = [
    "GELU",
    "AdaptiveAvgPool2D",
    "AvgPool2D",
    "BatchNorm",
    "BatchNorm1D",
    "BatchNorm2D",
    "BatchNorm3D",
    "Conv1D",
    "Conv2D",
    "CrossEntropyLoss",
    "Dropout",
    "Embedding",
    "Flatten",
    "HookRemoveHelper",
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
    "Pad1D",
    "Pad2D",
    "Pad3D",
    "RMSNorm",
    "ReLU",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Tanh",
]
