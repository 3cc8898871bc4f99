"""``minitorch_amp.nn.utils``: PyTorch's spelling of gradient clipping, ``clip_grad_norm_``."""

from ..clip import clip_grad_norm_

__all__ = ["clip_grad_norm_"]
