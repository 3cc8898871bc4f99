"""bfloat16 in AMP: Paddle's bfloat16 op lists, and whether a device can run bfloat16.

Paddle keeps separate lists per AMP dtype (``python/paddle/amp/amp_lists.py``). For
bfloat16 they are much shorter than for float16::

    BF16_WHITE_LIST = {conv2d, einsum, matmul_v2}     BF16_BLACK_LIST = set()
    white: OD, O1, O2 = BF16_WHITE_LIST
    black: OD = set(), O1 = BF16_BLACK_LIST | EXTRA_BLACK_LIST, O2 = EXTRA_BLACK_LIST

so at O1 the ops float16 keeps in float32 for their *range* (exp, log, softmax, sum, mean,
the losses...) are gray in bfloat16: bfloat16 has float32's exponent range, and they follow
their inputs. Only the extra-black ops (embedding: their backward is slow in 16 bits) stay
float32. Of the white ops, ours are ``matmul``, ``conv2d`` and ``linear`` (Paddle's dygraph
``F.linear`` is ``matmul_v2`` followed by an add: its product is white in bfloat16 too).
"""

from __future__ import annotations

import warnings

from ..autograd.op import EXTRA_BLACK, OP_TABLE
from ..backend import device as _device
from .op_lists import PADDLE_NAMES, _canonical_names

__all__ = ["BF16_WHITE_LIST", "bf16_black_list", "bf16_white_list", "is_bfloat16_supported"]

BF16_WHITE_LIST = frozenset({"conv2d", "einsum", "matmul_v2"})
"""Paddle's names, as in ``amp_lists.py``."""

# Ours: each Paddle name that has an op here, plus linear (matmul_v2 + add in Paddle's F.linear)
_WHITE = frozenset(
    PADDLE_NAMES.get(n, n) for n in BF16_WHITE_LIST if PADDLE_NAMES.get(n, n) in OP_TABLE
) | ({"linear"} & set(OP_TABLE))


def bf16_white_list(level: str = "O1") -> frozenset[str]:
    """Our ops that run in bfloat16 at ``level`` (empty at O0)."""
    return frozenset() if level == "O0" else _WHITE


def bf16_black_list(level: str = "O1") -> frozenset[str]:
    """Our ops that run in float32 at ``level`` under bfloat16: the extra-black ones at O1/O2."""
    if level in ("O1", "O2"):
        return frozenset(name for name, op in OP_TABLE.items() if op.amp == EXTRA_BLACK)
    return frozenset()


def resolve_bf16_lists(level: str, custom_white_list=None, custom_black_list=None):
    """``op_lists.resolve_lists`` for bfloat16: the bfloat16 defaults, then the custom lists."""
    custom_white = _canonical_names("custom_white_list", custom_white_list)
    custom_black = _canonical_names("custom_black_list", custom_black_list)
    overlap = custom_white & custom_black
    if overlap:
        raise ValueError(
            f"Custom white list overlap custom black list: {sorted(overlap)} appear in both"
        )
    white = set(bf16_white_list(level)) - custom_black | custom_white
    black = set(bf16_black_list(level)) - custom_white | custom_black
    return frozenset(white), frozenset(black)


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
    try:
        return bfloat16_unsupported_reason(device) is None
    except _device.DeviceError as exc:
        raise ValueError(f"is_bfloat16_supported: {exc}") from None


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
