"""Float64 NumPy references for attention and transformer layers, written from the formulas.

They read the weights of our layers (``.numpy()``, Paddle's ``[in, out]`` layout) and compute
what the layer should return, with no code shared with the library.
"""

from __future__ import annotations

import numpy as np


def softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def sdpa(q, k, v, bias=None):
    """``(out, weights)`` for Paddle's ``[batch, seq, heads, dim]`` inputs; ``bias`` is added
    to the ``[batch, heads, q_len, k_len]`` scores."""
    qh, kh, vh = (np.swapaxes(np.asarray(a, np.float64), -3, -2) for a in (q, k, v))
    scores = qh @ np.swapaxes(kh, -1, -2) / np.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias
    weights = softmax(scores)
    return np.swapaxes(weights @ vh, -3, -2), weights


def bias_of(keep: np.ndarray) -> np.ndarray:
    """The additive bias of a bool mask: 0 where True, -inf where False."""
    return np.where(keep, 0.0, -np.inf)


def linear(x, layer):
    w = layer.weight.numpy().astype(np.float64)
    out = x @ w
    return out if layer.bias is None else out + layer.bias.numpy().astype(np.float64)


def mha(layer, query, key=None, value=None, bias=None):
    """``(out, weights)`` of a MultiHeadAttention (eval mode) from its weights."""
    key = query if key is None else key
    value = query if value is None else value
    heads = layer.num_heads

    def split(x):  # [b, s, e] -> [b, s, heads, e / heads]
        return x.reshape(x.shape[0], x.shape[1], heads, -1)

    q, k, v = (
        split(linear(x, p))
        for x, p in ((query, layer.q_proj), (key, layer.k_proj), (value, layer.v_proj))
    )
    out, weights = sdpa(q, k, v, bias)
    return linear(out.reshape(out.shape[0], out.shape[1], -1), layer.out_proj), weights


def layer_norm(x, norm):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    y = (x - mean) / np.sqrt(var + norm._epsilon)
    return y * norm.weight.numpy().astype(np.float64) + norm.bias.numpy().astype(np.float64)


def encoder_layer(layer, x, bias=None):
    """A TransformerEncoderLayer (relu, eval mode) from its weights, pre- or post-norm."""
    pre = layer.normalize_before

    def block(x, norm, fn):
        y = x + fn(layer_norm(x, norm) if pre else x)
        return y if pre else layer_norm(y, norm)

    x = block(x, layer.norm1, lambda h: mha(layer.self_attn, h, bias=bias)[0])
    ffn = lambda h: linear(np.maximum(linear(h, layer.linear1), 0.0), layer.linear2)  # noqa: E731
    return block(x, layer.norm2, ffn)
