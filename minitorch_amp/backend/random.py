"""The one random-number source: every random creation, initialiser and dropout mask draws here.

``seed(n)`` resets it, so a seeded program is reproducible on a given backend.
"""

from __future__ import annotations

import numpy as np

from . import device


class _State:
    def __init__(self):
        self.seed_value = None
        self.cpu = np.random.default_rng()
        self.gpu = None  # created lazily, only if CuPy is in use


_state = _State()


def seed(value: int) -> None:
    """Seed every random generator (CPU and GPU) with ``value``."""
    if not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"seed must be a non-negative integer, got {value!r}")
    _state.seed_value = int(value)
    _state.cpu = np.random.default_rng(int(value))
    _state.gpu = None
    if device.cupy is not None:
        _state.gpu = device.cupy.random.default_rng(int(value))


def generator(xp):
    """The generator for array module ``xp`` (a ``numpy``/``cupy`` ``Generator``)."""
    if xp is np:
        return _state.cpu
    if _state.gpu is None:
        _state.gpu = xp.random.default_rng(_state.seed_value)
    return _state.gpu
