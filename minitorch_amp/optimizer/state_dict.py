"""An optimizer's checkpoint: its accumulators, fp32 master weights and lr scheduler.

Layout (Paddle's)::

    {'linear_0.w_0_moment1_0': Tensor, ...,                 # f'{param.name}_{acc}_0'
     'linear_1.w_0_fp32_master_0_moment1_0': Tensor, ...,   # a parameter with a master
     'master_weights': {'linear_1.w_0': Tensor(float32)},   # only when there are masters
     'LR_Scheduler': {...}}                                 # only with an LRScheduler

A float16 parameter with an fp32 master weight (``multi_precision``) keeps its accumulators
under the master's name, as Paddle does (its optimizer adds them to the master variable,
``{param.name}_fp32_master_0``), so Paddle's O2 checkpoints and ours load both ways. A
checkpoint that keys them by the parameter's own name (ours before) loads too.

NOTE: loading is all-or-nothing. Every entry (shapes, dtypes, completeness, every field of
the scheduler's state, nested ones included) is checked before the first value is written,
so a failed ``set_state_dict`` leaves the optimizer and its scheduler exactly as they were
rather than half old, half new. An optimizer driven by an ``LRScheduler`` refuses a state
dict without ``'LR_Scheduler'`` (``KeyError``, as Paddle's), rather than keep its schedule
where it is while the accumulators move on; with a float learning rate an ``'LR_Scheduler'``
entry is ignored (Paddle's too).
"""

from __future__ import annotations

import warnings
import weakref

import numpy as np

from ..autograd.tensor import Tensor
from ..backend import device as _device
from ..backend import dtypes as _dtypes
from .lr import LRScheduler


def optimizer_state_dict(opt) -> dict:
    """What ``Optimizer.state_dict()`` returns; every Tensor in it is a copy."""
    state: dict = {}
    for param in opt._parameter_list + opt._state.extra_params:
        owner = _master_name(param) if param.name in opt._master_weights else None
        for acc, array in (opt._accumulators.get(id(param)) or {}).items():
            key = state_key(param, acc, owner)
            if key in state:
                raise ValueError(
                    f"two parameters are both named {param.name!r}; state_dict keys are "
                    "built from parameter names, so give each parameter a unique name"
                )
            state[key] = _named_copy(array, key)
    if opt._master_weights:
        state["master_weights"] = {
            name: _named_copy(master._data, master.name)
            for name, master in opt._master_weights.items()
        }
    if isinstance(opt._learning_rate, LRScheduler):
        state["LR_Scheduler"] = opt._learning_rate.state_dict()
    return state


def load_optimizer_state(opt, state_dict: dict) -> None:
    """What ``Optimizer.set_state_dict()`` does: check everything, then replace the state."""
    if not isinstance(state_dict, dict):
        raise TypeError(f"set_state_dict needs a dict, got {type(state_dict).__name__}")
    scheduler = opt._learning_rate
    has_sched = isinstance(scheduler, LRScheduler)
    if has_sched:  # checked first, every field of it: its load below cannot fail
        if "LR_Scheduler" not in state_dict:
            raise KeyError(
                "set_state_dict: this optimizer's learning rate is an LRScheduler, but the "
                "state dict has no 'LR_Scheduler' entry (saved from an optimizer with a float "
                "learning rate?); nothing was loaded. To keep the scheduler where it is, load "
                "{**state_dict, 'LR_Scheduler': scheduler.state_dict()}"
            )
        caller = f"{type(opt).__name__}.set_state_dict"
        scheduler._check_state(state_dict["LR_Scheduler"], "LR_Scheduler", caller)
    staged, used = [], {"LR_Scheduler", "master_weights"}
    for param in opt._parameter_list + opt._state.extra_params:
        group = opt._group_of.get(id(param), opt._default_group)
        fresh = opt._create_accumulators(param, group)
        for owner in (_master_name(param), None):  # Paddle's O2 keys, then the plain ones
            keys = {acc: state_key(param, acc, owner) for acc in fresh}
            found = [acc for acc, key in keys.items() if key in state_dict]
            if found:
                break
        if not found:
            continue
        if len(found) != len(keys):
            missing = [key for key in keys.values() if key not in state_dict]
            raise ValueError(f"set_state_dict: {missing} missing for {param.name!r}")
        for acc, key in keys.items():
            _copy_checked(fresh[acc], state_dict[key], key, param)
            used.add(key)
        staged.append((param, fresh))
    masters, unknown = _stage_master_weights(opt, state_dict.get("master_weights"))
    unused = [k for k in state_dict if k not in used] + [f"master_weights/{n}" for n in unknown]
    if unused:
        warnings.warn(
            f"set_state_dict: {len(unused)} entries match no parameter of this optimizer "
            f"(e.g. {unused[0]!r}); were the parameters renamed or a different model built?",
            stacklevel=3,
        )
    # Every check passed: from here on nothing raises.
    state = opt._state
    for param, fresh in staged:
        state.accumulators[id(param)] = fresh
    if masters is not None:  # Paddle replaces the whole dict when the checkpoint has one
        state.masters = {name: master for name, (master, _) in masters.items()}
        state.master_owner = {name: id(param) for name, (_, param) in masters.items()}
        # The loaded masters are the truth for the parameters as they are now; a later write
        # of a parameter (a model checkpoint loaded after this one, set_value) is followed.
        state.master_seen = {
            name: (param._version, weakref.ref(param._data)) for name, (_, param) in masters.items()
        }
    state.invalidate()  # the next step builds its buffers from the loaded values
    if has_sched:
        scheduler._load_state(state_dict["LR_Scheduler"])


def _stage_master_weights(opt, entries):
    """Checked fp32 copies ``{name: (Tensor, param)}`` of the checkpoint's master weights.

    Returns ``(None, [])`` when the checkpoint has none, and the names that match no
    parameter of ``opt`` (they are left out, with a warning).
    """
    if entries is None:
        return None, []
    if not isinstance(entries, dict):
        raise TypeError(
            "set_state_dict: 'master_weights' must be a dict {param.name: Tensor}, got "
            f"{type(entries).__name__}"
        )
    by_name: dict = {}
    for param in opt._parameter_list + opt._state.extra_params:
        by_name.setdefault(param.name, param)
    staged, unknown = {}, []
    for name, value in entries.items():
        param = by_name.get(name)
        if param is None:
            unknown.append(name)
            continue
        array = _as_array(value, f"master_weights[{name!r}]")
        if array.dtype != _dtypes.float32:
            raise ValueError(
                f"set_state_dict: master weight {name!r} is {array.dtype}, but master weights "
                "are float32; nothing was loaded"
            )
        if tuple(array.shape) != tuple(param._data.shape):
            raise ValueError(
                f"set_state_dict: master weight {name!r} has shape {list(array.shape)} but "
                f"parameter {name!r} has shape {param.shape}; nothing was loaded"
            )
        master = _device.to_place(array, _device.place_of(param._data)).copy()
        label = getattr(value, "name", None) or f"{name}_fp32_master_0"  # _master_name
        staged[name] = (_named_copy(master, label, copy=False), param)
    return staged, unknown


def state_key(param, acc: str, owner: str | None = None) -> str:
    """``f'{owner}_{acc}_0'``, e.g. ``linear_0.w_0_moment1_0`` (Paddle's names); ``owner``
    is the parameter's name, or its master weight's (:func:`_master_name`)."""
    if not param.name:
        raise ValueError(
            "state_dict needs named parameters; this Tensor has no name (use Parameter, "
            "which names itself, or set tensor.name)"
        )
    return f"{owner or param.name}_{acc}_0"


def _master_name(param) -> str:
    """The name Paddle gives ``param``'s fp32 master variable (``unique_name`` adds _0)."""
    return f"{param.name}_fp32_master_0"


def _named_copy(array, name: str, copy: bool = True) -> Tensor:
    t = Tensor._wrap(array.copy() if copy else array)
    t.name = name
    t.persistable = True
    return t


def _as_array(value, key: str):
    array = value._data if isinstance(value, Tensor) else value
    if not (_device.is_array(array) or isinstance(array, np.ndarray)):
        raise TypeError(f"set_state_dict: {key!r} is a {type(value).__name__}, not a Tensor")
    return array


def _copy_checked(target, value, key: str, param) -> None:
    """Copy ``value`` (a Tensor or array) into ``target`` after checking its shape."""
    array = _as_array(value, key)
    if tuple(array.shape) != tuple(target.shape):
        raise ValueError(
            f"set_state_dict: {key!r} has shape {list(array.shape)} but parameter "
            f"{param.name!r} needs {list(target.shape)}; nothing was loaded"
        )
    target[...] = _device.to_place(array, _device.place_of(target))
