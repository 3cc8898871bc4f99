"""``minitorch_amp.device.cuda``: the GPU side of ``device`` (Paddle's ``paddle.device.cuda``).

The memory functions and ``synchronize`` take ``device`` as Paddle's do: None (the current
device), a Place, ``'gpu:N'`` or an int N. ``memory_allocated`` is what tensors use,
``memory_reserved`` that plus what the allocator caches (the same on the CPU, which caches
nothing), the ``max_`` forms their peaks; ``empty_cache()`` gives the current GPU's cache
back (a no-op on the CPU).

``graphs`` captures a training step as a CUDA graph and replays it (in one line:
``step = graphs.graphed(step)``). On a machine without a GPU the functions exist and say so:
``device_count()`` is 0, ``graphs.is_cuda_graph_supported()`` is False, and a graphed step
runs eagerly.
"""

from __future__ import annotations

from ...backend.device import device_count
from ...backend.memory import (
    empty_cache,
    max_memory_allocated,
    max_memory_reserved,
    memory_allocated,
    memory_reserved,
)
from . import graphs

__all__ = [
    "device_count",
    "empty_cache",
    "graphs",
    "max_memory_allocated",
    "max_memory_reserved",
    "memory_allocated",
    "memory_reserved",
    "synchronize",
]


def synchronize(device=None) -> None:
    """Wait for all queued work on the GPU ``device`` (default: the current device): None,
    a Place, ``'gpu:N'`` or an int N, as the memory functions take it."""
    from .. import synchronize as _synchronize

    _synchronize(device)
