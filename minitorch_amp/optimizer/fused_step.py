"""The optimizer's update on the GPU: one fused call per dtype bucket of a param group.

``Optimizer._apply_group`` asks :func:`update_path` how to update a group:

* ``'per-param numpy'`` (NumPy arrays, or an optimizer whose maths has no fused twin): the
  per-parameter ``_apply_update`` -> ``_update`` loop, the reference semantics;
* ``'fused kernel'`` / ``'cupy twin'`` (CuPy arrays): :func:`apply_fused` gathers, for every
  parameter, what ``_apply_update`` would use (master, accumulators, lr ratio, L2
  coefficient, hyper-parameters), groups them by (param dtype, grad dtype) and hands each
  bucket to the optimizer's ``_fused_update``, which calls ``backend.fused_optim`` once.
  ``found_inf`` stays a device array all the way down, and the learning rate is read from
  the optimizer's device buffer: nothing in the step waits for the GPU or uploads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..autograd.tensor import Tensor
from ..backend import device as _device
from ..backend import dtypes as _dtypes
from ..backend import fused_optim
from ..backend.cast_counter import count_cast
from ..regularizer import L2Decay


@dataclass
class FusedBatch:
    """One bucket's per-parameter lists, what ``_fused_update`` passes to the backend.

    ``prepared[i]``: the gradient already went through the regularizer (one the kernel does not
    fuse), so the kernel must not rescale it or add L2 again.
    """

    params: list = field(default_factory=list)  # arrays, written in place
    masters: list = field(default_factory=list)  # float32 arrays or None
    grads: list = field(default_factory=list)
    states: list = field(default_factory=list)  # the accumulator dicts
    base_lr: object = None  # the optimizer's lr buffer: a float64 array [1] on the device
    lr_ratios: list = field(default_factory=list)  # Python floats: lr = base_lr * ratio
    l2_coeffs: list = field(default_factory=list)
    prepared: list = field(default_factory=list)
    hypers: list = field(default_factory=list)  # optimizer._hyper(param, group)


def update_path(opt, pairs) -> str:
    """``'fused kernel'``, ``'cupy twin'`` or ``'per-param numpy'`` for this group's pairs."""
    if not has_fused_twin(type(opt)):
        return "per-param numpy"
    return fused_optim.update_path([p._data for p, _ in pairs], [_array(g) for _, g in pairs])


def apply_fused(opt, group: dict, pairs, found_inf) -> None:
    """Update ``pairs`` with one ``opt._fused_update`` call per (param, grad) dtype bucket."""
    buckets: dict = {}
    base_lr = opt._lr_buffer(_device.place_of(pairs[0][0]._data))
    for param, grad in pairs:
        data, g = param._data, _array(grad)
        state = opt._state_for(param, group)
        master = None
        if data.dtype in _dtypes.LOW_PRECISION:
            if opt._multi_precision:
                master = opt._master_weight(param)._data
            else:
                opt._warn_low_precision()
        regularizer = opt._regularizer_for(param, group)
        l2 = 0.0
        if type(regularizer) is L2Decay and regularizer.coeff != 0.0:
            l2 = regularizer.coeff  # fused into the kernel, as Paddle's momentum does
        elif regularizer is not None:  # any other: applied here, with array ops on the device
            wide = _dtypes.accumulation_dtype(data.dtype)
            p = master if master is not None else data.astype(wide, copy=False)
            g = opt._prepare_grad(p, g.astype(p.dtype, copy=False), regularizer, group)
        batch = buckets.setdefault((data.dtype, g.dtype), FusedBatch(base_lr=base_lr))
        batch.params.append(data)
        batch.masters.append(master)
        batch.grads.append(g)
        batch.states.append(state)
        batch.lr_ratios.append(opt._lr_multiplier(param, group))
        batch.l2_coeffs.append(l2)
        batch.prepared.append(regularizer is not None and not l2)
        batch.hypers.append(opt._hyper(param, group))
    for batch in buckets.values():
        opt._fused_update(batch, group, found_inf)
        # NOTE: counted on the host without knowing found_inf (reading it would be a sync):
        # a step skipped on the device still counts its optimize-casts.
        count_cast("optimizer", sum(m is not None for m in batch.masters))


def has_fused_twin(cls) -> bool:
    """Whether ``cls._fused_update`` reproduces ``cls._update`` and ``cls._prepare_grad``:
    a subclass that overrides either of those below ``_fused_update`` keeps the loop."""
    owner = _defining_class(cls, "_fused_update")
    return (
        owner is not None
        and getattr(owner, "_fused_update", None) is not None
        and issubclass(owner, _defining_class(cls, "_update"))
        and issubclass(owner, _defining_class(cls, "_prepare_grad"))
    )


def _defining_class(cls, name: str):
    return next((c for c in cls.__mro__ if name in vars(c)), None)


def _array(grad):
    return grad._data if isinstance(grad, Tensor) else grad
