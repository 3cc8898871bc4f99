"""A bucket's update in one launch of ``cuda/optim.cu`` (through ``backend.fused_optim``):
which kernel runs it, the table of its parameters' addresses the kernel reads, and the
launch. ``Bucket`` (``bucket.py``) takes these methods; its twin is the specification the
kernel is held to, bit for bit.
"""

from __future__ import annotations

import operator

import numpy as np

from ..backend import device as _device
from ..backend import dtypes as _dtypes
from ..backend import fused_optim, kernels


class KernelPath:
    """The kernel path of :class:`~minitorch_amp.optimizer.bucket.Bucket` (its records,
    views and flat buffers are the bucket's)."""

    def _kernel_kind(self, opt) -> str | None:
        """The kernel that runs this bucket, or None for the twin."""
        kind = opt._kernel_kind()
        on_gpu = self.xp is not np and kernels.enabled()
        contiguous = all(r.data.flags.c_contiguous for r in self.records)
        float32_state = self.wide == _dtypes.float32
        ok = on_gpu and contiguous and float32_state
        return kind if ok and fused_optim.takes(kind, self.ptype, self.kernel_gtype()) else None

    def kernel_gtype(self):
        """The kernel's G: grads that a regularizer it does not fuse prepared are wide."""
        return self.wide if self.records[0].regularizer is not None else self.gtype

    def _launch(self, grads, found_inf, base_lr, regularized=None) -> bool:
        """One launch of ``optim.cu`` over the bucket; False if these grads cannot go in it.
        ``regularized``: the bucket's ``regularized(grads)``, which the kernel reads instead."""
        if regularized is not None:
            grads = regularized
        with _device.cupy.cuda.Device(self.place.index):  # the table too: on the bucket's GPU
            words = self._words(grads)
            if words is None:
                return False
            flag = found_inf if found_inf is not None else self._no_overflow()
            fused_optim.launch(
                self.kernel, self.ptype, self.kernel_gtype(), words, len(self.records), flag,
                base_lr, self.scalars,
            )  # fmt: skip
        return True

    def _words(self, grads):
        """The kernel's table on the device: the last one when ``grads`` are the same arrays
        (a step uploads nothing), else built and uploaded; None if the kernel can't read a grad."""
        if self._table is not None:
            known, words = self._table
            if len(known) == len(grads) and all(map(operator.is_, known, grads)):
                kernels.using(words)
                return words
        gtype = self.kernel_gtype()
        if any(g.dtype != gtype or not g.flags.c_contiguous for g in grads):
            return None
        n = range(len(self.records))
        prepared = self.records[0].regularizer is not None
        columns = (
            self.params(),
            [None if self.master is None else self.view(self.master, i) for i in n],
            grads,
            [tuple(self.state_views(i).values()) for i in n],
            [r.lr_ratio for r in self.records],
            [r.decay for r in self.records],
            [1.0 if prepared else r.grad_scale for r in self.records],  # done by regularized()
            [0.0 if prepared else r.l2 for r in self.records],
        )
        key = ("optim.cu", self.serial, tuple(g.data.ptr for g in grads))
        words = kernels.device_table(key, lambda: fused_optim.table(*columns))
        self._table = (list(grads), words)
        return words

    def _no_overflow(self):
        """A device bool [1] that stays False (a step without a scaler), one per device."""
        flag = _NO_OVERFLOW.get(self.place)
        if flag is None:
            flag = _NO_OVERFLOW[self.place] = self._flat(1, _dtypes.bool_)
        return flag


_NO_OVERFLOW: dict = {}
