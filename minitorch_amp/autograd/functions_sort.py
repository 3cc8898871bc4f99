"""Sorting, top-k and sampling, with Paddle's names and signatures: ``sort``, ``argsort``,
``topk``, ``multinomial``.

Positions come from an op with an int64 result (no gradient); values are
``take_along_axis`` of the input at those positions, which carries the gradient back to the
entries that were picked. Sorts are stable: equal values keep their order (Paddle's
``stable=False`` leaves that order open, so stable is a valid answer for it too).

Example:
    >>> import minitorch_amp as mt
    >>> values, indices = mt.topk(mt.to_tensor([1.0, 4.0, 5.0, 7.0]), k=2)
    >>> values.numpy(), indices.numpy()
    (array([7., 5.], dtype=float32), array([3, 2]))
"""

from __future__ import annotations

from . import ops as _ops
from .dispatch import apply
from .functions_index import _int, _tensor
from .tensor import Tensor


def _values(x: Tensor, indices: Tensor, axis: int) -> Tensor:
    if x.ndim == 0:  # the one value, still in the graph
        return apply(_ops.Assign, x)
    return apply(_ops.TakeAlongAxis, x, indices, axis=axis)


def argsort(x, axis: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """Positions (int64) that sort ``x`` along ``axis``; always stable (ties keep their
    order), which ``stable=False`` allows."""
    x = _tensor(x, "argsort")
    return apply(_ops.ArgSort, x, axis=_int(axis, "argsort: axis"), descending=bool(descending))


def sort(x, axis: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """``x`` sorted along ``axis`` (Paddle returns the values only; :func:`argsort` gives the
    positions). The gradient goes back to where each value came from.

    Example:
        >>> import minitorch_amp as mt
        >>> mt.sort(mt.to_tensor([[3.0, 1.0, 2.0]]), descending=True).numpy()
        array([[3., 2., 1.]], dtype=float32)
    """
    x = _tensor(x, "sort")
    axis = _int(axis, "sort: axis")
    return _values(x, argsort(x, axis, descending, stable), axis)


def topk(x, k, axis=None, largest: bool = True, sorted: bool = True) -> tuple[Tensor, Tensor]:  # noqa: A002
    """The ``k`` largest entries along ``axis`` (default: the last) and their positions
    (int64), largest first; ``largest=False``: the smallest, smallest first. ``k`` may be a
    one-element tensor. Results always come sorted (``sorted=False`` allows any order)."""
    x = _tensor(x, "topk")
    axis = -1 if axis is None else _int(axis, "topk: axis")
    k = _int(k, "topk: k")
    indices = apply(_ops.TopK, x, k=k, axis=axis, largest=bool(largest))
    return _values(x, indices, axis), indices


def multinomial(x, num_samples: int = 1, replacement: bool = False) -> Tensor:
    """Category draws (int64) from the probabilities ``x`` (``[C]`` or ``[B, C]``, need not
    sum to 1), ``num_samples`` per row; ``replacement=False`` draws each category at most
    once. Reproducible after ``seed(n)``.

    Example:
        >>> import minitorch_amp as mt
        >>> mt.multinomial(mt.to_tensor([0.0, 1.0, 0.0]), num_samples=2, replacement=True).numpy()
        array([1, 1])
    """
    return apply(
        _ops.Multinomial,
        _tensor(x, "multinomial"),
        num_samples=num_samples,
        replacement=bool(replacement),
    )


__all__ = ["argsort", "multinomial", "sort", "topk"]
