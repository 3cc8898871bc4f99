"""The seed of a backward pass: the gradient its root starts from.

``backward()`` starts from ones of the root's shape (Paddle's rule), or from the
``grad_tensor`` given (:func:`initial_grad`; :func:`fit_seed` takes a ``[1]`` seed for a 0-D
root, as Paddle's ``grad`` does). Where the root's op can give its inputs' gradients for
that seed of ones without making it (``ones_backward``: ``scaler.scale(loss)``, whose
backward is the scale), the pass starts one node lower (:func:`from_ones`): two launches
fewer a step on a GPU.
"""

from __future__ import annotations

from ..backend import sync
from . import versions
from .dispatch import hooks
from .tensor import Tensor


def fit_seed(given, out: Tensor):
    """``given`` (a Tensor or array seed for ``out``), a ``[1]`` one reshaped to ``[]`` for a
    0-D ``out``: Paddle's ``grad`` accepts that (it predates 0-D tensors). Any other seed is
    returned as it is, for the caller to check (recorded reshape: differentiable)."""
    if given is None or out._data.ndim != 0:
        return given
    data = given._data if isinstance(given, Tensor) else given
    if getattr(data, "shape", None) != (1,):
        return given
    return given._reshape_to(()) if isinstance(given, Tensor) else data.reshape(())


def initial_grad(root: Tensor, grad_tensor):
    """The seed array: ``grad_tensor``, or ones of the root's shape (Paddle's rule, also for
    a result of several elements, where PyTorch refuses: the gradient of its sum)."""
    data = root._data
    if grad_tensor is None:
        return Tensor._xp_of(data).ones_like(data)
    g = grad_tensor._data if isinstance(grad_tensor, Tensor) else grad_tensor
    g = sync.to_device(g, data, "backward()'s grad_tensor")
    if g.shape != data.shape:
        raise ValueError(
            f"grad_tensor has shape {list(g.shape)} but the tensor has shape {list(data.shape)}; "
            "they must be equal"
        )
    return g.astype(data.dtype, copy=False)


def from_ones(root: Tensor):
    """``(roots, seeds)`` that start the pass below ``root`` when its op can give its inputs'
    gradients for a seed of ones without making it (``ones_backward``: a scaled loss's
    backward is the scale), else None: nothing may see the ones (a hook on the root, the
    NaN/Inf checker) and the root's node must be live and unchanged."""
    node = root._node
    ones_backward = None if node is None else getattr(node.op, "ones_backward", None)
    if ones_backward is None or node.freed or node.hooks or hooks.grad_observers:
        return None
    versions.check(node, root if root._version else None, False)
    grads = ones_backward(node.ctx)
    if grads is None:
        return None
    pairs = [(t, g) for t, g in zip(node.inputs, grads) if t is not None and g is not None]
    # a hook could write into what it is handed: a copy, not the op's own array
    seeds = [g.copy() if t._hooks or (t._node and t._node.hooks) else g for t, g in pairs]
    return [t for t, _ in pairs], seeds
