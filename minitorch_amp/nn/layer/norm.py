"""Normalisation layers: LayerNorm and BatchNorm1D (Paddle signatures and state names)."""

from __future__ import annotations

import numbers

import numpy as np

from ...autograd.creation import full
from ...autograd.tensor import Tensor
from ...backend import dtypes as _dtypes
from .. import functional as F
from ..initializer import Constant
from ..param_attr import ParamAttr
from ..parameter import unique_name
from .common import _check_size
from .layers import Layer


class LayerNorm(Layer):
    """Normalise over the last ``len(normalized_shape)`` axes, then scale and shift.

    ``y = (x - mean) / sqrt(var + epsilon) * weight + bias`` where mean and (biased) variance
    are taken per sample over the normalised axes.

    Args:
        normalized_shape: the trailing shape to normalise over (an int for one axis).
        epsilon: added to the variance for stability.
        weight_attr: ParamAttr/initializer for the scale (default ones); False for none.
        bias_attr: ParamAttr/initializer for the shift (default zeros); False for none.

    NOTE: as in Paddle, ``weight`` and ``bias`` are 1-D with ``prod(normalized_shape)``
    elements, whatever the number of normalised axes.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> ln = nn.LayerNorm(4)
        >>> y = ln(mt.to_tensor([[1.0, 2.0, 3.0, 4.0]]))
        >>> round(float(y.mean()), 6), ln.weight.shape
        (0.0, [4])
    """

    def __init__(
        self, normalized_shape, epsilon: float = 1e-05, weight_attr=None, bias_attr=None, name=None
    ):
        super().__init__(dtype=_dtypes.get_default_dtype())
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = [normalized_shape]
        self._normalized_shape = [
            _check_size("LayerNorm", "normalized_shape", n) for n in normalized_shape
        ]
        if not self._normalized_shape:
            raise ValueError("LayerNorm: normalized_shape must name at least one axis")
        if epsilon <= 0:
            raise ValueError(f"LayerNorm: epsilon must be positive, got {epsilon}")
        self._epsilon = float(epsilon)
        self._weight_attr, self._bias_attr, self.name = weight_attr, bias_attr, name
        param_shape = [int(np.prod(self._normalized_shape))]
        self.weight = self.create_parameter(
            param_shape, attr=weight_attr, default_initializer=Constant(1.0)
        )
        self.bias = self.create_parameter(param_shape, attr=bias_attr, is_bias=True)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - Paddle's argument name
        return F.layer_norm(
            input, self._normalized_shape, weight=self.weight, bias=self.bias, epsilon=self._epsilon
        )

    def extra_repr(self) -> str:
        return f"normalized_shape={self._normalized_shape}, epsilon={self._epsilon}"


class BatchNorm1D(Layer):
    """Normalise each feature over the batch (and length) axes, for ``[N, C]`` or ``[N, C, L]``.

    Training uses the batch's mean and biased variance and updates the running statistics::

        _mean     = momentum * _mean     + (1 - momentum) * batch_mean
        _variance = momentum * _variance + (1 - momentum) * batch_variance

    Evaluation normalises with the running statistics instead. ``momentum=0.9`` is Paddle's
    convention (the weight of the *old* value), the opposite of PyTorch's ``momentum=0.1``.

    Args:
        num_features: the channel count C.
        momentum: weight of the old running value, in ``[0, 1]``.
        epsilon: added to the variance for stability.
        weight_attr: ParamAttr/initializer for the scale (default ones); False keeps the scale
            fixed at 1 (still created, with ``stop_gradient=True``).
        bias_attr: same for the shift (default zeros).
        data_format: ``'NC'``/``'NCL'`` (channels on axis 1) or ``'NLC'`` (channels last).
        use_global_stats: True always uses the running statistics, False always the batch
            statistics; None (default) follows ``self.training``.

    NOTE: ``_mean`` and ``_variance`` are buffers here (Paddle makes them frozen parameters),
    so ``parameters()`` holds only ``weight`` and ``bias``; the state-dict keys are Paddle's.

    Example:
        >>> from minitorch_amp import nn
        >>> list(nn.BatchNorm1D(3).state_dict())
        ['weight', 'bias', '_mean', '_variance']
    """

    def __init__(
        self,
        num_features: int,
        momentum: float = 0.9,
        epsilon: float = 1e-05,
        weight_attr=None,
        bias_attr=None,
        data_format: str = "NCL",
        use_global_stats: bool | None = None,
        name=None,
    ):
        super().__init__(dtype=_dtypes.get_default_dtype())
        num_features = _check_size("BatchNorm1D", "num_features", num_features)
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"BatchNorm1D: momentum must be in [0, 1], got {momentum}")
        if epsilon <= 0:
            raise ValueError(f"BatchNorm1D: epsilon must be positive, got {epsilon}")
        if data_format not in ("NC", "NCL", "NLC"):
            raise ValueError(
                f"BatchNorm1D: data_format must be 'NC', 'NCL' or 'NLC', got {data_format!r}"
            )
        self._num_features, self._momentum, self._epsilon = num_features, momentum, epsilon
        self._data_format, self._use_global_stats, self._name = data_format, use_global_stats, name
        self._weight_attr, self._bias_attr = weight_attr, bias_attr
        self.weight = self._affine([num_features], weight_attr, 1.0, is_bias=False)
        self.bias = self._affine([num_features], bias_attr, 0.0, is_bias=True)
        for buffer, value in (("_mean", 0.0), ("_variance", 1.0)):
            stat = full([num_features], value, dtype=self._dtype)
            stat.name = unique_name(f"{self._full_name}.w")  # Paddle's naming: <layer>.w_N
            stat.persistable = True
            self.register_buffer(buffer, stat)

    def _affine(self, shape, attr, value: float, is_bias: bool):
        """Paddle's rule: ``attr=False`` still creates the tensor, frozen at ``value``."""
        frozen = attr is False or (isinstance(attr, ParamAttr) and attr.learning_rate == 0.0)
        param = self.create_parameter(
            shape,
            attr=None if attr is False else attr,
            is_bias=is_bias,
            default_initializer=Constant(value),
        )
        if frozen:
            param.stop_gradient = True
        return param

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - Paddle's argument name
        if input.ndim not in (2, 3):
            raise ValueError(
                f"BatchNorm1D expects a 2-D [N, C] or 3-D [N, C, L] input, got shape {input.shape}"
            )
        channel_axis = -1 if self._data_format == "NLC" and input.ndim == 3 else 1
        if input.shape[channel_axis] != self._num_features:
            raise ValueError(
                f"BatchNorm1D({self._num_features}) got {input.shape[channel_axis]} channels "
                f"(input shape {input.shape}, data_format={self._data_format!r})"
            )
        if self._use_global_stats is None:
            training = self.training
        else:
            training = not self._use_global_stats
        return F.batch_norm(
            input,
            self._mean,
            self._variance,
            weight=self.weight,
            bias=self.bias,
            training=training,
            momentum=self._momentum,
            epsilon=self._epsilon,
            data_format="NLC" if channel_axis == -1 else "NCL",
        )

    def extra_repr(self) -> str:
        text = (
            f"num_features={self._num_features}, momentum={self._momentum}, epsilon={self._epsilon}"
        )
        if self._data_format != "NCL":
            text += f", data_format={self._data_format}"
        return text + (f", name={self._name}" if self._name else "")
