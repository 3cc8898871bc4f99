"""An optimizer step is all or nothing: everything that can fail happens before the first write.

A step used to create each parameter's state (fp32 master, moments) just before updating it,
so an out-of-memory error at the second parameter left the first one updated; a retry then
updated it twice. Now a step runs in two phases:

1. **prepare**, for every group: clip the gradients (new arrays), then create every piece of
   state the update will read (accumulators, fp32 masters, the lr buffer of the fused path).
   If anything raises, the state created in this phase is removed again and the error says
   that nothing was updated;
2. **update**: the optimizers' in-place maths, which allocates nothing the memory accounting
   counts.

NOTE: on a GPU the fused update also uploads a small kernel table the first time it meets a
set of tensors; an out-of-memory there (hundreds of bytes) would come after earlier buckets
were written.
"""

from __future__ import annotations

from ..backend import device as _device
from ..backend import dtypes as _dtypes
from .fused_step import update_path


def clipped(plan: list) -> list:
    """``[(group, pairs)]`` with each group's ``grad_clip`` applied and empty groups dropped."""
    out = []
    for group, pairs in plan:
        if pairs and group["grad_clip"] is not None:
            pairs = group["grad_clip"](pairs)
        pairs = [(p, g) for p, g in pairs if g is not None]
        if pairs:
            out.append((group, pairs))
    return out


def prepare(opt, plan: list) -> None:
    """Create all the state ``plan``'s update needs; on failure remove it again and re-raise.

    Raises:
        whatever creating the state raised (e.g. ``OutOfMemoryError``), with a note that no
        parameter or state was changed.
    """
    before = (
        set(opt._accumulators), set(opt._master_weights), len(opt._extra_params),
        dict(opt._master_owner), dict(opt._master_seen), set(opt._lr_buffers),
    )  # fmt: skip
    try:
        for group, pairs in plan:
            for param, _ in pairs:
                opt._state_for(param, group)
                if opt._multi_precision and param._data.dtype in _dtypes.LOW_PRECISION:
                    opt._master_weight(param)
            if update_path(opt, pairs) != "per-param numpy":
                opt._lr_buffer(_device.place_of(pairs[0][0]._data))
    except BaseException as exc:
        accumulators, masters, extra, owners, seen, lr_buffers = before
        for key in set(opt._accumulators) - accumulators:
            del opt._accumulators[key]
        for name in set(opt._master_weights) - masters:
            del opt._master_weights[name]
        del opt._extra_params[extra:]
        opt._master_owner, opt._master_seen = owners, seen
        for place in set(opt._lr_buffers) - lr_buffers:
            del opt._lr_buffers[place]
        if hasattr(exc, "add_note"):  # Python 3.11+
            exc.add_note(
                f"{type(opt).__name__}: the step failed while preparing its state, before "
                "any write: no parameter, master weight or accumulator was changed, so the "
                "step can be retried."
            )
        raise
