"""PyTorch's gradient flag on ``Tensor``, and what to use for PyTorch names it lacks.

``requires_grad`` is ``not stop_gradient``: reading it, assigning it and
``requires_grad_(flag=True)`` (a method recent Paddle has too) all go through Paddle's
``stop_gradient``, the one flag the engine reads. Any other missing name raises the usual
AttributeError, with what to use when ``minitorch_amp.pytorch_hints`` knows
(``x.view`` -> ``x.reshape([...])``). ``tensor.py`` is at its size budget, so these live here.

Example:
    >>> import minitorch_amp as mt
    >>> x = mt.ones([2]).requires_grad_()
    >>> x.requires_grad, x.stop_gradient
    (True, False)
"""

from __future__ import annotations

from ..pytorch_hints import missing
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
Tensor.__getattr__ = _missing_attribute
