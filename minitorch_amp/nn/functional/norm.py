"""Normalisation functions: layer_norm, rms_norm, batch_norm and normalize."""

from __future__ import annotations

import math

from ...autograd import Tensor, apply
from ...autograd import ops as _ops
from .common import refuse_integers

_CHANNELS_FIRST = ("NC", "NCL", "NCHW", "NCDHW")
_CHANNELS_LAST = ("NLC", "NHWC", "NDHWC")


def _checked_norm_args(fn: str, normalized_shape, epsilon, **params) -> tuple:
    """``normalized_shape`` as a tuple of ints, after checking ``epsilon`` and the affine
    ``params`` (name -> Tensor or None): each must have shape ``normalized_shape`` (PyTorch's
    rule) or be 1-D with ``prod(normalized_shape)`` elements (Paddle's, what nn.LayerNorm and
    nn.RMSNorm make). Another shape of the same size was silently reshaped (a transposed
    ``[5, 4]`` weight for ``[4, 5]``): it is refused."""
    if isinstance(normalized_shape, int):
        normalized_shape = [normalized_shape]
    shape = tuple(int(n) for n in normalized_shape)
    if epsilon < 0:
        raise ValueError(f"{fn}: epsilon must be >= 0, got {epsilon}")
    flat = (math.prod(shape),)
    for name, t in params.items():
        if t is not None and tuple(t.shape) not in (shape, flat):
            raise ValueError(
                f"{fn}: {name} of shape {t.shape} does not match normalized_shape "
                f"{list(shape)}: it must have that shape or be 1-D with {flat[0]} elements"
            )
    return shape


def layer_norm(
    x: Tensor,
    normalized_shape,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    epsilon: float = 1e-05,
    name=None,
) -> Tensor:
    """Normalise over the trailing ``normalized_shape`` dimensions, then scale and shift.

    ``y = (x - mean) / sqrt(var + epsilon) * weight + bias``, where ``mean`` and the biased
    ``var`` are taken over the last ``len(normalized_shape)`` axes. float16 input has its
    statistics computed in float32.

    Args:
        x: the input, whose shape ends with ``normalized_shape``.
        normalized_shape: an int or a list of ints.
        weight, bias: optional, of shape ``normalized_shape`` or 1-D of its flattened size
            (another shape is a ValueError).
        epsilon: added to the variance; must be >= 0.

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> F.layer_norm(mt.to_tensor([[1.0, 3.0]]), 2).numpy()
        array([[-0.999995,  0.999995]], dtype=float32)
    """
    shape = _checked_norm_args("layer_norm", normalized_shape, epsilon, weight=weight, bias=bias)
    return apply(_ops.LayerNorm, x, weight, bias, normalized_shape=shape, epsilon=float(epsilon))


def rms_norm(
    x: Tensor,
    normalized_shape,
    weight: Tensor | None = None,
    epsilon: float = 1e-05,
    name=None,
    *,
    eps: float | None = None,
) -> Tensor:
    """Divide by the root mean square over the trailing ``normalized_shape`` dims, then scale.

    ``y = x / sqrt(mean(x^2) + epsilon) * weight``: layer norm without subtracting the mean
    and without a shift. float16 and bfloat16 input has its statistics computed in float32;
    under ``auto_cast`` O1 it runs in float32, like ``layer_norm``.

    Args:
        x: the input, whose shape ends with ``normalized_shape``.
        normalized_shape: an int or a list of ints.
        weight: optional scale, of shape ``normalized_shape`` or 1-D of its flattened size
            (another shape is a ValueError).
        epsilon: added to the mean square (``eps=`` is accepted too); must be >= 0.

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> F.rms_norm(mt.to_tensor([[3.0, 4.0]]), 2, epsilon=0.0).numpy()
        array([[0.84852815, 1.1313709 ]], dtype=float32)
    """
    refuse_integers("rms_norm", x)
    epsilon = epsilon if eps is None else eps
    shape = _checked_norm_args("rms_norm", normalized_shape, epsilon, weight=weight)
    return apply(_ops.RmsNorm, x, weight, normalized_shape=shape, epsilon=float(epsilon))


def normalize(x: Tensor, p: float = 2, axis: int = 1, epsilon: float = 1e-12, name=None):
    """Divide by the ``p``-norm along ``axis``: ``y = x / max(||x||_p, epsilon)``.

    ``||x||_p = (sum |x_i|^p)^(1/p)`` over ``axis``, kept as a size-1 axis so it broadcasts.
    As in Paddle, the norm (the ``p_norm`` op) follows its input's dtype under ``auto_cast``,
    and ``epsilon`` is taken in ``x``'s dtype (1e-12 is 0 in float16: a zero vector gives NaN).

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> F.normalize(mt.to_tensor([[3.0, 4.0], [0.0, 0.0]])).numpy()
        array([[0.6, 0.8],
               [0. , 0. ]], dtype=float32)
    """
    refuse_integers("normalize", x)
    norm = apply(_ops.PNorm, x, porder=float(p), axis=int(axis), keepdim=True)
    return x / norm.clip(min=float(epsilon))  # Paddle: x / maximum(norm, epsilon)


def batch_norm(
    x: Tensor,
    running_mean: Tensor,
    running_var: Tensor,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.9,
    epsilon: float = 1e-05,
    data_format: str = "NCHW",
    use_global_stats: bool | None = None,
    name=None,
) -> Tensor:
    """Normalise each channel with batch statistics (training) or running ones (inference).

    ``y = (x - mean) / sqrt(var + epsilon) * weight + bias`` per channel. In training, mean
    and biased var come from the batch (all axes but the channel axis) and ``running_mean``
    and ``running_var`` are updated in place::

        running_mean = momentum * running_mean + (1 - momentum) * batch_mean
        running_var  = momentum * running_var  + (1 - momentum) * batch_var

    Args:
        x: ``[N, C]`` or ``[N, C, ...]`` (channels last for ``'NLC'``/``'NHWC'``/``'NDHWC'``).
        running_mean, running_var: Tensors of shape ``[C]``, updated in training.
        weight, bias: optional per-channel scale and shift, shape ``[C]``.
        training: use and update batch statistics.
        momentum: weight of the old running value.
        epsilon: added to the variance.
        data_format: where the channel axis is.
        use_global_stats: True forces the running statistics, False the batch ones.

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> mean, var = mt.zeros([2]), mt.ones([2])
        >>> y = F.batch_norm(mt.to_tensor([[1.0, 2.0], [3.0, 6.0]]), mean, var, training=True)
        >>> mean.numpy()
        array([0.2, 0.4], dtype=float32)
    """
    if data_format not in _CHANNELS_FIRST + _CHANNELS_LAST:
        raise ValueError(
            f"batch_norm: data_format must be one of {_CHANNELS_FIRST + _CHANNELS_LAST}, "
            f"got {data_format!r}"
        )
    if use_global_stats is not None:
        training = not use_global_stats
    return apply(
        _ops.BatchNorm,
        x,
        weight,
        bias,
        running_mean=running_mean.data,
        running_var=running_var.data,
        training=bool(training),
        momentum=float(momentum),
        epsilon=float(epsilon),
        channel_axis=-1 if data_format in _CHANNELS_LAST else 1,
    )
