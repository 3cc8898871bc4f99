"""Which ops AMP runs in low precision and which in float32: Paddle's default lists.

The op table is the single source for float16: each op's ``amp`` category (``autograd/op.py``)
says whether it is white, black, extra-black or gray. This module turns the categories into
the per-level lists Paddle uses, holds Paddle's bfloat16 lists (the one home of both dtypes'
lists), and resolves users' custom lists (which may use our op names or Paddle's fluid names
such as ``matmul_v2`` or ``elementwise_add``).

=====  =========================  ================================================
level  white (low precision)      black (float32)
=====  =========================  ================================================
O0     (AMP off)                  (AMP off)
OD     white ops                  none: every other op runs in float32
O1     white ops                  black + extra-black ops; gray ops promote
O2     white ops                  extra-black ops only; gray (and black) ops promote
=====  =========================  ================================================

bfloat16 uses current Paddle's lists at the same levels: ``BF16_WHITE_LIST = WHITE_LIST``
(float16's white list without the fused-attention and fake-quantize ops that have no
bfloat16 kernel) and ``BF16_BLACK_LIST = FP16_BLACK_LIST``: softmax, layer_norm, exp, the
reductions and the losses stay float32 at O1, as in float16. (Paddle 2.5 had
``{conv2d, einsum, matmul_v2}`` and an empty black list.) For the ops here the two dtypes'
lists are the same: ``matmul``, ``conv2d``, ``einsum`` and ``linear`` (Paddle's dygraph
``F.linear`` is ``matmul_v2`` followed by an add) are white in both.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from ..autograd.op import BLACK, EXTRA_BLACK, GRAY, OP_TABLE, WHITE

LEVELS = ("O0", "OD", "O1", "O2")

# Paddle's fluid op names, as they appear in Paddle code and custom lists, mapped to ours.
PADDLE_NAMES = {
    "matmul_v2": "matmul",
    "mul": "matmul",
    "fused_gemm_epilogue": "linear",
    "elementwise_add": "add",
    "elementwise_sub": "subtract",
    "elementwise_mul": "multiply",
    "elementwise_div": "divide",
    "elementwise_pow": "pow",
    "reduce_sum": "sum",
    "reduce_mean": "mean",
    "reduce_max": "max",
    "arg_max": "argmax",
    "lookup_table": "embedding",
    "lookup_table_v2": "embedding",
    "softmax_with_cross_entropy": "cross_entropy",
    "cross_entropy2": "cross_entropy",
    "reshape2": "reshape",
    "transpose2": "transpose",
    "transfer_dtype": "cast",
    "slice": "getitem",
    "expand_v2": "expand",
    "expand_as_v2": "expand_as",
}


# Paddle's default lists (python/paddle/amp/amp_lists.py), in its op names: what
# white_list() and black_list() report besides our own ops. A name here that is no op of
# ours is accepted in custom lists and changes nothing (no such op ever runs).
# WHITE_LIST: white in float16 and bfloat16; ONLY_FP16_WHITE_LIST: no bfloat16 kernel.
PADDLE_WHITE = frozenset({
    "conv2d", "einsum", "matmul", "matmul_v2", "max_pool2d_with_index", "mul",
    "fused_gemm_epilogue", "fused_rotary_position_embedding", "flash_attn",
})  # fmt: skip
PADDLE_ONLY_FP16_WHITE = frozenset({
    "fake_quantize_dequantize_abs_max", "fake_quantize_dequantize_moving_average_abs_max",
    "fused_attention", "fused_feedforward",
})  # fmt: skip
PADDLE_FP16_WHITE = PADDLE_WHITE | PADDLE_ONLY_FP16_WHITE
PADDLE_FP16_BLACK = frozenset({
    "tan", "acos", "asin", "sinh", "cosh", "atanh", "tanh_shrink", "erfinv", "exp",
    "expm1", "log", "log10", "log2", "reciprocal", "rsqrt", "pow", "square", "reduce_sum",
    "mean", "reduce_mean", "reduce_prod", "cumprod", "cumsum", "dist", "pnorm",
    "frobenius_norm", "renorm", "group_norm", "layer_norm", "softmax", "softmin", "softplus",
    "log_softmax", "softmax_with_cross_entropy", "sigmoid_cross_entropy_with_logits",
    "c_softmax_with_cross_entropy", "c_softmax_with_multi_label_cross_entropy",
    "cross_entropy", "cross_entropy2", "nll_loss", "huber_loss", "triplet_margin_loss",
    "log_loss", "hsigmoid_loss", "margin_cross_entropy",
})  # fmt: skip
# "FP16/BF16 performance of grad op is worse than that of FP32": float32 at O1 and O2.
PADDLE_EXTRA_BLACK = frozenset({
    "linear_interp_v2", "nearest_interp_v2", "bilinear_interp_v2", "bicubic_interp_v2",
    "trilinear_interp_v2", "lookup_table", "lookup_table_v2", "scatter",
})  # fmt: skip
PADDLE_BF16_WHITE = PADDLE_WHITE
PADDLE_BF16_BLACK = PADDLE_FP16_BLACK
# Ops with no float16 or bfloat16 kernel in Paddle: its "unsupported" set, built from the
# kernel registry (AmpOperators in amp_auto_cast.cc), not a list in amp_lists.py. Where AMP
# would run one in low precision it runs in float32, whatever the lists say. Only those that
# are ops here are named.
PADDLE_NO_LOW_PRECISION_KERNEL = {
    "float16": frozenset({"expand_as_v2"}),
    "bfloat16": frozenset({"expand_as_v2"}),
}
# Paddle's listed names that are not spellings of our ops.
PADDLE_ONLY = (PADDLE_FP16_WHITE | PADDLE_FP16_BLACK | PADDLE_EXTRA_BLACK) - set(PADDLE_NAMES)


def _ops_in(*categories: str) -> frozenset[str]:
    return frozenset(name for name, op in OP_TABLE.items() if op.amp in categories)


def _ours(paddle_names: frozenset[str]) -> frozenset[str]:
    """Our ops among Paddle's names (``matmul_v2`` -> ``matmul``; ``einsum`` is no op here)."""
    return frozenset(PADDLE_NAMES.get(n, n) for n in paddle_names) & set(OP_TABLE)


_DTYPES = ("float16", "bfloat16")


def _check_dtype(dtype: str) -> None:
    if dtype not in _DTYPES:
        raise ValueError(f"AMP op lists exist for 'float16' and 'bfloat16', got {dtype!r}")


def white_ops(level: str = "O1", dtype: str = "float16") -> frozenset[str]:
    """Our ops that run in ``dtype`` at ``level`` (empty at O0): what ``auto_cast`` starts
    from. The white ops of the op table; for bfloat16 without Paddle's fp16-only ones."""
    _check_dtype(dtype)
    if level == "O0":
        return frozenset()
    white = _ops_in(WHITE)
    return white if dtype == "float16" else white - _ours(PADDLE_ONLY_FP16_WHITE)


def black_ops(level: str = "O1", dtype: str = "float16") -> frozenset[str]:
    """Our ops that run in float32 at ``level`` under ``dtype``: O1 black + extra-black, O2
    extra-black, OD none (OD runs every non-white op in float32 without a list). Paddle's
    bfloat16 black list is float16's, so ``dtype`` only has to be one of the two."""
    _check_dtype(dtype)
    if level == "O1":
        return _ops_in(BLACK) | _ops_in(EXTRA_BLACK)
    if level == "O2":
        return _ops_in(EXTRA_BLACK)
    return frozenset()


@functools.cache
def no_kernel_ops(dtype: str = "float16") -> frozenset[str]:
    """Our ops that Paddle has no ``dtype`` kernel for: float32 at every level, even when a
    custom list names them white (Paddle's ``GetAmpDestDtype``)."""
    _check_dtype(dtype)
    return _ours(PADDLE_NO_LOW_PRECISION_KERNEL[dtype])


def gray_list() -> frozenset[str]:
    """Ops that follow their inputs (float32 if any floating input is float32)."""
    return _ops_in(GRAY)


def white_list() -> dict[str, dict[str, set[str]]]:
    """Paddle's ``paddle.amp.white_list()``: ``{dtype: {level: op names}}``, levels OD, O1, O2.

    Paddle's default white list for the dtype (its names: ``matmul_v2``, ``conv2d``, ...)
    and our white ops (``matmul``, ``linear``). Fresh sets each call.

    Example:
        >>> from minitorch_amp import amp
        >>> "matmul_v2" in amp.white_list()["float16"]["O1"]
        True
    """
    lists = {
        "float16": PADDLE_FP16_WHITE | white_ops("O1", "float16"),
        "bfloat16": PADDLE_BF16_WHITE | white_ops("O1", "bfloat16"),
    }
    return {dtype: {lv: set(ops) for lv in ("OD", "O1", "O2")} for dtype, ops in lists.items()}


def black_list() -> dict[str, dict[str, set[str]]]:
    """Paddle's ``paddle.amp.black_list()``: ``{dtype: {level: op names}}``. OD is empty, O1
    holds the black and the extra-black list, O2 only the extra-black one (Paddle's names,
    with the interpolation ops, and ours); bfloat16's are float16's, as in Paddle.

    Example:
        >>> from minitorch_amp import amp
        >>> sorted(amp.black_list()["float16"]["O2"])[:3]
        ['bicubic_interp_v2', 'bilinear_interp_v2', 'embedding']
    """
    black, extra = PADDLE_FP16_BLACK | _ops_in(BLACK), PADDLE_EXTRA_BLACK | _ops_in(EXTRA_BLACK)
    lists = {"float16": (black, extra), "bfloat16": (PADDLE_BF16_BLACK | _ops_in(BLACK), extra)}
    return {d: {"OD": set(), "O1": set(b | e), "O2": set(e)} for d, (b, e) in lists.items()}


def canonical_name(name: str) -> str:
    """Our op name for ``name`` (ours or Paddle's), or a ValueError naming the known ops.

    A name from Paddle's default lists that names no op here (``bilinear_interp_v2``) is
    returned as it is: a valid Paddle name, which changes nothing since no such op runs.
    """
    if not isinstance(name, str):
        raise TypeError(f"op names in custom lists must be strings, got {name!r}")
    resolved = PADDLE_NAMES.get(name, name)
    if resolved not in OP_TABLE and resolved not in PADDLE_ONLY:
        known = ", ".join(sorted(OP_TABLE))
        raise ValueError(
            f"unknown op {name!r} in a custom AMP list; known ops are: {known} "
            f"(Paddle names such as {', '.join(sorted(PADDLE_NAMES)[:4])}, ... are accepted too)"
        )
    return resolved


def _canonical_names(arg: str, names) -> set[str]:
    """Our names for a custom list: None, or a list, tuple or set of op names (Paddle's)."""
    if names is None:
        return set()
    # NOTE: a string is iterable too; "exp" would otherwise be read as the ops 'e', 'x', 'p'.
    if isinstance(names, str | bytes) or not isinstance(names, Iterable):
        wrap = f"; wrap one name in a list: {arg}=[{names!r}]" if isinstance(names, str) else ""
        raise TypeError(f"{arg} must be a list or set of op names, got {names!r}{wrap}")
    return {canonical_name(n) for n in names}


def resolve_lists(
    level: str, custom_white_list=None, custom_black_list=None, dtype: str = "float16"
):
    """The ``(white, black)`` sets for ``level`` and ``dtype`` after applying the custom lists.

    Paddle's rule: start from the level's defaults; a custom-white op leaves the black list and
    joins the white list, a custom-black op the other way round. An op in both custom lists is
    an error.
    """
    if custom_white_list is None and custom_black_list is None:
        return _default_lists(level, dtype)  # what a region entered every step asks for
    custom_white = _canonical_names("custom_white_list", custom_white_list)
    custom_black = _canonical_names("custom_black_list", custom_black_list)
    overlap = custom_white & custom_black
    if overlap:
        raise ValueError(
            f"Custom white list overlap custom black list: {sorted(overlap)} appear in both"
        )
    white = set(white_ops(level, dtype)) - custom_black | custom_white
    black = set(black_ops(level, dtype)) - custom_white | custom_black
    return frozenset(white), frozenset(black)


def reported_lists(
    level: str, custom_white_list=None, custom_black_list=None, dtype: str = "float16"
) -> tuple[frozenset, frozenset]:
    """Paddle's ``tracer._get_amp_op_list()`` in a region: :func:`white_list` and
    :func:`black_list` for ``level`` and ``dtype`` (Paddle's names and ours) with the custom
    names moved *as given* (Paddle's ``_update_list``); empty at O0. What
    ``amp_state().white``/``.black`` report; the lists were checked by :func:`resolve_lists`.

    NOTE: a report, not the decision: ops here are decided by :func:`resolve_lists`, in our
    names. ``custom_white_list=['reduce_sum']`` makes our ``sum`` white; the report moves
    ``reduce_sum`` and leaves our name ``sum`` in black (the names differ, as in Paddle).
    """
    if custom_white_list is None and custom_black_list is None:
        return _default_reported(level, dtype)
    white, black = (set(s) for s in _default_reported(level, dtype))
    if level != "O0":
        for name in custom_white_list or ():
            black.discard(name)
            white.add(name)
        for name in custom_black_list or ():
            white.discard(name)
            black.add(name)
    return frozenset(white), frozenset(black)


@functools.cache
def _default_reported(level: str, dtype: str) -> tuple[frozenset, frozenset]:
    if level == "O0":
        return frozenset(), frozenset()
    return frozenset(white_list()[dtype][level]), frozenset(black_list()[dtype][level])


@functools.cache
def _default_lists(level: str, dtype: str) -> tuple[frozenset, frozenset]:
    """The level's own lists, built once (an unknown level or dtype raises, uncached)."""
    return frozenset(white_ops(level, dtype)), frozenset(black_ops(level, dtype))
