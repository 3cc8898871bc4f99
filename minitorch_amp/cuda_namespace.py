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
    """A name ``torch.cuda`` has: where it is here. Its own hint if it has one, else
    ``mt.device.cuda`` when that has the name (Paddle's ``paddle.device.cuda``: the memory
    functions, ``graphs``)."""
    from .device import cuda as device_cuda
    from .pytorch_hints import HINTS, missing

    if name not in HINTS["minitorch_amp.cuda"] and name in device_cuda.__all__:
        raise AttributeError(
            f"module 'minitorch_amp.cuda' has no attribute {name!r}; use "
            f"mt.device.cuda.{name} (Paddle's paddle.device.cuda.{name}; minitorch_amp.cuda "
            "holds only PyTorch's is_available, device_count and amp)",
            name=name,
        )
    raise missing("minitorch_amp.cuda", name, names=vars(cuda))


cuda = types.ModuleType("minitorch_amp.cuda", __doc__)
amp = types.ModuleType("minitorch_amp.cuda.amp", "PyTorch's torch.cuda.amp: autocast, GradScaler.")
amp.GradScaler, amp.autocast, amp.__all__ = GradScaler, cuda_autocast, ["GradScaler", "autocast"]
cuda.amp, cuda.is_available, cuda.device_count = amp, is_available, device_count
cuda.__all__ = ["amp", "device_count", "is_available"]
cuda.__getattr__ = _missing  # a PyTorch name that is elsewhere here says where
sys.modules.setdefault("minitorch_amp.cuda", cuda)
sys.modules.setdefault("minitorch_amp.cuda.amp", amp)
