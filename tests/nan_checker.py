"""Paddle's NaN/Inf checker turned on for one block (``enable_tensor_checker`` with
``CHECK_NAN_INF``, then ``disable_tensor_checker`` whatever happens), for tests."""

from __future__ import annotations

import contextlib

from minitorch_amp.amp import debugging


@contextlib.contextmanager
def nan_inf_checker():
    """Check every op's results and gradients for NaN and Inf inside the block."""
    config = debugging.TensorCheckerConfig(True, debugging.DebugMode.CHECK_NAN_INF)
    debugging.enable_tensor_checker(config)
    try:
        yield
    finally:
        debugging.disable_tensor_checker()
