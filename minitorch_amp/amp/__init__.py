"""Automatic Mixed Precision: ``auto_cast``, the op lists and cast statistics.

The pieces, bottom up: ``op_lists`` (white/black/gray, from the op table), ``auto_cast``
(the per-op cast rule and the cast cache, plugged into ``apply``), ``GradScaler`` (dynamic
loss scaling), ``decorate`` (O2: fp16 parameters, fp32 master weights in the optimizer),
``debugging`` (operator statistics, NaN/Inf checks), an apex-style facade, and ``fp8``
(FP8 GEMMs with per-tensor scaling, ``fp8_autocast``).
"""

from ..backend.cast_counter import cast_counts, reset_cast_counts
from . import apex, debugging
from .apex import initialize, master_params, scale_loss
from .auto_cast import AmpState, amp_state, auto_cast
from .bf16 import is_bfloat16_supported
from .decorate import decorate
from .fp8 import DelayedScaling, Float8CurrentScaling, Format, fp8_autocast, fp8_meta
from .grad_scaler import AmpScaler, GradScaler, OptimizerState
from .op_lists import black_list, gray_list, white_list
from .torch_autocast import (
    autocast,
    get_autocast_cpu_dtype,
    get_autocast_dtype,
    get_autocast_gpu_dtype,
    is_autocast_enabled,
)
from .torch_autocast import check_device as _check_device


def is_float16_supported(device=None) -> bool:
    """True: float16 runs on the GPU natively and is emulated faithfully on the CPU.

    Raises:
        ValueError: ``device`` is not a Place or a device string (``'cpu'``, ``'gpu:0'``,
            ...), or names a GPU this machine does not have (Paddle raises ValueError too).
    """
    if device is not None:
        _usable_device(device, "is_float16_supported")
    return True


def _usable_device(device, what: str) -> None:
    from ..backend.device import parse_device

    _check_device(device, what)
    parse_device(device, what)  # a DeviceError, also a ValueError


__all__ = [
    "AmpScaler",
    "GradScaler",
    "OptimizerState",
    "apex",
    "autocast",
    "get_autocast_cpu_dtype",
    "get_autocast_dtype",
    "get_autocast_gpu_dtype",
    "is_autocast_enabled",
    "initialize",
    "master_params",
    "scale_loss",
    "AmpState",
    "amp_state",
    "auto_cast",
    "black_list",
    "cast_counts",
    "debugging",
    "decorate",
    "DelayedScaling",
    "Float8CurrentScaling",
    "Format",
    "fp8_autocast",
    "fp8_meta",
    "gray_list",
    "is_bfloat16_supported",
    "is_float16_supported",
    "reset_cast_counts",
    "white_list",
]


def __getattr__(name: str):
    """A PyTorch name this package spells differently raises an AttributeError that says
    what to use (``minitorch_amp.pytorch_hints``); called only for names not found."""
    from ..pytorch_hints import missing

    raise missing("minitorch_amp.amp", name, names=globals())
