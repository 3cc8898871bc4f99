"""RMSNorm: root-mean-square layer normalisation (LLaMA-style transformers)."""

from __future__ import annotations

import numbers

import numpy as np

from ...autograd.tensor import Tensor
from ...backend import dtypes as _dtypes
from .. import functional as F
from ..initializer import Constant
from .common import _check_size
from .layers import Layer


class RMSNorm(Layer):
    """Divide by the root mean square over the last ``len(normalized_shape)`` axes, then scale.

    ``y = x / sqrt(mean(x^2) + epsilon) * weight``: :class:`LayerNorm` without subtracting the
    mean and without a bias. Under ``auto_cast`` O1 it runs in float32, like LayerNorm.

    Args:
        normalized_shape: the trailing shape to normalise over (an int for one axis).
        epsilon: added to the mean square (PyTorch's ``eps=`` is accepted too).
        weight_attr: ParamAttr/initializer for the scale (default ones); False for none
            (PyTorch's ``elementwise_affine=False`` says the same).

    NOTE: as LayerNorm's, ``weight`` is 1-D with ``prod(normalized_shape)`` elements.
    ``decorate(level='O2')`` casts it with the model: Paddle keeps only its batch, layer and
    instance norms in float32, and the op computes in float32 whatever the weight's dtype.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> norm = nn.RMSNorm(2, epsilon=0.0)
        >>> norm(mt.to_tensor([[3.0, 4.0]])).numpy(), norm.weight.shape
        (array([[0.84852815, 1.1313709 ]], dtype=float32), [2])
    """

    def __init__(
        self,
        normalized_shape,
        epsilon: float = 1e-05,
        weight_attr=None,
        name=None,
        *,
        eps: float | None = None,
        elementwise_affine: bool = True,
    ):
        super().__init__(dtype=_dtypes.get_default_dtype())
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = [normalized_shape]
        self._normalized_shape = [
            _check_size("RMSNorm", "normalized_shape", n) for n in normalized_shape
        ]
        if not self._normalized_shape:
            raise ValueError("RMSNorm: normalized_shape must name at least one axis")
        epsilon = epsilon if eps is None else eps
        if epsilon < 0:
            raise ValueError(f"RMSNorm: epsilon must be >= 0, got {epsilon}")
        self._epsilon, self._weight_attr, self.name = float(epsilon), weight_attr, name
        attr = False if not elementwise_affine else weight_attr
        self.weight = self.create_parameter(
            [int(np.prod(self._normalized_shape))], attr=attr, default_initializer=Constant(1.0)
        )

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - Paddle's argument name
        return F.rms_norm(input, self._normalized_shape, self.weight, self._epsilon)

    def extra_repr(self) -> str:
        return f"normalized_shape={self._normalized_shape}, epsilon={self._epsilon}"
