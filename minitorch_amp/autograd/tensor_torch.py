"""PyTorch's gradient flag on ``Tensor``, ``zero_``, and what to use for PyTorch spellings.

``requires_grad`` is ``not stop_gradient``: reading it, assigning it and
``requires_grad_(flag=True)`` (a method recent Paddle has too) all go through Paddle's
``stop_gradient``, the one flag the engine reads. ``zero_()`` is Paddle 2.x's (and PyTorch's)
in-place fill with zeros. Any other missing name raises the usual AttributeError, with what
to use when ``minitorch_amp.pytorch_hints`` knows (``x.view`` -> ``x.reshape([...])``), and
PyTorch's forms of two Paddle methods, ``x.transpose(0, 1)`` and ``x.sum(dim=0)``, are
refused with the Paddle form to write. ``tensor.py`` is at its size budget, so these live here.

Example:
    >>> import minitorch_amp as mt
    >>> x = mt.ones([2]).requires_grad_()
    >>> x.requires_grad, x.stop_gradient
    (True, False)
"""

from __future__ import annotations

from ..pytorch_hints import missing
from . import view_writes as _view_writes
from .tensor import Tensor


def _get_requires_grad(self) -> bool:
    return not self.stop_gradient


def _set_requires_grad(self, flag: bool) -> None:
    if not isinstance(flag, bool):
        raise TypeError(f"requires_grad must be True or False, got {flag!r}")
    self.stop_gradient = not flag


def requires_grad_(self, requires_grad: bool = True) -> Tensor:
    """Set ``stop_gradient = not requires_grad`` in place; returns the tensor (PyTorch's and
    recent Paddle's ``requires_grad_``)."""
    _set_requires_grad(self, requires_grad)
    return self


def zero_(self) -> Tensor:
    """Fill the tensor with zeros in place and return it (Paddle 2.x's and PyTorch's
    ``zero_``: ``p.grad.zero_()``). A write, as ``set_value`` is: the version moves, so a
    graph that saved the old values refuses to differentiate, and its views see it. On a
    tensor in a recorded graph it is recorded, as ``x[...] = 0`` is (Paddle's inplace
    ``fill_``): the zeros send no gradient back; a leaf that needs a gradient is refused."""
    if self._node is not None or not self.stop_gradient:
        self[...] = 0  # (recorded where grad mode is on; the checks and refusals of setitem)
        return self
    data = self._data
    if data.base is not None:  # a view of another tensor's memory: copy on write
        data = self._writable(whole=True)
    data.fill(0)
    self._version += 1
    _view_writes.wrote(self)
    return self


_paddle_transpose = Tensor.transpose
_paddle_sum = Tensor.sum


def transpose(self, perm=None, *more):
    # NOTE: one type test on the way to Paddle's method; PyTorch's transpose(dim0, dim1)
    # would otherwise fail with "takes 2 positional arguments" or "'int' is not iterable".
    if more or isinstance(perm, int):
        axes, n = (perm, *more), self.ndim
        order = list(range(n))[::-1]  # (an example: the reversed axes)
        if len(axes) == 2 and all(isinstance(a, int) and -n <= a < n for a in axes):
            order = list(range(n))
            order[axes[0]], order[axes[1]] = order[axes[1]], order[axes[0]]
        shown = ", ".join(map(repr, axes))
        raise TypeError(
            f"transpose takes the full permutation as one list (Paddle), not PyTorch's "
            f"transpose({shown}): write x.transpose({order}) for this {n}-D tensor "
            "(the list names, for each output axis, the input axis it takes)"
        )
    return _paddle_transpose(self, perm)


def sum(self, axis=None, dtype=None, keepdim: bool = False, **torch_names):  # noqa: A001
    if torch_names:  # PyTorch's dim= (and NumPy's keepdims=): name Paddle's spelling
        for name in torch_names:
            if name not in _TORCH_SUM_NAMES:
                raise TypeError(f"sum() got an unexpected keyword argument {name!r}")
        given = ", ".join(f"{k}= is {_TORCH_SUM_NAMES[k]}=" for k in torch_names)
        raise TypeError(f"sum(): Paddle's names differ: {given} (x.sum(axis=0, keepdim=True))")
    return _paddle_sum(self, axis, dtype, keepdim)


_TORCH_SUM_NAMES = {"dim": "axis", "keepdims": "keepdim"}


transpose.__doc__ = _paddle_transpose.__doc__
sum.__doc__ = _paddle_sum.__doc__


def _missing_attribute(self, name: str):
    # Only called when normal lookup fails; dunder probes (NumPy's __array_interface__, ...)
    # take the short way.
    if name.startswith("__"):
        raise AttributeError(name)
    raise missing("Tensor", name)


Tensor.requires_grad = property(
    _get_requires_grad,
    _set_requires_grad,
    doc="PyTorch's flag: ``not stop_gradient`` (assigning it sets ``stop_gradient``).",
)
Tensor.requires_grad_ = requires_grad_
Tensor.zero_ = zero_
Tensor.transpose = transpose
Tensor.sum = sum
Tensor.__getattr__ = _missing_attribute
