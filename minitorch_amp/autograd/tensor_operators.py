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

from ..backend import dtypes as _dtypes
from ..backend import sync as _sync
from . import fp8_route as _fp8
from . import ops as _ops
from . import view_writes as _view_writes
from .dispatch import apply
from .grad_mode import _enabled
from .ops.index import check_axis
from .ops.shape import SetValue, _has_mask
from .tensor import Tensor, _as_array
from .tensor_args import _axis_arg, _shape_arg, _unwrap_index


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

    def __setitem__(self, index, value):
        """``x[index] = value`` in place (Paddle's ``set_value``); see :func:`set_item`."""
        set_item(self, index, value)

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
        """Sum over ``axis``; with ``dtype`` the input is cast first and summed in ``dtype``
        (Paddle: ``sum(float16 x, dtype='float32')`` does not overflow; the gradient comes
        back through the cast in ``x``'s dtype)."""
        x = self
        if dtype is not None and _dtypes.convert_dtype(dtype) != self._data.dtype:
            x = self.astype(dtype)
        return apply(_ops.Sum, x, axis=_axis_arg(axis), keepdim=keepdim)

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
        """Merge the axes ``start_axis..stop_axis`` (inclusive, each in ``[-ndim, ndim)``)
        into one; a 0-D tensor becomes shape [1]."""
        shape = self._data.shape
        nd = max(len(shape), 1)
        start = check_axis("flatten: start_axis", start_axis, nd)
        stop = check_axis("flatten: stop_axis", stop_axis, nd)
        if start > stop:
            raise ValueError(
                f"flatten: stop_axis ({stop_axis}) should be larger than start_axis "
                f"({start_axis}) for a tensor of shape {list(shape)}; swap them"
            )
        merged = int(np.prod(shape[start : stop + 1], dtype=np.int64))
        return self._reshape_to(list(shape[:start]) + [merged] + list(shape[stop + 1 :]))

    def unsqueeze(self, axis):
        """Insert size-1 axes: ``axis`` an int in ``[-(ndim+1), ndim]``, or a list, tuple or
        Tensor of them, inserted one after another (each in range of the shape so far)."""
        shape = list(self._data.shape)
        if isinstance(axis, Tensor):
            axis = axis._to_host("an axis given as a Tensor").reshape(-1).tolist()
        for a in [axis] if isinstance(axis, (int, np.integer)) else axis:
            nd = len(shape)
            if not -(nd + 1) <= a <= nd:
                raise ValueError(
                    f"unsqueeze: axis {a} is out of range for a tensor of shape {shape} "
                    f"(valid: {-(nd + 1)} to {nd})"
                )
            shape.insert(int(a) % (nd + 1), 1)
        return self._reshape_to(shape)

    def squeeze(self, axis=None):
        """Drop size-1 axes (only those in ``axis``, each in ``[-ndim, ndim)``; a named axis
        whose size is not 1 stays). A 0-D tensor is returned as it is."""
        shape = self._data.shape
        named = [] if axis is None else [axis] if isinstance(axis, (int, np.integer)) else axis
        axes = {check_axis("squeeze", int(a), max(len(shape), 1)) for a in named}
        keep = [n for i, n in enumerate(shape) if n != 1 or (axes and i not in axes)]
        return self._reshape_to(keep)


def set_item(x: Tensor, index, value) -> None:
    """Write ``value`` into ``x[index]`` in place, as Paddle's ``x[index] = value``.

    ``index``: ints, slices, Ellipsis, None, lists, integer or boolean tensors (as in
    ``x[index]``). ``value``: a number, a NumPy array or a Tensor that broadcasts to the
    shape of ``x[index]``; it is cast to ``x``'s dtype. Everything is checked before anything
    is written. The write bumps ``x``'s version, so backward through an op that saved ``x``
    before it raises instead of using the new values.

    Gradients: when ``x`` or a Tensor ``value`` needs one (and grad mode is on) the write is
    recorded and ``x``'s history continues through it: ``x``'s gradient is the incoming one
    with the written positions zeroed, ``value``'s the incoming one at those positions,
    summed back to its shape. Ops that used ``x`` before the write still send their
    gradients to ``x`` as it was (``versions.check`` re-routes them).

    Raises:
        IndexError: ``index`` does not fit ``x``'s shape.  ValueError: ``value`` does not
        broadcast to ``x[index]``, or ``x`` is a leaf that needs a gradient (Paddle refuses
        the in-place write: write it under ``no_grad()``, or build a new tensor).

    Example:
        >>> import minitorch_amp as mt
        >>> x = mt.to_tensor([-1.0, 2.0, -3.0])
        >>> x[x < 0] = 0.0
        >>> x.numpy()
        array([0., 2., 0.], dtype=float32)
    """
    index = _unwrap_index(index)
    data = x._data
    if _has_mask(index):  # the size of x[mask] depends on the mask's values
        _sync.host_read("writing through a boolean mask")
    try:
        target = data[index]  # (a view for basic indexes: nothing is copied)
    except IndexError as exc:
        raise IndexError(
            f"x[index] = value: index {index!r} is invalid for a tensor of shape {x.shape}: {exc}"
        ) from None
    target_shape = tuple(getattr(target, "shape", ()))
    source = value._data if isinstance(value, Tensor) else _as_array(value, x.dtype, x.place)
    shape = tuple(source.shape)
    while len(shape) > len(target_shape) and shape[0] == 1:  # NumPy drops leading 1s
        shape = shape[1:]
    try:
        fits = np.broadcast_shapes(shape, target_shape) == target_shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(
            f"x[index] = value: a value of shape {list(source.shape)} does not broadcast to "
            f"x[index] of shape {list(target_shape)} (x has shape {x.shape}); give a value "
            "of that shape, or one that broadcasts to it"
        )
    needs = isinstance(value, Tensor) and not value.stop_gradient
    record = _enabled.get() and _dtypes.is_floating(data.dtype) and (needs or not x.stop_gradient)
    if record and not x.stop_gradient and x._node is None:
        raise ValueError(
            f"x[index] = value on a leaf tensor that needs a gradient (stop_gradient=False, "
            f"shape {x.shape}): Paddle refuses this in-place write. To set initial values, "
            "write under minitorch_amp.no_grad(); to compute with the change, make a new "
            "tensor: mt.where(mask, value, x), x.masked_fill(mask, value), or x.clone() and "
            "write into the clone"
        )
    if isinstance(value, Tensor):  # recorded when value needs a gradient (it comes back)
        if value.place != x.place or value.dtype != x.dtype:
            value = value.to(x.place, dtype=x.dtype)
        if shape != tuple(source.shape):
            value = value.reshape(list(shape))
    else:
        value = source.reshape(shape)
    data = x._writable()  # (a view gets its own array first: copy on write)
    if not record:
        data[index] = value._data if isinstance(value, Tensor) else value
        x._version += 1
        _view_writes.wrote(x)
        return
    before = x._version
    as_was = Tensor._wrap(data)  # x before the write: its history (the same array)
    as_was._node, as_was.stop_gradient = x._node, x.stop_gradient
    as_was._version = before + 1  # written, as x is (ops that saved its result check it)
    out = apply(SetValue, as_was, value, index=index, before=before)
    x._node, x.stop_gradient = out._node, False
    x._version = before + 1
    _view_writes.wrote(x)


# NOTE: not the class's own attributes, and not __hash__: defining __eq__ set this class's
# to None, and Tensor's stays (a tensor hashes by identity, as in Paddle and PyTorch).
_OWN = ("__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__hash__")
for _name, _value in vars(TensorOperators).items():
    if _name not in _OWN:
        setattr(Tensor, _name, _value)
