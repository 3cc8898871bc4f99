"""``minitorch_amp.nn.utils``: PyTorch spellings of gradient clipping."""

from ..clip import clip_grad_norm_, clip_grad_value_

__all__ = ["clip_grad_norm_", "clip_grad_value_"]
