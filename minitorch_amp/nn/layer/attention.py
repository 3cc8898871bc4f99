"""``MultiHeadAttention`` with Paddle's signature, mask rules and decoding caches."""

from __future__ import annotations

import collections

import numpy as np

from ...autograd.creation import zeros
from ...autograd.functions import concat
from ...autograd.tensor import Tensor
from ...backend import dtypes as _dtypes
from ...backend.cast import cast as _cast
from ..functional import attention as _attention
from .common import Linear, _check_size
from .layers import Layer


def convert_attention_mask(attn_mask: Tensor | None, dtype) -> Tensor | None:
    """An attention mask as the float ``dtype`` bias that is added to the scores (Paddle's rule).

    A bool or integer mask keeps its True/1 positions: it becomes ``(mask - 1) * 1e9``, so
    kept positions get exactly 0 and masked ones ``-1e9`` (``-inf`` once in float16). A float
    mask is only cast. A mask already of ``dtype``, or None, is returned as it is.

    Raises:
        TypeError: ``attn_mask`` is not a Tensor (a list or a NumPy array: wrap it first).
    """
    if attn_mask is None:
        return None
    _attention._check_mask_type(attn_mask)
    dtype = _dtypes.convert_dtype(dtype)
    if attn_mask.dtype == dtype:
        return attn_mask
    if not _dtypes.is_floating(attn_mask.dtype):  # bool and integer masks: no gradient
        # NOTE: (mask - 1) * 1e9 computed in float16 is wrong: 1e9 is inf there, and a kept
        # position gets 0 * inf = NaN. Paddle's scale kernel computes in float32, so here:
        # in float32 (float64 for float64), rounded once to dtype (-1e9 -> -inf in float16).
        acc = _dtypes.accumulation_dtype(dtype)
        bias = (attn_mask._data.astype(acc) - 1.0) * acc.type(1e9)
        with np.errstate(over="ignore"):  # the -inf that float16 rounds -1e9 to is meant
            return Tensor._wrap(_cast(bias, dtype))  # the cast kernel on a GPU
    return attn_mask.astype(dtype)


class MultiHeadAttention(Layer):
    """Attention over ``num_heads`` learned projections of the queries, keys and values.

    ``out = concat_h(softmax(q_h k_h^T / sqrt(head_dim) + mask) v_h) @ W_out + b_out`` with
    ``q_h``, ``k_h``, ``v_h`` the ``h``-th slice of ``head_dim = embed_dim // num_heads``
    columns of ``query @ W_q + b_q``, ``key @ W_k + b_k`` and ``value @ W_v + b_v``.

    Args:
        embed_dim: the feature size of the queries and of the output.
        num_heads: the number of heads; must divide ``embed_dim``.
        dropout: the probability of dropping an attention weight while training.
        kdim: the feature size of ``key`` (default ``embed_dim``).
        vdim: the feature size of ``value`` (default ``embed_dim``).
        need_weights: also return the attention weights ``[batch, heads, q_len, k_len]``.
        weight_attr: ParamAttr or initializer of the four projection weights.
        bias_attr: the same for their biases; False for none.

    The sublayers are ``q_proj``, ``k_proj``, ``v_proj`` and ``out_proj`` (Linear, weights
    ``[in, out]``). ``attn_mask`` broadcasts to ``[batch, num_heads, q_len, k_len]``: bool
    masks attend where True, integer masks where 1, float masks are added to the scores.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> mha = nn.MultiHeadAttention(8, num_heads=2, need_weights=True)
        >>> out, weights = mha(mt.ones([3, 5, 8]))  # self-attention
        >>> out.shape, weights.shape
        ([3, 5, 8], [3, 2, 5, 5])
    """

    Cache = collections.namedtuple("Cache", ["k", "v"])
    StaticCache = collections.namedtuple("StaticCache", ["k", "v"])

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        kdim: int | None = None,
        vdim: int | None = None,
        need_weights: bool = False,
        weight_attr=None,
        bias_attr=None,
    ):
        super().__init__()
        embed_dim = _check_size("MultiHeadAttention", "embed_dim", embed_dim)
        num_heads = _check_size("MultiHeadAttention", "num_heads", num_heads)
        if embed_dim % num_heads:
            raise ValueError(
                f"MultiHeadAttention: embed_dim ({embed_dim}) must be divisible by num_heads "
                f"({num_heads})"
            )
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"MultiHeadAttention: dropout must be in [0, 1], got {dropout}")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.kdim = embed_dim if kdim is None else _check_size("MultiHeadAttention", "kdim", kdim)
        self.vdim = embed_dim if vdim is None else _check_size("MultiHeadAttention", "vdim", vdim)
        self.head_dim = embed_dim // num_heads
        self.dropout, self.need_weights = float(dropout), bool(need_weights)
        self.q_proj = Linear(embed_dim, embed_dim, weight_attr, bias_attr=bias_attr)
        self.k_proj = Linear(self.kdim, embed_dim, weight_attr, bias_attr=bias_attr)
        self.v_proj = Linear(self.vdim, embed_dim, weight_attr, bias_attr=bias_attr)
        self.out_proj = Linear(embed_dim, embed_dim, weight_attr, bias_attr=bias_attr)

    def _split_heads(self, x: Tensor) -> Tensor:
        """``[batch, seq, embed_dim] -> [batch, num_heads, seq, head_dim]``."""
        return x.reshape([0, 0, self.num_heads, self.head_dim]).transpose([0, 2, 1, 3])

    def compute_kv(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """The projected keys and values, split into heads: ``[batch, num_heads, len, head_dim]``.

        ``gen_cache`` uses it to build a ``StaticCache`` once (the encoder's output in a decoder).
        """
        return self._split_heads(self.k_proj(key)), self._split_heads(self.v_proj(value))

    def gen_cache(self, key: Tensor, value: Tensor | None = None, type=Cache):  # noqa: A002
        """A cache for decoding, as Paddle builds it.

        * ``type=MultiHeadAttention.StaticCache``: ``compute_kv(key, value)``, computed once and
          reused at every step (cross-attention to a fixed memory);
        * ``type=Cache`` and ``value`` None: empty ``k`` and ``v`` of shape
          ``[batch, num_heads, 0, head_dim]`` that each call extends by its new positions
          (self-attention while generating), ``key`` giving the batch size and dtype;
        * ``type=Cache`` with ``value``: ``Cache(key, value)``, tensors already projected.
        """
        if type is MultiHeadAttention.StaticCache:
            if value is None:
                raise TypeError(
                    "gen_cache(type=StaticCache) projects both key and value: pass value too, "
                    "e.g. gen_cache(memory, memory, type=MultiHeadAttention.StaticCache)"
                )
            return self.StaticCache(*self.compute_kv(key, value))
        if type is not MultiHeadAttention.Cache:
            raise TypeError(
                "gen_cache: type must be MultiHeadAttention.Cache or MultiHeadAttention."
                f"StaticCache, got {type!r}"
            )
        if value is None:
            shape = [key.shape[0], self.num_heads, 0, self.head_dim]
            empty = zeros(shape, dtype=key.dtype, place=key.place)
            return self.Cache(empty, empty)
        return self.Cache(key, value)

    def _prepare_qkv(self, query, key, value, cache):
        q = self._split_heads(self.q_proj(query))
        if isinstance(cache, self.StaticCache):  # keys and values computed once, beforehand
            k, v = cache.k, cache.v
        else:
            k, v = self.compute_kv(key, value)
        if isinstance(cache, self.Cache):  # the positions seen so far, then this call's
            k, v = concat([cache.k, k], axis=2), concat([cache.v, v], axis=2)
            cache = self.Cache(k, v)
        return q, k, v, cache

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        attn_mask: Tensor | None = None,
        cache=None,
    ):
        """Attend from ``query`` ``[batch, q_len, embed_dim]`` to ``key``/``value``.

        ``key`` and ``value`` default to ``query`` (``[batch, k_len, kdim]`` and
        ``[batch, k_len, vdim]`` otherwise). ``cache`` is a ``Cache`` (its ``k``/``v`` are
        prepended and the extended cache is returned) or a ``StaticCache`` (used in place of
        ``key``/``value``, and returned as it is).

        Returns:
            ``out`` ``[batch, q_len, embed_dim]``; ``(out, weights)`` with ``need_weights``;
            the cache is appended last when one was given.
        """
        if cache is not None and not isinstance(cache, (self.Cache, self.StaticCache)):
            raise TypeError(
                "MultiHeadAttention: cache must be None or made by gen_cache "
                f"(MultiHeadAttention.Cache or .StaticCache), got {type(cache).__name__}"
            )
        if query.ndim != 3 or query.shape[-1] != self.embed_dim:
            raise ValueError(
                f"MultiHeadAttention: query must be [batch, q_len, {self.embed_dim}], got "
                f"{query.shape}"
            )
        key = query if key is None else key
        value = query if value is None else value
        if not isinstance(cache, self.StaticCache):  # (a StaticCache replaces key and value)
            self._check_key_value(query, key, value)
        q, k, v, new_cache = self._prepare_qkv(query, key, value, cache)
        product = _attention.attention_scores(q, k)
        if attn_mask is not None:
            mask = convert_attention_mask(attn_mask, product.dtype)
            _attention._check_mask_shape(mask, product)  # (a wider mask would widen the output)
            product = product + mask
        out, weights = _attention.attend(product, v, self.dropout, self.training)
        out = out.transpose([0, 2, 1, 3])  # [batch, q_len, num_heads, head_dim]
        out = self.out_proj(out.reshape([0, 0, self.embed_dim]))
        outs = [out]
        if self.need_weights:
            outs.append(weights)
        if cache is not None:
            outs.append(new_cache)
        return out if len(outs) == 1 else tuple(outs)

    def _check_key_value(self, query: Tensor, key: Tensor, value: Tensor) -> None:
        """ValueError unless key is ``[batch, k_len, kdim]`` and value ``[batch, k_len, vdim]``,
        with the query's batch."""
        for name, t, width in (("key", key, self.kdim), ("value", value, self.vdim)):
            if t.ndim != 3 or t.shape[0] != query.shape[0] or t.shape[-1] != width:
                raise ValueError(
                    f"MultiHeadAttention: {name} must be [batch {query.shape[0]}, k_len, "
                    f"{width}], got {t.shape} (a missing key or value is the query)"
                )
        if key.shape[1] != value.shape[1]:
            raise ValueError(
                f"MultiHeadAttention: key and value must have the same length (one value per "
                f"key), got key {key.shape} and value {value.shape} (a missing value is the "
                "query, not the key: pass value=key)"
            )

    def extra_repr(self) -> str:
        return (
            f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}, "
            f"kdim={self.kdim}, vdim={self.vdim}, need_weights={self.need_weights}"
        )
