"""``minitorch_amp.cuda``: PyTorch's ``torch.cuda.amp`` spelling (Paddle 3.x's ``paddle.cuda``).

Only the AMP namespace lives here: ``cuda.amp.autocast(enabled=True, dtype=float16,
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

cuda = types.ModuleType("minitorch_amp.cuda", __doc__)
amp = types.ModuleType("minitorch_amp.cuda.amp", "PyTorch's torch.cuda.amp: autocast, GradScaler.")
amp.GradScaler, amp.autocast, amp.__all__ = GradScaler, cuda_autocast, ["GradScaler", "autocast"]
cuda.amp, cuda.__all__ = amp, ["amp"]
sys.modules.setdefault("minitorch_amp.cuda", cuda)
sys.modules.setdefault("minitorch_amp.cuda.amp", amp)
