"""FP8 training: the recipes (``recipe``), per-tensor scaling state (``scaling``), the FP8
GEMM ops (``gemm``) and the region that turns them on (``autocast``). ``docs/fp8.md``
explains the numbers."""

from .autocast import fp8_autocast, fp8_meta, is_fp8_enabled
from .recipe import DelayedScaling, Float8CurrentScaling, Format
from .scaling import ScalingState

__all__ = [
    "DelayedScaling",
    "Float8CurrentScaling",
    "Format",
    "ScalingState",
    "fp8_autocast",
    "fp8_meta",
    "is_fp8_enabled",
]
