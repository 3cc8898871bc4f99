"""``minitorch_amp.cuda``: PyTorch's ``torch.cuda.amp`` spelling (Paddle 3.x's ``paddle.cuda``).

Besides ``cuda.is_available()`` and ``cuda.device_count()`` (PyTorch's first lines), only
the AMP namespace lives here: ``cuda.amp.autocast(enabled=True, dtype=float16,
cache_enabled=True)``, PyTorch's CUDA-only form whose first argument is ``enabled``
(:class:`~minitorch_amp.amp.torch_autocast.cuda_autocast`), and ``cuda.amp.GradScaler``
(:class:`minitorch_amp.amp.torch_grad_scaler.GradScaler`: Paddle's scaler, which takes
PyTorch's argument forms, saving PyTorch's state dict keys). Devices are
:mod:`minitorch_amp.device`.

NOTE: a package directory ``minitorch_amp/cuda/`` would collide with the kernel sources,
which the wheel ships there; so ``minitorch_amp.cuda`` and ``minitorch_amp.cuda.amp`` are
module objects made here and registered in ``sys.modules`` (``import minitorch_amp.cuda.amp``
and ``from minitorch_amp.cuda.amp import GradScaler`` work).
"""

from __future__ import annotations

import sys
import types

from .amp.torch_autocast import cuda_autocast
from .amp.torch_grad_scaler import GradScaler
from .backend.device import device_count


def is_available() -> bool:
    """PyTorch's ``torch.cuda.is_available()``: whether a usable GPU was found at import
    (Paddle asks ``paddle.device.cuda.device_count() > 0``)."""
    return device_count() > 0


def _missing(name: str):
    from .pytorch_hints import missing

    raise missing("minitorch_amp.cuda", name, names=vars(cuda))


cuda = types.ModuleType("minitorch_amp.cuda", __doc__)
amp = types.ModuleType("minitorch_amp.cuda.amp", "PyTorch's torch.cuda.amp: autocast, GradScaler.")
amp.GradScaler, amp.autocast, amp.__all__ = GradScaler, cuda_autocast, ["GradScaler", "autocast"]
cuda.amp, cuda.is_available, cuda.device_count = amp, is_available, device_count
cuda.__all__ = ["amp", "device_count", "is_available"]
cuda.__getattr__ = _missing  # a PyTorch name that is elsewhere here says where
sys.modules.setdefault("minitorch_amp.cuda", cuda)
sys.modules.setdefault("minitorch_amp.cuda.amp", amp)
