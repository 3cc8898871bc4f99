"""Initializers with a structure rather than a distribution, Paddle's ``Orthogonal``, ``Dirac``
and ``Bilinear`` (``paddle.nn.initializer``; re-exported from :mod:`.initializer`).

* :class:`Orthogonal`: a random (semi-)orthogonal matrix, times ``gain``;
* :class:`Dirac`: a convolution weight that passes its input through (an identity);
* :class:`Bilinear`: a transposed-convolution weight that upsamples by bilinear interpolation.

Each value is computed in float32 (float64 for a float64 parameter) and rounded to the
parameter's dtype once (round to nearest even): Dirac's and Bilinear's values are exact in
float16 and bfloat16 too (0, 1, and sums of a few powers of 2 for the usual kernel sizes).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..backend import random as _random
from .initializer_base import Initializer, _check_floating, _draw_dtype

__all__ = ["Bilinear", "Dirac", "Orthogonal"]


class Orthogonal(Initializer):
    """A (semi-)orthogonal matrix times ``gain``, on the parameter flattened to ``[rows, cols]``.

    ``rows = shape[0]``, ``cols = shape[1] * ... * shape[-1]`` (Paddle's convention). With
    ``rows <= cols`` the rows are orthonormal (``W @ W.T = gain**2 I``), else the columns
    (``W.T @ W = gain**2 I``). A Linear weight is ``[in, out]``: ``Linear(10, 15)`` gets
    orthonormal rows, ``Linear(15, 10)`` orthonormal columns.

    Drawn as Paddle draws it: ``A ~ N(0, 1)`` of shape ``[max(rows, cols), min(rows, cols)]``,
    ``Q, R = qr(A)``, ``Q * sign(diag(R))`` (so that ``Q`` is uniform over the orthogonal
    matrices), transposed when ``rows < cols``.

    Args:
        gain: the scale of the result (e.g. ``calculate_gain('relu')``).

    Example:
        >>> import numpy as np
        >>> from minitorch_amp import nn
        >>> w = nn.Linear(4, 6, weight_attr=nn.initializer.Orthogonal(gain=2.0)).weight.numpy()
        >>> np.allclose(w @ w.T, 4.0 * np.eye(4), atol=1e-5)
        True
    """

    def __init__(self, gain: float = 1.0, name=None):
        if isinstance(gain, bool) or not isinstance(gain, numbers.Real):
            raise TypeError(f"Orthogonal: gain must be a number, got {gain!r}")
        self.gain = float(gain)

    def _generate(self, shape, dtype, xp):
        if len(shape) < 2:
            raise ValueError(
                f"Orthogonal initializes a parameter of 2 or more dims, got shape {list(shape)}"
            )
        _check_floating("Orthogonal", dtype)
        rows, cols = int(shape[0]), math.prod(int(n) for n in shape[1:])
        draw = _draw_dtype(dtype)
        a = _random.generator(xp).standard_normal((max(rows, cols), min(rows, cols)), dtype=draw)
        q, r = xp.linalg.qr(a, mode="reduced")
        q = q * xp.sign(xp.diagonal(r))  # NOTE: without it Q is not uniformly distributed
        if rows < cols:
            q = q.T
        return (q.reshape(tuple(shape)) * self.gain).astype(dtype)


class Dirac(Initializer):
    """A convolution weight ``[out_c, in_c, k...]`` (3, 4 or 5 dims) that keeps its input.

    ``W[g * n + d, d, k0 // 2, k1 // 2, ...] = 1`` for each group ``g`` and
    ``d < min(n, in_c)``, where ``n = out_c // groups``; every other element is 0. A
    convolution with it copies input channel ``d`` to output channel ``d`` of each group
    (cropped by the kernel's border unless padded).

    Args:
        groups: the number of groups the output channels are split into (``out_c`` must be a
            multiple of it).

    Example:
        >>> from minitorch_amp import nn
        >>> conv = nn.Conv1D(3, 2, 3, weight_attr=nn.initializer.Dirac())
        >>> conv.weight.numpy().tolist()
        [[[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]]
    """  # noqa: E501 (a printed value)

    def __init__(self, groups: int = 1, name=None):
        if isinstance(groups, bool) or not isinstance(groups, numbers.Integral) or groups < 1:
            raise ValueError(f"Dirac: groups must be a positive int, got {groups!r}")
        self.groups = int(groups)

    def _generate(self, shape, dtype, xp):
        if len(shape) not in (3, 4, 5):
            raise ValueError(
                f"Dirac initializes a convolution weight of 3, 4 or 5 dims, got shape {list(shape)}"
            )
        _check_floating("Dirac", dtype)
        out_c, in_c = int(shape[0]), int(shape[1])
        if out_c % self.groups:
            raise ValueError(
                f"Dirac: the weight's {out_c} output channels (shape[0]) are not divisible by "
                f"groups={self.groups}"
            )
        per_group = out_c // self.groups
        centre = tuple(int(k) // 2 for k in shape[2:])
        out = xp.zeros(tuple(shape), dtype=dtype)
        for g in range(self.groups):
            for d in range(min(per_group, in_c)):
                out[(g * per_group + d, d, *centre)] = 1
        return out


class Bilinear(Initializer):
    """A transposed-convolution weight ``[C, 1, K, K]`` that upsamples by bilinear interpolation.

    Every ``[K, K]`` kernel is the same:
    ``W[..., y, x] = (1 - |x / f - c|) * (1 - |y / f - c|)`` with ``f = ceil(K / 2)`` and
    ``c = (2f - 1 - f % 2) / (2f)``. In Paddle it is given to
    ``Conv2DTranspose(C, C, kernel_size=2 * factor - factor % 2, stride=factor,
    padding=ceil((factor - 1) / 2), groups=C)`` to upsample by an integer ``factor``, with
    learning rate and weight decay 0 to keep the kernel (this library has no transposed
    convolution layer: create the weight with ``Layer.create_parameter``).

    NOTE: Paddle 2.x computes the row index ``y`` with ``/`` (``(i / K) % K``), a true
    division in Python 3, so its kernels are not bilinear. Here ``y`` is the row, as in Caffe's
    filler the code comes from (MXNet fixed the same slip in apache/mxnet#12983).

    Example:
        >>> from minitorch_amp import nn
        >>> w = nn.Layer().create_parameter([1, 1, 4, 4], attr=nn.initializer.Bilinear())
        >>> w.numpy()[0, 0].tolist()
        [[0.0625, 0.1875, 0.1875, 0.0625], [0.1875, 0.5625, 0.5625, 0.1875], [0.1875, 0.5625, 0.5625, 0.1875], [0.0625, 0.1875, 0.1875, 0.0625]]
    """  # noqa: E501 (a printed value)

    def __init__(self, name=None):
        """``name`` is Paddle's argument, the name of its initializer op (none here)."""

    def _generate(self, shape, dtype, xp):
        if len(shape) != 4 or shape[2] != shape[3]:
            raise ValueError(
                "Bilinear initializes a transposed-convolution weight [C, 1, K, K] (4 dims, "
                f"square kernel), got shape {list(shape)}"
            )
        _check_floating("Bilinear", dtype)
        size = int(shape[3])
        f = math.ceil(size / 2.0)
        c = (2 * f - 1 - f % 2) / (2.0 * f)
        ramp = 1.0 - np.abs(np.arange(size, dtype=_draw_dtype(dtype)) / f - c)
        kernel = np.outer(ramp, ramp)  # [y, x]
        return xp.broadcast_to(xp.asarray(kernel), tuple(shape)).astype(dtype)
