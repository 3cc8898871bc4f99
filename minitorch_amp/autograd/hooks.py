"""Gradient hooks: ``Tensor.register_hook(hook)``, Paddle's semantics.

``hook(grad)`` is called each time the gradient of the tensor is computed, by ``backward()``
and by ``grad()``, with the tensor's *whole* gradient (the sum over every path); it must not
modify ``grad`` but may return a Tensor that replaces it. Where a hook lives:

* an intermediate result: on its :class:`~.dispatch.Node`; the engine calls the hooks when it
  reaches the node, so the replaced gradient is what flows on to the node's inputs;
* a leaf (a parameter, an input with ``stop_gradient=False``): on the tensor; the engine sums
  the leaf's gradient over the whole graph first, calls the hooks once, and accumulates what
  they return into ``.grad``.

Hooks run in the order they were registered, each seeing the previous one's result.

Example:
    >>> import minitorch_amp as mt
    >>> x = mt.to_tensor([1.0, 2.0], stop_gradient=False)
    >>> handle = x.register_hook(lambda g: g * 10)
    >>> (x * x).sum().backward()
    >>> x.grad.numpy()
    array([20., 40.], dtype=float32)
    >>> handle.remove()
    True
"""

from __future__ import annotations

import itertools

from ..backend import device as _device
from .tensor import Tensor

_ids = itertools.count()


class TensorHookRemoveHelper:
    """What ``register_hook`` returns: ``remove()`` unregisters the hook (True if it was
    still registered, False if it had been removed already)."""

    def __init__(self, hooks: list, key: int):
        self._hooks = hooks
        self._key = key

    def remove(self) -> bool:
        for i, (key, _) in enumerate(self._hooks):
            if key == self._key:
                del self._hooks[i]
                return True
        return False


def register_hook(tensor: Tensor, hook) -> TensorHookRemoveHelper:
    """Register ``hook`` on ``tensor`` (see the module docstring).

    Raises:
        RuntimeError: the tensor has ``stop_gradient=True`` (it never gets a gradient).
        TypeError: ``hook`` is not callable.
    """
    if tensor.stop_gradient:
        raise RuntimeError(
            "Cannot register hook on a tensor that stop gradient: it never receives a "
            "gradient. Set tensor.stop_gradient = False first (before computing with it)."
        )
    if not callable(hook):
        raise TypeError(f"register_hook needs a function hook(grad), got {type(hook).__name__}")
    if tensor._node is not None:
        if tensor._node.hooks is None:
            tensor._node.hooks = []
        hooks = tensor._node.hooks
    else:
        if tensor._hooks is None:
            tensor._hooks = []
        hooks = tensor._hooks
    key = next(_ids)
    hooks.append((key, hook))
    return TensorHookRemoveHelper(hooks, key)


def run_hooks(hooks: list, grad, shape: tuple, dtype, graph: bool):
    """``grad`` passed through ``hooks``; ``grad`` is an array, or a Tensor when ``graph``.

    A hook's result must have the gradient's dtype, place and shape (Paddle's and PyTorch's
    rule): a float64 result for a float32 parameter would otherwise become its ``.grad``, and
    a cast back would hide a hook that computes in the wrong precision (an fp16 matmul under
    ``auto_cast``).

    Raises:
        RuntimeError: a hook returned a Tensor of another dtype or on another place (as
            Paddle and PyTorch do).  TypeError: something other than a Tensor or None.
            ValueError: a Tensor of another shape.
    """
    for _, hook in list(hooks):
        value = grad if graph else Tensor._wrap(grad)
        out = hook(value)
        if out is None:
            continue
        name = getattr(hook, "__qualname__", None) or repr(hook)
        if not isinstance(out, Tensor):
            raise TypeError(
                f"gradient hook {name} returned {type(out).__name__}; it must return a Tensor "
                "(the new gradient) or None (keep the gradient)"
            )
        _check_result(name, out._data, value._data, shape, dtype)
        grad = out if graph else out._data
    return grad


def _check_result(name: str, out, given, shape: tuple, dtype) -> None:
    """A hook's result ``out`` (an array) against the gradient ``given`` it received."""
    if tuple(out.shape) != tuple(shape):
        raise ValueError(
            f"gradient hook {name} returned a gradient of shape {list(out.shape)} for a tensor "
            f"of shape {list(shape)}; return one of the same shape"
        )
    if out.dtype != dtype:
        raise RuntimeError(
            f"gradient hook {name} returned a {out.dtype} gradient for a "
            f"{dtype} tensor; a hook must keep the gradient's dtype (nothing "
            f"is cast back): return grad.astype('{dtype}') if it computes in "
            "another dtype"
        )
    place, expected = _device.place_of(out), _device.place_of(given)
    if place != expected:
        raise RuntimeError(
            f"gradient hook {name} returned a gradient on {place} for a tensor on {expected}; "
            "a hook must keep the gradient's place: move its result back (.cuda() or .cpu())"
        )
