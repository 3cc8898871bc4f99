"""``group_sharded_parallel``: Paddle's entry point to optimizer (and gradient) sharding.

Levels (Paddle's names):

* ``'os'``: optimizer state sharding. Gradients are all-reduced as in ``DataParallel``; each
  rank updates only the parameters it owns and broadcasts them.
* ``'os_g'``: also gradients. Each gradient bucket is reduce-scattered (one block per
  owner, unequal lengths, no padding), so a rank receives (and keeps) only the averaged
  gradients of its own parameters: gradient memory about 1/N, and in a ring algorithm each
  rank sends (N-1)/N of the gradients instead of an all-reduce's 2(N-1)/N.

``'p_g_os'`` (parameters sharded too, stage 3) is not implemented.
"""

from __future__ import annotations

import os
import zlib

import numpy as np

from ... import io
from ...autograd.tensor import Tensor
from ...backend import device as _device
from ...backend.comm import CollectiveMismatchError
from ...nn.layer.layers import Layer
from ...optimizer.optimizer import Optimizer
from ..env import check_group, world
from ..parallel import DataParallel, check_same_model
from ..reducer import AllReduceGrads, ReduceScatterGrads
from .optimizer import ShardedOptimizer

__all__ = ["gather_optimizer_state_dict", "group_sharded_parallel", "save_group_sharded_model"]

_LEVELS = ("os", "os_g", "p_g_os")
_MB = 1024 * 1024


def group_sharded_parallel(model, optimizer, level, scaler=None, group=None, offload=False,
                           sync_buffers=False, buffer_max_size=2**23, segment_size=2**20,
                           sync_comm=False, dp_group=None, exclude_layer=None):  # fmt: skip
    """Shard ``optimizer``'s state (and, at ``'os_g'``, the gradients) across the ranks.

    Call it after ``amp.decorate`` (O2) and after ``init_parallel_env``, on every rank.

    Args:
        model: the Layer (not yet wrapped in DataParallel).
        optimizer: its optimizer, built over all its parameters.
        level: ``'os'`` or ``'os_g'`` (see the module doc).
        scaler: a ``GradScaler`` or None; returned as is (in a distributed run every
            GradScaler already ORs its overflow flag over the ranks).
        group, dp_group: must be None (all ranks).
        offload: must be False (CPU offload is not implemented).
        buffer_max_size: the gradient bucket size in bytes of float32 (default 2**23).
        sync_buffers, segment_size, sync_comm, exclude_layer: accepted for Paddle
            compatibility; buffers are broadcast from rank 0 once, at wrap time.

    Returns:
        ``(model, optimizer, scaler)``: the model wrapped so that backward synchronises the
        gradients, a :class:`ShardedOptimizer`, and ``scaler``.

    Raises:
        ValueError: an unknown or unsupported level, a group, or offload.
        TypeError: ``model`` is not a Layer or ``optimizer`` not an Optimizer.
    """
    check_group(group)
    check_group(dp_group)
    if level not in _LEVELS:
        raise ValueError(f"level must be one of {_LEVELS[:2]}, got {level!r}")
    if level == "p_g_os":
        raise ValueError(
            "level 'p_g_os' (parameter sharding, stage 3) is not implemented; use 'os_g' "
            "(optimizer state and gradients sharded) or 'os'"
        )
    if offload:
        raise ValueError("offload=True (optimizer state on the CPU) is not implemented")
    if not isinstance(model, Layer) or getattr(model, "_is_data_parallel", False):
        raise TypeError(
            f"group_sharded_parallel needs the bare model (a Layer), got {type(model).__name__}"
        )
    if not isinstance(optimizer, Optimizer):
        raise TypeError(
            f"group_sharded_parallel needs a minitorch_amp optimizer, got {type(optimizer)}"
        )
    if (
        isinstance(buffer_max_size, bool)
        or not isinstance(buffer_max_size, int)
        or (buffer_max_size <= 0)
    ):
        raise ValueError(f"buffer_max_size must be a positive int, got {buffer_max_size!r}")
    model_params = {id(p) for p in model.parameters()}
    strangers = [p.name for p in optimizer._parameter_list if id(p) not in model_params]
    if strangers:
        raise ValueError(
            f"the optimizer holds parameters that are not the model's (e.g. {strangers[0]!r}); "
            "build it over model.parameters()"
        )
    comm = world()
    check_same_model(model, comm)  # before anything changes: a mismatch leaves all intact
    _check_same_order(model, optimizer, comm)
    # 'os' all-reduces the buckets and 'os_g' reduce-scatters them: agree before either
    comm.check("check", caller=f"group_sharded_parallel(level={level!r})")
    sharded = ShardedOptimizer(optimizer, comm, chunk_bytes=buffer_max_size)
    params = [p for p in sharded._all_params if not p.stop_gradient]
    if level == "os":
        sync = AllReduceGrads(params, comm, buffer_max_size, buffer_max_size, False)
    else:
        sync = ReduceScatterGrads(
            params, comm, buffer_max_size, buffer_max_size, False, sharded._owner
        )
    wrapped = DataParallel(model, _grad_sync=sync)
    return wrapped, sharded, scaler


def _check_same_order(model: Layer, optimizer: Optimizer, comm) -> None:
    """Raise ``CollectiveMismatchError`` on every rank unless every rank's optimizer holds
    the same model parameters in the same order.

    NOTE: the owners and the gradient buckets follow the optimizer's order. Two ranks that
    list same-shaped layers in other orders pass the model check, then add each other's
    gradients into the wrong parameters and broadcast into the wrong tensors, silently.
    """
    position = {id(p): i for i, p in enumerate(model.parameters())}
    order = [position[id(p)] for p in optimizer._parameter_list]
    signature = zlib.crc32(np.asarray(order, dtype=np.int64).tobytes())
    try:
        comm.check("check", None, len(order), _ORDER, signature)
    except CollectiveMismatchError as err:
        if set(err.calls) != {_ORDER}:
            raise  # some rank was doing something else: the usual listing says what
        raise CollectiveMismatchError(
            "the ranks' optimizers hold the model's parameters in different orders (or "
            "different ones): the shards and gradient buckets follow that order. Build each "
            "rank's optimizer the same way, over model.parameters().",
            err.table,
        ) from None


_ORDER = "sharding: the optimizer's parameter order"  # (48 bytes at most)


def gather_optimizer_state_dict(optimizer: ShardedOptimizer, dst: int = 0):
    """Merge every rank's shard into one single-process optimizer state dict, on ``dst``.

    Every rank must call it. Returns the full dict (Paddle's keys; loads into the same
    optimizer built in one process) on ``dst`` and None on the other ranks.
    """
    if not isinstance(optimizer, ShardedOptimizer):
        raise TypeError(
            "gather_optimizer_state_dict needs the optimizer that group_sharded_parallel "
            f"returned, got {type(optimizer).__name__}"
        )
    comm = optimizer._comm
    if isinstance(dst, bool) or not isinstance(dst, int) or not 0 <= dst < comm.size:
        raise ValueError(f"dst must be a rank in [0, {comm.size}), got {dst!r}")
    shards = comm.gather_object(_to_host(optimizer.state_dict()), root=dst)
    if shards is None:
        return None
    full: dict = {}
    for shard in shards:
        for key, value in shard.items():
            if key == "master_weights":
                full.setdefault(key, {}).update(value)
            elif key not in full:
                full[key] = value
    return _to_tensors(full)


def save_group_sharded_model(model, output: str, optimizer=None) -> None:
    """Write ``output/model.pdmodel`` (the model) and ``output/model.pdopt`` (the gathered
    optimizer state) from rank 0, as single-process checkpoints. Every rank must call it.
    """
    comm = world()
    state = gather_optimizer_state_dict(optimizer) if optimizer is not None else None
    if comm.rank == 0:
        os.makedirs(output, exist_ok=True)
        io.save(model.state_dict(), os.path.join(output, "model.pdmodel"))
        if state is not None:
            io.save(state, os.path.join(output, "model.pdopt"))
    comm.barrier(caller="save_group_sharded_model")


def _to_host(value):
    """Tensors as ``(name, numpy array)`` so a shard can be pickled and sent."""
    if isinstance(value, Tensor):
        return ("__tensor__", value.name, _device.asnumpy(value._data))
    if isinstance(value, dict):
        return {k: _to_host(v) for k, v in value.items()}
    return value


def _to_tensors(value):
    if isinstance(value, tuple) and len(value) == 3 and value[0] == "__tensor__":
        tensor = Tensor._wrap(_device.to_place(value[2], _device.current_place()))
        tensor.name = value[1]
        tensor.persistable = True
        return tensor
    if isinstance(value, dict):
        return {k: _to_tensors(v) for k, v in value.items()}
    return value
