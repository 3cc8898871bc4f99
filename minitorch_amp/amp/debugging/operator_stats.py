"""Operator statistics: how many forward calls of each op ran in which dtype."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ...autograd import Tensor
from ...autograd.dispatch import hooks
from ...autograd.ops import Cast
from ...backend.dtypes import FP8, bfloat16
from .observers import install as _install
from .observers import install_counter, uninstall_counter
from .observers import uninstall as _uninstall

_BUCKETS = ("fp16", "bf16", "fp32", "other")
_BUCKET_OF = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}
_HEADER = "<{:-^40} | {:-^17} | {:-^17} | {:-^17} | {:-^17}>".format(
    " Op Name ", " FP16 Calls ", " BF16 Calls ", " FP32 Calls", " Other Calls "
)


class OperatorStats:
    """Forward calls per op, bucketed by the dtype its kernel ran in, as Paddle counts them:
    the output's dtype, or for an op with an integer or bool result (a comparison,
    ``argmax``, ``topk``) the dtype of its first floating input.

    fp16, bf16 and fp32 have their own bucket; everything else (int, bool, float64) is
    ``'other'``. Casts are counted as ``'cast'`` (Paddle's table calls them ``transfer_dtype``)
    the way Paddle counts its cast kernel: by the *source* dtype (the kernel's key), every
    one that runs: forward, backward (Paddle's ``cast_grad`` runs the cast kernel), a
    master_grad's float16 gradient made float32, an fp32 master weight made from its
    parameter. The optimizer's update counts under Paddle's eager names (``sgd_``,
    ``momentum_``, ``adam_``, ``adamw_``), once per parameter and step call, in the
    parameter's dtype; the scaler's unscale as ``check_finite_and_unscale``, once per
    gradient dtype.

    Attributes:
        counts: ``{op_name: {'fp16': n, 'bf16': n, 'fp32': n, 'other': n}}``; ops that never
            ran are absent.
    """

    def __init__(self) -> None:
        self.counts: dict[str, dict[str, int]] = {}

    def add(self, op_name: str, dtype) -> None:
        """Count one forward call of ``op_name`` that returned a ``dtype`` tensor."""
        row = self.counts.get(op_name)
        if row is None:
            row = self.counts[op_name] = dict.fromkeys(_BUCKETS, 0)
        row[_BUCKET_OF.get(str(dtype), "other")] += 1

    def table(self) -> str:
        """Paddle's op-list table, one row per op sorted by name (rows without trailing blanks)."""
        lines = ["<{:-^69}>".format(" op list "), _HEADER]
        for name in sorted(self.counts):
            cells = "".join(f"|  {self.counts[name][b]:<17}" for b in _BUCKETS)
            lines.append(f"  {name:<40}{cells}".rstrip())
        lines.append("<{:-^71}>".format(f" op count: {len(self.counts)} "))
        return "\n".join(lines)


_collectors: list[OperatorStats] = []  # every active collector counts every forward call
_global_stats: OperatorStats | None = None  # the one enable_operator_stats_collection starts


def _count_op(op, out: Tensor) -> None:
    if op is Cast:  # a cast counts itself, by its source dtype (through hooks.counters)
        return
    dtype = out._data.dtype
    if not _floating(dtype):  # a comparison, argmax, topk: the kernel's dtype is its input's
        dtype = next((d for d in _input_dtypes() if _floating(d)), dtype)
    for stats in _collectors:
        stats.add(op.name, dtype)


def _floating(dtype) -> bool:
    return dtype.kind == "f" or dtype == bfloat16 or dtype in FP8


def _input_dtypes():
    """The dtypes of the arrays the observed op read (``hooks.inputs``)."""
    return (a.dtype for a in hooks.inputs if hasattr(a, "dtype"))


def _count_kernel(name: str, dtype) -> None:
    """A kernel told of through ``hooks.counters``: the optimizer's update, once per
    parameter, bucketed by the parameter's dtype (``adamw_`` runs in float16 for a float16
    parameter even with an fp32 master), the scaler's ``check_finite_and_unscale``, once per
    gradient dtype, and every cast, by the dtype it casts from."""
    for stats in _collectors:
        stats.add(name, dtype)


def _start(stats: OperatorStats) -> None:
    _collectors.append(stats)
    _install(_count_op)
    install_counter(_count_kernel)


def _stop(stats: OperatorStats) -> None:
    _collectors.remove(stats)
    if not _collectors:
        _uninstall(_count_op)
        uninstall_counter(_count_kernel)


def enable_operator_stats_collection() -> None:
    """Start counting forward op calls by kernel dtype; :func:`disable_operator_stats_collection`
    prints and returns the counts. Enabling again while on clears the counts (as Paddle does).
    """
    global _global_stats
    if _global_stats is None:
        _global_stats = OperatorStats()
        _start(_global_stats)
    else:
        _global_stats.counts.clear()


def disable_operator_stats_collection() -> dict[str, dict[str, int]] | None:
    """Stop counting, print Paddle's table and return the counts (None if it was not on).

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp.amp import debugging
        >>> x = mt.ones([2, 2]).astype("float16")
        >>> debugging.enable_operator_stats_collection()
        >>> y = mt.matmul(x, x) > 1.0
        >>> counts = debugging.disable_operator_stats_collection()
        <------------------------------ op list ------------------------------>
        <--------------- Op Name ---------------- | -- FP16 Calls --- | -- BF16 Calls --- | --- FP32 Calls--- | -- Other Calls -->
          compare                                 |  1                |  0                |  0                |  0
          matmul                                  |  1                |  0                |  0                |  0
        <----------------------------- op count: 2 ----------------------------->
        >>> counts["matmul"]
        {'fp16': 1, 'bf16': 0, 'fp32': 0, 'other': 0}
    """  # noqa: E501 - the table is wider than a source line
    global _global_stats
    stats, _global_stats = _global_stats, None
    if stats is None:
        return None
    _stop(stats)
    print(stats.table())
    return stats.counts


@contextlib.contextmanager
def collect_operator_stats() -> Iterator[OperatorStats]:
    """Count forward op calls inside the block; print the table on exit, even on an exception.

    Yields the :class:`OperatorStats` being filled; its ``counts`` stay readable afterwards.
    Blocks may nest: each counts its own region, and every call is counted once per block.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp.amp import debugging
        >>> with debugging.collect_operator_stats() as stats:
        ...     y = mt.ones([3]).astype("float16") * 2.0
        <------------------------------ op list ------------------------------>
        <--------------- Op Name ---------------- | -- FP16 Calls --- | -- BF16 Calls --- | --- FP32 Calls--- | -- Other Calls -->
          cast                                    |  0                |  0                |  1                |  0
          multiply                                |  1                |  0                |  0                |  0
        <----------------------------- op count: 2 ----------------------------->
        >>> stats.counts["cast"]["fp32"]  # a cast counts by the dtype it casts from
        1
    """  # noqa: E501 - the table is wider than a source line
    stats = OperatorStats()
    _start(stats)
    try:
        yield stats
    finally:  # NOTE: Paddle has no finally: an exception there leaves the collection on.
        _stop(stats)
        print(stats.table())
