"""Everyday layers: Linear, Dropout, Embedding, Flatten, Identity (Paddle signatures)."""

from __future__ import annotations

import numbers

from ...autograd.ops.nn_ops import check_dropout_axis
from ...autograd.tensor import Tensor
from ...backend import dtypes as _dtypes
from .. import functional as F
from .layers import Layer


def _check_size(layer: str, arg: str, value, allow_zero: bool = False) -> int:
    """``value`` as an int, or a ValueError/TypeError that names the layer and argument."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{layer}: {arg} must be an integer, got {type(value).__name__}")
    lowest = 0 if allow_zero else 1
    if value < lowest:
        kind = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{layer}: {arg} must be a {kind} integer, got {value}")
    return int(value)


def _name_suffix(name) -> str:
    return f", name={name}" if name else ""


class Linear(Layer):
    """``y = x @ weight + bias`` with ``weight`` of shape ``[in_features, out_features]``.

    NOTE: the layout is Paddle's, the transpose of PyTorch's ``[out, in]``: a checkpoint
    converted from PyTorch needs its Linear weights transposed.

    Args:
        in_features: size of the last input dimension.
        out_features: size of the last output dimension.
        weight_attr: a ParamAttr or initializer for the weight (default Xavier uniform,
            ``U[-sqrt(6 / (in + out)), +sqrt(6 / (in + out))]``).
        bias_attr: same for the bias (default zeros); False for no bias.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> fc = nn.Linear(3, 2)
        >>> fc.weight.shape, fc.bias.shape, fc(mt.ones([4, 3])).shape
        ([3, 2], [2], [4, 2])
    """

    def __init__(
        self, in_features: int, out_features: int, weight_attr=None, bias_attr=None, name=None
    ):
        super().__init__(dtype=_dtypes.get_default_dtype())
        in_features = _check_size("Linear", "in_features", in_features)
        out_features = _check_size("Linear", "out_features", out_features)
        self._weight_attr, self._bias_attr = weight_attr, bias_attr
        self.weight = self.create_parameter([in_features, out_features], attr=weight_attr)
        self.bias = self.create_parameter([out_features], attr=bias_attr, is_bias=True)
        self.name = name

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - Paddle's argument name
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        in_f, out_f = self.weight.shape
        return f"in_features={in_f}, out_features={out_f}, dtype={self._dtype}" + _name_suffix(
            self.name
        )


class Dropout(Layer):
    """Zero each element with probability ``p`` while training; the identity in eval mode.

    With ``mode='upscale_in_train'`` (default) kept values are divided by ``1 - p`` while
    training so the expected value is unchanged; with ``'downscale_in_infer'`` training only
    masks, and inference multiplies by ``1 - p`` instead.

    Args:
        p: drop probability, in ``[0, 1]``.
        axis: None drops elements independently; an int or list of ints (in ``[0, ndim)``,
            as in Paddle) draws the mask only along those axes and shares it along the others
            (e.g. whole channels).
        mode: ``'upscale_in_train'`` or ``'downscale_in_infer'``.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> drop = nn.Dropout(0.5).eval()
        >>> drop(mt.ones([3])).numpy()
        array([1., 1., 1.], dtype=float32)
    """

    def __init__(self, p: float = 0.5, axis=None, mode: str = "upscale_in_train", name=None):
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, numbers.Real):
            raise TypeError(f"Dropout: p must be a number, got {type(p).__name__}")
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p is a probability and must be in [0, 1], got {p}")
        if mode not in ("upscale_in_train", "downscale_in_infer"):
            raise ValueError(
                f"Dropout: mode must be 'upscale_in_train' or 'downscale_in_infer', got {mode!r}"
            )
        check_dropout_axis(axis)  # (each input's rank is checked by F.dropout)
        self.p, self.axis, self.mode, self.name = float(p), axis, mode, name

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.dropout(input, p=self.p, axis=self.axis, training=self.training, mode=self.mode)

    def extra_repr(self) -> str:
        return f"p={self.p}, axis={self.axis}, mode={self.mode}" + _name_suffix(self.name)


class Embedding(Layer):
    """A lookup table: row ``i`` of ``weight`` (shape ``[num_embeddings, embedding_dim]``).

    Args:
        num_embeddings: number of rows (the vocabulary size).
        embedding_dim: size of each row.
        padding_idx: a row that is initialised to zeros and receives no gradient (negative
            values count from the end); None for none.
        sparse: accepted for Paddle compatibility; gradients are always dense here.
        weight_attr: a ParamAttr or initializer for the table (default Xavier uniform).

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> emb = nn.Embedding(10, 4, padding_idx=0)
        >>> out = emb(mt.to_tensor([[0, 3]]))
        >>> out.shape, out.numpy()[0, 0].tolist()
        ([1, 2, 4], [0.0, 0.0, 0.0, 0.0])
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        sparse: bool = False,
        weight_attr=None,
        name=None,
    ):
        super().__init__(dtype=_dtypes.get_default_dtype())
        num_embeddings = _check_size("Embedding", "num_embeddings", num_embeddings)
        embedding_dim = _check_size("Embedding", "embedding_dim", embedding_dim)
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(
                    f"Embedding: padding_idx must be in [-{num_embeddings}, {num_embeddings}), "
                    f"got {padding_idx}"
                )
            padding_idx = int(padding_idx) % num_embeddings
        self._num_embeddings, self._embedding_dim = num_embeddings, embedding_dim
        self._padding_idx, self._sparse, self._weight_attr = padding_idx, bool(sparse), weight_attr
        self.weight = self.create_parameter([num_embeddings, embedding_dim], attr=weight_attr)
        if padding_idx is not None:
            self.weight._data[padding_idx] = 0  # in place, before any graph exists
        self.name = name

    def forward(self, x: Tensor) -> Tensor:
        return F.embedding(x, self.weight, padding_idx=self._padding_idx, sparse=self._sparse)

    def extra_repr(self) -> str:
        text = f"{self._num_embeddings}, {self._embedding_dim}"
        if self._padding_idx is not None:
            text += f", padding_idx={self._padding_idx}"
        return text + f", sparse={self._sparse}" + _name_suffix(self.name)


class Flatten(Layer):
    """Merge the axes ``start_axis..stop_axis`` into one: ``[N, C, H, W] -> [N, C*H*W]``.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> nn.Flatten()(mt.ones([2, 3, 4])).shape
        [2, 12]
    """

    def __init__(self, start_axis: int = 1, stop_axis: int = -1):
        super().__init__()
        self.start_axis, self.stop_axis = int(start_axis), int(stop_axis)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return input.flatten(self.start_axis, self.stop_axis)

    def extra_repr(self) -> str:
        return f"start_axis={self.start_axis}, stop_axis={self.stop_axis}"


class Identity(Layer):
    """Returns its input unchanged; a placeholder (arguments are accepted and ignored)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):  # noqa: A002
        return input
