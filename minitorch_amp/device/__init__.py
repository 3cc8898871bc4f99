"""``minitorch_amp.device``: choosing a device, how much memory it has, and when the host waits
for it (Paddle's ``paddle.device``; ``device.cuda.graphs`` holds CUDA graphs).

A wrong device or dtype argument anywhere raises :class:`DeviceError` (also a ValueError,
TypeError and RuntimeError). Memory accounting works on the CPU too, against a budget you can
set, and so does the sync debug mode: the NumPy backend reports the same host reads a GPU
would wait on.
"""

from __future__ import annotations

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

    A synchronisation, so the sync debug mode reports it; the checks the device deferred
    (``backend.sync.defer``) report here too.
    """
    place = _device.current_place() if device is None else _device.parse_device(device)
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
