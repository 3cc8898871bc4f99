"""One bucket of an optimizer step, and the one place its update runs.

A bucket is the parameters of one param group that share a (param dtype, grad dtype). Their
state lives in flat buffers, one per kind of state, with each parameter's accumulators and
fp32 master as views into them::

    master   [ p0 ........ | p1 ... | p2 ............ ]   float32 (fp16/bf16 params, O2)
    moment1  [ p0 ........ | p1 ... | p2 ............ ]   one value per element
    beta1_pow_acc  [ p0 | p1 | p2 ]                       one value per tensor

so that one call updates every parameter of the bucket, the way one kernel launch does on
the GPU. :meth:`Bucket.run` takes one of two paths, chosen when the bucket is built:

* **the kernel** (``cuda/optim.cu`` through ``backend.fused_optim``; ``bucket_kernel.py``),
  on CuPy arrays when raw kernels are on and the kernel has the optimizer and the dtypes; the
  kernel reads ``found_inf`` and the learning rate from device memory;
* **the twin**: the optimizer's own maths (its ``_update``, written once, in Python) run on
  the flat buffers, NumPy or CuPy. This is the specification the kernel is held to bit for
  bit: each run of parameters with the same per-tensor scalars is one call of ``_update``,
  which does exactly the kernel's float32 operations in the kernel's order.

Both start from the same prologue and end with the same optimize-cast, per element::

    p = master (or float32(param))
    g = float32(grad) * grad_scale + l2 * p                (L2Decay, fused after the scale)
    g = regularizer(p, float32(grad)) * grad_scale         (any other: before the scale)
    optimizer._update(p, g, state, lr, hyper)         lr = wide(base_lr * lr_ratio)
    master = p;  param = round_to_nearest_even(p)

NOTE: skipping on overflow is one commit, here: with a device flag the twin computes new
values into copies and commits them with ``where(found_inf, old, new)`` (the kernel does the
same by not writing); a host flag never gets here when set (the optimizer returns first).
"""

from __future__ import annotations

import itertools

import numpy as np

from ..backend import device as _device
from ..backend import dtypes as _dtypes
from ..backend import memory
from ..backend.blocks import blocks
from ..backend.cast import convert
from ..backend.cast_counter import count_cast
from ..backend.dtypes import float16
from .bucket_in_place import InPlacePath, _lr_and_decay
from .bucket_kernel import KernelPath

ALIGN = 64  # on a GPU each segment starts at a multiple of 64 elements: aligned vector loads
IN_PLACE_FROM = 1 << 16  # elements: a NumPy bucket this big is updated parameter by parameter


class Record:
    """One parameter as a step sees it, read when the parameter set is (re)built."""

    __slots__ = ("param", "data", "lr_ratio", "l2", "decay", "grad_scale", "regularizer")

    def __init__(self, param, lr_ratio, l2, decay, grad_scale, regularizer):
        self.param = param
        self.data = param._data  # the array the bucket writes (the plan is rebuilt if it changes)
        self.lr_ratio = lr_ratio  # lr = base_lr * lr_ratio: group, param and lr_ratio() ratios
        self.l2 = l2  # an L2Decay coefficient, fused into the update (0.0: none)
        self.decay = decay  # AdamW's decoupled coefficient (0.0: none)
        self.grad_scale = grad_scale  # Momentum's rescale_grad (1.0: none)
        self.regularizer = regularizer  # any other regularizer, applied before the update

    def scalars(self) -> tuple:
        return (self.lr_ratio, self.l2, self.decay, self.grad_scale)


class Bucket(InPlacePath, KernelPath):
    """The flat state of one bucket and its update (see the module docstring).

    Args:
        opt: the optimizer: its ``_update`` and ``_advance`` (the maths), ``_state_layout``
            (its accumulators), ``_kernel_kind`` and ``_kernel_scalars`` (its kernel).
        group: the param group.
        records: the bucket's parameters, all of one dtype, with grads of ``grad_dtype``.
        masters: whether the parameters get fp32 master weights (O2, ``multi_precision``).

    Every buffer is allocated here (which may raise, out of memory say) before anything
    outside the bucket points into it; ``OptimizerState`` fills and installs them.
    """

    def __init__(self, opt, group: dict, records: list, grad_dtype, masters: bool):
        first = records[0].data
        self.opt, self.group, self.records = opt, group, records
        self.serial = next(_SERIALS)  # names this bucket's kernel tables
        self.xp = _device.get_array_module(first)
        self.place = _device.place_of(first)
        self.ptype, self.gtype = first.dtype, np.dtype(grad_dtype)
        self.wide = _dtypes.accumulation_dtype(self.ptype)
        self.lr_type = self.wide.type  # the rate as _update sees it: float64 for float64 params
        self.sizes = [r.data.size for r in records]
        align = 1 if self.xp is np else ALIGN
        padded = [-(-n // align) * align for n in self.sizes]
        self.offsets = [int(x) for x in np.cumsum([0, *padded[:-1]])]
        self.total = self.offsets[-1] + self.sizes[-1]
        self.dense = align == 1  # segments back to back: one concatenate gathers a bucket
        # name -> ('element' | 'tensor', initial value): Adam's moments, its beta pows, ...
        self.layout = opt._state_layout(group)
        self.master = self._flat(self.total, _dtypes.float32) if masters else None
        self.state = {
            name: self._flat(self.total if per == "element" else len(records), self.wide)
            for name, (per, _) in self.layout.items()
        }
        self.kernel = self._kernel_kind(opt)
        self.scalars = opt._kernel_scalars(group) if self.kernel else ()  # kernel arguments
        self.runs = self._static_runs()
        self._scratch: dict = {}  # 'grad' / 'param' -> the flat buffer the twin gathers into
        self._casts: list = []  # [(param, start, stop)] in the flat values: the write-back
        # NumPy float32/float64 parameters without masters are updated where they live (see
        # _update_in_place); the flat copies are made only for a step a found_inf may skip.
        # A small bucket takes the flat path all the same: one _update call for the whole
        # bucket, not one per parameter (each is ~15 NumPy calls, whose overhead is most of a
        # small model's step), for flat copies of at most IN_PLACE_FROM elements.
        self.in_place = (
            self.xp is np
            and self.total >= IN_PLACE_FROM
            and (
                masters  # the masters are flat already; each parameter is written from its own
                or (self.wide == self.ptype and all(r.data.flags.c_contiguous for r in records))
            )
        )
        if self.kernel is None and not self.in_place:  # now: a step cannot fail half-way
            self._twin_buffers()
        self._table = None  # (grad arrays, device words) of the last launch

    # ---- layout -----------------------------------------------------------------------
    def _flat(self, n: int, dtype):
        xp = self.xp
        if self.place.kind == "gpu":
            with _device.cupy.cuda.Device(self.place.index):
                array = xp.zeros(n, dtype=dtype)
        else:
            array = xp.zeros(n, dtype=dtype)
        memory.track(array)  # optimizer state is device memory (the CPU budget counts it)
        return array

    def view(self, flat, i: int):
        """Parameter ``i``'s segment of a per-element flat buffer, in the parameter's shape."""
        a = self.offsets[i]
        return flat[a : a + self.sizes[i]].reshape(self.records[i].data.shape)

    def state_views(self, i: int) -> dict:
        """Parameter ``i``'s accumulators: ``{name: view}`` ([1] for a per-tensor value)."""
        return {
            name: self.view(flat, i) if per == "element" else flat[i : i + 1]
            for (name, (per, _)), flat in zip(self.layout.items(), self.state.values())
        }

    def _static_runs(self) -> list:
        """``[(start, stop)]``: parameters next to each other with the same scalars; one
        parameter alone when it has a regularizer that is not fused (it may need shapes)."""
        runs, start, n = [], 0, len(self.records)
        for i in range(1, n + 1):
            if (
                i == n
                or self.records[i - 1].regularizer is not None
                or self.records[i].scalars() != self.records[start].scalars()
            ):
                runs.append((start, i))
                start = i
        return runs

    # ---- the update -----------------------------------------------------------------------
    def regularized(self, grads: list) -> list | None:
        """``regularizer(p, g) * grad_scale`` of each parameter, in the bucket's wide dtype
        and the parameter's shape (a bucket holds parameters with such a regularizer or
        none): what the update reads for a regularizer it does not fuse. None without one.

        NOTE: the regularizer comes before Momentum's ``rescale_grad`` (Paddle runs it as an
        op of its own before the momentum op, whose kernel scales what it is given); only a
        fused ``L2Decay`` comes after it (``g * rescale_grad + coeff * p``).

        Raises:
            ValueError: a regularizer returned another shape than its parameter's.
        """
        if self.records[0].regularizer is None:
            return None
        out = []
        for i, (record, grad) in enumerate(zip(self.records, grads)):
            own = self.view(self.master, i) if self.master is not None else record.data
            p = own.astype(self.wide, copy=False)
            g = grad.astype(self.wide)  # (a copy: the regularizer never sees .grad itself)
            value = self.xp.ascontiguousarray(record.regularizer(p, g), dtype=self.wide)
            if value.shape != own.shape:
                raise ValueError(
                    f"the regularizer of parameter {record.param.name!r} returned shape "
                    f"{list(value.shape)} for a parameter of shape {list(own.shape)}; it must "
                    "return the regularized gradient, of the parameter's shape (nothing was "
                    "updated)"
                )
            out.append(value * record.grad_scale if record.grad_scale != 1.0 else value)
        return out

    def run(self, grads: list, found_inf, base_lr, regularized=None) -> None:
        """Update every parameter of the bucket from ``grads`` (arrays, in record order).

        Args:
            found_inf: None, or a bool [1] device array (read by the kernel, or by the
                where-commit; a set host flag never gets here).
            base_lr: the learning rate: a Python float, or the optimizer's float64 [1]
                device buffer (on a GPU).
            regularized: :meth:`regularized` of ``grads``, made before any bucket of the
                step wrote (None: made here).
        """
        if regularized is None:
            regularized = self.regularized(grads)
        if self.kernel is None or not self._launch(grads, found_inf, base_lr, regularized):
            self._twin(grads, found_inf, base_lr, regularized)
        if self.master is not None:
            # NOTE: counted on the host without knowing found_inf (reading it would be a
            # sync): a step skipped on the device still counts its optimize-casts.
            count_cast("optimizer", len(self.records))

    def _twin(self, grads, found_inf, base_lr, regularized) -> None:
        """The optimizer's maths on the flat buffers, one ``_update`` call per run."""
        if self.in_place and found_inf is None:
            self._update_in_place(grads, base_lr, regularized)
            return
        xp = self.xp
        keep = None if found_inf is None else found_inf.reshape(())  # True: overflow
        g = self._gather("grad", grads)
        p = self.master if self.master is not None else self._gather("param", self.params())
        old = {"p": p, **self.state}
        new = old if keep is None else {k: v.copy() for k, v in old.items()}
        p, state = new["p"], {name: new[name] for name in self.state}
        for start, stop in self._runs(state):
            record = self.records[start]
            a, b = self.offsets[start], self.offsets[stop - 1] + self.sizes[stop - 1]
            ps, gs = p[a:b], g[a:b]
            if record.grad_scale != 1.0:
                gs *= record.grad_scale  # Momentum's rescale_grad, before a fused L2Decay
            if record.l2:
                gs += record.l2 * ps  # L2Decay: g + coeff * p
            elif regularized is not None:  # a run of one, made before the step's writes
                gs[...] = regularized[start].reshape(-1)
            lr, decay = _lr_and_decay(base_lr, record, self.lr_type)
            run_state = {
                name: flat[a:b] if per == "element" else self._per_element(flat, start, stop)
                for (name, (per, _)), flat in zip(self.layout.items(), state.values())
            }
            hyper = {**self.group, "decay": decay}
            # NOTE: elementwise maths, so block by block on the CPU gives the same bits with
            # the blocks' temporaries in cache (special.blocks); one call on a device
            for block in blocks(b - a) if xp is np else [slice(None)]:
                self.opt._update(ps[block], gs[block], self._block(run_state, block), lr, hyper)
        per_tensor = {n: state[n] for n, (per, _) in self.layout.items() if per == "tensor"}
        self.opt._advance(per_tensor, self.group)
        with np.errstate(over="ignore"):  # float16 overflow to inf is the update's to make
            if keep is not None:  # NOTE: the one commit of a step skipped on the device
                for name, array in old.items():
                    xp.copyto(array, new[name], where=~keep)
            if keep is None:  # the optimize-cast: the whole bucket rounded at once
                rounded = p if self.ptype == p.dtype else convert(p, self.ptype)
                for param, a, b in self._casts:
                    param[...] = rounded[a:b].reshape(param.shape)
            else:
                for i, param in enumerate(self.params()):
                    xp.copyto(param, self.view(p, i).astype(param.dtype), where=~keep)

    def _block(self, run_state: dict, block: slice) -> dict:
        """``run_state`` over one block: per-element buffers sliced, per-tensor ones whole."""
        return {
            name: array[block] if self.layout[name][0] == "element" else array
            for name, array in run_state.items()
        }

    def params(self) -> list:
        return [r.data for r in self.records]

    def _twin_buffers(self) -> None:
        """The twin's scratch buffers, and which segment each parameter is written from."""
        self._scratch["grad"] = self._flat(self.total, self.wide)
        own = self.master
        if own is None:
            own = self._scratch["param"] = self._flat(self.total, self.wide)
        for name, dtype in (("grad16", self.gtype), ("param16", self.ptype)):
            if self.dense and dtype == float16:  # the raw float16, widened by to_float32
                self._scratch[name] = self._flat(self.total, float16)
        self._casts = [
            (r.data, self.offsets[i], self.offsets[i] + self.sizes[i])
            for i, r in enumerate(self.records)
        ]

    def _runs(self, state) -> list:
        """The static runs, split where a per-tensor value differs, so that each run reads
        one [1] slice of it. On NumPy the values are free to read; on a device each tensor's
        value is repeated over its elements instead (:meth:`_per_element`)."""
        tensor_states = [state[n] for n, (per, _) in self.layout.items() if per == "tensor"]
        if not tensor_states or self.xp is not np:
            return self.runs
        if all(bool((s == s[0]).all()) for s in tensor_states):
            return self.runs  # the usual case: every parameter has taken as many steps
        rows = list(zip(*(s.tolist() for s in tensor_states)))
        runs = []
        for start, stop in self.runs:
            first = start
            for i in range(start + 1, stop + 1):
                if i == stop or rows[i] != rows[first]:
                    runs.append((first, i))
                    first = i
        return runs

    def _per_element(self, flat, start: int, stop: int):
        """A per-tensor buffer over a run: its one value, or on a device each tensor's value
        repeated over the tensor's elements (and the padding after them).

        NOTE: not ``xp.repeat(flat[start:stop], counts)``: CuPy 14 uploads a list of counts
        and reads their sum back to size the result, so every step would wait for the GPU.
        One copy per tensor, from its [1] slice on the device, reads nothing.
        """
        if self.xp is np or stop - start == 1:
            return flat[start : start + 1]
        base, end = self.offsets[start], self.offsets[stop - 1] + self.sizes[stop - 1]
        out = self.xp.empty(end - base, dtype=flat.dtype)
        ends = [*self.offsets[start + 1 : stop], end]
        for i, (a, b) in enumerate(zip(self.offsets[start:stop], ends), start):
            out[a - base : b - base] = flat[i : i + 1]  # broadcast on the device
        return out

    def _gather(self, name: str, arrays):
        """``arrays`` widened into one flat scratch buffer, laid out like the state."""
        if not self._scratch:
            self._twin_buffers()  # a kernel bucket that met grads the kernel cannot read
        out = self._scratch[name]
        if self.dense and arrays[0].dtype == float16:  # NumPy widens subnormals slowly
            raw = self._scratch[name + "16"]
            np.concatenate(arrays, axis=None, out=raw)
            out[...] = convert(raw, self.wide)
        elif self.dense:
            np.concatenate(arrays, axis=None, out=out, casting="same_kind")
        else:
            for i, a in enumerate(arrays):
                self.view(out, i)[...] = a
        return out


_SERIALS = itertools.count()
