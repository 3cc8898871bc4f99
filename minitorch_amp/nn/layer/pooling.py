"""Pooling layers: MaxPool2D, AvgPool2D and AdaptiveAvgPool2D (Paddle signatures).

Each checks its arguments when built (so a bad one fails at construction, not in the first
forward) and calls the function of the same name in :mod:`minitorch_amp.nn.functional`.
"""

from __future__ import annotations

from ...autograd.tensor import Tensor
from .. import functional as F
from ..functional.conv import as_list, resolve_padding
from ..functional.pooling import check_pool_padding
from .layers import Layer


def _check(layer: str, kernel_size, stride, padding, ceil_mode, data_format) -> None:
    if data_format not in ("NCHW", "NHWC"):
        raise ValueError(f"{layer}: data_format must be 'NCHW' or 'NHWC', got {data_format!r}")
    kernel = as_list(kernel_size, 2, "kernel_size", layer)
    if stride is not None:
        as_list(stride, 2, "stride", layer)
    pads, algorithm = resolve_padding(padding, 2, data_format == "NHWC", layer)
    check_pool_padding(pads, kernel, padding, kernel_size, layer)
    if algorithm != "EXPLICIT" and ceil_mode:
        raise ValueError(f'{layer}: with padding "{algorithm}", ceil_mode must be False')


class MaxPool2D(Layer):
    """The maximum over ``kernel_size`` windows, ``stride`` apart (default: ``kernel_size``).

    ``H_out = (H + pad_top + pad_bottom - kernel) // stride + 1`` (rounded up with
    ``ceil_mode=True``); padding counts as -inf, so it never wins. Each side's padding is at
    most ``kernel_size // 2`` (checked here, at construction).

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> nn.MaxPool2D(2)(mt.ones([1, 3, 8, 8])).shape
        [1, 3, 4, 4]
    """

    def __init__(
        self,
        kernel_size,
        stride=None,
        padding=0,
        return_mask: bool = False,
        ceil_mode: bool = False,
        data_format: str = "NCHW",
        name=None,
    ):
        super().__init__()
        _check("MaxPool2D", kernel_size, stride, padding, ceil_mode, data_format)
        if return_mask:
            raise NotImplementedError(
                "MaxPool2D(return_mask=True) is not supported: the indices of the maxima are "
                "not returned; use return_mask=False"
            )
        self.ksize, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.data_format, self.name = ceil_mode, data_format, name

    def forward(self, x: Tensor) -> Tensor:
        return F.max_pool2d(
            x, self.ksize, self.stride, self.padding, ceil_mode=self.ceil_mode,
            data_format=self.data_format,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return f"kernel_size={self.ksize}, stride={self.stride}, padding={self.padding}"


class AvgPool2D(Layer):
    """The mean over ``kernel_size`` windows, ``stride`` apart (default: ``kernel_size``).

    ``exclusive=True`` (Paddle's default) divides each window's sum by the number of input
    elements in it, so padding does not dilute the edges; False divides by ``kh * kw``;
    ``divisor_override`` divides by that number instead. Each side's padding is at most
    ``kernel_size // 2``.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> nn.AvgPool2D(3, stride=1, padding=1)(mt.ones([1, 1, 4, 4])).numpy().min()
        np.float32(1.0)
    """

    def __init__(
        self,
        kernel_size,
        stride=None,
        padding=0,
        ceil_mode: bool = False,
        exclusive: bool = True,
        divisor_override=None,
        data_format: str = "NCHW",
        name=None,
    ):
        super().__init__()
        _check("AvgPool2D", kernel_size, stride, padding, ceil_mode, data_format)
        if divisor_override is not None and not divisor_override > 0:
            raise ValueError(
                f"AvgPool2D: divisor_override must be positive, got {divisor_override}"
            )
        self.ksize, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.exclusive, self.divisor = ceil_mode, exclusive, divisor_override
        self.data_format, self.name = data_format, name

    def forward(self, x: Tensor) -> Tensor:
        return F.avg_pool2d(
            x, self.ksize, self.stride, self.padding, ceil_mode=self.ceil_mode,
            exclusive=self.exclusive, divisor_override=self.divisor, data_format=self.data_format,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return f"kernel_size={self.ksize}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2D(Layer):
    """Average pooling to a fixed output size: ``output_size`` (an int, or ``[OH, OW]`` where
    None keeps that input size). ``AdaptiveAvgPool2D(1)`` is global average pooling.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> nn.AdaptiveAvgPool2D(1)(mt.ones([2, 16, 5, 7])).shape
        [2, 16, 1, 1]
    """

    def __init__(self, output_size, data_format: str = "NCHW", name=None):
        super().__init__()
        if data_format not in ("NCHW", "NHWC"):
            raise ValueError(
                f"AdaptiveAvgPool2D: data_format must be 'NCHW' or 'NHWC', got {data_format!r}"
            )
        sizes = output_size if isinstance(output_size, (list, tuple)) else [output_size] * 2
        as_list([1 if s is None else s for s in sizes], 2, "output_size", "AdaptiveAvgPool2D")
        self._output_size, self._data_format, self.name = output_size, data_format, name

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_avg_pool2d(x, self._output_size, data_format=self._data_format)

    def extra_repr(self) -> str:
        return f"output_size={self._output_size}"
