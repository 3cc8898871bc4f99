"""``GradScaler.scale``'s product, ``loss * scale``, recorded as the multiply it is.

It is Paddle's ``var * self._scale``: an elementwise multiply (operator statistics count a
``multiply``), float32 for a float16 loss, whose backward multiplies the loss's gradient by
the scale. The scale is a device array that ``update()`` changes in place, so the factor the
backward uses is a copy taken now: an ``update()`` between ``scale()`` and ``backward()``
cannot change the gradients. On a GPU a 0-d float32 loss takes the copy and the product in
one launch (``backend.loss_scaling.scale_loss``) where CuPy took two.
"""

from __future__ import annotations

import numpy as np

from ..autograd.higher_order import DOUBLE_BACKWARD
from ..autograd.ops.elementwise import Multiply
from ..autograd.tensor import Tensor
from ..backend.loss_scaling import scale_loss


class ScaleLoss(Multiply, register=False):  # (the op table's multiply is Multiply)
    """``loss * scale`` (a float32 [1] or 0-d scale), backward ``grad * scale-as-it-was``."""

    @staticmethod
    def ones_backward(ctx):
        """The inputs' gradients for a gradient of ones (``backward()``'s own seed), or None:
        ``ones * factor`` is the factor, so a loss of one element gets the factor itself
        (in the loss's dtype, as the engine would cast the product), and neither the ones
        nor the product is made: two launches fewer a step on a GPU. A larger loss would
        need the factor broadcast, which kernels cannot read: None."""
        x, factor = ctx.x, ctx.y
        if x.size != 1 or not ctx.needs_grad[0]:
            return None
        g = factor.reshape(x.shape)  # (a view: the engine hands a seed on read-only)
        if g.dtype != x.dtype:
            with np.errstate(over="ignore"):  # (as the engine's cast of the product)
                g = g.astype(x.dtype)
        return g, None

    name = "multiply"

    @staticmethod
    def forward(ctx, x, y):
        out, factor = scale_loss(x, y)
        ctx.x, ctx.y = x, factor  # Multiply's backward: grad * ctx.y for the loss
        return out


DOUBLE_BACKWARD[ScaleLoss] = DOUBLE_BACKWARD[Multiply]  # (a gradient penalty scales its loss)


def check_scale_input(var, path: str) -> None:
    """TypeError unless ``var`` is a Tensor or a (nested) list or tuple of Tensors."""
    if isinstance(var, Tensor):
        return
    if isinstance(var, (list, tuple)):
        for i, v in enumerate(var):
            check_scale_input(v, f"{path}[{i}]")
        return
    raise TypeError(
        f"GradScaler.scale() needs a Tensor (the loss) or a list/tuple of Tensors; "
        f"{path} is {type(var).__name__}"
    )
