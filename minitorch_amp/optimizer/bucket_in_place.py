"""A NumPy bucket's update where its parameters lie: each parameter itself (or its segment of
the fp32 masters), no flat copy of the parameters and gradients (two more copies of the model:
384 MiB for SimpleNet at width 4096). ``Bucket`` (``bucket.py``) takes these methods when it is
large (``IN_PLACE_FROM`` elements and more) and no found_inf can skip the step; they make the
same operations in the same order as its flat twin, so the same bits.
"""

from __future__ import annotations

import numpy as np

from ..backend.blocks import blocks
from ..backend.cast import convert

GROUP_BELOW = 1 << 14  # elements: smaller neighbours in such a bucket are updated together


class InPlacePath:
    """The in-place path of :class:`~minitorch_amp.optimizer.bucket.Bucket` (its records,
    offsets and flat state are the bucket's)."""

    def _update_in_place(self, grads, base_lr, regularized) -> None:
        """The twin's maths on each parameter itself (or its segment of the masters), block
        by block: no flat copy of the parameters and gradients (two more copies of the model:
        384 MiB for SimpleNet at width 4096). The same operations in the same order as
        :meth:`_twin`, so the same bits. Only for a step no found_inf can skip: the flat path
        keeps the step undoable until found_inf is known.

        Consecutive small parameters of a run (biases, norms' weights: under
        :data:`GROUP_BELOW` elements each) are updated together, one ``_update`` call on their
        segments gathered, as the flat path would: each call is ~15 NumPy calls, whose
        overhead is most of a small parameter's update (the example GPT has 42 such).
        """
        for start, stop in self._runs(self.state):
            i = start
            while i < stop:
                j = i
                while j < stop and self._groups(j):
                    j += 1
                if j - i >= 2:
                    self._update_group(grads, i, j, base_lr)
                    i = j
                else:
                    self._update_one(grads, i, base_lr, regularized)
                    i += 1
        per_tensor = {n: self.state[n] for n, (per, _) in self.layout.items() if per == "tensor"}
        self.opt._advance(per_tensor, self.group)

    def _groups(self, i: int) -> bool:
        """Whether parameter ``i`` may join its small neighbours' :meth:`_update_group`."""
        record = self.records[i]
        whole = record.regularizer is not None and not record.l2  # it sees its own shape
        return self.dense and not whole and record.data.size < GROUP_BELOW

    def _update_one(self, grads, i: int, base_lr, regularized) -> None:
        """Parameter ``i`` on its own, where it lies."""
        record = self.records[i]
        a = self.offsets[i]
        if self.master is None:
            p = record.data.reshape(-1)  # a view: the parameter, written in place
        else:
            p = self.master[a : a + record.data.size]
        g = grads[i].reshape(-1)
        state = {
            name: flat[a : a + p.size] if per == "element" else flat[i : i + 1]
            for (name, (per, _)), flat in zip(self.layout.items(), self.state.values())
        }
        lr, decay = _lr_and_decay(base_lr, record, self.lr_type)
        hyper = {**self.group, "decay": decay}
        whole = record.regularizer is not None and not record.l2  # it sees the shape
        # the step's scaling, L2 decay and a regularizer write into the gradient: a copy
        # then; else ``_update`` only reads it, and a wide one is used where it lies
        read_only = g.dtype == self.wide and record.grad_scale == 1.0 and not record.l2
        read_only = read_only and not whole
        for block in [slice(None)] if whole else blocks(p.size):
            ps = p[block]
            gs = g[block] if read_only else convert(g[block], self.wide)
            if record.grad_scale != 1.0:
                gs *= record.grad_scale
            if record.l2:
                gs += record.l2 * ps
            elif whole:  # (made before the step's writes)
                gs[...] = regularized[i].reshape(-1)
            self.opt._update(ps, gs, self._block(state, block), lr, hyper)
        if self.master is not None:  # the optimize-cast, parameter by parameter
            with np.errstate(over="ignore"):  # float16 overflow to inf is the update's
                record.data[...] = convert(p, self.ptype).reshape(record.data.shape)

    def _update_group(self, grads, i: int, j: int, base_lr) -> None:
        """Parameters ``i`` to ``j - 1`` (small, of one run: the same scalars and per-tensor
        values) in one ``_update`` call on their gathered segments; the same bits as one
        call each (elementwise maths)."""
        records = self.records[i:j]
        a, b = self.offsets[i], self.offsets[j - 1] + self.sizes[j - 1]
        if self.master is None:  # the parameters gathered, written back after
            p = np.concatenate([r.data.reshape(-1) for r in records])
        else:
            p = self.master[a:b]
        g = np.concatenate([grads[k].reshape(-1) for k in range(i, j)])  # a fresh copy
        g = g if g.dtype == self.wide else convert(g, self.wide)
        record = records[0]  # the run's scalars are every record's
        if record.grad_scale != 1.0:
            g *= record.grad_scale
        if record.l2:
            g += record.l2 * p
        state = {
            name: flat[a:b] if per == "element" else flat[i : i + 1]
            for (name, (per, _)), flat in zip(self.layout.items(), self.state.values())
        }
        lr, decay = _lr_and_decay(base_lr, record, self.lr_type)
        hyper = {**self.group, "decay": decay}
        for block in blocks(b - a):  # (cache-sized, as the other paths)
            self.opt._update(p[block], g[block], self._block(state, block), lr, hyper)
        with np.errstate(over="ignore"):  # float16 overflow to inf is the update's
            rounded = p if self.master is None else convert(p, self.ptype)
            for k, r in enumerate(records, i):
                start = self.offsets[k] - a
                r.data[...] = rounded[start : start + r.data.size].reshape(r.data.shape)


def _lr_and_decay(base_lr, record, lr_type):
    """``(lr_type(base * ratio), lr_type(1 - base * ratio * decay) or None)``, the products
    in float64 as the kernel computes them: NumPy scalars when the base is a Python float,
    0-d device arrays when it is the optimizer's device buffer (nothing is read).

    ``lr_type`` is the bucket's wide type (``Bucket.lr_type``): float32 for float16, bfloat16
    and float32 parameters, as the kernel reads it; float64 for float64 ones, whose rate is
    not rounded to float32 (Paddle keeps the rate in the parameters' dtype: SGD's
    ``0 - 0.1 * 10`` is exactly -1.0 in float64)."""
    if isinstance(base_lr, float):
        lr64 = base_lr * record.lr_ratio
        return lr_type(lr64), (lr_type(1.0 - lr64 * record.decay) if record.decay else None)
    lr64 = base_lr.reshape(()) * record.lr_ratio
    decay = (1.0 - lr64 * record.decay).astype(lr_type) if record.decay else None
    return lr64.astype(lr_type), decay
