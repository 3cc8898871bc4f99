"""The public tensor functions, with Paddle 2.x names and signatures (``paddle.add`` ...).

Each is a thin call into the op table through :func:`apply`, or the Tensor method that already
does the same (so argument handling lives in one place). Arguments that may be Python numbers
(``y`` of ``add``, ``x``/``y`` of ``where``) are weak constants: ``add(x16, 1.0)`` stays
float16.

Example:
    >>> import minitorch_amp as mt
    >>> x = mt.to_tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> mt.sum(mt.multiply(x, x), axis=1).numpy()
    array([ 5., 25.], dtype=float32)
"""

from __future__ import annotations

from ..backend import dtypes as _dtypes
from . import ops as _ops
from .dispatch import apply
from .tensor import Tensor


def _tensor(x, fn: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(
            f"{fn} expects a Tensor, got {type(x).__name__}; wrap the data with to_tensor(...)"
        )
    return x


# ---- elementwise arithmetic (broadcasting) -------------------------------------------------------
def add(x, y) -> Tensor:
    """``x + y`` with broadcasting."""
    return apply(_ops.Add, x, y)


def subtract(x, y) -> Tensor:
    """``x - y`` with broadcasting."""
    return apply(_ops.Subtract, x, y)


def multiply(x, y) -> Tensor:
    """``x * y`` with broadcasting."""
    return apply(_ops.Multiply, x, y)


def divide(x, y) -> Tensor:
    """``x / y`` with broadcasting (true division)."""
    return apply(_ops.Divide, x, y)


def pow(x, y) -> Tensor:  # noqa: A001 - Paddle's name
    """``x ** y``; ``y`` is a tensor or a Python number."""
    return apply(_ops.Pow, x, y)


def neg(x) -> Tensor:
    """``-x``."""
    return apply(_ops.Neg, x)


def square(x) -> Tensor:
    """``x * x``."""
    return apply(_ops.Square, x)


def sqrt(x) -> Tensor:
    """Square root."""
    return apply(_ops.Sqrt, x)


def exp(x) -> Tensor:
    """``e ** x``."""
    return apply(_ops.Exp, x)


def log(x) -> Tensor:
    """Natural logarithm."""
    return apply(_ops.Log, x)


def abs(x) -> Tensor:  # noqa: A001 - Paddle's name
    """``|x|`` (gradient ``sign(x)``, 0 at 0)."""
    return apply(_ops.Abs, x)


def tanh(x) -> Tensor:
    """Hyperbolic tangent."""
    return apply(_ops.Tanh, x)


def sigmoid(x) -> Tensor:
    """``1 / (1 + exp(-x))``."""
    return apply(_ops.Sigmoid, x)


def clip(x, min=None, max=None) -> Tensor:  # noqa: A002 - Paddle's names
    """Clamp ``x`` to ``[min, max]``; either bound may be None."""
    return _tensor(x, "clip").clip(min, max)


# ---- comparisons (bool results, never differentiated) --------------------------------------------
def equal(x, y) -> Tensor:
    return apply(_ops.Compare, x, y, relation="equal")


def not_equal(x, y) -> Tensor:
    return apply(_ops.Compare, x, y, relation="not_equal")


def less_than(x, y) -> Tensor:
    return apply(_ops.Compare, x, y, relation="less")


def less_equal(x, y) -> Tensor:
    return apply(_ops.Compare, x, y, relation="less_equal")


def greater_than(x, y) -> Tensor:
    return apply(_ops.Compare, x, y, relation="greater")


def greater_equal(x, y) -> Tensor:
    return apply(_ops.Compare, x, y, relation="greater_equal")


# ---- linear algebra ------------------------------------------------------------------------------
def matmul(x, y, transpose_x: bool = False, transpose_y: bool = False) -> Tensor:
    """``op(x) @ op(y)`` where ``op`` swaps the last two axes when its flag is set.

    1-D operands are vectors (as in NumPy); leading batch dimensions broadcast.
    """
    return _tensor(x, "matmul").matmul(y, transpose_x=transpose_x, transpose_y=transpose_y)


# ---- reductions ----------------------------------------------------------------------------------
def sum(x, axis=None, dtype=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """Sum over ``axis`` (int, list, or None for all); float16 accumulates in float32.
    With ``dtype``, ``x`` is cast to it first and summed in it (Paddle)."""
    return _tensor(x, "sum").sum(axis=axis, dtype=dtype, keepdim=keepdim)


def mean(x, axis=None, keepdim: bool = False) -> Tensor:
    """Arithmetic mean over ``axis`` (all axes when None)."""
    return _tensor(x, "mean").mean(axis=axis, keepdim=keepdim)


def max(x, axis=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """Maximum over ``axis``; each tied maximum gets the whole gradient (Paddle's ``max``)."""
    return _tensor(x, "max").max(axis=axis, keepdim=keepdim)


def argmax(x, axis=None, keepdim: bool = False, dtype="int64") -> Tensor:
    """Index of the maximum (over the flattened tensor when ``axis`` is None)."""
    out = _tensor(x, "argmax").argmax(axis=axis, keepdim=keepdim)
    return out if _dtypes.convert_dtype(dtype) == out.dtype else out.astype(dtype)


# ---- shape ---------------------------------------------------------------------------------------
def reshape(x, shape) -> Tensor:
    """A tensor with the same data and a new ``shape`` (``-1`` infers, ``0`` copies a dim)."""
    return _tensor(x, "reshape").reshape(shape)


def transpose(x, perm) -> Tensor:
    """Permute the axes of ``x`` by ``perm``."""
    return _tensor(x, "transpose").transpose(perm)


def flatten(x, start_axis: int = 0, stop_axis: int = -1) -> Tensor:
    """Merge the axes ``start_axis..stop_axis`` (inclusive) into one; ValueError when an
    axis is out of ``[-ndim, ndim)`` or ``start_axis`` comes after ``stop_axis``."""
    return _tensor(x, "flatten").flatten(start_axis, stop_axis)


def unsqueeze(x, axis) -> Tensor:
    """Insert size-1 axes; with a list they are inserted one after another, in order.
    Each axis must be in ``[-(ndim+1), ndim]`` of the shape so far (else a ValueError)."""
    return _tensor(x, "unsqueeze").unsqueeze(axis)


def squeeze(x, axis=None) -> Tensor:
    """Drop size-1 axes (only those in ``axis`` when given, each in ``[-ndim, ndim)``)."""
    return _tensor(x, "squeeze").squeeze(axis)


def concat(x, axis: int = 0) -> Tensor:
    """Join the tensors in the list ``x`` along an existing ``axis``."""
    return apply(_ops.Concat, *x, axis=int(axis))


def stack(x, axis: int = 0) -> Tensor:
    """Join the same-shaped tensors in the list ``x`` along a new ``axis``."""
    return apply(_ops.Stack, *x, axis=int(axis))


def where(condition, x, y) -> Tensor:
    """``x`` where ``condition`` is true, else ``y`` (all three broadcast together)."""
    return apply(_ops.Where, condition, x, y)


def cast(x, dtype) -> Tensor:
    """``x`` converted to ``dtype`` (recorded: the gradient comes back in ``x``'s dtype)."""
    return _tensor(x, "cast").astype(dtype)


def mm(input, mat2) -> Tensor:  # noqa: A002 - Paddle's argument name
    """``input @ mat2``: Paddle's ``mm`` is :func:`matmul` without transposes (batched too)."""
    return matmul(input, mat2)


def expand(x, shape) -> Tensor:
    """``x`` broadcast to ``shape``; ``-1`` keeps the input's size on that axis.

    Example:
        >>> import minitorch_amp as mt
        >>> mt.expand(mt.to_tensor([1.0, 2.0]), [2, -1]).numpy()
        array([[1., 2.],
               [1., 2.]], dtype=float32)
    """
    x = _tensor(x, "expand")
    shape = [int(n) for n in shape]
    lead = len(shape) - x.ndim
    if lead < 0:
        raise ValueError(f"expand: shape {shape} has fewer dimensions than x's {x.shape}")
    for i, n in enumerate(shape):
        if n == -1:
            if i < lead:
                raise ValueError(f"expand: -1 in shape {shape} is on a new axis; give its size")
            shape[i] = x.shape[i - lead]
    return apply(_ops.Expand, x, shape=tuple(shape))


def broadcast_to(x, shape) -> Tensor:
    """Paddle's alias of :func:`expand`."""
    return expand(x, shape)


def expand_as(x, y) -> Tensor:
    """``x`` broadcast to ``y``'s shape (only the shape of ``y`` is used; it gets no gradient).

    Example:
        >>> import minitorch_amp as mt
        >>> mt.expand_as(mt.to_tensor([[1.0], [2.0]]), mt.zeros([2, 3])).shape
        [2, 3]
    """
    shape = tuple(_tensor(y, "expand_as").shape)
    return apply(_ops.ExpandAs, _tensor(x, "expand_as"), shape=shape)


__all__ = [
    "abs",
    "add",
    "argmax",
    "broadcast_to",
    "cast",
    "clip",
    "concat",
    "divide",
    "equal",
    "exp",
    "expand",
    "expand_as",
    "flatten",
    "greater_equal",
    "greater_than",
    "less_equal",
    "less_than",
    "log",
    "matmul",
    "max",
    "mean",
    "mm",
    "multiply",
    "neg",
    "not_equal",
    "pow",
    "reshape",
    "sigmoid",
    "sqrt",
    "square",
    "squeeze",
    "stack",
    "subtract",
    "sum",
    "tanh",
    "transpose",
    "unsqueeze",
    "where",
]
