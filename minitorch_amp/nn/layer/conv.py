"""Convolution layers: Conv1D and Conv2D (Paddle signatures, parameter shapes and defaults)."""

from __future__ import annotations

import math

import numpy as np

from ...autograd.tensor import Tensor
from ...backend import dtypes as _dtypes
from ...backend.constants import device_constant
from .. import functional as F
from ..functional.conv import as_list, resolve_padding
from ..initializer import Normal
from .common import _check_size
from .layers import Layer

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")
_NUMPY_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


class _ConvNd(Layer):
    """What Conv1D and Conv2D share: checks, the parameters, the non-zero padding modes."""

    _dims: int
    _formats: tuple[str, str]  # (channels first, channels last)

    def __init__(
        self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
        padding_mode, weight_attr, bias_attr, data_format,
    ):  # fmt: skip
        super().__init__(dtype=_dtypes.get_default_dtype())
        kind = type(self).__name__
        in_channels = _check_size(kind, "in_channels", in_channels)
        out_channels = _check_size(kind, "out_channels", out_channels)
        groups = _check_size(kind, "groups", groups)
        if in_channels % groups or out_channels % groups:
            raise ValueError(
                f"{kind}: groups={groups} must divide in_channels ({in_channels}) and "
                f"out_channels ({out_channels})"
            )
        if padding_mode not in PADDING_MODES:
            raise ValueError(
                f"{kind}: padding_mode must be one of {PADDING_MODES}, got {padding_mode!r}"
            )
        if data_format not in self._formats:
            raise ValueError(
                f"{kind}: data_format must be one of {self._formats}, got {data_format!r}"
            )
        channel_last = data_format == self._formats[1]
        self._kernel_size = as_list(kernel_size, self._dims, "kernel_size", kind)
        self._stride = as_list(stride, self._dims, "stride", kind)
        self._dilation = as_list(dilation, self._dims, "dilation", kind)
        self._padding, self._padding_mode = padding, padding_mode
        self._mode_pads = None  # per axis (before, after), for the non-zero modes
        if padding_mode != "zeros":  # Paddle: pad first (F.pad), then convolve without padding
            pads, _ = resolve_padding(padding, self._dims, channel_last, kind)
            if isinstance(padding, str) or pads[0::2] != pads[1::2]:
                raise ValueError(
                    f"{kind}: padding_mode={padding_mode!r} needs an int padding or one int per "
                    f"spatial axis, got {padding!r}"
                )
            self._mode_pads = pads[0::2] if any(pads) else None
        else:
            resolve_padding(padding, self._dims, channel_last, kind)  # checked now, not at forward
        self._in_channels, self._out_channels, self._groups = in_channels, out_channels, groups
        self._data_format, self._weight_attr, self._bias_attr = data_format, weight_attr, bias_attr
        # Paddle's default: Normal(0, sqrt(2 / (prod(kernel) * in_channels))), groups ignored
        std = math.sqrt(2.0 / (int(np.prod(self._kernel_size)) * in_channels))
        shape = [out_channels, in_channels // groups, *self._kernel_size]
        self.weight = self.create_parameter(
            shape, attr=weight_attr, default_initializer=Normal(0.0, std)
        )
        self.bias = self.create_parameter([out_channels], attr=bias_attr, is_bias=True)

    def _pad_input(self, x: Tensor) -> Tensor:
        """Reflect, replicate or wrap the spatial axes, one axis at a time, by indexing with
        the padded positions (a getitem op: the gradient of repeated positions adds up)."""
        if self._mode_pads is None:
            return x
        first = 1 if self._data_format == self._formats[1] else 2
        for axis, pad in enumerate(self._mode_pads):
            size = x.shape[first + axis]
            if self._padding_mode == "reflect" and pad >= size:
                raise ValueError(
                    f"{type(self).__name__}: reflect padding {pad} needs more than {pad} "
                    f"elements on each spatial axis, got input of shape {x.shape}"
                )
            mode = _NUMPY_MODES[self._padding_mode]
            positions = device_constant(  # built and uploaded once per size, pad and mode
                x._data,
                ("conv pad positions", size, pad, mode),
                lambda size=size, pad=pad, mode=mode: np.pad(np.arange(size), pad, mode=mode),
                f"a {self._padding_mode} padding's positions",
            )
            x = x[(slice(None),) * (first + axis) + (Tensor._wrap(positions),)]
        return x

    def forward(self, x: Tensor) -> Tensor:
        return self._function(
            self._pad_input(x), self.weight, self.bias, stride=self._stride,
            padding=self._conv_padding(), dilation=self._dilation, groups=self._groups,
            data_format=self._data_format,
        )  # fmt: skip

    def _conv_padding(self):
        return self._padding if self._padding_mode == "zeros" else 0

    def extra_repr(self) -> str:  # Paddle's: only what differs from the defaults
        text = f"{self._in_channels}, {self._out_channels}, kernel_size={self._kernel_size}"
        if self._stride != [1] * self._dims:
            text += f", stride={self._stride}"
        if self._padding != 0:
            text += f", padding={self._padding}"
        if self._padding_mode != "zeros":
            text += f", padding_mode={self._padding_mode}"
        if self._dilation != [1] * self._dims:
            text += f", dilation={self._dilation}"
        if self._groups != 1:
            text += f", groups={self._groups}"
        return text + f", data_format={self._data_format}"


class Conv1D(_ConvNd):
    """1-D convolution over ``[N, C, L]`` (``'NCL'``) or ``[N, L, C]`` (``'NLC'``).

    ``weight`` is ``[out_channels, in_channels / groups, kernel_size]``, initialised from
    ``Normal(0, sqrt(2 / (kernel_size * in_channels)))`` (Paddle's default); ``bias`` is
    ``[out_channels]``, zeros (``bias_attr=False``: none). The output length is
    ``(L + pad_before + pad_after - (dilation * (kernel_size - 1) + 1)) // stride + 1``.

    Args:
        in_channels, out_channels: channel counts.
        kernel_size, stride, dilation: an int or a list of one int.
        padding: ``'same'``, ``'valid'``, an int, ``[before, after]`` or pairs, as in
            :func:`~minitorch_amp.nn.functional.conv1d`.
        groups: split the channels into this many independent groups.
        padding_mode: ``'zeros'``, or ``'reflect'``/``'replicate'``/``'circular'`` (then
            ``padding`` must be an int or one int per axis).
        weight_attr, bias_attr: ParamAttr or initializer; ``bias_attr=False`` for no bias.
        data_format: ``'NCL'`` or ``'NLC'``.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> conv = nn.Conv1D(3, 8, 5, padding=2)
        >>> conv.weight.shape, conv(mt.ones([4, 3, 20])).shape
        ([8, 3, 5], [4, 8, 20])
    """

    _dims, _formats, _function = 1, ("NCL", "NLC"), staticmethod(F.conv1d)

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups: int = 1,
        padding_mode: str = "zeros",
        weight_attr=None,
        bias_attr=None,
        data_format: str = "NCL",
    ):
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
            padding_mode, weight_attr, bias_attr, data_format,
        )  # fmt: skip


class Conv2D(_ConvNd):
    """2-D convolution over ``[N, C, H, W]`` (``'NCHW'``) or ``[N, H, W, C]`` (``'NHWC'``).

    ``weight`` is ``[out_channels, in_channels / groups, kh, kw]``, initialised from
    ``Normal(0, sqrt(2 / (kh * kw * in_channels)))`` (Paddle's default); ``bias`` is
    ``[out_channels]``, zeros (``bias_attr=False``: none). Under AMP the convolution is a
    white-list op (float16, on tensor cores on the GPU); the bias is added after it.

    Args:
        in_channels, out_channels: channel counts.
        kernel_size, stride, dilation: an int or ``[h, w]``.
        padding: ``'same'``, ``'valid'``, an int, ``[h, w]``, ``[top, bottom, left, right]``
            or four pairs, as in :func:`~minitorch_amp.nn.functional.conv2d`.
        groups: split the channels into this many independent groups.
        padding_mode: ``'zeros'``, or ``'reflect'``/``'replicate'``/``'circular'`` (then
            ``padding`` must be an int or ``[h, w]``).
        weight_attr, bias_attr: ParamAttr or initializer; ``bias_attr=False`` for no bias.
        data_format: ``'NCHW'`` or ``'NHWC'``.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> conv = nn.Conv2D(1, 4, 3, padding=1, bias_attr=False)
        >>> conv.weight.shape, conv.bias, conv(mt.ones([2, 1, 8, 8])).shape
        ([4, 1, 3, 3], None, [2, 4, 8, 8])
    """

    _dims, _formats, _function = 2, ("NCHW", "NHWC"), staticmethod(F.conv2d)

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups: int = 1,
        padding_mode: str = "zeros",
        weight_attr=None,
        bias_attr=None,
        data_format: str = "NCHW",
    ):
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
            padding_mode, weight_attr, bias_attr, data_format,
        )  # fmt: skip
