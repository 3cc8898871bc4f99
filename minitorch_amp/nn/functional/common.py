"""Common layers as functions: linear, dropout, embedding and pad."""

from __future__ import annotations

import numbers

import numpy as np

from ...autograd import Tensor, apply, fp8_route
from ...autograd import ops as _ops
from ...autograd.dispatch import autocast_state
from ...autograd.ops.activation import float_only
from ...autograd.ops.nn_ops import check_dropout, dropout_axes
from ...autograd.ops.padding import PAD_MODES


def refuse_integers(fn: str, x) -> None:
    """TypeError when ``x`` (a Tensor or an array) holds integers or bools: ``fn`` computes in
    floating point only, as in Paddle (no integer kernels) and PyTorch ("not implemented for
    'Long'"). One comparison per call; values without a dtype are left to the op."""
    try:
        kind = x._data.dtype.kind  # a Tensor: the common case, two attribute reads
    except AttributeError:
        kind = getattr(getattr(x, "dtype", None), "kind", "f")
    if kind in "biu":
        raise float_only(fn, x.dtype)


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None, name=None) -> Tensor:
    """``x @ weight + bias`` with Paddle's weight layout ``[in_features, out_features]``.

    As in Paddle, a matmul and then an add, each with its own dtype: under ``auto_cast`` the
    product follows the matmul's rule (float16) and the add the gray rule, so a float32 bias
    gives a float32 result at O1, OD and O2 with promotion, and a float16 bias (after
    ``decorate(level='O2')``) a float16 one. Outside AMP the add promotes: the result has the
    wider of the product's and the bias's dtypes.

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> F.linear(mt.ones([2, 3]), mt.ones([3, 4]), mt.zeros([4])).shape
        [2, 4]
        >>> with mt.amp.auto_cast():
        ...     F.linear(mt.ones([2, 3]), mt.ones([3, 4]), mt.zeros([4])).dtype
        dtype('float32')
    """
    if fp8_route.region.get() is not None:  # inside amp.fp8_autocast: an FP8 GEMM
        out = fp8_route.fp8_gemm("linear", x, weight, bias)
        if out is not None:
            return out
    if bias is not None and autocast_state.get() is None:
        bias = _promoted_bias(x, weight, bias)
    return apply(_ops.Linear, x, weight, bias)


def _promoted_bias(x, weight, bias):
    """``bias`` cast up to the product's dtype when it is narrower (Paddle's add promotes);
    the op adds in the bias's dtype, which AMP's rule picks inside ``auto_cast``."""
    tensors = (x, weight, bias)
    if not all(isinstance(t, Tensor) and t._data.dtype.kind == "f" for t in tensors):
        return bias
    wide = np.result_type(x._data.dtype, weight._data.dtype, bias._data.dtype)
    return bias if wide == bias._data.dtype else bias.astype(wide)


def dropout(
    x: Tensor,
    p: float = 0.5,
    axis=None,
    training: bool = True,
    mode: str = "upscale_in_train",
    name=None,
) -> Tensor:
    """Zero each element with probability ``p``.

    ``upscale_in_train`` (default): training gives ``x * mask / (1 - p)`` and inference
    returns ``x`` itself. ``downscale_in_infer``: training gives ``x * mask`` and inference
    ``x * (1 - p)``. ``mask`` is Bernoulli(1 - p), drawn from the generator ``seed()`` sets.

    Args:
        x: the input tensor.
        p: the probability of zeroing an element, in ``[0, 1]``.
        axis: draw the mask only over these axes (ints in ``[0, x.ndim)``, as in Paddle) and
            broadcast it over the others.
        training: False for inference.
        mode: ``'upscale_in_train'`` or ``'downscale_in_infer'``.

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> F.dropout(mt.ones([4]), p=0.0).numpy()
        array([1., 1., 1., 1.], dtype=float32)
    """
    check_dropout(p, mode)  # (before the short cuts: a bad p would hide until training)
    refuse_integers("dropout", x)  # (and a bad x or axis)
    if axis is not None:
        axis = dropout_axes(axis, x.ndim)
    if not training and mode == "upscale_in_train":
        return x  # Paddle returns the input itself here
    if isinstance(p, (int, float)) and not isinstance(p, bool) and p == 0:
        return x  # Paddle's fast return: nothing recorded, no mask drawn
    return apply(_ops.Dropout, x, p=float(p), training=bool(training), mode=mode, axis=axis)


def embedding(
    x: Tensor, weight: Tensor, padding_idx: int | None = None, sparse: bool = False, name=None
) -> Tensor:
    """Look up rows of ``weight`` (``[num_embeddings, dim]``) by the integer ids in ``x``.

    The result has shape ``x.shape + [dim]``. Ids equal to ``padding_idx`` (negative values
    count from the end) give zero rows and no gradient. The gradient of ``weight`` is always
    dense; ``sparse`` is accepted for Paddle compatibility.

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> w = mt.to_tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])
        >>> F.embedding(mt.to_tensor([[2, 1]]), w).numpy()
        array([[[3., 4.],
                [1., 2.]]], dtype=float32)
    """
    return apply(_ops.Embedding, x, weight, padding_idx=padding_idx)


_FORMATS = {3: ("NCL", "NLC"), 4: ("NCHW", "NHWC"), 5: ("NCDHW", "NDHWC")}
_SPATIAL_NAMES = ("pad_left, pad_right", "pad_top, pad_bottom", "pad_front, pad_back")


def pad(
    x: Tensor,
    pad,
    mode: str = "constant",
    value: float = 0.0,
    data_format: str | None = None,
    pad_from_left_axis: bool = True,
    name=None,
) -> Tensor:
    """Pad ``x`` with a border of ``value`` (``mode='constant'``) or of its own elements.

    ``pad`` lists border widths, two per padded axis (before, after), in Paddle's orders:

    * the spatial form, for every mode: ``x`` is 3-D, 4-D or 5-D (``data_format`` says where
      the channels are; by default ``NCL``/``NCHW``/``NCDHW``) and ``pad`` has two widths per
      spatial axis, the last axis first: ``[left, right]``, ``[left, right, top, bottom]``,
      ``[left, right, top, bottom, front, back]``;
    * otherwise, for ``'constant'`` only: up to two widths per axis of ``x``, the last axis
      first, missing ones 0 (an odd count gets a 0 after it). With exactly two per axis and
      ``pad_from_left_axis=True`` (the default) the first axis comes first instead.

    Modes: ``'constant'``; ``'reflect'`` mirrors ``x`` about its edge elements (each width
    must be smaller than its axis); ``'replicate'`` repeats the edge elements; ``'circular'``
    wraps around. ``pad`` may be a Tensor of ints (read as the spatial form).

    NOTE: PyTorch's ``F.pad`` always starts from the last axis; pass
    ``pad_from_left_axis=False`` when ``pad`` has two widths for every axis.

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> x = mt.to_tensor([[[1.0, 2.0, 3.0]]])
        >>> F.pad(x, [2, 1], mode="reflect").numpy()
        array([[[3., 2., 1., 2., 3., 2.]]], dtype=float32)
        >>> F.pad(x, [0, 1, 0, 0, 1, 0], value=9.0).shape  # two per axis, first axis first
        [2, 1, 4]
    """
    if mode not in PAD_MODES:
        raise ValueError(f"pad: mode must be one of {PAD_MODES}, got {mode!r}")
    spatial = isinstance(pad, Tensor)
    widths = pad_widths(pad, "pad")
    ndim = len(x.shape)
    if mode == "constant" and not spatial and len(widths) != 2 * (ndim - 2):
        if len(widths) > 2 * ndim:
            raise ValueError(
                f"pad: {len(widths)} widths for a {ndim}-D input; give at most two per axis "
                f"({2 * ndim})"
            )
        widths += [0] * (2 * ndim - len(widths))
        if not (len(pad) == 2 * ndim and pad_from_left_axis):
            widths = _last_axis_first(widths, range(ndim), ndim)
        return apply(_ops.Pad, x, paddings=tuple(widths), value=float(value))
    fmt = _check_format(x.shape, data_format, mode)
    if len(widths) != 2 * (ndim - 2):
        names = ", ".join(_SPATIAL_NAMES[: ndim - 2])
        raise ValueError(
            f"pad: mode {mode!r} on a {ndim}-D input takes {2 * (ndim - 2)} widths "
            f"[{names}], got {len(widths)}"
        )
    axes = range(2, ndim) if fmt[1] == "C" else range(1, ndim - 1)
    widths = _last_axis_first(widths, axes, ndim)
    return apply(_ops.Pad3D, x, paddings=tuple(widths), mode=mode, value=float(value))


def pad_widths(pad, fn: str, arg: str = "pad") -> list[int]:
    """``pad`` (a list, tuple or Tensor of ints) as a list of ints, or TypeError (``fn`` names
    the caller: F.pad, or a Pad layer checking its widths at construction)."""
    if isinstance(pad, Tensor):
        pad = pad.numpy().reshape(-1).tolist()
    if not isinstance(pad, list | tuple) or not all(
        isinstance(w, numbers.Integral) and not isinstance(w, bool) for w in pad
    ):
        raise TypeError(f"{fn}: {arg} must be a list, tuple or Tensor of ints, got {pad!r}")
    return [int(w) for w in pad]


def _last_axis_first(widths: list[int], axes, ndim: int) -> list[int]:
    """Widths given pair by pair from the last of ``axes`` backwards, as two per axis of an
    ``ndim``-D input in axis order (0 for the axes not in ``axes``)."""
    out = [0] * (2 * ndim)
    for k, axis in enumerate(reversed(axes)):
        out[2 * axis : 2 * axis + 2] = widths[2 * k : 2 * k + 2]
    return out


def _check_format(shape, data_format: str | None, mode: str) -> str:
    ndim = len(shape)
    if ndim not in _FORMATS:
        raise ValueError(
            f"pad: mode {mode!r} pads the spatial axes of a 3-D, 4-D or 5-D input (batch, "
            f"channels, then 1 to 3 spatial axes), got a {ndim}-D input of shape {list(shape)}; "
            "reshape it to that layout first"
        )
    fmt = _FORMATS[ndim][0] if data_format is None else str(data_format).upper()
    if fmt not in _FORMATS[ndim]:
        raise ValueError(
            f"pad: data_format for a {ndim}-D input must be one of {_FORMATS[ndim]}, "
            f"got {data_format!r}"
        )
    return fmt
