"""Transformer encoder and decoder layers, their stacks and ``Transformer`` (Paddle's API).

Each sublayer (self-attention, cross-attention, feed-forward) is wrapped the same way:

* ``normalize_before=False`` (post-norm, the default): ``x = norm(x + dropout(sublayer(x)))``;
* ``normalize_before=True`` (pre-norm, GPT-2 style): ``x = x + dropout(sublayer(norm(x)))``.

Masks follow :class:`MultiHeadAttention`: bool (True attends), int (1 attends) or float
(added); they are converted once to the input's dtype (``(mask - 1) * 1e9`` for bool/int,
computed in float32: kept positions are exactly 0 in every dtype).
"""

from __future__ import annotations

import numpy as np

from ...autograd.creation import to_tensor
from ...autograd.tensor import Tensor
from ...backend import dtypes as _dtypes
from .attention import MultiHeadAttention, convert_attention_mask
from .common import Dropout, Linear, _check_size
from .container import LayerList
from .layers import Layer
from .norm import LayerNorm
from .transformer_args import _activation, _param_attrs, _split_attrs


class _SublayerMixin:
    """The residual wrapper shared by the encoder and decoder layers."""

    def _pre(self, x: Tensor, norm: LayerNorm) -> Tensor:
        return norm(x) if self.normalize_before else x

    def _post(self, residual: Tensor, x: Tensor, drop: Dropout, norm: LayerNorm) -> Tensor:
        x = residual + drop(x)
        return x if self.normalize_before else norm(x)

    def _feed_forward(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(self.activation(self.linear1(x))))


class TransformerEncoderLayer(_SublayerMixin, Layer):
    """Self-attention then a feed-forward network, each with dropout, residual and LayerNorm.

    Args:
        d_model: the feature size of the input and output.
        nhead: the number of attention heads.
        dim_feedforward: the hidden size of the feed-forward network.
        dropout: the dropout after each sublayer (and the default of the next two).
        activation: the feed-forward activation, a name in ``nn.functional`` ('relu', 'gelu').
        attn_dropout: the dropout of the attention weights (default ``dropout``).
        act_dropout: the dropout after the activation (default ``dropout``).
        normalize_before: pre-norm instead of post-norm.
        weight_attr: one attribute for all weights, or ``[attention, feed-forward]``.
        bias_attr: the same for the biases (False: none).
        layer_norm_eps: the LayerNorms' epsilon.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> layer = nn.TransformerEncoderLayer(16, nhead=4, dim_feedforward=32)
        >>> layer(mt.randn([2, 7, 16])).shape
        [2, 7, 16]
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int,
        dropout: float = 0.1,
        activation: str = "relu",
        attn_dropout: float | None = None,
        act_dropout: float | None = None,
        normalize_before: bool = False,
        weight_attr=None,
        bias_attr=None,
        layer_norm_eps: float = 1e-5,
    ):
        self._config = {k: v for k, v in locals().items() if k not in ("self", "__class__")}
        super().__init__()
        name = "TransformerEncoderLayer"
        _check_size(name, "dim_feedforward", dim_feedforward)
        weights = _param_attrs(weight_attr, 2, name, "weight_attr")
        biases = _param_attrs(bias_attr, 2, name, "bias_attr")
        self.normalize_before = bool(normalize_before)
        attn_dropout = dropout if attn_dropout is None else attn_dropout
        act_dropout = dropout if act_dropout is None else act_dropout
        self.self_attn = MultiHeadAttention(
            d_model, nhead, dropout=attn_dropout, weight_attr=weights[0], bias_attr=biases[0]
        )
        self.linear1 = Linear(d_model, dim_feedforward, weights[1], bias_attr=biases[1])
        self.dropout = Dropout(act_dropout)
        self.linear2 = Linear(dim_feedforward, d_model, weights[1], bias_attr=biases[1])
        self.norm1 = LayerNorm(d_model, epsilon=layer_norm_eps)
        self.norm2 = LayerNorm(d_model, epsilon=layer_norm_eps)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation, name)

    def forward(self, src: Tensor, src_mask: Tensor | None = None, cache=None):
        """``src`` ``[batch, seq, d_model]``; with a ``cache`` (``gen_cache``) also the new one."""
        src_mask = convert_attention_mask(src_mask, src.dtype)
        residual, x = src, self._pre(src, self.norm1)
        if cache is None:
            x = self.self_attn(x, x, x, src_mask)
        else:
            x, cache = self.self_attn(x, x, x, src_mask, cache)
        x = self._post(residual, x, self.dropout1, self.norm1)
        residual = x
        x = self._post(
            residual, self._feed_forward(self._pre(x, self.norm2)), self.dropout2, self.norm2
        )
        return x if cache is None else (x, cache)

    def gen_cache(self, src: Tensor):
        """An empty ``MultiHeadAttention.Cache`` for the self-attention (batch from ``src``)."""
        return self.self_attn.gen_cache(src, type=MultiHeadAttention.Cache)


class TransformerEncoder(Layer):
    """``num_layers`` encoder layers, then ``norm`` if given.

    NOTE: as in Paddle, the layers after the first are new layers built from the first one's
    arguments (fresh initial weights); PyTorch deep-copies the first (equal initial weights).

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> layer = nn.TransformerEncoderLayer(16, 4, 32, normalize_before=True)
        >>> encoder = nn.TransformerEncoder(layer, num_layers=3, norm=nn.LayerNorm(16))
        >>> len(encoder.layers), encoder(mt.randn([2, 7, 16])).shape
        (3, [2, 7, 16])
    """

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int, norm=None):
        super().__init__()
        num_layers = _check_size("TransformerEncoder", "num_layers", num_layers)
        cls, config = type(encoder_layer), encoder_layer._config
        self.layers = LayerList([encoder_layer] + [cls(**config) for _ in range(num_layers - 1)])
        self.num_layers, self.norm = num_layers, norm

    def forward(self, src: Tensor, src_mask: Tensor | None = None, cache=None):
        """``src`` ``[batch, seq, d_model]``; ``cache`` is a list, one per layer (``gen_cache``)."""
        src_mask = convert_attention_mask(src_mask, src.dtype)
        output, new_caches = src, []
        for i, layer in enumerate(self.layers):
            if cache is None:
                output = layer(output, src_mask=src_mask)
            else:
                output, layer_cache = layer(output, src_mask=src_mask, cache=cache[i])
                new_caches.append(layer_cache)
        if self.norm is not None:
            output = self.norm(output)
        return output if cache is None else (output, new_caches)

    def gen_cache(self, src: Tensor) -> list:
        return [layer.gen_cache(src) for layer in self.layers]


class TransformerDecoderLayer(_SublayerMixin, Layer):
    """Self-attention, cross-attention to the encoder's output, then a feed-forward network.

    Takes the arguments of :class:`TransformerEncoderLayer`; a list ``weight_attr`` or
    ``bias_attr`` has three items: self-attention, cross-attention, feed-forward.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> layer = nn.TransformerDecoderLayer(16, nhead=4, dim_feedforward=32)
        >>> tgt, memory = mt.randn([2, 5, 16]), mt.randn([2, 7, 16])
        >>> mask = nn.Transformer.generate_square_subsequent_mask(5)
        >>> layer(tgt, memory, tgt_mask=mask).shape
        [2, 5, 16]
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int,
        dropout: float = 0.1,
        activation: str = "relu",
        attn_dropout: float | None = None,
        act_dropout: float | None = None,
        normalize_before: bool = False,
        weight_attr=None,
        bias_attr=None,
        layer_norm_eps: float = 1e-5,
    ):
        self._config = {k: v for k, v in locals().items() if k not in ("self", "__class__")}
        super().__init__()
        name = "TransformerDecoderLayer"
        _check_size(name, "dim_feedforward", dim_feedforward)
        weights = _param_attrs(weight_attr, 3, name, "weight_attr")
        biases = _param_attrs(bias_attr, 3, name, "bias_attr")
        self.normalize_before = bool(normalize_before)
        attn_dropout = dropout if attn_dropout is None else attn_dropout
        act_dropout = dropout if act_dropout is None else act_dropout
        self.self_attn = MultiHeadAttention(
            d_model, nhead, dropout=attn_dropout, weight_attr=weights[0], bias_attr=biases[0]
        )
        self.cross_attn = MultiHeadAttention(
            d_model, nhead, dropout=attn_dropout, weight_attr=weights[1], bias_attr=biases[1]
        )
        self.linear1 = Linear(d_model, dim_feedforward, weights[2], bias_attr=biases[2])
        self.dropout = Dropout(act_dropout)
        self.linear2 = Linear(dim_feedforward, d_model, weights[2], bias_attr=biases[2])
        self.norm1 = LayerNorm(d_model, epsilon=layer_norm_eps)
        self.norm2 = LayerNorm(d_model, epsilon=layer_norm_eps)
        self.norm3 = LayerNorm(d_model, epsilon=layer_norm_eps)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation, name)

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask=None, memory_mask=None, cache=None):
        """``tgt`` ``[batch, tgt_len, d_model]`` attending to ``memory`` ``[batch, src_len,
        d_model]``; ``cache`` is ``(Cache, StaticCache)`` from ``gen_cache``, and the new
        pair is returned with the output."""
        tgt_mask = convert_attention_mask(tgt_mask, tgt.dtype)
        memory_mask = convert_attention_mask(memory_mask, memory.dtype)
        residual, x = tgt, self._pre(tgt, self.norm1)
        if cache is None:
            x = self.self_attn(x, x, x, tgt_mask, None)
        else:
            x, incremental = self.self_attn(x, x, x, tgt_mask, cache[0])
        x = self._post(residual, x, self.dropout1, self.norm1)
        residual, x = x, self._pre(x, self.norm2)
        if cache is None:
            x = self.cross_attn(x, memory, memory, memory_mask, None)
        else:
            x, static = self.cross_attn(x, memory, memory, memory_mask, cache[1])
        x = self._post(residual, x, self.dropout2, self.norm2)
        residual = x
        x = self._post(
            residual, self._feed_forward(self._pre(x, self.norm3)), self.dropout3, self.norm3
        )
        return x if cache is None else (x, (incremental, static))

    def gen_cache(self, memory: Tensor) -> tuple:
        """``(Cache, StaticCache)``: empty self-attention keys/values, and the cross-attention
        keys/values of ``memory``, projected once."""
        incremental = self.self_attn.gen_cache(memory, type=MultiHeadAttention.Cache)
        static = self.cross_attn.gen_cache(memory, memory, type=MultiHeadAttention.StaticCache)
        return incremental, static


class TransformerDecoder(Layer):
    """``num_layers`` decoder layers, then ``norm`` if given (built like TransformerEncoder)."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm=None):
        super().__init__()
        num_layers = _check_size("TransformerDecoder", "num_layers", num_layers)
        cls, config = type(decoder_layer), decoder_layer._config
        self.layers = LayerList([decoder_layer] + [cls(**config) for _ in range(num_layers - 1)])
        self.num_layers, self.norm = num_layers, norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask=None, memory_mask=None, cache=None):
        tgt_mask = convert_attention_mask(tgt_mask, tgt.dtype)
        memory_mask = convert_attention_mask(memory_mask, memory.dtype)
        output, new_caches = tgt, []
        for i, layer in enumerate(self.layers):
            if cache is None:
                output = layer(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask)
            else:
                output, layer_cache = layer(output, memory, tgt_mask, memory_mask, cache[i])
                new_caches.append(layer_cache)
        if self.norm is not None:
            output = self.norm(output)
        return output if cache is None else (output, new_caches)

    def gen_cache(self, memory: Tensor, do_zip: bool = False) -> list:
        """One ``(Cache, StaticCache)`` per layer; ``do_zip`` gives ``[caches, static caches]``."""
        cache = [layer.gen_cache(memory) for layer in self.layers]
        return list(zip(*cache)) if do_zip else cache


class Transformer(Layer):
    """An encoder and a decoder (post-norm by default), each ending in a LayerNorm.

    Embeddings and the output projection are not included. ``custom_encoder`` and
    ``custom_decoder`` replace the stacks built from the other arguments.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> model = nn.Transformer(16, 4, num_encoder_layers=2, num_decoder_layers=2,
        ...                        dim_feedforward=32)
        >>> src, tgt = mt.randn([2, 7, 16]), mt.randn([2, 5, 16])
        >>> model(src, tgt, tgt_mask=model.generate_square_subsequent_mask(5)).shape
        [2, 5, 16]
    """

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str = "relu",
        attn_dropout: float | None = None,
        act_dropout: float | None = None,
        normalize_before: bool = False,
        weight_attr=None,
        bias_attr=None,
        custom_encoder=None,
        custom_decoder=None,
    ):
        super().__init__()
        enc_w, dec_w = _split_attrs(weight_attr, "weight_attr")
        enc_b, dec_b = _split_attrs(bias_attr, "bias_attr")
        args = (d_model, nhead, dim_feedforward, dropout, activation, attn_dropout, act_dropout)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(*args, normalize_before, enc_w, enc_b)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, LayerNorm(d_model))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(*args, normalize_before, dec_w, dec_b)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, LayerNorm(d_model))
        self.d_model, self.nhead = d_model, nhead

    def forward(self, src: Tensor, tgt: Tensor, src_mask=None, tgt_mask=None, memory_mask=None):
        """The decoder's output ``[batch, tgt_len, d_model]`` for ``src`` and ``tgt``."""
        src_mask = convert_attention_mask(src_mask, src.dtype)
        memory = self.encoder(src, src_mask=src_mask)
        tgt_mask = convert_attention_mask(tgt_mask, tgt.dtype)
        memory_mask = convert_attention_mask(memory_mask, memory.dtype)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask)

    @staticmethod
    def generate_square_subsequent_mask(length) -> Tensor:
        """A ``[length, length]`` float mask: 0 on and below the diagonal, ``-inf`` above.

        ``length`` is an int or a one-element integer Tensor; a float, a string or a bool is
        refused with a TypeError (it was truncated or parsed).

        Example:
            >>> from minitorch_amp import nn
            >>> nn.Transformer.generate_square_subsequent_mask(3).numpy()
            array([[  0., -inf, -inf],
                   [  0.,   0., -inf],
                   [  0.,   0.,   0.]], dtype=float32)
        """
        what = "Transformer.generate_square_subsequent_mask"
        if isinstance(length, Tensor):  # a one-element integer tensor, as Paddle's callers pass
            if length.size != 1:
                raise TypeError(
                    f"{what}: length must be an integer or a one-element integer Tensor, got a "
                    f"Tensor of shape {length.shape}"
                )
            length = length.item()  # (a float or bool tensor's item is refused below)
        n = _check_size(what, "length", length, allow_zero=True)  # no 2.7, '3' or True
        mask = np.triu(np.full((n, n), -np.inf), 1)
        return to_tensor(mask, dtype=_dtypes.get_default_dtype())
