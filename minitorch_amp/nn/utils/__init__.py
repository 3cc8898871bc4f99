"""``minitorch_amp.nn.utils``: PyTorch spellings of gradient clipping, and re-estimating
batch norm statistics (``reestimate_batch_norm``, PyTorch's ``swa_utils.update_bn``)."""

from ..clip import clip_grad_norm_, clip_grad_value_
from ..layer.norm_statistics import reestimate_batch_norm

__all__ = ["clip_grad_norm_", "clip_grad_value_", "reestimate_batch_norm"]
