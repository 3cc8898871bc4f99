"""Which op produced the first inf/NaN, forward or backward, and what it read.

The model properties (:mod:`~minitorch_amp.testing.model_properties`) watch a run through the
tensor checker's plumbing: the observers that ``apply`` calls after every forward and the
engine after every backward (``minitorch_amp.amp.debugging``), with the tensor checker's own
statistics (``num_nan``, ``num_inf``, ``max``/``min`` over the finite values). An
:class:`OpTrace` numbers each op name's applications (``linear`` #0, #1, ..., ``linear_grad``
#0, ...), so the same op can be found again in a float32 run of the same model, where AMP's
casts do not exist but every other op runs in the same order. AMP's own casts (those its
per-op rule inserts, and their backward) are numbered apart from the model's ``cast`` ops and
marked ``amp_cast``: the float32 run has no twin of them.

Under ``fp8_autocast`` each FP8 cast shows as op ``cast_to_fp8``, its output the *plain*
(unsaturated) conversion of the scaled tensor (``minitorch_amp.amp.fp8.gemm``): NaN (E4M3) or
inf (E5M2) where the saturating cast clipped a value. A trace holds each cast until the FP8
GEMM it feeds shows (``fp8_linear`` #0, ``fp8_linear_grad`` #0, ...), then records which
operand it was (``feeds``) and the unscaled values the cast read: the GEMM's input.

Example:
    >>> import numpy as np
    >>> import minitorch_amp as mt
    >>> with OpTrace() as trace:
    ...     y = mt.to_tensor([60000.0, 1.0], dtype="float16") * 2
    >>> trace.first_bad.op, trace.first_bad.output
    ('multiply', 'fp16[2] in [2, 2], 1 inf')
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..amp.debugging import observers
from ..amp.debugging.tensor_checker import _dtype_name, _numerics
from ..autograd.dispatch import hooks
from ..autograd.ops.cast import Cast
from ..backend import asnumpy
from ..backend.dtypes import FP8

CAST = "cast_to_fp8"
# The operands of an FP8 GEMM, in the order their casts show, and which input of the GEMM
# each one is (forward: what apply passed it; backward: the incoming gradient, input 0).
_OPERANDS = {1: (("input", 0),), 2: (("weight", 1), ("input", 0))}
_MATMUL = (("x", 0), ("y", 1))
_GRAD = (("output gradient", 0),)

__all__ = ["OpRecord", "OpTrace", "describe"]


def describe(data) -> str:
    """``'fp16[2, 3] in [-1.5, 6.4e+04], 2 inf'``: dtype, shape, range of the finite values
    and the count of infs and NaNs, from the tensor checker's statistics."""
    if data is None:
        return "None"
    if not hasattr(data, "dtype") or not hasattr(data, "shape"):  # a Python constant
        return repr(data)
    name = f"{_dtype_name(data.dtype)}{list(data.shape)}"
    if not _floating(data):
        return name
    with np.errstate(all="ignore"):  # the mean of values near MAX may overflow: not shown
        stats, values = _numerics(data)
    num_nan, num_inf, _ = (int(v) for v in asnumpy(stats))
    hi, lo, _ = (float(v) for v in asnumpy(values))
    text = f"{name} in [{lo:.4g}, {hi:.4g}]" if np.isfinite(hi) else f"{name} (no finite value)"
    text += f", {num_inf} inf" if num_inf else ""
    return text + (f", {num_nan} NaN" if num_nan else "")


def _floating(data) -> bool:
    return data.dtype.kind == "f" or str(data.dtype) == "bfloat16" or data.dtype in FP8


def _finite(data) -> bool:
    if data is None or not hasattr(data, "dtype") or not _floating(data) or data.size == 0:
        return True
    with np.errstate(all="ignore"):
        return bool(np.isfinite(data.astype(np.float32, copy=False)).all())


@dataclass(frozen=True)
class OpRecord:
    """One op application: ``linear`` (forward) or ``linear_grad`` (its backward).

    Attributes:
        op: the op's name; a backward is ``<op>_grad``, as in the tensor checker.
        occurrence: how many applications of this name came before it in the run (0: first).
        inputs: :func:`describe` of what it read: the forward's inputs after AMP's casts, or
            the backward's incoming gradient.
        output: :func:`describe` of the first non-finite result (a backward has one per
            input: the gradient of input ``slot``).
        dtype: that result's dtype, short (``fp16``, ``bf16``, ``fp32``).
        slot: which of the op's results ``output`` describes.
        feeds: for a ``cast_to_fp8``: ``(GEMM op, its application number, operand)``, e.g.
            ``('fp8_linear', 0, 'input')``; ``inputs`` then holds the values the cast read.
        amp_cast: a ``cast`` (or ``cast_grad``) that AMP inserted; ``occurrence`` then counts
            AMP's casts only, and a float32 run has no such op.
    """

    op: str
    occurrence: int
    inputs: tuple[str, ...]
    output: str
    dtype: str
    slot: int = 0
    feeds: tuple = ()
    amp_cast: bool = False

    @property
    def phase(self) -> str:
        gemm = self.feeds[0] if self.feeds else self.op
        return "backward" if gemm.endswith("_grad") else "forward"

    def twin(self) -> OpRecord:
        """The application a float32 run has in this one's place: itself, or the plain op of
        an FP8 one (``linear`` for ``fp8_linear``; for a ``cast_to_fp8``, the GEMM it fed)."""
        if self.feeds:
            gemm, occurrence, _ = self.feeds
            op = gemm.removeprefix("fp8_")
            return dataclasses.replace(self, op=op, occurrence=occurrence, slot=-1, feeds=())
        return dataclasses.replace(self, op=self.op.removeprefix("fp8_"))

    def values(self) -> str:
        """Two lines: what the op read and the result it wrote."""
        read = "gradient in" if self.phase == "backward" else "inputs"
        return f"  {read}: {'; '.join(self.inputs) or '(none)'}\n  output: {self.output}"

    def __str__(self) -> str:
        which = "AMP's cast" if self.amp_cast else "application"
        head = f"op {self.op!r} ({which} #{self.occurrence}, {self.phase})"
        if self.feeds:
            gemm, k, operand = self.feeds
            head += (
                f"\n  saturated (its plain conversion overflowed): the {operand} of {gemm!r} #{k}"
            )
        return f"{head}\n{self.values()}"


class OpTrace:
    """Watch the ops of a run (a context manager): the first one with a non-finite result, or
    the application ``want=(op, occurrence, slot)`` (``slot``: which result to describe; -1:
    the first one that is not None).

    Attributes:
        first_bad: the :class:`OpRecord` of the first op whose result held inf or NaN (None).
        wanted: the :class:`OpRecord` of ``want`` once it ran (None until then).
        counts: how many times each op name ran (AMP's casts under ``'cast (AMP)'`` and
            ``'cast_grad (AMP)'``).
    """

    def __init__(self, want: tuple[str, int, int] | None = None):
        self.want = want
        self.first_bad: OpRecord | None = None
        self.wanted: OpRecord | None = None
        self.counts: dict[str, int] = {}
        self._casts: list = []  # (occurrence, plain conversion) of the casts awaiting a GEMM
        self._inserting = 0  # > 0 while AMP's per-op rule runs: the casts it makes are its own
        self._amp_nodes: set = set()  # the graph nodes of AMP's casts (their backward too)
        # NOTE: one bound method each, kept: ``self._forward`` makes a new object at every
        # access, and uninstall removes the very object that was installed.
        self._observers = (self._forward, self._backward, self._autocast)
        self._amp_rule = None

    def __enter__(self) -> OpTrace:
        observers.install(self._observers[0])
        observers.install_grad_observer(self._observers[1])
        self._amp_rule = hooks.autocast
        if self._amp_rule is not None:
            hooks.autocast = self._observers[2]
        return self

    def __exit__(self, *exc) -> None:
        observers.uninstall(self._observers[0])
        observers.uninstall_grad_observer(self._observers[1])
        if hooks.autocast is self._observers[2]:
            hooks.autocast = self._amp_rule
        self._amp_nodes = set()
        self._flush(None, 0)  # a cast whose GEMM never showed (it raised)

    def _autocast(self, op, inputs, state):
        """AMP's per-op rule (``hooks.autocast``), watched: the casts it applies are AMP's."""
        self._inserting += 1
        try:
            return self._amp_rule(op, inputs, state)
        finally:
            self._inserting -= 1

    def _forward(self, op, out) -> None:
        inserted = op is Cast and self._inserting > 0
        if inserted and out._node is not None:
            self._amp_nodes.add(out._node)
        self._seen(op.name, (out._data,), inserted)

    def _backward(self, op, grads) -> None:
        self._seen(op.name + "_grad", grads, hooks.node in self._amp_nodes)

    def _seen(self, name: str, results, inserted: bool = False) -> None:
        key = f"{name} (AMP)" if inserted else name  # AMP's casts counted apart
        occurrence = self.counts.get(key, 0)
        self.counts[key] = occurrence + 1
        if name == CAST:
            self._casts.append((occurrence, results[0]))
            return
        if name.startswith("fp8_"):
            self._flush(name, occurrence)
        elif any(not _finite(plain) for _, plain in self._casts):
            return  # NOTE: AMP's casts of the GEMM's inputs show between its casts and it
        wanted = not inserted and self.want is not None and self.want[:2] == (name, occurrence)
        if self.first_bad is not None and not wanted:
            return
        bad = next((i for i, r in enumerate(results) if not _finite(r)), None)
        if bad is not None and self.first_bad is None:
            self.first_bad = self._record(name, occurrence, results, bad, amp_cast=inserted)
        if wanted and self.want[2] < len(results):
            slot = self.want[2]
            if slot < 0:  # any: the first result there is (the GEMM an FP8 cast fed)
                slot = next((i for i, r in enumerate(results) if r is not None), 0)
            self.wanted = self._record(name, occurrence, results, slot)

    def _flush(self, gemm: str | None, occurrence: int) -> None:
        """The first cast of ``gemm`` (the GEMM that now shows) that overflowed becomes
        ``first_bad``, if nothing came before it."""
        casts, self._casts = self._casts, []
        if self.first_bad is not None or not casts:
            return
        if gemm is None:
            operands = [("operand", None)] * len(casts)
        elif gemm.endswith("_grad"):
            operands = _GRAD * len(casts)
        else:
            operands = _MATMUL if gemm.startswith("fp8_matmul") else _OPERANDS.get(len(casts))
        operands = operands or [("operand", None)] * len(casts)
        for (k, plain), (operand, index) in zip(casts, operands):
            if not _finite(plain):
                read = hooks.inputs[index : index + 1] if index is not None else ()
                feeds = (gemm, occurrence, operand) if gemm else ()
                self.first_bad = self._record(CAST, k, (plain,), 0, read, feeds)
                return

    @staticmethod
    def _record(
        name: str, occurrence: int, results, slot: int, read=None, feeds=(), amp_cast=False
    ) -> OpRecord:
        shown = results[slot]
        read = hooks.inputs if read is None else read
        return OpRecord(
            op=name,
            occurrence=occurrence,
            inputs=tuple(describe(x) for x in read if x is not None),
            output=describe(shown),
            dtype=_dtype_name(shown.dtype) if shown is not None else "none",
            slot=slot,
            feeds=feeds,
            amp_cast=amp_cast,
        )
