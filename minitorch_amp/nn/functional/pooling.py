"""2-D pooling: max_pool2d, avg_pool2d and adaptive_avg_pool2d (Paddle's signatures).

An explicit padding may be at most ``kernel_size // 2`` on each side (PyTorch's rule; Paddle
does not check it): wider, a window can hold nothing but padding (max: -inf, average: nan).

All three run Paddle's ``pool2d`` op, which is on no AMP list: it follows its input's dtype.
"""

from __future__ import annotations

import numbers

from ...autograd import Tensor, apply
from ...autograd import ops as _ops
from .conv import as_list, resolve_padding, same_padding


def check_pool_padding(pads, kernel, padding, kernel_size, fn: str) -> None:
    """Each side of each axis pads at most ``kernel // 2`` (PyTorch's rule), or raise.

    ``pads`` is ``[top, bottom, left, right]`` and ``kernel`` ``[kh, kw]``, as resolved;
    ``padding`` and ``kernel_size`` are what the caller passed, for the message.

    NOTE: with more padding a window can cover nothing but padding: max pooling gives -inf
    there and average pooling 0 / 0 = nan, silently. ``'same'`` never pads more than
    ``kernel // 2`` on a side (its total is below the kernel), so only explicit paddings are
    checked.
    """
    for i, axis in enumerate("HW"):
        for side, pad in zip(("before", "after"), pads[2 * i : 2 * i + 2]):
            if pad > kernel[i] // 2:
                raise ValueError(
                    f"{fn}: padding {padding!r} with kernel_size {kernel_size!r}: axis {axis} "
                    f"pads {pad} {side}, more than {kernel[i]} // 2 = {kernel[i] // 2}; each "
                    "side may pad at most kernel_size // 2 (as in PyTorch), or a window can "
                    "hold nothing but padding and pool to -inf or nan. Use a smaller padding "
                    "or a larger kernel"
                )


def _pool(x, pooling_type, kernel_size, stride, padding, ceil_mode, data_format, fn, **attrs):
    """Check the arguments, resolve Paddle's padding forms and run the op on NCHW data."""
    if data_format not in ("NCHW", "NHWC"):
        raise ValueError(f"{fn}: data_format must be 'NCHW' or 'NHWC', got {data_format!r}")
    if x.ndim != 4:
        raise ValueError(f"{fn}: x must be 4-D ({data_format}), got shape {x.shape}")
    kernel = as_list(kernel_size, 2, "kernel_size", fn)
    stride = kernel if stride is None else as_list(stride, 2, "stride", fn)
    channel_last = data_format == "NHWC"
    pads, algorithm = resolve_padding(padding, 2, channel_last, fn)
    check_pool_padding(pads, kernel, padding, kernel_size, fn)
    if algorithm != "EXPLICIT" and ceil_mode:
        raise ValueError(f'{fn}: with padding "{algorithm}", ceil_mode must be False')
    if channel_last:
        x = x.transpose([0, 3, 1, 2])
    if algorithm == "SAME":
        pads = same_padding(x.shape[2:], kernel, stride)
    out = apply(
        _ops.Pool2D, x, pooling_type=pooling_type, kernel=tuple(kernel), stride=tuple(stride),
        padding=tuple(pads), ceil_mode=bool(ceil_mode), **attrs,
    )  # fmt: skip
    return out.transpose([0, 2, 3, 1]) if channel_last else out


def max_pool2d(
    x: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    return_mask: bool = False,
    ceil_mode: bool = False,
    data_format: str = "NCHW",
    name=None,
) -> Tensor:
    """The maximum of each ``kernel_size`` window, windows ``stride`` apart (default: the
    kernel size, so they tile the input). Padding never wins: it counts as -inf.

    Args:
        x: ``[N, C, H, W]`` (``[N, H, W, C]`` for ``'NHWC'``).
        kernel_size, stride: an int or ``[h, w]``.
        padding: ``'same'``, ``'valid'``, an int, ``[h, w]``, ``[top, bottom, left, right]``
            or four pairs, as for :func:`conv2d`; each side at most ``kernel_size // 2``
            (PyTorch's rule: a wider padding makes windows of padding alone).
        return_mask: must be False (the indices of the maxima are not returned yet).
        ceil_mode: round the output size up instead of down.

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> x = mt.to_tensor([[[[1.0, 2.0, 5.0], [3.0, 4.0, 0.0], [9.0, 8.0, 7.0]]]])
        >>> F.max_pool2d(x, 2).numpy()
        array([[[[4.]]]], dtype=float32)
        >>> F.max_pool2d(x, 2, ceil_mode=True).numpy()
        array([[[[4., 5.],
                 [9., 7.]]]], dtype=float32)
    """
    if return_mask:
        raise NotImplementedError(
            "max_pool2d(return_mask=True) is not supported: the indices of the maxima are not "
            "returned; pool with return_mask=False"
        )
    return _pool(x, "max", kernel_size, stride, padding, ceil_mode, data_format, "max_pool2d")


def avg_pool2d(
    x: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode: bool = False,
    exclusive: bool = True,
    divisor_override=None,
    data_format: str = "NCHW",
    name=None,
) -> Tensor:
    """The mean of each window. ``exclusive=True`` (Paddle's default) divides by the number of
    input elements in the window, leaving padding out; False divides by ``kh * kw``;
    ``divisor_override`` by that number. ``padding`` takes :func:`max_pool2d`'s forms, each
    side at most ``kernel_size // 2``.

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> x = mt.to_tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
        >>> F.avg_pool2d(x, 2, stride=1, padding=1).numpy()[0, 0, 0]
        array([1. , 1.5, 2. ], dtype=float32)
        >>> F.avg_pool2d(x, 2, stride=1, padding=1, exclusive=False).numpy()[0, 0, 0]
        array([0.25, 0.75, 0.5 ], dtype=float32)
    """
    if divisor_override is not None and (
        not isinstance(divisor_override, numbers.Real) or divisor_override <= 0
    ):
        raise ValueError(f"avg_pool2d: divisor_override must be positive, got {divisor_override}")
    return _pool(
        x, "avg", kernel_size, stride, padding, ceil_mode, data_format, "avg_pool2d",
        exclusive=bool(exclusive), divisor=divisor_override,
    )  # fmt: skip


def adaptive_avg_pool2d(x: Tensor, output_size, data_format: str = "NCHW", name=None) -> Tensor:
    """Average pooling to a fixed ``output_size``: output ``(i, j)`` is the mean of rows
    ``floor(i*H/OH) .. ceil((i+1)*H/OH) - 1`` and the matching columns.

    ``output_size`` is an int or ``[OH, OW]``, where None keeps the input's size.

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> x = mt.to_tensor([[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]])
        >>> F.adaptive_avg_pool2d(x, 1).numpy()
        array([[[[3.5]]]], dtype=float32)
        >>> F.adaptive_avg_pool2d(x, [1, 2]).numpy()
        array([[[[3., 4.]]]], dtype=float32)
    """
    if data_format not in ("NCHW", "NHWC"):
        raise ValueError(
            f"adaptive_avg_pool2d: data_format must be 'NCHW' or 'NHWC', got {data_format!r}"
        )
    if x.ndim != 4:
        raise ValueError(f"adaptive_avg_pool2d: x must be 4-D ({data_format}), got {x.shape}")
    channel_last = data_format == "NHWC"
    sizes = x.shape[1:3] if channel_last else x.shape[2:]
    wanted = [output_size] * 2 if not isinstance(output_size, (list, tuple)) else output_size
    if len(wanted) != 2:
        raise ValueError(f"adaptive_avg_pool2d: output_size must be an int or 2 ints, got {wanted}")
    wanted = [size if w is None else w for size, w in zip(sizes, wanted)]
    out_size = as_list(wanted, 2, "output_size", "adaptive_avg_pool2d")
    if channel_last:
        x = x.transpose([0, 3, 1, 2])
    out = apply(_ops.Pool2D, x, pooling_type="avg", kernel=tuple(out_size), adaptive=True)
    return out.transpose([0, 2, 3, 1]) if channel_last else out
