"""Activation functions: relu, leaky_relu, gelu, silu, sigmoid, tanh, softmax, log_softmax.

Each takes Paddle's trailing ``name=None``, accepted and ignored (Paddle names static-graph
variables with it). Integer and bool inputs are refused with a TypeError: these compute in
floating point only (cast first, e.g. ``x.astype('float32')``).
"""

from __future__ import annotations

from ...autograd import Tensor, apply
from ...autograd import functions as _functions
from ...autograd import ops as _ops


def relu(x: Tensor, name=None) -> Tensor:
    """Rectified linear unit, ``max(x, 0)``.

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> F.relu(mt.to_tensor([-2.0, 0.0, 3.0])).numpy()
        array([0., 0., 3.], dtype=float32)
    """
    return apply(_ops.Relu, x)


def gelu(x: Tensor, approximate: bool = False, name=None) -> Tensor:
    """Gaussian error linear unit.

    ``gelu(x) = x * (1 + erf(x / sqrt(2))) / 2``; with ``approximate=True`` the tanh form
    ``x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))``.

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> F.gelu(mt.to_tensor([-1.0, 0.0, 1.0])).numpy()
        array([-0.15865523,  0.        ,  0.8413448 ], dtype=float32)
    """
    return apply(_ops.Gelu, x, approximate=bool(approximate))


def leaky_relu(x: Tensor, negative_slope: float = 0.01, name=None) -> Tensor:
    """``x`` where ``x > 0``, else ``negative_slope * x``.

    The gradient is 1 where ``x > 0`` and ``negative_slope`` elsewhere (at 0 too, as Paddle).

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> F.leaky_relu(mt.to_tensor([-2.0, 0.0, 3.0]), negative_slope=0.1).numpy()
        array([-0.2,  0. ,  3. ], dtype=float32)
    """
    return apply(_ops.LeakyRelu, x, negative_slope=float(negative_slope))


def silu(x: Tensor, name=None) -> Tensor:
    """Sigmoid linear unit (swish), ``x * sigmoid(x) = x / (1 + exp(-x))``.

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> F.silu(mt.to_tensor([-1.0, 0.0, 1.0])).numpy()
        array([-0.2689414,  0.       ,  0.7310586], dtype=float32)
    """
    return apply(_ops.Silu, x)


def sigmoid(x: Tensor, name=None) -> Tensor:
    """``1 / (1 + exp(-x))`` (``minitorch_amp.sigmoid`` with Paddle's ``name`` argument).

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> F.sigmoid(mt.to_tensor([0.0])).numpy()
        array([0.5], dtype=float32)
    """
    return _functions.sigmoid(x)


def tanh(x: Tensor, name=None) -> Tensor:
    """The hyperbolic tangent (``minitorch_amp.tanh`` with Paddle's ``name`` argument).

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> F.tanh(mt.to_tensor([0.0])).numpy()
        array([0.], dtype=float32)
    """
    return _functions.tanh(x)


def _maybe_cast(x: Tensor, dtype) -> Tensor:
    return x if dtype is None else x.astype(dtype)


def softmax(x: Tensor, axis: int = -1, dtype=None, name=None) -> Tensor:
    """``softmax(x)_i = exp(x_i) / sum_j exp(x_j)`` along ``axis`` (computed stably).

    Args:
        x: the input tensor.
        axis: the axis to normalise over.
        dtype: cast ``x`` to this dtype first (Paddle's argument), e.g. ``'float64'``.

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> F.softmax(mt.to_tensor([0.0, 0.0, 0.0, 0.0])).numpy()
        array([0.25, 0.25, 0.25, 0.25], dtype=float32)
    """
    return apply(_ops.Softmax, _maybe_cast(x, dtype), axis=int(axis))


def log_softmax(x: Tensor, axis: int = -1, dtype=None, name=None) -> Tensor:
    """``log_softmax(x)_i = x_i - log(sum_j exp(x_j))`` along ``axis`` (computed stably).

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> F.log_softmax(mt.to_tensor([1.0, 1.0])).numpy()
        array([-0.6931472, -0.6931472], dtype=float32)
    """
    return apply(_ops.LogSoftmax, _maybe_cast(x, dtype), axis=int(axis))
