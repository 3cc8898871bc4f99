"""``minitorch_amp.device``: choosing a device, how much memory it has, and when the host waits
for it (Paddle's ``paddle.device``; ``device.cuda.graphs`` holds CUDA graphs).

A wrong device or dtype argument anywhere raises :class:`DeviceError` (also a ValueError,
TypeError and RuntimeError). Memory accounting works on the CPU too, against a budget you can
set, and so does the sync debug mode: the NumPy backend reports the same host reads a GPU
would wait on.
"""

from __future__ import annotations

import sys
import types

from ..backend import device as _device
from ..backend import sync as _sync
from ..backend.device import Place, device_count, get_device, is_compiled_with_cuda, set_device
from ..backend.device_errors import DeviceError
from ..backend.memory import (
    OutOfMemoryError,
    get_memory_limit,
    max_memory_allocated,
    memory_allocated,
    memory_available,
    reset_max_memory_allocated,
    set_memory_limit,
)
from ..backend.memory import device_place as _memory_place
from ..backend.sync import (
    SyncError,
    SyncWarning,
    get_sync_debug_mode,
    set_sync_debug_mode,
    sync_debug_mode,
)
from . import amp, cuda


def get_available_device() -> list[str]:
    """Every device string this machine accepts, e.g. ``['cpu', 'gpu:0']``."""
    return ["cpu"] + [f"gpu:{i}" for i in range(device_count())]


def synchronize(device=None) -> None:
    """Wait for all queued GPU work on ``device`` (default: the current one).

    ``device`` is taken as the memory functions take it: None, a Place, a device string
    (``'gpu:0'``) or an int N, GPU N (``paddle.device.cuda.synchronize(0)``,
    ``torch.cuda.synchronize(0)``). A synchronisation, so the sync debug mode reports it;
    the checks the device deferred (``backend.sync.defer``) report here too.
    """
    place = _memory_place(device)  # (checked before the sync debug mode hears of a read)
    _sync.host_read("device.synchronize()")
    _device.synchronize(place)


__all__ = [
    "DeviceError",
    "OutOfMemoryError",
    "Place",
    "SyncError",
    "SyncWarning",
    "amp",
    "cuda",
    "device_count",
    "get_available_device",
    "get_device",
    "get_memory_limit",
    "get_sync_debug_mode",
    "is_compiled_with_cuda",
    "max_memory_allocated",
    "memory_allocated",
    "memory_available",
    "reset_max_memory_allocated",
    "set_device",
    "set_memory_limit",
    "set_sync_debug_mode",
    "sync_debug_mode",
    "synchronize",
]


class _DeviceModule(types.ModuleType):
    """This module's type: Paddle's ``paddle.device`` module that can also be called as
    PyTorch's ``torch.device``.

    NOTE: ``mt.device("cuda" if mt.cuda.is_available() else "cpu")`` is the first line of most
    PyTorch scripts; Paddle's module is not callable, so calling it means nothing else here.
    It returns the :class:`Place`, which ``.to()``, ``place=`` and ``set_device`` take.
    """

    def __call__(self, device, index: int | None = None) -> Place:
        """``device('cuda')``, ``device('cuda:1')``, ``device('cuda', 1)`` or ``device('cpu')``:
        the Place, checked as ``.to()`` checks it (a GPU this machine lacks is refused)."""
        if index is not None:
            if not isinstance(device, str) or ":" in device:
                raise _device.DeviceError(
                    f"device({device!r}, {index!r}): give the number once, as "
                    "device('cuda', 1) or device('cuda:1')"
                )
            device = f"{device}:{index}"
        return _device.parse_device(device, "minitorch_amp.device()")


sys.modules[__name__].__class__ = _DeviceModule
