"""Parameter initializers, with Paddle's names (``paddle.nn.initializer``).

An initializer is a small object that knows how to fill an array of a given shape. Layers use
one when they create a parameter; calling it on an existing parameter refills it in place::

    init = nn.initializer.Normal(mean=0.0, std=0.02)
    init(linear.weight)          # linear.weight is the same object, with new values

Every random draw comes from :func:`minitorch_amp.backend.random.generator`, so
``minitorch_amp.seed(n)`` before building a model makes its initial weights reproducible.
Values are drawn in float32 (float64 for float64 parameters) and rounded to nearest even once
when the parameter is float16.

``Orthogonal``, ``Dirac`` and ``Bilinear`` live in :mod:`.initializer_structured` and are
re-exported here. :func:`set_global_initializer` changes the defaults of the parameters created
afterwards.

Fans (the number of inputs/outputs a weight connects) follow Paddle's layout: a Linear weight
is ``[in_features, out_features]`` so ``fan_in = shape[0]`` and ``fan_out = shape[1]``; a
convolution weight ``[out_c, in_c, k...]`` has ``fan_in = in_c * prod(k)`` and
``fan_out = out_c * prod(k)``.
"""

from __future__ import annotations

import math

import numpy as np

from ..autograd.tensor import Tensor
from ..backend import random as _random
from .initializer_base import Initializer, _check_floating, _draw_dtype

__all__ = [
    "Assign",
    "Bilinear",
    "Constant",
    "Dirac",
    "Initializer",
    "KaimingNormal",
    "KaimingUniform",
    "Normal",
    "Orthogonal",
    "TruncatedNormal",
    "Uniform",
    "XavierNormal",
    "XavierUniform",
    "calculate_gain",
    "set_global_initializer",
]


def _compute_fans(shape) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a parameter of ``shape`` (Paddle's rule, see module doc)."""
    shape = list(shape)
    if not shape:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive_field = int(np.prod(shape[2:]))
    return shape[1] * receptive_field, shape[0] * receptive_field


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The gain that keeps activations' variance steady through ``nonlinearity``.

    ``relu``: sqrt(2); ``leaky_relu``: sqrt(2 / (1 + slope**2)); ``tanh``: 5/3; ``selu``: 3/4;
    ``sigmoid``, ``linear`` and the ``conv*`` family: 1.

    Example:
        >>> from minitorch_amp.nn.initializer import calculate_gain
        >>> round(calculate_gain("relu"), 4)
        1.4142
    """
    if param is None:
        param = 0.01 if nonlinearity == "leaky_relu" else 0.0
    gains = {
        "sigmoid": 1.0,
        "linear": 1.0,
        "conv1d": 1.0,
        "conv2d": 1.0,
        "conv3d": 1.0,
        "conv1d_transpose": 1.0,
        "conv2d_transpose": 1.0,
        "conv3d_transpose": 1.0,
        "tanh": 5.0 / 3.0,
        "relu": math.sqrt(2.0),
        "leaky_relu": math.sqrt(2.0 / (1.0 + param**2)),
        "selu": 3.0 / 4.0,
    }
    if nonlinearity not in gains:
        raise ValueError(
            f"calculate_gain: unknown nonlinearity {nonlinearity!r}; use one of {sorted(gains)}"
        )
    return gains[nonlinearity]


def _normal(shape, dtype, xp, mean: float, std: float):
    _check_floating("a normal initializer", dtype)
    rng = _random.generator(xp)
    values = rng.standard_normal(tuple(shape), dtype=_draw_dtype(dtype))
    return (values * std + mean).astype(dtype, copy=False)


def _uniform(shape, dtype, xp, low: float, high: float):
    _check_floating("a uniform initializer", dtype)
    rng = _random.generator(xp)
    values = rng.random(tuple(shape), dtype=_draw_dtype(dtype))
    return (values * (high - low) + low).astype(dtype, copy=False)


class Constant(Initializer):
    """Every element equals ``value`` (biases use ``Constant(0.0)``, norm scales ``1.0``)."""

    def __init__(self, value: float = 0.0):
        self.value = value

    def _generate(self, shape, dtype, xp):
        return xp.full(tuple(shape), self.value, dtype=dtype)


class Normal(Initializer):
    """Samples from N(mean, std**2)."""

    def __init__(self, mean: float = 0.0, std: float = 1.0, name=None):
        if std < 0:
            raise ValueError(f"Normal: std must be >= 0, got {std}")
        self.mean, self.std = float(mean), float(std)

    def _generate(self, shape, dtype, xp):
        return _normal(shape, dtype, xp, self.mean, self.std)


class Uniform(Initializer):
    """Samples from U[low, high)."""

    def __init__(self, low: float = -1.0, high: float = 1.0, name=None):
        if high < low:
            raise ValueError(f"Uniform: high ({high}) must be >= low ({low})")
        self.low, self.high = float(low), float(high)

    def _generate(self, shape, dtype, xp):
        return _uniform(shape, dtype, xp, self.low, self.high)


class TruncatedNormal(Initializer):
    """N(mean, std**2) restricted to ``[mean - 2 std, mean + 2 std]``.

    Samples outside the interval are redrawn until none is left (about 4.6% per round), so the
    result is exactly the truncated distribution, not a clipped one.
    """

    def __init__(self, mean: float = 0.0, std: float = 1.0, name=None):
        if std < 0:
            raise ValueError(f"TruncatedNormal: std must be >= 0, got {std}")
        self.mean, self.std = float(mean), float(std)

    def _generate(self, shape, dtype, xp):
        _check_floating("TruncatedNormal", dtype)
        rng = _random.generator(xp)
        draw = _draw_dtype(dtype)
        z = rng.standard_normal(tuple(shape), dtype=draw)
        outside = xp.abs(z) > 2.0
        while bool(outside.any()):
            z[outside] = rng.standard_normal(int(outside.sum()), dtype=draw)
            outside = xp.abs(z) > 2.0
        return (z * self.std + self.mean).astype(dtype, copy=False)


class XavierUniform(Initializer):
    """Glorot uniform: U[-limit, limit] with ``limit = gain * sqrt(6 / (fan_in + fan_out))``.

    Args:
        fan_in, fan_out: override the fans computed from the shape.
        gain: a scale, e.g. ``calculate_gain('tanh')``.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> w = nn.Linear(100, 50).weight          # Xavier uniform by default
        >>> bound = (6 / (100 + 50)) ** 0.5
        >>> bool(abs(w.numpy()).max() <= bound)
        True
    """

    def __init__(self, fan_in=None, fan_out=None, name=None, gain: float = 1.0):
        self.fan_in, self.fan_out, self.gain = fan_in, fan_out, float(gain)

    def _limit(self, shape) -> float:
        fan_in, fan_out = _compute_fans(shape)
        fan_in = fan_in if self.fan_in is None else self.fan_in
        fan_out = fan_out if self.fan_out is None else self.fan_out
        if fan_in + fan_out <= 0:
            raise ValueError(f"Xavier initialisation of shape {list(shape)}: fan_in + fan_out is 0")
        return self.gain * math.sqrt(6.0 / float(fan_in + fan_out))

    def _generate(self, shape, dtype, xp):
        limit = self._limit(shape)
        return _uniform(shape, dtype, xp, -limit, limit)


class XavierNormal(XavierUniform):
    """Glorot normal: N(0, std**2) with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""

    def _generate(self, shape, dtype, xp):
        # limit = gain * sqrt(6 / n) and std = gain * sqrt(2 / n), so std = limit / sqrt(3).
        return _normal(shape, dtype, xp, 0.0, self._limit(shape) / math.sqrt(3.0))


class KaimingUniform(Initializer):
    """He uniform: U[-limit, limit] with ``limit = gain * sqrt(3 / fan_in)``.

    ``gain = calculate_gain(nonlinearity, negative_slope)``, sqrt(2) for ReLU, so
    ``limit = sqrt(6 / fan_in)`` by default.
    """

    def __init__(
        self,
        fan_in: float | None = None,
        negative_slope: float = 0.0,
        nonlinearity: str = "relu",
        name=None,
    ):
        self.fan_in = fan_in
        self.negative_slope = float(negative_slope)
        self.nonlinearity = nonlinearity
        calculate_gain(nonlinearity, negative_slope)  # fail early on a bad name

    def _scale(self, shape) -> float:
        """``gain / sqrt(fan_in)``: the standard deviation of the normal variant."""
        fan_in = _compute_fans(shape)[0] if self.fan_in is None else self.fan_in
        if fan_in <= 0:
            raise ValueError(f"Kaiming initialisation of shape {list(shape)}: fan_in is 0")
        return calculate_gain(self.nonlinearity, self.negative_slope) / math.sqrt(float(fan_in))

    def _generate(self, shape, dtype, xp):
        limit = math.sqrt(3.0) * self._scale(shape)
        return _uniform(shape, dtype, xp, -limit, limit)


class KaimingNormal(KaimingUniform):
    """He normal: N(0, std**2) with ``std = gain / sqrt(fan_in)`` (sqrt(2 / fan_in) for ReLU)."""

    def _generate(self, shape, dtype, xp):
        return _normal(shape, dtype, xp, 0.0, self._scale(shape))


class Assign(Initializer):
    """Fill with given values (a NumPy array, a list, a number or a Tensor); shapes must match.

    Example:
        >>> from minitorch_amp import nn
        >>> init = nn.initializer.Assign([[1.0, 2.0], [3.0, 4.0]])
        >>> nn.Linear(2, 2, weight_attr=init).weight.numpy().tolist()
        [[1.0, 2.0], [3.0, 4.0]]
    """

    def __init__(self, value, name=None):
        if isinstance(value, Tensor):
            value = value.numpy()
        self.value = np.array(value)  # a private host copy: later edits of `value` do not leak

    def _generate(self, shape, dtype, xp):
        if list(self.value.shape) != list(shape) and self.value.size != 1:
            raise ValueError(
                f"Assign: the value has shape {list(self.value.shape)} but the parameter has "
                f"shape {list(shape)}"
            )
        out = xp.empty(tuple(shape), dtype=dtype)
        out[...] = xp.asarray(self.value).astype(dtype)
        return out

    def __repr__(self) -> str:
        return f"Assign(shape={list(self.value.shape)})"


# ---- the global defaults -------------------------------------------------------------------------
_global_weight: Initializer | None = None
_global_bias: Initializer | None = None


def set_global_initializer(weight_init: Initializer | None, bias_init: Initializer | None = None):
    """Initialize every weight (and bias) created from now on with these, until called again;
    ``set_global_initializer(None)`` restores the layers' own defaults.

    Paddle's priority: an initializer given to the parameter (``weight_attr=``,
    ``ParamAttr(initializer=...)``) wins; the global one comes next, before the layer's own
    default (Conv's Normal, a norm layer's ``Constant(1.0)`` scale: a norm's scale is a weight,
    so it takes the global weight initializer too) and Xavier / zeros. Parameters that exist
    already keep their values.

    Example:
        >>> from minitorch_amp import nn
        >>> nn.initializer.set_global_initializer(nn.initializer.Constant(0.5))
        >>> nn.Linear(2, 2).weight.numpy().tolist()
        [[0.5, 0.5], [0.5, 0.5]]
        >>> nn.initializer.set_global_initializer(None)
    """
    for what, init in (("weight_init", weight_init), ("bias_init", bias_init)):
        if init is not None and not isinstance(init, Initializer):
            raise TypeError(
                f"set_global_initializer: {what} must be an nn.initializer object or None, got "
                f"{type(init).__name__}"
            )
    global _global_weight, _global_bias
    _global_weight, _global_bias = weight_init, bias_init


def global_initializer(is_bias: bool) -> Initializer | None:
    """The initializer :func:`set_global_initializer` set for biases or weights (None: none);
    ``create_parameter`` puts it before the layer's ``default_initializer``."""
    return _global_bias if is_bias else _global_weight


from .initializer_structured import Bilinear, Dirac, Orthogonal  # noqa: E402 (they subclass Initializer)
