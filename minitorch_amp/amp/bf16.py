"""bfloat16 in AMP: whether a device can run bfloat16, and the scaler's bfloat16 rule.

The bfloat16 op lists (Paddle's ``BF16_WHITE_LIST``/``BF16_BLACK_LIST``, and ours) live with
float16's in :mod:`~minitorch_amp.amp.op_lists`: ``white_ops(level, 'bfloat16')``,
``black_ops(level, 'bfloat16')``.
"""

from __future__ import annotations

import warnings

from ..backend import device as _device

__all__ = ["is_bfloat16_supported"]


def is_bfloat16_supported(device=None) -> bool:
    """Whether ``device`` (default: the current one) runs bfloat16.

    The CPU answers True: bfloat16 is *emulated* there with NumPy and ``ml_dtypes`` (each op
    computes in float32 and rounds to nearest even bfloat16, as a GPU kernel does), exact
    but not fast. A GPU answers True from compute capability 8.0 (Ampere) on, with CuPy 14
    or newer (the first with a bfloat16 dtype); :func:`bfloat16_unsupported_reason` says why
    not.

    Raises:
        ValueError: ``device`` is not a Place or a device string, or names a GPU this
            machine does not have (as :func:`~minitorch_amp.amp.is_float16_supported`).

    Example:
        >>> import minitorch_amp as mt
        >>> mt.amp.is_bfloat16_supported("cpu")
        True
    """
    from .torch_autocast import check_device

    if device is not None:
        check_device(device, "is_bfloat16_supported")
        _device.parse_device(device, "is_bfloat16_supported")  # a DeviceError, a ValueError
    return bfloat16_unsupported_reason(device) is None


def bfloat16_unsupported_reason(device=None) -> str | None:
    """None when ``device`` runs bfloat16, else the reason (what :func:`is_bfloat16_supported`
    answers False for)."""
    place = _device.current_place() if device is None else _device.parse_device(device)
    return _device.bfloat16_unsupported(place)


def disable_for_bfloat16(scaler) -> None:
    """Paddle's ``GradScaler.scale`` rule: after ``auto_cast(dtype='bfloat16')``, a scaler with
    dynamic loss scaling turns itself off for good (scale 1, static), with Paddle's warning.

    Why: bfloat16 has float32's exponent range. A gradient that float16 flushes to zero
    (below 2**-24) is still a normal bfloat16 down to 2**-126, so there is nothing for a
    loss scale to rescue, and an overflow of a bfloat16 gradient is an overflow in float32
    too. A *static* scale (``use_dynamic_loss_scaling=False``) is kept: the user asked for it.

    NOTE: Paddle's check is ``amp_dtype != 'float16'``, which also fires when no auto_cast was
    ever entered (its global starts as 'float32'); here only bfloat16 turns the scaler off,
    so fp32 code that uses a scaler (and this project's tests) keeps its scaling.
    """
    from .auto_cast import last_amp_dtype

    if last_amp_dtype() != "bfloat16":
        return
    scaler._enable = False
    scaler._use_dynamic_loss_scaling = False
    scaler._init_loss_scaling = 1.0
    warnings.warn(
        "It is not recommended to use dynamic loss scaling for bfloat16, so GradScaler is "
        "disable by default.",
        stacklevel=3,
    )
