"""``Tensor``'s operators and Paddle's named methods: each is one op, through
:func:`~minitorch_amp.autograd.dispatch.apply`.

``tensor.py`` holds what a tensor is (its array, the autodiff state, the conversions); these
methods only compute. They are written as the class :class:`TensorOperators` and copied onto
``Tensor`` when this module is imported, which ``tensor.py`` does last: ``dispatch`` and the
op modules need ``Tensor`` defined first. (``tensor_methods.py`` adds the methods that the
function modules define, ``x.topk(2)`` and the like.)

Example:
    >>> import minitorch_amp as mt
    >>> x = mt.to_tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> (x @ x.T + 1).sum(axis=1).numpy()
    array([18., 38.], dtype=float32)
"""

from __future__ import annotations

import numpy as np

from . import fp8_route as _fp8
from . import ops as _ops
from .dispatch import apply
from .tensor import Tensor, _axis_arg, _shape_arg, _unwrap_index


class TensorOperators:
    """The methods copied onto ``Tensor`` (see the module's docstring)."""

    # ---- arithmetic (each one op) ----------------------------------------------------------
    def __add__(self, other):
        return apply(_ops.Add, self, other)

    def __radd__(self, other):
        return apply(_ops.Add, other, self)

    def __sub__(self, other):
        return apply(_ops.Subtract, self, other)

    def __rsub__(self, other):
        return apply(_ops.Subtract, other, self)

    def __mul__(self, other):
        return apply(_ops.Multiply, self, other)

    def __rmul__(self, other):
        return apply(_ops.Multiply, other, self)

    def __truediv__(self, other):
        return apply(_ops.Divide, self, other)

    def __rtruediv__(self, other):
        return apply(_ops.Divide, other, self)

    def __pow__(self, other):
        return apply(_ops.Pow, self, other)

    def __rpow__(self, other):
        return apply(_ops.Pow, other, self)

    def __matmul__(self, other):
        return self.matmul(other)

    def __rmatmul__(self, other):
        out = _fp8.fp8_gemm("matmul", other, self) if _fp8.region.get() is not None else None
        return apply(_ops.Matmul, other, self) if out is None else out

    def __neg__(self):
        return apply(_ops.Neg, self)

    def __pos__(self):
        return self

    def __abs__(self):
        return apply(_ops.Abs, self)

    def __eq__(self, other):  # type: ignore[override]
        return apply(_ops.Compare, self, other, relation="equal")

    def __ne__(self, other):  # type: ignore[override]
        return apply(_ops.Compare, self, other, relation="not_equal")

    def __lt__(self, other):
        return apply(_ops.Compare, self, other, relation="less")

    def __le__(self, other):
        return apply(_ops.Compare, self, other, relation="less_equal")

    def __gt__(self, other):
        return apply(_ops.Compare, self, other, relation="greater")

    def __ge__(self, other):
        return apply(_ops.Compare, self, other, relation="greater_equal")

    def __getitem__(self, index):
        return apply(_ops.GetItem, self, index=_unwrap_index(index))

    # ---- named methods (Paddle spellings) -----------------------------------------------------
    def matmul(self, y, transpose_x: bool = False, transpose_y: bool = False):
        flags = {"transpose_x": transpose_x, "transpose_y": transpose_y}
        if _fp8.region.get() is not None:  # inside amp.fp8_autocast: an FP8 GEMM if it can
            out = _fp8.fp8_gemm("matmul", self, y, **flags)
            if out is not None:
                return out
        return apply(_ops.Matmul, self, y, **flags)

    def reshape(self, shape, *more):
        """Paddle's reshape: ``-1`` infers one dimension, ``0`` copies the input's dimension."""
        shape = _shape_arg((shape, *more) if more else shape)
        dims = self._data.shape
        shape = tuple(dims[i] if n == 0 and i < len(dims) else n for i, n in enumerate(shape))
        return self._reshape_to(shape)

    def _reshape_to(self, shape):
        # NOTE: literal dims, so a 0 stays 0 (an empty axis), unlike reshape's Paddle rule.
        return apply(_ops.Reshape, self, shape=tuple(shape))

    def transpose(self, perm=None):
        """Permute the axes (all of them, reversed, when ``perm`` is None)."""
        return apply(_ops.Transpose, self, perm=None if perm is None else tuple(perm))

    @property
    def T(self):  # noqa: N802 - Paddle's name
        return self.transpose()

    def sum(self, axis=None, dtype=None, keepdim: bool = False):
        out = apply(_ops.Sum, self, axis=_axis_arg(axis), keepdim=keepdim)
        return out if dtype is None else out.astype(dtype)

    def mean(self, axis=None, keepdim: bool = False):
        return apply(_ops.Mean, self, axis=_axis_arg(axis), keepdim=keepdim)

    def max(self, axis=None, keepdim: bool = False):
        return apply(_ops.Max, self, axis=_axis_arg(axis), keepdim=keepdim)

    def argmax(self, axis=None, keepdim: bool = False):
        return apply(_ops.ArgMax, self, axis=axis, keepdim=keepdim)

    def exp(self):
        return apply(_ops.Exp, self)

    def log(self):
        return apply(_ops.Log, self)

    def sqrt(self):
        return apply(_ops.Sqrt, self)

    def square(self):
        return apply(_ops.Square, self)

    def abs(self):
        return apply(_ops.Abs, self)

    def pow(self, y):
        return apply(_ops.Pow, self, y)

    def tanh(self):
        return apply(_ops.Tanh, self)

    def sigmoid(self):
        return apply(_ops.Sigmoid, self)

    def clip(self, min=None, max=None):  # noqa: A002 - Paddle's argument names
        return apply(_ops.Clip, self, min=min, max=max)

    def flatten(self, start_axis: int = 0, stop_axis: int = -1):
        shape = self._data.shape
        nd = len(shape)
        start, stop = start_axis % max(nd, 1), stop_axis % max(nd, 1)
        merged = int(np.prod(shape[start : stop + 1], dtype=np.int64))
        return self._reshape_to(list(shape[:start]) + [merged] + list(shape[stop + 1 :]))

    def unsqueeze(self, axis: int):
        shape = list(self._data.shape)
        shape.insert(axis % (len(shape) + 1), 1)
        return self._reshape_to(shape)

    def squeeze(self, axis=None):
        shape = self._data.shape
        axes = {a % len(shape) for a in ([axis] if isinstance(axis, int) else axis or [])}
        keep = [n for i, n in enumerate(shape) if n != 1 or (axes and i not in axes)]
        return self._reshape_to(keep)


# NOTE: not the class's own attributes, and not __hash__: defining __eq__ set this class's
# to None, and Tensor's stays (a tensor hashes by identity, as in Paddle and PyTorch).
_OWN = ("__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__hash__")
for _name, _value in vars(TensorOperators).items():
    if _name not in _OWN:
        setattr(Tensor, _name, _value)
