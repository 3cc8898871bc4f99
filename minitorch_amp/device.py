"""``minitorch_amp.device``: choosing a device, and how much memory it has (Paddle's
``paddle.device``). Memory accounting works on the CPU too, against a budget you can set."""

from __future__ import annotations

from .backend import device as _device
from .backend.device import Place, device_count, get_device, is_compiled_with_cuda, set_device
from .backend.memory import (
    OutOfMemoryError,
    get_memory_limit,
    max_memory_allocated,
    memory_allocated,
    memory_available,
    reset_max_memory_allocated,
    set_memory_limit,
)


def get_available_device() -> list[str]:
    """Every device string this machine accepts, e.g. ``['cpu', 'gpu:0']``."""
    return ["cpu"] + [f"gpu:{i}" for i in range(device_count())]


def synchronize(device=None) -> None:
    """Wait for all queued GPU work on ``device`` (default: the current one)."""
    place = _device.current_place() if device is None else _device.parse_device(device)
    _device.synchronize(place)


__all__ = [
    "OutOfMemoryError",
    "Place",
    "device_count",
    "get_available_device",
    "get_device",
    "get_memory_limit",
    "is_compiled_with_cuda",
    "max_memory_allocated",
    "memory_allocated",
    "memory_available",
    "reset_max_memory_allocated",
    "set_device",
    "set_memory_limit",
    "synchronize",
]
