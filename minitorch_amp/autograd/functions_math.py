"""More maths with Paddle's names and signatures: ``einsum``, ``bmm``, ``cumsum``,
``rsqrt``.

AMP (Paddle's lists): ``einsum`` is white (runs in float16/bfloat16), ``cumsum`` and
``rsqrt`` are black (float32 at O1), ``bmm`` is on no list and follows its inputs (unlike
``matmul``, and unlike PyTorch's autocast, which runs ``bmm`` in float16).

Example:
    >>> import minitorch_amp as mt
    >>> a, b = mt.ones([2, 2, 3]), mt.ones([2, 3, 4])
    >>> mt.einsum("bij,bjk->bik", a, b).shape, mt.bmm(a, b).shape
    ([2, 2, 4], [2, 2, 4])
"""

from __future__ import annotations

from . import ops as _ops
from .dispatch import apply
from .functions_index import _int, _tensor
from .tensor import Tensor


def einsum(equation: str, *operands) -> Tensor:
    """Sums of products named by ``equation``: ``"ij,jk->ik"`` is a matrix product, ``"ij->"``
    a sum, ``"...ij->...ji"`` a transpose of the last two axes. Without ``->`` the output is
    the ``...`` dimensions then the letters used once, in alphabetical order. A letter
    repeated within one operand (a diagonal) is not supported, as in Paddle.

    Example:
        >>> import minitorch_amp as mt
        >>> x = mt.to_tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> mt.einsum("ij,j->i", x, mt.to_tensor([1.0, 1.0])).numpy()
        array([3., 7.], dtype=float32)
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise TypeError(f"einsum: equation must be a string, got {type(equation).__name__}")
    if not operands:
        raise ValueError("einsum needs at least one operand")
    for t in operands:
        _tensor(t, "einsum")
    return apply(_ops.Einsum, *operands, equation=equation)


def bmm(x, y) -> Tensor:
    """Batched matrix product of ``[b, n, k]`` and ``[b, k, m]`` (no broadcasting)."""
    return apply(_ops.Bmm, _tensor(x, "bmm"), _tensor(y, "bmm"))


def cumsum(x, axis=None, dtype=None) -> Tensor:
    """Running sum along ``axis`` (over the flattened tensor when None); ``dtype`` casts ``x``
    first. float16 sums in float32, rounded once per element.

    Example:
        >>> import minitorch_amp as mt
        >>> mt.cumsum(mt.to_tensor([[1, 2], [3, 4]])).numpy()
        array([ 1,  3,  6, 10])
    """
    x = _tensor(x, "cumsum")
    if dtype is not None:
        x = x.astype(dtype)
    if axis is None:
        return apply(_ops.Cumsum, x._reshape_to([x.size]), axis=0)
    return apply(_ops.Cumsum, x, axis=_int(axis, "cumsum: axis"))


def rsqrt(x) -> Tensor:
    """``1 / sqrt(x)``."""
    return apply(_ops.Rsqrt, _tensor(x, "rsqrt"))


__all__ = ["bmm", "cumsum", "einsum", "rsqrt"]
