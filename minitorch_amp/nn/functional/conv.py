"""Convolutions: conv1d and conv2d (Paddle's signatures), and the argument rules pooling shares.

Both run the ``conv2d`` op (im2col + GEMM, a white-list op: float16 on tensor cores under AMP),
or ``depthwise_conv2d`` where Paddle does (``groups == in_channels != 1`` and the filter
count a multiple of it; a gray op). As in Paddle the bias is a separate ``add``, so under O1 a
float32 bias makes the output float32.
"""

from __future__ import annotations

import numbers

from ...autograd import Tensor, apply, fp8_route
from ...autograd import ops as _ops
from .common import refuse_integers


def as_list(value, n: int, arg: str, fn: str) -> list[int]:
    """``value`` (an int, or a list/tuple of ``n`` ints) as a list of ``n`` positive ints."""
    items = [value] * n if _is_int(value) else value
    if not isinstance(items, (list, tuple)) or len(items) != n or not all(map(_is_int, items)):
        raise ValueError(f"{fn}: {arg} must be an int or a list of {n} ints, got {value!r}")
    if any(v <= 0 for v in items):
        raise ValueError(f"{fn}: {arg} must be positive, got {value!r}")
    return [int(v) for v in items]


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def resolve_padding(padding, n: int, channel_last: bool, fn: str) -> tuple[list[int], str]:
    """Paddle's padding forms as ``([before_0, after_0, before_1, ...], algorithm)``.

    ``'same'`` / ``'valid'`` (any case) give the algorithm ``'SAME'`` / ``'VALID'`` (their
    pads depend on the input: see :func:`same_padding`); an int pads every side; ``n`` ints
    pad both sides of each axis; ``2n`` ints are ``[before, after]`` per axis; ``n + 2``
    pairs include the batch and channel axes, whose pairs must be ``[0, 0]``.
    """
    if isinstance(padding, str):
        algorithm = padding.upper()
        if algorithm not in ("SAME", "VALID"):
            raise ValueError(f"{fn}: unknown padding {padding!r}; use 'same', 'valid' or ints")
        return [0] * (2 * n), algorithm
    if _is_int(padding):
        pads = [int(padding)] * (2 * n)
    elif isinstance(padding, (list, tuple)) and all(map(_is_int, padding)):
        if len(padding) == n:
            pads = [int(p) for p in padding for _ in range(2)]
        elif len(padding) == 2 * n:
            pads = [int(p) for p in padding]
        else:
            raise ValueError(f"{fn}: padding {padding!r} must have {n} or {2 * n} ints")
    elif isinstance(padding, (list, tuple)) and len(padding) == n + 2:
        pairs = [list(p) if isinstance(p, (list, tuple)) else None for p in padding]
        if any(p is None or len(p) != 2 or not all(map(_is_int, p)) for p in pairs):
            raise ValueError(f"{fn}: padding {padding!r} must be {n + 2} pairs of ints")
        outer = [pairs[0], pairs[-1]] if channel_last else pairs[:2]
        if any(p != [0, 0] for p in outer):
            raise ValueError(
                f"{fn}: padding {padding!r} pads the batch or channel axis; only the spatial "
                "axes can be padded (give them [0, 0])"
            )
        pads = [int(v) for p in (pairs[1:-1] if channel_last else pairs[2:]) for v in p]
    else:
        raise ValueError(f"{fn}: padding {padding!r} is not an int, a list of ints or pairs")
    if any(p < 0 for p in pads):
        raise ValueError(f"{fn}: padding must not be negative, got {padding!r}")
    return pads, "EXPLICIT"


def same_padding(sizes, kernels, strides) -> list[int]:
    """Paddle's ``'SAME'`` pads: output ``ceil(size / stride)``, the extra row at the end.

    ``pad = max((out - 1) * stride + kernel - size, 0)``, ``before = pad // 2``.
    """
    pads = []
    for size, kernel, stride in zip(sizes, kernels, strides):
        out = -(-size // stride)
        total = max((out - 1) * stride + kernel - size, 0)
        pads += [total // 2, total - total // 2]
    return pads


def _tensors(fn: str, *values) -> None:
    """Raise TypeError unless every value is a Tensor (a list or an array would fail
    further in with an AttributeError that says nothing about the fix)."""
    for value in values:
        if not isinstance(value, Tensor):
            raise TypeError(
                f"{fn}: got a {type(value).__name__} where a Tensor goes; make one first with "
                "minitorch_amp.to_tensor(data) (PyTorch's torch.tensor(data))"
            )


def _groups(groups, channels: int, filters: int, fn: str) -> int:
    if not _is_int(groups) or groups < 1:
        raise ValueError(f"{fn}: groups must be a positive integer, got {groups!r}")
    if channels % groups or filters % groups:
        raise ValueError(
            f"{fn}: groups={groups} must divide the input channels ({channels}) and the number "
            f"of filters ({filters})"
        )
    return int(groups)


def _conv2d_nchw(x, weight, stride, pads, algorithm, dilation, groups):
    """The op call on NCHW data, with Paddle's choice of op and its 'SAME' rule."""
    if algorithm == "SAME":
        pads = same_padding(x.shape[2:], weight.shape[2:], stride)
        dilation = [1, 1]  # NOTE: Paddle's SAME ignores dilation (UpdatePaddingAndDilation)
    channels, filters = x.shape[1], weight.shape[0]
    depthwise = channels == groups and channels != 1 and filters % channels == 0
    op = _ops.DepthwiseConv2D if depthwise else _ops.Conv2D
    attrs = {"stride": tuple(stride), "padding": tuple(pads), "dilation": tuple(dilation)}
    if not depthwise and fp8_route.region.get() is not None:  # amp.fp8_autocast: FP8 GEMMs
        out = fp8_route.fp8_gemm("conv2d", x, weight, groups=groups, **attrs)
        if out is not None:
            return out
    return apply(op, x, weight, groups=groups, **attrs)


def _add_bias(out: Tensor, bias: Tensor | None, channel_axis: int) -> Tensor:
    if bias is None:
        return out
    shape = [1] * out.ndim
    shape[channel_axis] = -1
    return out + bias.reshape(shape)


def conv2d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    dilation=1,
    groups: int = 1,
    data_format: str = "NCHW",
    name=None,
) -> Tensor:
    """2-D convolution: ``out[n, o] = sum_c x[n, c] (*) weight[o, c] + bias[o]``.

    Args:
        x: ``[N, C, H, W]`` (``[N, H, W, C]`` for ``data_format='NHWC'``).
        weight: ``[O, C / groups, kh, kw]``.
        bias: ``[O]`` or None.
        stride, dilation: an int or ``[h, w]``.
        padding: ``'same'``, ``'valid'``, an int, ``[h, w]``, ``[top, bottom, left, right]``
            or four pairs (batch and channel pairs ``[0, 0]``). With ``'same'`` the output
            is ``ceil(H / stride)`` and, as in Paddle, ``dilation`` is ignored.
        groups: input and output channels split into this many independent groups.
        data_format: ``'NCHW'`` or ``'NHWC'``.

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> x = mt.to_tensor([[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]]])
        >>> F.conv2d(x, mt.ones([1, 1, 2, 2])).numpy()
        array([[[[12., 16.],
                 [24., 28.]]]], dtype=float32)
        >>> F.conv2d(x, mt.ones([2, 1, 3, 3]), padding="same", stride=2).shape
        [1, 2, 2, 2]
    """
    if data_format not in ("NCHW", "NHWC"):
        raise ValueError(f"conv2d: data_format must be 'NCHW' or 'NHWC', got {data_format!r}")
    channel_last = data_format == "NHWC"
    _tensors("conv2d", x, weight)
    refuse_integers("conv2d", x)
    if x.ndim != 4 or weight.ndim != 4:
        raise ValueError(
            f"conv2d: x must be 4-D ({data_format}) and weight 4-D [out, in/groups, kh, kw], "
            f"got {x.shape} and {weight.shape}"
        )
    channels = x.shape[-1 if channel_last else 1]
    groups = _groups(groups, channels, weight.shape[0], "conv2d")
    stride = as_list(stride, 2, "stride", "conv2d")
    dilation = as_list(dilation, 2, "dilation", "conv2d")
    pads, algorithm = resolve_padding(padding, 2, channel_last, "conv2d")
    if channel_last:
        x = x.transpose([0, 3, 1, 2])
    out = _conv2d_nchw(x, weight, stride, pads, algorithm, dilation, groups)
    if channel_last:
        out = out.transpose([0, 2, 3, 1])
    return _add_bias(out, bias, -1 if channel_last else 1)


def conv1d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    dilation=1,
    groups: int = 1,
    data_format: str = "NCL",
    name=None,
) -> Tensor:
    """1-D convolution of ``[N, C, L]`` by ``[O, C / groups, k]``, run as a conv2d of height 1
    (as Paddle does).

    ``padding`` is ``'same'``, ``'valid'``, an int, ``[p]``, ``[before, after]`` or three
    pairs; ``stride`` and ``dilation`` an int or ``[s]``; ``data_format`` ``'NCL'`` or
    ``'NLC'``.

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> x = mt.to_tensor([[[4.0, 8.0, 1.0, 9.0], [7.0, 2.0, 0.0, 9.0], [6.0, 9.0, 2.0, 6.0]]])
        >>> w = mt.to_tensor([[[9.0, 3.0, 4.0], [0.0, 0.0, 7.0], [2.0, 5.0, 6.0]],
        ...                   [[0.0, 3.0, 4.0], [2.0, 9.0, 7.0], [5.0, 6.0, 8.0]]])
        >>> F.conv1d(x, w).numpy()
        array([[[133., 238.],
                [160., 211.]]], dtype=float32)
    """
    if data_format not in ("NCL", "NLC"):
        raise ValueError(f"conv1d: data_format must be 'NCL' or 'NLC', got {data_format!r}")
    channel_last = data_format == "NLC"
    _tensors("conv1d", x, weight)
    refuse_integers("conv1d", x)
    if x.ndim != 3 or weight.ndim != 3:
        raise ValueError(
            f"conv1d: x must be 3-D ({data_format}) and weight 3-D [out, in/groups, k], "
            f"got {x.shape} and {weight.shape}"
        )
    channels = x.shape[-1 if channel_last else 1]
    groups = _groups(groups, channels, weight.shape[0], "conv1d")
    stride = [1, *as_list(stride, 1, "stride", "conv1d")]
    dilation = [1, *as_list(dilation, 1, "dilation", "conv1d")]
    pads, algorithm = resolve_padding(padding, 1, channel_last, "conv1d")
    # [N, C, L] -> [N, C, 1, L]: the height axis has kernel 1, stride 1 and no padding
    x = x.unsqueeze(-2) if not channel_last else x.unsqueeze(1).transpose([0, 3, 1, 2])
    out = _conv2d_nchw(x, weight.unsqueeze(2), stride, [0, 0, *pads], algorithm, dilation, groups)
    out = out.squeeze(2)
    if channel_last:
        out = out.transpose([0, 2, 1])
    return _add_bias(out, bias, -1 if channel_last else 1)
