"""``minitorch_amp.device``: Paddle's ``paddle.device`` functions for choosing a device."""

from __future__ import annotations

from .backend import device as _device
from .backend.device import Place, device_count, get_device, is_compiled_with_cuda, set_device


def get_available_device() -> list[str]:
    """Every device string this machine accepts, e.g. ``['cpu', 'gpu:0']``."""
    return ["cpu"] + [f"gpu:{i}" for i in range(device_count())]


def synchronize(device=None) -> None:
    """Wait for all queued GPU work on ``device`` (default: the current one)."""
    place = _device.current_place() if device is None else _device.parse_device(device)
    _device.synchronize(place)


__all__ = [
    "Place",
    "device_count",
    "get_available_device",
    "get_device",
    "is_compiled_with_cuda",
    "set_device",
    "synchronize",
]
