"""Activation layers: thin wrappers that call :mod:`minitorch_amp.nn.functional`.

They hold no parameters; they exist so activations can sit inside a ``Sequential``.

Example:
    >>> import minitorch_amp as mt
    >>> from minitorch_amp import nn
    >>> nn.ReLU()(mt.to_tensor([-1.0, 2.0])).numpy()
    array([0., 2.], dtype=float32)
"""

from __future__ import annotations

from ...autograd.tensor import Tensor
from .. import functional as F
from .layers import Layer


def _name_suffix(name) -> str:
    return f"name={name}" if name else ""


class ReLU(Layer):
    """``max(x, 0)``."""

    def __init__(self, name=None):
        super().__init__()
        self._name = name

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x)

    def extra_repr(self) -> str:
        return _name_suffix(self._name)


class LeakyReLU(Layer):
    """``x`` where ``x > 0``, else ``negative_slope * x``."""

    def __init__(self, negative_slope: float = 0.01, name=None):
        super().__init__()
        self._negative_slope, self._name = float(negative_slope), name

    def forward(self, x: Tensor) -> Tensor:
        return F.leaky_relu(x, self._negative_slope)

    def extra_repr(self) -> str:
        name = f", name={self._name}" if self._name else ""
        return f"negative_slope={self._negative_slope}{name}"


class GELU(Layer):
    """``x * Phi(x)`` (Phi: the standard normal CDF); ``approximate=True`` uses the tanh form
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``."""

    def __init__(self, approximate: bool = False, name=None):
        super().__init__()
        self._approximate, self._name = bool(approximate), name

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, approximate=self._approximate)

    def extra_repr(self) -> str:
        return f"approximate={self._approximate}" + (f", name={self._name}" if self._name else "")


class SiLU(Layer):
    """``x * sigmoid(x)`` (also called swish)."""

    def __init__(self, name=None):
        super().__init__()
        self._name = name

    def forward(self, x: Tensor) -> Tensor:
        return F.silu(x)

    def extra_repr(self) -> str:
        return _name_suffix(self._name)


class Sigmoid(Layer):
    """``1 / (1 + exp(-x))``."""

    def __init__(self, name=None):
        super().__init__()
        self._name = name

    def forward(self, x: Tensor) -> Tensor:
        return F.sigmoid(x)

    def extra_repr(self) -> str:
        return _name_suffix(self._name)


class Tanh(Layer):
    """``tanh(x)``."""

    def __init__(self, name=None):
        super().__init__()
        self._name = name

    def forward(self, x: Tensor) -> Tensor:
        return F.tanh(x)

    def extra_repr(self) -> str:
        return _name_suffix(self._name)


class Softmax(Layer):
    """``exp(x) / sum(exp(x))`` along ``axis``: each slice becomes a probability vector."""

    def __init__(self, axis: int = -1, name=None):
        super().__init__()
        self._axis, self._name = int(axis), name

    def forward(self, x: Tensor) -> Tensor:
        return F.softmax(x, axis=self._axis)

    def extra_repr(self) -> str:
        return f"axis={self._axis}" + (f", name={self._name}" if self._name else "")


class LogSoftmax(Layer):
    """``x - log(sum(exp(x)))`` along ``axis``, computed stably (not as ``log(softmax)``)."""

    def __init__(self, axis: int = -1, name=None):
        super().__init__()
        self._axis, self._name = int(axis), name

    def forward(self, x: Tensor) -> Tensor:
        return F.log_softmax(x, axis=self._axis)

    def extra_repr(self) -> str:
        return f"axis={self._axis}" + (f", name={self._name}" if self._name else "")
