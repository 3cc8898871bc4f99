"""``minitorch_amp.device.amp``: the AMP names Paddle 3.x also exposes as ``paddle.device.amp``.

The same objects as in :mod:`minitorch_amp.amp` (``device.amp.GradScaler is
amp.GradScaler``): the scaler, Paddle's ``auto_cast`` and PyTorch's ``autocast``.
"""

from ..amp import GradScaler, auto_cast, autocast

__all__ = ["GradScaler", "auto_cast", "autocast"]
