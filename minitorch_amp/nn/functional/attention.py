"""Scaled dot-product attention, composed from the op table's matmul, softmax and dropout.

Nothing here is a new op: the scores and the weighted sum are ``matmul`` (white under
``auto_cast``: float16 at O1), the normalisation is ``softmax`` (black: float32 at O1), and
masks are ``where``/``add`` (gray). So AMP treats attention exactly as Paddle's math path
does, and every backward is the backward of those ops.

Example:
    >>> import minitorch_amp as mt
    >>> import minitorch_amp.nn.functional as F
    >>> q = mt.ones([2, 5, 4, 8])  # [batch, seq_len, num_heads, head_dim]
    >>> F.scaled_dot_product_attention(q, q, q, is_causal=True).shape
    [2, 5, 4, 8]
"""

from __future__ import annotations

import numpy as np

from ...autograd import functions as _fn
from ...autograd.tensor import Tensor
from ...backend import dtypes as _dtypes
from ...backend import get_array_module
from .activation import softmax
from .common import dropout as _dropout


def _check_qkv(query, key, value) -> None:
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"scaled_dot_product_attention: {name} must be a Tensor")
        if t.ndim not in (3, 4) or t.ndim != query.ndim:
            raise ValueError(
                "scaled_dot_product_attention: query, key and value must all be 4-D "
                "[batch, seq_len, num_heads, head_dim] (or all 3-D without the batch), got "
                f"{query.shape}, {key.shape} and {value.shape}"
            )
    q, k, v = query.shape, key.shape, value.shape
    if q[:-3] != k[:-3] or k[:-3] != v[:-3]:
        raise ValueError(f"scaled_dot_product_attention: batch sizes differ: {q}, {k}, {v}")
    if not q[-2] == k[-2] == v[-2]:
        raise ValueError(
            "scaled_dot_product_attention: query, key and value need the same num_heads "
            f"(axis -2 in Paddle's [batch, seq_len, num_heads, head_dim]), got {q}, {k}, {v}; "
            "PyTorch's [batch, num_heads, seq_len, head_dim] must be transposed first"
        )
    if q[-1] != k[-1]:
        raise ValueError(
            f"scaled_dot_product_attention: query and key head_dim differ: {q[-1]} != {k[-1]}"
        )
    if k[-3] != v[-3]:
        raise ValueError(
            f"scaled_dot_product_attention: key and value seq_len differ: {k[-3]} != {v[-3]}"
        )


def attention_scores(q: Tensor, k: Tensor) -> Tensor:
    """``(q / sqrt(head_dim)) @ k^T`` for heads-first ``[..., heads, seq, head_dim]``.

    As in Paddle, ``q`` is scaled before the product (one multiply of the smaller operand).
    With ``head_dim`` 0 the scores are all 0 (an empty sum): uniform weights, the mean of the
    values, as in PyTorch; the scale, 1/sqrt(0), multiplies nothing and is left out.
    """
    head_dim = q.shape[-1]
    return _fn.matmul(q * (head_dim**-0.5) if head_dim else q, k, transpose_y=True)


def attend(scores: Tensor, v: Tensor, dropout_p: float, training: bool) -> tuple[Tensor, Tensor]:
    """``(softmax(scores) @ v, softmax(scores))``, with dropout on the weights when training."""
    weights = softmax(scores, axis=-1)
    if dropout_p:
        weights = _dropout(weights, dropout_p, training=training, mode="upscale_in_train")
    return _fn.matmul(weights, v), weights


def _check_mask_type(mask) -> None:
    """TypeError unless ``mask`` is a Tensor (F.scaled_dot_product_attention and
    nn.MultiHeadAttention take the same masks)."""
    if not isinstance(mask, Tensor):
        raise TypeError(
            f"attn_mask must be a Tensor or None, got {type(mask).__name__}; wrap it first, "
            "e.g. mt.to_tensor(mask) (bool: True = attend)"
        )


def _check_mask_shape(mask: Tensor, scores: Tensor) -> None:
    try:
        shape = np.broadcast_shapes(tuple(mask.shape), tuple(scores.shape))
    except ValueError:
        shape = None
    if shape != tuple(scores.shape):
        raise ValueError(
            f"attn_mask of shape {mask.shape} does not broadcast to the attention scores' "
            f"shape {scores.shape} ([batch, num_heads, q_len, k_len])"
        )


def _causal_keep(scores: Tensor) -> Tensor:
    """A bool ``[q_len, k_len]`` tensor on the scores' device: True on and below the diagonal."""
    q_len, k_len = scores.shape[-2:]
    if q_len != k_len:
        raise ValueError(
            f"is_causal=True needs as many queries as keys, got q_len={q_len} and "
            f"k_len={k_len}; pass an explicit attn_mask (True = attend) instead"
        )
    xp = get_array_module(scores._data)
    return Tensor._wrap(xp.tril(xp.ones((q_len, k_len), dtype=bool)))


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    training: bool = True,
    name=None,
) -> Tensor:
    """``softmax(Q K^T / sqrt(d) + mask) V`` per head, in Paddle's layout.

    NOTE: Paddle's layout is ``[batch, seq_len, num_heads, head_dim]``, not PyTorch's
    ``[batch, num_heads, seq_len, head_dim]``: port PyTorch code by transposing axes 1 and 2
    of the inputs and of the result.

    Args:
        query: ``[batch, q_len, num_heads, head_dim]`` (or 3-D without ``batch``).
        key: ``[batch, k_len, num_heads, head_dim]``.
        value: ``[batch, k_len, num_heads, v_dim]``.
        attn_mask: broadcastable to ``[batch, num_heads, q_len, k_len]``; a bool mask keeps
            the positions that are True (False ones get ``-inf`` before the softmax), a
            float mask is added to the scores (in the scores' dtype). A row masked out
            entirely gives NaN.
        dropout_p: the probability of dropping an attention weight while ``training``.
        is_causal: query ``i`` attends to keys ``0..i`` only (needs ``q_len == k_len``);
            combined with ``attn_mask`` when both are given.
        training: False turns dropout off.
        name: accepted for Paddle compatibility.

    Returns:
        ``[batch, q_len, num_heads, v_dim]``.

    Example:
        >>> import minitorch_amp as mt
        >>> import minitorch_amp.nn.functional as F
        >>> v = mt.to_tensor([[[[1.0]], [[3.0]]]])  # [batch 1, k_len 2, 1 head, v_dim 1]
        >>> q = k = mt.zeros([1, 2, 1, 4])
        >>> F.scaled_dot_product_attention(q, k, v, is_causal=True).numpy().ravel()
        array([1., 2.], dtype=float32)
    """
    _check_qkv(query, key, value)
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.dtype.kind in "biu":
            raise TypeError(
                f"scaled_dot_product_attention: got an input of dtype {t.dtype} ({name}), but "
                "attention computes in floating point only; cast it to a float dtype first, "
                f"e.g. {name}.astype('float32')"
            )
    if attn_mask is not None:
        _check_mask_type(attn_mask)
    if not 0.0 <= float(dropout_p) <= 1.0:
        raise ValueError(
            f"scaled_dot_product_attention: dropout_p must be in [0, 1], got {dropout_p}"
        )
    perm = [0, 2, 1, 3] if query.ndim == 4 else [1, 0, 2]
    q, k, v = (t.transpose(perm) for t in (query, key, value))  # heads first
    scores = attention_scores(q, k)
    if attn_mask is not None:
        _check_mask_shape(attn_mask, scores)
        if attn_mask.dtype == np.bool_:
            scores = _fn.where(attn_mask, scores, float("-inf"))
        elif _dtypes.is_floating(attn_mask.dtype):
            scores = scores + attn_mask.astype(scores.dtype)
        else:
            raise TypeError(
                f"attn_mask of dtype {attn_mask.dtype}: pass a bool mask (True = attend) or a "
                "float mask added to the scores (nn.MultiHeadAttention also takes int masks)"
            )
    if is_causal:
        scores = _fn.where(_causal_keep(scores), scores, float("-inf"))
    out, _ = attend(scores, v, float(dropout_p), bool(training))
    return out.transpose(perm)
