"""``OptimizerState``: everything an optimizer keeps between steps, in one place.

* ``accumulators``: ``id(param) -> {name: array}`` (Paddle's ``moment1``, ``velocity``, ...);
* ``masters``: ``param.name -> Tensor(float32)``, the fp32 master weights (Paddle keys them by
  name), with ``master_owner`` (``name -> id(param)``, to refuse two parameters with one
  name) and ``master_seen`` (each parameter's version and array as the optimizer last left
  them: a write behind its back re-seeds the master, see ``mixed_precision.py``);
* ``lr_buffers``: ``Place -> HostFed``, the learning rate the kernel reads on each device;
* ``extra_params``: parameters stepped through ``minimize(parameters=...)`` that are in no
  param group;
* ``plan``: the step's buckets (``bucket.py``), built the first time a set of parameters is
  stepped and kept while the step looks the same: the same parameters with the same arrays,
  versions, grad dtypes and settings (``optimize_attr``'s learning rate, ``regularizer``),
  and the same ``multi_precision``. Anything else (a new param group, ``set_state_dict``,
  ``Layer.to``, ``set_value``, sharding) builds it again. A conversion (``Layer.to``,
  ``float16()``, ...) drops it first (:func:`release_plans`): it holds the arrays it
  writes. AdamW's ``lr_ratio`` and ``apply_decay_param_fun`` are called when the plan is
  built.

Building is all or nothing: every buffer is allocated and filled before the first one is
installed, under :meth:`OptimizerState.snapshot` / :meth:`OptimizerState.restore`, so a
failure (out of memory, say) leaves the optimizer exactly as it was, and says so.
"""

from __future__ import annotations

import operator
import warnings
import weakref

from ..autograd.dispatch import hooks
from ..autograd.tensor import Tensor
from ..autograd.view_writes import wrote
from ..backend import device as _device
from ..backend import dtypes as _dtypes
from ..backend import graphs as _graphs
from ..backend.error_notes import add_note
from .bucket import Bucket
from .mixed_precision import check_master_name, seed_master
from .param_groups import own_settings

_DATA = operator.attrgetter("_data")
_VERSION = operator.attrgetter("_version")
_DTYPE = operator.attrgetter("dtype")


class Plan:
    """The buckets of a step and where each takes its grads from in the step's grad list.

    A step writes its parameters in place, so it bumps each one's ``_version``, as
    ``set_value`` does (PyTorch's optimizers do too): backward then refuses a graph that
    saved a weight before the step, and a cached cast of it is made again. The plan's
    signature and ``master_seen`` follow those bumps, so only a write by someone else
    builds the plan again or re-seeds a master.
    """

    __slots__ = ("signature", "buckets", "written", "version_slots", "seen")

    def __init__(self, signature: list, buckets: list, written: list, version_slots, seen):
        self.signature = signature
        self.buckets = buckets  # [(picks its grads from the step's list, Bucket)]
        self.written = written  # the parameters a step writes
        self.version_slots = version_slots  # where their versions sit in the signature
        self.seen = seen  # [(master_seen, name, parameter)] of the ones with a master

    def run(self, grads: list, found_inf, lr_for) -> None:
        """Update every bucket; ``lr_for(place)`` is the learning rate as a bucket reads it.

        A regularizer that is not fused (any but L2Decay: user code, which may raise) runs
        for every bucket first, before the first bucket writes: the step stays all or
        nothing."""
        taken = [(take(grads), bucket) for take, bucket in self.buckets]
        regularized = [bucket.regularized(bucket_grads) for bucket_grads, bucket in taken]
        lrs: dict = {}
        for (bucket_grads, bucket), prepared in zip(taken, regularized):
            base_lr = lrs.get(bucket.place)
            if base_lr is None:
                base_lr = lrs[bucket.place] = lr_for(bucket.place)
            bucket.run(bucket_grads, found_inf, base_lr, prepared)
        self._wrote()

    def _wrote(self) -> None:
        """Each written parameter's new version, in the parameter, the signature and the
        record of what the optimizer last left (a skipped step bumps too: harmless)."""
        signature = self.signature
        for param, slot in zip(self.written, self.version_slots):
            param._version += 1
            signature[slot] = param._version
            wrote(param)  # views of it (a reshaped weight) are written too
        for master_seen, name, param in self.seen:
            master_seen[name] = (param._version, master_seen[name][1])


_STATES: weakref.WeakSet = weakref.WeakSet()  # every live OptimizerState


def release_plans(tensors: list) -> None:
    """Drop the plan of every optimizer whose step writes one of ``tensors``, which are about
    to get new arrays (``Layer.to`` and every other conversion, ``tensor_convert.py``).

    A plan holds each parameter's array (``Record.data``, the write-back), so until the next
    step it would keep the replaced arrays alive: a conversion would free no memory. The plan
    is only a cache: the accumulators and masters live in the state's dicts, and the next
    step builds the plan again (re-seeding a master from its converted parameter)."""
    ids = set(map(id, tensors))
    for state in list(_STATES):
        plan = state.plan
        if plan is not None and not ids.isdisjoint(map(id, plan.written)):
            state.invalidate()


hooks.new_arrays = (*hooks.new_arrays, release_plans)  # told by every Layer conversion


class OptimizerState:
    """An optimizer's state (see the module docstring); ``Optimizer._state``."""

    def __init__(self):
        _STATES.add(self)  # for release_plans
        self.accumulators: dict[int, dict] = {}
        self.masters: dict[str, Tensor] = {}
        self.master_owner: dict[str, int] = {}
        self.master_seen: dict[str, tuple] = {}
        self.lr_buffers: dict = {}
        self.extra_params: list = []
        self.plan: Plan | None = None

    # ---- all or nothing -----------------------------------------------------------------
    def snapshot(self) -> tuple:
        """What :meth:`restore` needs to put the state back as it is now (shallow copies:
        building writes only into new buffers, and re-points the old ones' owners)."""
        return (
            {k: dict(v) for k, v in self.accumulators.items()},
            dict(self.masters),
            {name: master._data for name, master in self.masters.items()},
            dict(self.master_owner),
            dict(self.master_seen),
            dict(self.lr_buffers),
            list(self.extra_params),
            self.plan,
        )

    def restore(self, snapshot: tuple) -> None:
        (accumulators, self.masters, data, self.master_owner, self.master_seen,
         self.lr_buffers, self.extra_params, self.plan) = snapshot  # fmt: skip
        self.accumulators = accumulators
        for name, array in data.items():
            self.masters[name]._data = array

    def invalidate(self) -> None:
        """Build the plan again at the next step (the state changed under it)."""
        self.plan = None

    def forget(self, keep) -> None:
        """Drop the state of every parameter not in ``keep`` (the ones another rank owns)."""
        ids, names = {id(p) for p in keep}, {p.name for p in keep}
        for key in [k for k in self.accumulators if k not in ids]:
            del self.accumulators[key]
        for name in [n for n in self.masters if n not in names]:
            del self.masters[name]
            self.master_owner.pop(name, None)
            self.master_seen.pop(name, None)
        self.invalidate()

    # ---- the plan -------------------------------------------------------------------------
    def plan_for(self, opt, steps: list) -> Plan:
        """The plan for ``steps`` (``[(group, params, grads)]``): the last one when the step
        looks the same (a few C-level passes over the parameters), else a new one."""
        signature = [opt._multi_precision]
        for group, params, grads in steps:
            signature.append(id(group))
            signature.extend(map(id, params))
            signature.extend(map(id, map(_DATA, params)))
            signature.extend(map(_VERSION, params))
            signature.extend(map(_DTYPE, grads))
            # a parameter's own settings: Paddle reads them at every step, so a change
            # must reach the next one
            signature.extend(map(own_settings, params))
        plan = self.plan
        if plan is not None and plan.signature == signature:
            return plan
        return self._build(opt, steps, signature)

    def lr_buffer(self, opt, place):
        """The device buffer holding ``opt.get_lr()`` on ``place``, made current."""
        buffer = self.lr_buffers.get(place)
        if buffer is None:
            buffer = self.lr_buffers[place] = _graphs.HostFed(place, "float64")
        buffer.follow(opt.get_lr)
        return buffer.array

    def _build(self, opt, steps: list, signature: list) -> Plan:
        _graphs.refuse_in_capture(
            "creating optimizer state or master weights for a new set of parameters",
            "run the step eagerly once before capturing it",
        )
        snapshot = self.snapshot()
        notes: list = []
        owners = dict(self.master_owner)  # and the names this build gives a master
        try:
            buckets, start = [], 0
            for group, params, grads in steps:
                by_dtype: dict = {}
                for j, (param, grad) in enumerate(zip(params, grads)):
                    record = opt._record(param, group)
                    key = (param._data.dtype, grad.dtype, record.regularizer is not None)
                    by_dtype.setdefault(key, []).append((start + j, record))
                start += len(params)
                for (ptype, gtype, _), items in by_dtype.items():
                    items = _runs_together(items)
                    low = ptype in _dtypes.LOW_PRECISION
                    if low and not opt._multi_precision:
                        opt._warn_low_precision()
                    records = [record for _, record in items]
                    bucket = Bucket(opt, group, records, gtype, low and opt._multi_precision)
                    self._fill(bucket, owners, notes)
                    buckets.append((_taker([j for j, _ in items]), bucket))
            for place in {bucket.place for _, bucket in buckets} - {_device.CPU}:
                self.lr_buffer(opt, place)  # the kernel's lr, made now: all or nothing
            for _, bucket in buckets:
                self._install(opt, bucket)
        except BaseException as exc:
            self.restore(snapshot)
            add_note(
                exc,
                f"{type(opt).__name__}: the step failed while preparing its state, "
                "before any write: no parameter, master weight or accumulator was "
                "changed, so the step can be retried.",
            )
            raise
        for note in notes:  # re-seeded masters: said once everything is in place
            warnings.warn(note, stacklevel=5)
        written, slots, at = [], [], 1
        for _, params, _ in steps:  # the signature: ids, array ids, versions, ... per group
            written += params
            slots += range(at + 1 + 2 * len(params), at + 1 + 3 * len(params))
            at += 1 + 5 * len(params)
        seen = [
            (self.master_seen, r.param.name, r.param)
            for _, bucket in buckets
            if bucket.master is not None
            for r in bucket.records
        ]
        self.plan = Plan(signature, buckets, written, slots, seen)
        return self.plan

    def _fill(self, bucket: Bucket, owners: dict, notes: list) -> None:
        """Write the bucket's new buffers: each parameter's current state, or fresh state."""
        for i, record in enumerate(bucket.records):
            param = record.param
            old = self.accumulators.get(id(param))
            for name, view in bucket.state_views(i).items():
                if old is None:
                    view.fill(bucket.layout[name][1])
                else:
                    view[...] = _device.to_place(old[name], bucket.place)
            if bucket.master is not None:
                check_master_name(param, owners)
                owners[param.name] = id(param)
                note = seed_master(
                    bucket.view(bucket.master, i),
                    param,
                    self.masters.get(param.name),
                    self.master_seen.get(param.name),
                )
                if note:
                    notes.append(note)

    def _install(self, opt, bucket: Bucket) -> None:
        """Point each parameter's state at the bucket's buffers (nothing here can fail)."""
        for i, record in enumerate(bucket.records):
            param = record.param
            if id(param) not in self.accumulators and not opt._has_group(param):
                self.extra_params.append(param)  # first update, so not there yet
            self.accumulators[id(param)] = bucket.state_views(i)
            if bucket.master is not None:
                view = bucket.view(bucket.master, i)
                master = self.masters.get(param.name)
                if master is None:
                    master = Tensor._wrap(view)
                    master.name = f"{param.name}_fp32_master_0"
                    master.persistable = True
                    self.masters[param.name] = master
                master._data = view
                self.master_owner[param.name] = id(param)
                self.master_seen[param.name] = (param._version, weakref.ref(param._data))


def _taker(indices: list):
    """A function picking the bucket's grads, in its order, from the step's list."""
    getter = operator.itemgetter(*indices)
    if len(indices) == 1:
        return lambda grads: [getter(grads)]
    return lambda grads: list(getter(grads))


def _runs_together(items: list) -> list:
    """``items`` (``(index, record)``) with the records of equal scalars next to each other,
    in order of first appearance: a bucket's CPU update runs once per stretch of equal
    scalars, so AdamW decaying only its 2-D weights runs twice, not once per parameter
    (48 times for the GPT example). Each element's update ignores its neighbours: the order
    changes no result."""
    groups: dict = {}
    for item in items:
        groups.setdefault(item[1].scalars(), []).append(item)
    return [item for group in groups.values() for item in group]
