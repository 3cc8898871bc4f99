"""FP8 training: the recipes (``recipe``), per-tensor scaling state (``scaling``), the FP8
GEMM ops (``gemm``), the region that turns them on (``autocast``) and the scaling states'
place in checkpoints (``checkpoint``). ``docs/fp8.md`` explains the numbers."""

from . import checkpoint  # puts the scaling states into Layer.state_dict()
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
