"""Input and output: checkpoints (:mod:`.checkpoint`) and, like ``paddle.io``, data loading.

``save`` / ``load`` write and read nested state dicts without pickling code; see
:mod:`minitorch_amp.io.checkpoint` for the format.
"""

from .checkpoint import DEFAULT_MAX_BYTES, CheckpointError, load, save

__all__ = ["DEFAULT_MAX_BYTES", "CheckpointError", "load", "save"]
