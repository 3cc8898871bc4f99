"""``ShardedOptimizer``: each rank keeps optimizer state only for the parameters it owns.

The parameters are split across the ranks, balanced by size (:func:`partition`). A rank's
inner optimizer sees only its own parameters, so their fp32 master weights and moments exist
on that rank alone: per-rank optimizer memory is about 1/N. One step::

    clip (a global norm is summed over the ranks)      on the owned gradients
    inner.step()                                       owned params: fp32 master updated, then
                                                       the fp16 param written from it (the
                                                       optimize-cast; the fused kernel on GPU)
    broadcast from each owner                          the params in their own dtype: float16
                                                       under O2, half the bytes of fp32

This is PR 35878's optimizer sharding with optimize-cast: forward and backward read the fp16
copy, which is produced once per step by the rank that owns the master, and only fp16 moves.
"""

from __future__ import annotations

import numpy as np

from ...autograd.tensor import Tensor
from ...autograd.view_writes import wrote
from ...backend import device as _device
from ...backend.comm import ReduceOp
from ...nn.clip import ClipGradByGlobalNorm, _norm_dtype, _scaled, _sum_squares
from ...optimizer.optimizer import Optimizer

__all__ = ["ShardedOptimizer", "partition"]

STEP = "ShardedOptimizer.step()"  # the check that starts a sharded step (or minimize)


def _numel(p) -> int:
    return int(np.prod(p.shape, dtype=np.int64))


def partition(params: list, world_size: int) -> dict[int, int]:
    """``id(param) -> rank``: largest first, each to the rank holding the fewest elements.

    Deterministic (ties go to the lower rank, equal sizes keep model order), so every rank
    computes the same split without talking.

    Example:
        >>> import numpy as np
        >>> from minitorch_amp.nn.parameter import Parameter
        >>> ps = [Parameter(np.zeros(n, "float32")) for n in (100, 60, 50, 10)]
        >>> owner = partition(ps, 2)
        >>> [owner[id(p)] for p in ps]  # rank 0: 100 (+ 10), rank 1: 60 + 50
        [0, 1, 1, 0]
    """
    order = sorted(range(len(params)), key=lambda i: (-_numel(params[i]), i))
    loads = [0] * world_size
    owner: dict[int, int] = {}
    for i in order:
        rank = min(range(world_size), key=lambda r: (loads[r], r))
        owner[id(params[i])] = rank
        loads[rank] += _numel(params[i])
    return owner


class ShardedOptimizer:
    """Wraps an optimizer so that it updates only this rank's share of the parameters.

    Made by ``group_sharded_parallel``; ``GradScaler``, ``amp.decorate`` and the lr
    schedulers work with it as with the inner optimizer.

    Args:
        optimizer: the inner optimizer, built over all the model's parameters.
        comm: the communicator.
        chunk_bytes: parameters are broadcast packed in chunks of at most this many bytes.
    """

    def __init__(self, optimizer: Optimizer, comm, chunk_bytes: int = 2**23):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(
                f"sharding needs a minitorch_amp optimizer, got {type(optimizer).__name__}"
            )
        self._inner_opt = optimizer
        self._comm = comm
        self._all_params = list(optimizer._parameter_list)
        self._owner = partition(self._all_params, comm.size)
        me = comm.rank
        # State made before sharding (a resumed optimizer) is kept only for owned params.
        optimizer.restrict_to([p for p in self._all_params if self._owner[id(p)] == me])
        # A global-norm clip must see every rank's gradients: we clip before the inner step.
        self._clips = optimizer.take_grad_clips()
        self.chunk_bytes = int(chunk_bytes)
        self._buffers: dict = {}  # (dtype, place) -> the broadcast staging buffer

    # ---- what GradScaler and users touch -----------------------------------------------
    @property
    def _parameter_list(self) -> list:
        """The parameters this rank owns (GradScaler unscales and checks only these)."""
        return self._inner_opt._parameter_list

    def owner_of(self, param) -> int:
        """The rank that owns ``param``'s master weight and optimizer state."""
        return self._owner[id(param)]

    def _set_auxiliary_var(self, key: str, value) -> None:
        self._inner_opt._set_auxiliary_var(key, value)

    def _get_auxiliary_var(self, key: str):
        return self._inner_opt._get_auxiliary_var(key)

    def step(self) -> None:
        """Clip, update the owned parameters, then send every parameter from its owner.

        A ``found_inf`` handed over with ``_set_auxiliary_var`` reaches the inner step."""
        self._comm.check("check", caller=STEP)  # every rank steps, or none changes anything
        self._clip_grads()
        self._inner_opt.step()
        self._broadcast_params()

    def minimize(self, loss, startup_program=None, parameters=None, no_grad_set=None):
        """Like ``Optimizer.minimize`` (dygraph: applies the existing gradients)."""
        if parameters is not None:
            parameters = [p for p in parameters if self._owner.get(id(p)) == self._comm.rank]
        self._comm.check("check", caller=STEP)
        self._clip_grads()
        result = self._inner_opt.minimize(loss, startup_program, parameters, no_grad_set)
        self._broadcast_params()
        return result

    def clear_grad(self, set_to_zero: bool = True) -> None:
        """Zero (or drop) the gradients of every parameter, owned or not."""
        for p in self._all_params:
            p.clear_grad(set_to_zero)  # zeroing is deferred to the next write (Tensor._grad)

    clear_gradients = clear_grad

    def get_lr(self) -> float:
        return self._inner_opt.get_lr()

    def set_lr(self, value: float) -> None:
        self._inner_opt.set_lr(value)

    def set_lr_scheduler(self, scheduler) -> None:
        self._inner_opt.set_lr_scheduler(scheduler)

    # ---- checkpoints ---------------------------------------------------------------------
    def state_dict(self) -> dict:
        """This rank's shard: Paddle's keys, for the owned parameters only.

        ``sharding.gather_optimizer_state_dict`` merges the shards into a single-process one.
        """
        return self._inner_opt.state_dict()

    def set_state_dict(self, state_dict: dict) -> None:
        """Load a shard, or a full single-process state dict (only the owned part is kept)."""
        if not isinstance(state_dict, dict):
            raise TypeError(f"set_state_dict needs a dict, got {type(state_dict).__name__}")
        self._inner_opt.set_state_dict(self._owned_part(state_dict))

    set_dict = set_state_dict

    def _owned_part(self, state_dict: dict) -> dict:
        mine = {p.name for p in self._inner_opt._parameter_list}
        names = sorted({p.name for p in self._all_params}, key=len, reverse=True)

        def param_of(key: str):
            return next((n for n in names if key.startswith(n + "_")), None)

        out = {}
        for key, value in state_dict.items():
            if key == "master_weights":
                out[key] = {n: v for n, v in value.items() if n in mine}
            elif key == "LR_Scheduler" or param_of(key) in mine or param_of(key) is None:
                out[key] = value
        return out

    # ---- the two collective parts of a step ----------------------------------------------
    def _clip_grads(self) -> None:
        for clip, params in self._clips:
            pairs = [(p, p._grad) for p in params if p._grad is not None]
            if isinstance(clip, ClipGradByGlobalNorm):
                self._clip_global_norm(clip, pairs)  # a collective: every rank calls it
            elif pairs:
                for (p, _), (_, g) in zip(pairs, clip(pairs)):
                    p._grad = g if isinstance(g, Tensor) else Tensor._wrap(g)

    def _clip_global_norm(self, clip: ClipGradByGlobalNorm, pairs) -> None:
        """``ClipGradByGlobalNorm`` with the sum of squares added up over the ranks."""
        grads = [g._data for p, g in pairs if getattr(p, "need_clip", True)]
        dtype = _norm_dtype(grads) if grads else np.dtype(np.float32)
        like = self._all_params[0]._data
        xp = _device.get_array_module(like)
        total = _device.to_place(xp.zeros(1, dtype=dtype), _device.place_of(like))
        for g in grads:
            total += _sum_squares(g, dtype)
        self._comm.all_reduce(total, ReduceOp.SUM, caller="the global-norm clip")
        limit = dtype.type(clip.clip_norm)
        scale = limit / xp.maximum(xp.sqrt(total), limit)
        for p, g in pairs:
            if getattr(p, "need_clip", True):
                g._data[...] = _scaled(g._data, scale[0])

    def _broadcast_params(self) -> None:
        """Each owner sends its parameters in their own dtype (float16 under O2).

        Small parameters are packed into chunks of at most ``chunk_bytes`` (one collective
        each) through one reused staging buffer; a parameter at least that large is sent in
        place. The extra memory is one chunk, not a copy of the model.
        """
        comm, me = self._comm, self._comm.rank
        if comm.size == 1:
            return
        for chunk, (root, params) in enumerate(self._broadcast_plan()):
            caller = f"parameter broadcast {chunk}"
            if root != me:  # written here, as the owner's step wrote its own (state.Plan)
                for p in params:
                    p._version += 1
                    wrote(p)
            if len(params) == 1:
                comm.broadcast(params[0]._data, root, caller)  # big: straight from/into it
                continue
            sizes = [_numel(p) for p in params]
            buf = self._staging(sum(sizes), params[0])
            offsets = np.cumsum([0, *sizes])
            if root == me:
                for p, a, b in zip(params, offsets[:-1], offsets[1:]):
                    buf[a:b] = p._data.reshape(-1)
            comm.broadcast(buf, root, caller)
            if root != me:
                for p, a, b in zip(params, offsets[:-1], offsets[1:]):
                    p._data[...] = buf[a:b].reshape(p._data.shape)

    def _broadcast_plan(self) -> list:
        """``[(owner, params)]``: per owner and dtype, runs of params up to ``chunk_bytes``.

        Recomputed each step from the partition and the params' dtypes, so every rank makes
        the same plan (``decorate`` may change dtypes after sharding).
        """
        plan = []
        for root in range(self._comm.size):
            by_dtype: dict = {}
            for p in self._all_params:
                if self._owner[id(p)] == root:
                    by_dtype.setdefault(p._data.dtype, []).append(p)
            for params in by_dtype.values():
                run, nbytes = [], 0
                for p in params:
                    if run and nbytes + p._data.nbytes > self.chunk_bytes:
                        plan.append((root, run))
                        run, nbytes = [], 0
                    run.append(p)
                    nbytes += p._data.nbytes
                if run:
                    plan.append((root, run))
        return plan

    def _staging(self, size: int, like):
        """A reused flat buffer of ``like``'s dtype and device holding ``size`` elements."""
        key = (like._data.dtype, like.place)
        buf = self._buffers.get(key)
        if buf is None or buf.size < size:
            xp = _device.get_array_module(like._data)
            buf = _device.to_place(xp.empty(size, dtype=like._data.dtype), like.place)
            self._buffers[key] = buf
        return buf[:size]

    def __repr__(self) -> str:
        return (
            f"ShardedOptimizer({type(self._inner_opt).__name__}, rank {self._comm.rank} owns "
            f"{len(self._parameter_list)} of {len(self._all_params)} parameters)"
        )
