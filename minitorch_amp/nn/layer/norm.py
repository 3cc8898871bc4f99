"""Normalisation layers: LayerNorm, BatchNorm1D/2D/3D and BatchNorm (Paddle signatures and
state names)."""

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

    keeps_float32 = "float16"  # decorate(level='O2', dtype='float16') keeps it float32

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


class _BatchNormBase(Layer):
    """Normalise each channel over the batch (and spatial) axes; what every BatchNorm shares.

    Training uses the batch's mean and biased variance and updates the running statistics::

        _mean     = momentum * _mean     + (1 - momentum) * batch_mean
        _variance = momentum * _variance + (1 - momentum) * batch_variance

    Evaluation normalises with the running statistics instead. ``momentum=0.9`` is Paddle's
    convention (the weight of the *old* value), the opposite of PyTorch's ``momentum=0.1``.

    NOTE: ``_mean`` and ``_variance`` are buffers here (Paddle makes them frozen parameters),
    so ``parameters()`` holds only ``weight`` and ``bias``; the state-dict keys are Paddle's.
    """

    # decorate and float16()/bfloat16() keep batch norm float32 (convert.stays_float32): its
    # running statistics move by (1 - momentum) * batch_mean, steps that 16 bits round away.
    keeps_float32 = "always"
    _ndims: tuple[int, ...]  # the input ranks the layer accepts
    _formats: tuple[str, ...]  # the data formats it accepts, the default first
    _last: str  # the channels-last one
    _expects: str  # how the error message names the accepted input

    def __init__(
        self,
        num_features: int,
        momentum: float = 0.9,
        epsilon: float = 1e-05,
        weight_attr=None,
        bias_attr=None,
        data_format: str = "NCHW",
        use_global_stats: bool | None = None,
        name=None,
        dtype=None,
    ):
        if dtype is None:  # Paddle: float32 parameters when the default dtype is float16
            dtype = _dtypes.get_default_dtype()
        super().__init__(dtype="float32" if _dtypes.convert_dtype(dtype) == "float16" else dtype)
        kind = type(self).__name__
        num_features = _check_size(kind, "num_features", num_features)
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"{kind}: momentum must be in [0, 1], got {momentum}")
        if epsilon <= 0:
            raise ValueError(f"{kind}: epsilon must be positive, got {epsilon}")
        if data_format not in self._formats:
            names = ", ".join(f"'{f}'" for f in self._formats)
            raise ValueError(f"{kind}: data_format must be one of {names}, got {data_format!r}")
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

    def _uses_batch_statistics(self) -> bool:
        if self._use_global_stats is None:
            return self.training
        return not self._use_global_stats

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - Paddle's argument name
        kind = type(self).__name__
        if input.ndim not in self._ndims:
            raise ValueError(f"{kind} expects {self._expects} input, got shape {input.shape}")
        channel_axis = -1 if self._data_format == self._last and input.ndim > 2 else 1
        if input.shape[channel_axis] != self._num_features:
            raise ValueError(
                f"{kind}({self._num_features}) got {input.shape[channel_axis]} channels "
                f"(input shape {input.shape}, data_format={self._data_format!r})"
            )
        return F.batch_norm(
            input,
            self._mean,
            self._variance,
            weight=self.weight,
            bias=self.bias,
            training=self._uses_batch_statistics(),
            momentum=self._momentum,
            epsilon=self._epsilon,
            data_format="NHWC" if channel_axis == -1 else "NCHW",
        )

    def extra_repr(self) -> str:
        text = (
            f"num_features={self._num_features}, momentum={self._momentum}, epsilon={self._epsilon}"
        )
        if self._data_format != self._formats[0]:
            text += f", data_format={self._data_format}"
        return text + (f", name={self._name}" if self._name else "")


class BatchNorm1D(_BatchNormBase):
    """Batch normalisation of ``[N, C]`` or ``[N, C, L]`` (``'NLC'``: ``[N, L, C]``).

    See :class:`BatchNorm2D` for the arguments; ``data_format`` is ``'NC'``/``'NCL'``
    (channels on axis 1) or ``'NLC'`` (channels last).

    Example:
        >>> from minitorch_amp import nn
        >>> list(nn.BatchNorm1D(3).state_dict())
        ['weight', 'bias', '_mean', '_variance']
    """

    _ndims, _expects = (2, 3), "a 2-D [N, C] or 3-D [N, C, L]"
    _formats, _last = ("NCL", "NC", "NLC"), "NLC"

    def __init__(
        self, num_features: int, momentum: float = 0.9, epsilon: float = 1e-05,
        weight_attr=None, bias_attr=None, data_format: str = "NCL",
        use_global_stats: bool | None = None, name=None,
    ):  # fmt: skip
        super().__init__(
            num_features, momentum, epsilon, weight_attr, bias_attr, data_format,
            use_global_stats, name,
        )  # fmt: skip


class BatchNorm2D(_BatchNormBase):
    """Batch normalisation of images ``[N, C, H, W]`` (``'NHWC'``: ``[N, H, W, C]``).

    Each channel is normalised over N, H and W, then scaled by ``weight`` and shifted by
    ``bias`` (``[C]`` each). Statistics of float16 input are taken in float32, and AMP casts
    only the input: the parameters and running statistics stay float32 (``decorate`` keeps
    batch norm layers float32 at O2).

    Args:
        num_features: the channel count C.
        momentum: weight of the old running value, in ``[0, 1]``.
        epsilon: added to the variance for stability.
        weight_attr: ParamAttr/initializer for the scale (default ones); False keeps the scale
            fixed at 1 (still created, with ``stop_gradient=True``).
        bias_attr: same for the shift (default zeros).
        data_format: ``'NCHW'`` (default) or ``'NHWC'``.
        use_global_stats: True always uses the running statistics, False always the batch
            statistics; None (default) follows ``self.training``.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> bn = nn.BatchNorm2D(2)
        >>> y = bn(mt.to_tensor([[[[1.0]], [[2.0]]], [[[3.0]], [[6.0]]]]))
        >>> bn._mean.numpy()
        array([0.2, 0.4], dtype=float32)
    """

    _ndims, _expects = (4,), "a 4-D"
    _formats, _last = ("NCHW", "NHWC"), "NHWC"

    def __init__(
        self, num_features: int, momentum: float = 0.9, epsilon: float = 1e-05,
        weight_attr=None, bias_attr=None, data_format: str = "NCHW",
        use_global_stats: bool | None = None, name=None,
    ):  # fmt: skip
        super().__init__(
            num_features, momentum, epsilon, weight_attr, bias_attr, data_format,
            use_global_stats, name,
        )  # fmt: skip


class BatchNorm3D(_BatchNormBase):
    """Batch normalisation of volumes ``[N, C, D, H, W]`` (``'NDHWC'``: channels last).

    As :class:`BatchNorm2D`, over N, D, H and W; ``data_format`` is ``'NCDHW'`` or ``'NDHWC'``.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> nn.BatchNorm3D(4)(mt.ones([2, 4, 3, 3, 3])).shape
        [2, 4, 3, 3, 3]
    """

    _ndims, _expects = (5,), "a 5-D"
    _formats, _last = ("NCDHW", "NDHWC"), "NDHWC"

    def __init__(
        self, num_features: int, momentum: float = 0.9, epsilon: float = 1e-05,
        weight_attr=None, bias_attr=None, data_format: str = "NCDHW",
        use_global_stats: bool | None = None, name=None,
    ):  # fmt: skip
        super().__init__(
            num_features, momentum, epsilon, weight_attr, bias_attr, data_format,
            use_global_stats, name,
        )  # fmt: skip


_ACTIVATIONS = {
    "relu": F.relu,
    "sigmoid": F.sigmoid,
    "tanh": F.tanh,
    "gelu": F.gelu,
    "softmax": F.softmax,
    "log_softmax": F.log_softmax,
}


class BatchNorm(_BatchNormBase):
    """Paddle's original batch norm layer: any ``[N, C, ...]`` input of 2 to 5 dimensions,
    then an optional activation ``act``.

    The computation and state are :class:`BatchNorm2D`'s. Training or inference follows
    ``self.training`` (``train()`` / ``eval()``), as in Paddle's dygraph mode.

    Args:
        num_channels: the channel count C.
        act: None, or ``'relu'``, ``'sigmoid'``, ``'tanh'``, ``'gelu'``, ``'softmax'`` or
            ``'log_softmax'``, applied to the output.
        is_test: ignored, as in Paddle's dygraph mode (use ``eval()``).
        momentum, epsilon: as for :class:`BatchNorm2D`.
        param_attr, bias_attr: ParamAttr/initializer for the scale and shift; False freezes
            them at 1 and 0.
        dtype: the parameters' dtype; ``'float16'`` gives float32 parameters (Paddle).
        data_layout: ``'NCHW'`` (channels on axis 1) or ``'NHWC'`` (channels last).
        in_place, do_model_average_for_mean_and_var: static-graph options; ignored, as in
            Paddle's dygraph mode.
        moving_mean_name, moving_variance_name: names for the running-statistic tensors.
        use_global_stats: True always normalises with the running statistics.
        trainable_statistics: True uses (and updates) batch statistics in eval mode too.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> bn = nn.BatchNorm(3, act="relu")
        >>> bn(mt.randn([4, 3, 5, 5])).numpy().min()
        np.float32(0.0)
    """

    _ndims, _expects = (2, 3, 4, 5), "a 2-D to 5-D [N, C, ...]"
    _formats, _last = ("NCHW", "NHWC"), "NHWC"

    def __init__(
        self,
        num_channels: int,
        act: str | None = None,
        is_test: bool = False,
        momentum: float = 0.9,
        epsilon: float = 1e-05,
        param_attr=None,
        bias_attr=None,
        dtype="float32",
        data_layout: str = "NCHW",
        in_place: bool = False,
        moving_mean_name: str | None = None,
        moving_variance_name: str | None = None,
        do_model_average_for_mean_and_var: bool = True,
        use_global_stats: bool = False,
        trainable_statistics: bool = False,
    ):
        if act is not None and act not in _ACTIVATIONS:
            raise ValueError(
                f"BatchNorm: act must be None or one of {sorted(_ACTIVATIONS)}, got {act!r}"
            )
        super().__init__(
            num_channels, momentum, epsilon, param_attr, bias_attr, data_layout, None, None, dtype
        )
        self._act, self._is_test, self._in_place = act, is_test, in_place
        self._global_stats, self._trainable_statistics = use_global_stats, trainable_statistics
        self._do_model_average_for_mean_and_var = do_model_average_for_mean_and_var
        for buffer, name in (("_mean", moving_mean_name), ("_variance", moving_variance_name)):
            if name is not None:
                getattr(self, buffer).name = name

    def _uses_batch_statistics(self) -> bool:
        # Paddle's kernel: global statistics when use_global_stats, or in inference unless
        # trainable_statistics; otherwise batch statistics (and the running ones updated).
        if self._global_stats:
            return False
        return self.training or self._trainable_statistics

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - Paddle's argument name
        out = super().forward(input)
        return out if self._act is None else _ACTIVATIONS[self._act](out)
