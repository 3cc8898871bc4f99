"""Which op produced the first inf/NaN, forward or backward, and what it read.

The model properties (:mod:`~minitorch_amp.testing.model_properties`) watch a run through the
tensor checker's plumbing: the observers that ``apply`` calls after every forward and the
engine after every backward (``minitorch_amp.amp.debugging``), with the tensor checker's own
statistics (``num_nan``, ``num_inf``, ``max``/``min`` over the finite values). An
:class:`OpTrace` numbers each op name's applications (``linear`` #0, #1, ..., ``linear_grad``
#0, ...), so the same op can be found again in a float32 run of the same model, where AMP's
casts do not exist but every other op runs in the same order.

Example:
    >>> import numpy as np
    >>> import minitorch_amp as mt
    >>> with OpTrace() as trace:
    ...     y = mt.to_tensor([60000.0, 1.0], dtype="float16") * 2
    >>> trace.first_bad.op, trace.first_bad.output
    ('multiply', 'fp16[2] in [2, 2], 1 inf')
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..amp.debugging import observers
from ..amp.debugging.tensor_checker import _dtype_name, _numerics
from ..autograd.dispatch import hooks
from ..backend import asnumpy

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
    return data.dtype.kind == "f" or str(data.dtype) == "bfloat16"


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
    """

    op: str
    occurrence: int
    inputs: tuple[str, ...]
    output: str
    dtype: str
    slot: int = 0

    @property
    def phase(self) -> str:
        return "backward" if self.op.endswith("_grad") else "forward"

    def values(self) -> str:
        """Two lines: what the op read and the result it wrote."""
        read = "gradient in" if self.phase == "backward" else "inputs"
        return f"  {read}: {'; '.join(self.inputs) or '(none)'}\n  output: {self.output}"

    def __str__(self) -> str:
        return f"op {self.op!r} (application #{self.occurrence}, {self.phase})\n{self.values()}"


class OpTrace:
    """Watch the ops of a run (a context manager): the first one with a non-finite result, or
    the application ``want=(op, occurrence, slot)`` (``slot``: which result to describe).

    Attributes:
        first_bad: the :class:`OpRecord` of the first op whose result held inf or NaN (None).
        wanted: the :class:`OpRecord` of ``want`` once it ran (None until then).
        counts: how many times each op name ran.
    """

    def __init__(self, want: tuple[str, int, int] | None = None):
        self.want = want
        self.first_bad: OpRecord | None = None
        self.wanted: OpRecord | None = None
        self.counts: dict[str, int] = {}
        # NOTE: one bound method each, kept: ``self._forward`` makes a new object at every
        # access, and uninstall removes the very object that was installed.
        self._observers = (self._forward, self._backward)

    def __enter__(self) -> OpTrace:
        observers.install(self._observers[0])
        observers.install_grad_observer(self._observers[1])
        return self

    def __exit__(self, *exc) -> None:
        observers.uninstall(self._observers[0])
        observers.uninstall_grad_observer(self._observers[1])

    def _forward(self, op, out) -> None:
        self._seen(op.name, (out._data,))

    def _backward(self, op, grads) -> None:
        self._seen(op.name + "_grad", grads)

    def _seen(self, name: str, results) -> None:
        occurrence = self.counts.get(name, 0)
        self.counts[name] = occurrence + 1
        wanted = self.want is not None and self.want[:2] == (name, occurrence)
        if self.first_bad is not None and not wanted:
            return
        bad = next((i for i, r in enumerate(results) if not _finite(r)), None)
        if bad is not None and self.first_bad is None:
            self.first_bad = self._record(name, occurrence, results, bad)
        if wanted and self.want[2] < len(results):
            self.wanted = self._record(name, occurrence, results, self.want[2])

    @staticmethod
    def _record(name: str, occurrence: int, results, slot: int) -> OpRecord:
        shown = results[slot]
        return OpRecord(
            op=name,
            occurrence=occurrence,
            inputs=tuple(describe(x) for x in hooks.inputs if x is not None),
            output=describe(shown),
            dtype=_dtype_name(shown.dtype) if shown is not None else "none",
            slot=slot,
        )
