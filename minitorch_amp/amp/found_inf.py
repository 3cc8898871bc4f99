"""One overflow verdict for every rank: GradScaler's found_inf, OR-ed over the world, and
the optimizer step it skips.

Ranks may hold different gradients (one rank's batch overflows, or each rank holds its own
shard of the gradients), so each rank's found_inf can differ. If one rank skipped a step
that another took, their parameters and loss scales would part ways for good. So after
unscaling, GradScaler ORs the flag over the ranks (an all-reduce MAX of one byte) and every
rank skips the same steps and keeps the same scale.

This is AMP policy over the backend's transport: the world comes from
:func:`minitorch_amp.backend.comm.get_world`, which ``distributed.init_parallel_env``
starts. (It lives in ``amp/`` because ``amp`` may not import ``distributed``, which sits
above it.)

Example:
    >>> import numpy as np
    >>> reduce_found_inf(np.array([True]))  # no world started: nothing to agree with
    array([ True])
"""

from __future__ import annotations

from ..backend import comm as _comm
from ..backend import device as _device
from ..backend import sync as _sync

__all__ = ["reduce_found_inf", "run_skipping"]


def reduce_found_inf(found_inf):
    """OR the bool [1] flag over all ranks, in place; return it.

    Outside a world of several ranks it does nothing. On NCCL the flag stays on the GPU (no
    host read); the collective is checked like every other and named ``for found_inf`` in a
    mismatch message.
    """
    world = _comm.get_world()
    if world is not None and world.size > 1:
        world.all_reduce(found_inf, _comm.ReduceOp.MAX, caller="found_inf")
    return found_inf


def run_skipping(optimizer, found_inf, method: str, args, kwargs, skipped):
    """Run ``optimizer.step`` or ``.minimize``, skipped when found_inf is set.

    found_inf reaches an optimizer one way, Paddle's: ``_set_auxiliary_var('found_inf',
    flag)``, then the call (ours, and the sharded one, skip on the device). An optimizer
    without it gets Paddle's host-side check instead and is not called on an overflow.
    """
    if hasattr(optimizer, "_set_auxiliary_var"):
        optimizer._set_auxiliary_var("found_inf", found_inf)
        return getattr(optimizer, method)(*args, **kwargs)
    _sync.host_read(f"GradScaler.{method}() of an optimizer that cannot skip on the device")
    if bool(_device.asnumpy(found_inf)[0]):
        return skipped
    return getattr(optimizer, method)(*args, **kwargs)
