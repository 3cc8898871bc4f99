"""Padding layers: Pad1D, Pad2D and Pad3D (Paddle's names and signatures) over ``F.pad``.

Example:
    >>> import minitorch_amp as mt
    >>> from minitorch_amp import nn
    >>> nn.Pad1D([1, 2], mode="replicate")(mt.to_tensor([[[1.0, 2.0]]])).numpy()
    array([[[1., 1., 2., 2., 2.]]], dtype=float32)
"""

from __future__ import annotations

import numbers

from ...autograd.ops.padding import PAD_MODES
from ...autograd.tensor import Tensor
from .. import functional as F
from ..functional.common import pad_widths
from .layers import Layer


class _PadND(Layer):
    """Pad the spatial axes: ``padding`` is one int for every side, or two widths per spatial
    axis, the last axis first (``[left, right, top, bottom, front, back]``): ints >= 0 (a list,
    a tuple or a Tensor of them), checked at construction."""

    _spatial: int  # how many spatial axes
    _formats: tuple[str, str]  # channels first (the default), channels last

    def __init__(
        self, padding, mode: str = "constant", value: float = 0.0, data_format=None, name=None
    ):
        super().__init__()
        kind, sides = type(self).__name__, 2 * self._spatial
        if isinstance(padding, numbers.Integral) and not isinstance(padding, bool):
            padding = [int(padding)] * sides
        elif not isinstance(padding, list | tuple | Tensor):
            raise ValueError(f"{kind}: padding must be an int or {sides} widths, got {padding!r}")
        widths = pad_widths(padding, kind, "padding")  # F.pad's check: ints only, never truncated
        if len(widths) != sides:
            raise ValueError(f"{kind}: padding must be an int or {sides} widths, got {padding!r}")
        if any(w < 0 for w in widths):
            raise ValueError(f"{kind}: padding widths must be >= 0, got {widths}")
        if not isinstance(padding, Tensor):
            padding = widths
        if mode not in PAD_MODES:
            raise ValueError(f"{kind}: mode must be one of {PAD_MODES}, got {mode!r}")
        data_format = self._formats[0] if data_format is None else data_format
        if data_format not in self._formats:
            raise ValueError(
                f"{kind}: data_format must be one of {self._formats}, got {data_format!r}"
            )
        self._pad, self._mode, self._value = padding, mode, float(value)
        self._data_format, self._name = data_format, name

    def forward(self, x: Tensor) -> Tensor:
        return F.pad(x, self._pad, self._mode, self._value, self._data_format)

    def extra_repr(self) -> str:
        name = f", name={self._name}" if self._name else ""
        return (
            f"padding={self._pad}, mode={self._mode}, value={self._value}, "
            f"data_format={self._data_format}{name}"
        )


class Pad1D(_PadND):
    """Pad the last axis of ``[N, C, L]`` (``data_format='NCL'``) or ``[N, L, C]`` (``'NLC'``)."""

    _spatial, _formats = 1, ("NCL", "NLC")


class Pad2D(_PadND):
    """Pad H and W of ``[N, C, H, W]`` (``data_format='NCHW'``) or ``[N, H, W, C]``."""

    _spatial, _formats = 2, ("NCHW", "NHWC")


class Pad3D(_PadND):
    """Pad D, H and W of ``[N, C, D, H, W]`` (``data_format='NCDHW'``) or ``[N, D, H, W, C]``."""

    _spatial, _formats = 3, ("NCDHW", "NDHWC")
