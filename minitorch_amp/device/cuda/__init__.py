"""``minitorch_amp.device.cuda``: the GPU side of ``device`` (Paddle's ``paddle.device.cuda``).

``graphs`` captures a training step as a CUDA graph and replays it (in one line:
``step = graphs.graphed(step)``). On a machine without a GPU the functions exist and say so:
``device_count()`` is 0, ``graphs.is_cuda_graph_supported()`` is False, and a graphed step
runs eagerly.
"""

from __future__ import annotations

from ...backend.device import device_count
from ...backend.memory import max_memory_allocated, memory_allocated
from . import graphs

__all__ = ["device_count", "graphs", "max_memory_allocated", "memory_allocated", "synchronize"]


def synchronize(device=None) -> None:
    """Wait for all queued work on the GPU ``device`` (default: the current device)."""
    from .. import synchronize as _synchronize

    _synchronize(device)
