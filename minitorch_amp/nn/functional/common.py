"""Common layers as functions: linear, dropout and embedding."""

from __future__ import annotations

import numpy as np

from ...autograd import Tensor, apply
from ...autograd import ops as _ops
from ...autograd.dispatch import autocast_state


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
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
    x: Tensor, p: float = 0.5, axis=None, training: bool = True, mode: str = "upscale_in_train"
) -> Tensor:
    """Zero each element with probability ``p``.

    ``upscale_in_train`` (default): training gives ``x * mask / (1 - p)`` and inference
    returns ``x`` itself. ``downscale_in_infer``: training gives ``x * mask`` and inference
    ``x * (1 - p)``. ``mask`` is Bernoulli(1 - p), drawn from the generator ``seed()`` sets.

    Args:
        x: the input tensor.
        p: the probability of zeroing an element, in ``[0, 1]``.
        axis: draw the mask only over these axes and broadcast it over the others.
        training: False for inference.
        mode: ``'upscale_in_train'`` or ``'downscale_in_infer'``.

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> F.dropout(mt.ones([4]), p=0.0).numpy()
        array([1., 1., 1., 1.], dtype=float32)
    """
    if not training and mode == "upscale_in_train":
        return x  # Paddle returns the input itself here
    return apply(_ops.Dropout, x, p=float(p), training=bool(training), mode=mode, axis=axis)


def embedding(x: Tensor, weight: Tensor, padding_idx: int | None = None, sparse: bool = False):
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
