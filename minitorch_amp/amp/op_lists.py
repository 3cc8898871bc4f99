"""Which ops AMP runs in low precision and which in float32: Paddle's default lists.

The op table is the single source: each op's ``amp`` category (``autograd/op.py``) says
whether it is white, black, extra-black or gray. This module turns the categories into the
per-level lists Paddle uses, and resolves users' custom lists (which may use our op names or
Paddle's fluid names such as ``matmul_v2`` or ``elementwise_add``).

=====  =========================  ================================================
level  white (low precision)      black (float32)
=====  =========================  ================================================
O0     (AMP off)                  (AMP off)
OD     white ops                  none: every other op runs in float32
O1     white ops                  black + extra-black ops; gray ops promote
O2     white ops                  extra-black ops only; gray (and black) ops promote
=====  =========================  ================================================
"""

from __future__ import annotations

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
    "expand_as_v2": "expand",
}


def _ops_in(*categories: str) -> frozenset[str]:
    return frozenset(name for name, op in OP_TABLE.items() if op.amp in categories)


def white_list(level: str = "O1") -> frozenset[str]:
    """Ops that run in float16 at ``level`` (empty at O0)."""
    return frozenset() if level == "O0" else _ops_in(WHITE)


def black_list(level: str = "O1") -> frozenset[str]:
    """Ops that run in float32 at ``level``: O1 black + extra-black, O2 extra-black, OD none."""
    if level == "O1":
        return _ops_in(BLACK, EXTRA_BLACK)
    if level == "O2":
        return _ops_in(EXTRA_BLACK)
    return frozenset()


def gray_list() -> frozenset[str]:
    """Ops that follow their inputs (float32 if any floating input is float32)."""
    return _ops_in(GRAY)


def canonical_name(name: str) -> str:
    """Our op name for ``name`` (ours or Paddle's), or a ValueError naming the known ops."""
    if not isinstance(name, str):
        raise TypeError(f"op names in custom lists must be strings, got {name!r}")
    resolved = PADDLE_NAMES.get(name, name)
    if resolved not in OP_TABLE:
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


def resolve_lists(level: str, custom_white_list=None, custom_black_list=None):
    """The ``(white, black)`` sets for ``level`` after applying the custom lists.

    Paddle's rule: start from the level's defaults; a custom-white op leaves the black list and
    joins the white list, a custom-black op the other way round. An op in both custom lists is
    an error.
    """
    custom_white = _canonical_names("custom_white_list", custom_white_list)
    custom_black = _canonical_names("custom_black_list", custom_black_list)
    overlap = custom_white & custom_black
    if overlap:
        raise ValueError(
            f"Custom white list overlap custom black list: {sorted(overlap)} appear in both"
        )
    white = set(white_list(level)) - custom_black | custom_white
    black = set(black_list(level)) - custom_white | custom_black
    return frozenset(white), frozenset(black)
