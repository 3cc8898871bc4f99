"""``Optimizer``: the base of SGD, Momentum, Adam and AdamW (Paddle 2.x dygraph semantics).

One ``step()``, in Paddle's order:

1. per param group, ``(param, grad)`` for every trainable parameter that has a gradient, and
   ``pairs = grad_clip(pairs)`` (e.g. ``ClipGradByGlobalNorm``; new gradient tensors);
2. the plan: the parameters grouped into buckets (one group, one param dtype, one grad
   dtype) whose state lives in flat buffers (``state.py``, ``bucket.py``). Built the first
   time, kept while the step looks the same;
3. per bucket, one update: ``cuda/optim.cu`` on a GPU, else the optimizer's own maths on the
   flat buffers. ``g = regularizer(p, g)`` (``L2Decay``: ``g + coeff * p``), then
   ``self._update(p, g, state, lr, hyper)``.

``lr`` is ``get_lr() * param.optimize_attr['learning_rate']``, where in a param group
given as a dict the group's ``learning_rate`` replaces the parameter's (and its
``weight_decay`` the parameter's ``regularizer``), as Paddle's ``_add_param_group`` does by
writing them into the parameter (``UpdateRule._own_settings``; the parameter is left alone).
``_update`` is the one place a subclass writes maths, on plain float32 arrays (``p`` is
updated in place, ``state`` holds the accumulators): it is the CPU path and the
specification ``optim.cu`` is held to bit for bit.

AMP, the two things GradScaler and ``amp.decorate`` rely on:

* ``multi_precision=True``: each float16 parameter gets an fp32 *master weight*, created at
  its first update as an exact cast of the parameter and kept in
  ``self._master_weights[param.name]``. The update runs on the master in fp32, then writes
  the float16 parameter from it, rounded to nearest even (**optimize-cast**: under O2 this
  is the only place a weight is cast, once per parameter per update).
* ``found_inf``: a bool array of shape [1] saying the scaled gradients overflowed; when it
  is set the step changes nothing at all (a skipped AMP step). It arrives one way, Paddle's:
  ``_set_auxiliary_var('found_inf', flag)`` before ``step()`` or ``minimize()``, which
  normalise it once. A flag on the GPU is read by the update on the device, never by the
  host; a host flag that is set returns before anything is prepared.

The learning rate reaches the kernel through a device buffer, written when ``get_lr()``
changes: a step captured as a CUDA graph follows a scheduler's new rate.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np

from ..autograd.dispatch import hooks
from ..autograd.tensor import Tensor
from ..backend import device as _device
from .lr import LRScheduler
from .mixed_precision import as_found_inf, low_precision_warning
from .param_groups import (
    as_groups,
    as_regularizer,
    check_floating,
    check_learning_rate,
    own_settings,
)
from .state import OptimizerState
from .state_dict import load_optimizer_state, optimizer_state_dict
from .torch_compat import TorchOptimizerMethods
from .update_rule import UpdateRule

__all__ = ["Optimizer"]

# Keys of a parameter group that every optimizer understands; subclasses add theirs.
_BASE_GROUP_KEYS = ("params", "learning_rate", "weight_decay", "grad_clip")


class Optimizer(UpdateRule, TorchOptimizerMethods):
    """Base class of the optimizers; holds parameters, groups, accumulators and the lr.

    Args:
        learning_rate: a float, or an ``lr.LRScheduler`` (the user calls its ``step()``).
        parameters: the parameters to optimize (required), e.g. ``model.parameters()``; or a
            list of param groups ``{'params': [...], 'learning_rate': ratio,
            'weight_decay': ...}`` where ``learning_rate`` multiplies the global rate and
            any other key overrides the optimizer's argument of that name for the group.
            As in Paddle, a group's ``learning_rate`` (default 1.0) replaces its parameters'
            ``ParamAttr`` learning rate, and its ``weight_decay`` (default the optimizer's;
            AdamW excepted) their ``ParamAttr`` regularizer. Floating-point parameters only.
        weight_decay: None, a float (``L2Decay(coeff)``: ``g += coeff * p``) or a
            regularizer from ``minitorch_amp.regularizer``. A parameter's own regularizer
            (``ParamAttr``) wins over it, outside param groups.
        grad_clip: called as ``grad_clip([(param, grad), ...])`` before regularization, e.g.
            ``nn.ClipGradByGlobalNorm(1.0)``.
        name: unused; kept for Paddle compatibility.
        multi_precision: keep an fp32 master weight for every float16 parameter (AMP O2);
            ``amp.decorate(level='O2')`` turns it on. Float32 parameters are unaffected.

    Attributes:
        _parameter_list: every parameter, in order (the name Paddle's GradScaler reads).
        _param_groups: the groups (dicts).
        _multi_precision: the flag above (``decorate`` sets it as Paddle does).
        _state: everything kept between steps (``state.py``): accumulators, master weights,
            the lr buffers and the step's plan. ``_accumulators`` (``id(param) -> {name:
            array}``) and ``_master_weights`` (``param.name -> Tensor(float32)``) are its
            two dicts under Paddle's names.
    """

    _group_keys: tuple[str, ...] = ()  # the subclass's hyper-parameters a group may override
    _kernel_name: str | None = None  # Paddle's update op in operator statistics ('adamw_')

    def __init__(
        self,
        learning_rate=0.001,
        parameters=None,
        weight_decay=None,
        grad_clip=None,
        name=None,
        multi_precision: bool = False,
    ):
        self._learning_rate = check_learning_rate(learning_rate)
        self._name = name
        self._multi_precision = bool(multi_precision)
        self._state = OptimizerState()
        self._auxiliary_vars: dict = {}
        self._warned_low_precision = False
        # Subclasses put their hyper-parameters in self._defaults before calling us.
        defaults = {
            "learning_rate": 1.0,
            "weight_decay": weight_decay,
            "grad_clip": grad_clip,
            **getattr(self, "_defaults", {}),
        }
        self._default_group = self._make_group({"params": [], **defaults}, defaults)
        self._param_groups: list[dict] = []
        self._parameter_list: list[Tensor] = []
        self._group_of: dict[int, dict] = {}
        groups, given_as_dicts = as_groups(parameters, type(self).__name__)
        for group in groups:
            self._add_param_group(group, defaults, given_as_dicts)

    # ---- parameters and groups ---------------------------------------------------------------
    def _add_param_group(self, group: dict, defaults: dict, given_as_dict: bool = True) -> None:
        """Check ``group`` (every parameter, every setting), then add it.

        A group given as a dict takes over its parameters' own settings as Paddle's
        ``_add_param_group`` does (see ``UpdateRule._own_settings``): ``group['_taken']``
        records each parameter's settings as they were when the group took it.
        """
        group = self._make_group(group, defaults)
        seen: set = set()
        for param in group["params"]:
            if id(param) in self._group_of or id(param) in seen:
                raise ValueError(
                    f"parameter {param.name!r} appears twice in the parameters given to "
                    f"{type(self).__name__}; pass each parameter once"
                )
            seen.add(id(param))
        group["_taken"] = (
            {id(p): own_settings(p) for p in group["params"]} if given_as_dict else None
        )
        for param in group["params"]:
            self._group_of[id(param)] = group
        self._param_groups.append(group)
        self._parameter_list.extend(group["params"])

    def _make_group(self, group: dict, defaults: dict) -> dict:
        known = _BASE_GROUP_KEYS + self._group_keys
        unknown = [k for k in group if k not in known]
        if unknown:
            raise ValueError(
                f"{type(self).__name__}: unknown param-group key(s) {unknown}; "
                f"a group may set {list(known)}"
            )
        group = {**defaults, **group, "params": list(group["params"])}
        for i, p in enumerate(group["params"]):
            if not isinstance(p, Tensor):
                raise TypeError(
                    f"{type(self).__name__}: parameters must be Parameters or Tensors, "
                    f"item {i} is a {type(p).__name__}"
                )
            check_floating(p, type(self).__name__)
        self._validate_group(group)
        return group

    def _validate_group(self, group: dict) -> None:
        """Check a group's hyper-parameters and derive ``group['_regularizer']``."""
        ratio = group["learning_rate"]
        if isinstance(ratio, bool) or not isinstance(ratio, numbers.Real) or ratio < 0:
            raise ValueError(
                "a param group's 'learning_rate' is a multiplier of the optimizer's rate and "
                f"must be a number >= 0, got {ratio!r}"
            )
        clip = group["grad_clip"]
        if clip is not None and not callable(clip):
            raise TypeError(
                "grad_clip must be None or a clipping object such as "
                f"nn.ClipGradByGlobalNorm(1.0), got {type(clip).__name__}"
            )
        group["_regularizer"] = as_regularizer(group["weight_decay"])

    # ---- learning rate -----------------------------------------------------------------------
    def get_lr(self) -> float:
        """The current global learning rate (the scheduler's current value when there is one)."""
        if isinstance(self._learning_rate, LRScheduler):
            return float(self._learning_rate())
        return self._learning_rate

    def set_lr(self, value: float) -> None:
        """Set a new float learning rate.

        Raises:
            RuntimeError: the optimizer is driven by an LRScheduler (step the scheduler instead).
        """
        if isinstance(self._learning_rate, LRScheduler):
            raise RuntimeError(
                "set_lr() cannot be used when the learning rate is an LRScheduler; call "
                "scheduler.step() to change it, or set_lr_scheduler() to replace it"
            )
        self._learning_rate = check_learning_rate(value)

    def set_lr_scheduler(self, scheduler: LRScheduler) -> None:
        """Drive the learning rate by ``scheduler`` from now on."""
        if not isinstance(scheduler, LRScheduler):
            raise TypeError(f"set_lr_scheduler needs an LRScheduler, got {type(scheduler)}")
        self._learning_rate = scheduler

    # ---- the update ---------------------------------------------------------------------------
    def step(self, closure=None) -> None:
        """Update every trainable parameter that has a gradient, from that gradient.

        Parameters with ``stop_gradient=True`` or no ``.grad`` are skipped (they keep their
        values and their accumulators). When the auxiliary var ``'found_inf'`` is true the
        whole update is skipped; the var is cleared either way.

        Args:
            closure: refused. Paddle's ``step()`` takes none; PyTorch's ``step(closure)``
                calls it first: write ``loss = closure()`` then ``opt.step()``.
        """
        if closure is not None:
            raise TypeError(
                f"{type(self).__name__}.step() takes no closure (Paddle's step has none): call "
                "it yourself first, loss = closure(), then opt.step(); nothing was updated"
            )
        found_inf = self._auxiliary_vars.pop("found_inf", None)
        self._run(found_inf, [(group, group["params"]) for group in self._param_groups])

    def minimize(self, loss, startup_program=None, parameters=None, no_grad_set=None):
        """Apply the gradients already computed, like :meth:`step` (Paddle dygraph).

        NOTE: in dygraph ``minimize`` does not run backward: call ``loss.backward()`` first.

        Args:
            loss: unused in dygraph (kept for the Paddle signature).
            startup_program: unused.
            parameters: update only these (default: the optimizer's parameters).
            no_grad_set: parameters (or their names) to leave alone.

        Returns:
            ``(optimize_ops, params_grads)``: ``[]`` and the ``(param, grad)`` pairs used
            (the pairs that would have been used, when ``'found_inf'`` skipped the update).
        """
        params = self._parameter_list if parameters is None else list(parameters)
        if len({id(p) for p in params}) != len(params):  # (each would be updated twice)
            twice = next(p for i, p in enumerate(params) if any(q is p for q in params[:i]))
            raise ValueError(
                f"minimize: parameter {twice.name!r} appears twice in parameters; pass each "
                "parameter once (nothing was updated)"
            )
        found_inf = self._auxiliary_vars.pop("found_inf", None)
        skip = set(no_grad_set or ())
        skip_ids = {id(x) for x in skip if isinstance(x, Tensor)}
        skip_names = {x for x in skip if isinstance(x, str)}
        chosen = [p for p in params if id(p) not in skip_ids and p.name not in skip_names]
        by_group: dict[int, list] = {}
        for param in chosen:
            group = self._group_of.get(id(param), self._default_group)
            by_group.setdefault(id(group), []).append(param)
        groups = [*self._param_groups, self._default_group]
        self._run(found_inf, [(g, by_group[id(g)]) for g in groups if id(g) in by_group])
        return [], [(p, p._grad) for p in chosen if not p.stop_gradient and p._grad is not None]

    def _run(self, found_inf, groups: list) -> None:
        """The step itself, for ``[(group, params)]``: found_inf normalised once, then the
        gradients clipped, the plan found (or built, all or nothing), every bucket updated."""
        flag = as_found_inf(found_inf)
        if flag is not None and _device.get_array_module(flag) is np:
            if flag[0]:
                return  # a host flag: reading it is free, so skip before anything else
            flag = None
        steps = []
        for group, params in groups:
            pairs = [(p, p._grad) for p in params if not p.stop_gradient and p._grad is not None]
            if pairs and group["grad_clip"] is not None:
                pairs = [(p, g) for p, g in group["grad_clip"](pairs) if g is not None]
            if pairs:
                grads = [g._data if isinstance(g, Tensor) else g for _, g in pairs]
                steps.append((group, [p for p, _ in pairs], grads))
        if not steps:
            return
        plan = self._state.plan_for(self, steps)
        plan.run([g for _, _, grads in steps for g in grads], flag, self._base_lr)
        if hooks.counters and self._kernel_name:  # operator statistics: one call per param
            for _, params, _ in steps:
                for param in params:
                    for count in hooks.counters:
                        count(self._kernel_name, param._data.dtype)

    def _base_lr(self, place):
        """The learning rate as the update on ``place`` reads it: a float on the CPU, the
        optimizer's float64 [1] device buffer on a GPU (no upload, a captured graph follows)."""
        if place.kind == "cpu":
            return float(self.get_lr())
        return self._state.lr_buffer(self, place)

    def _has_group(self, param) -> bool:
        return id(param) in self._group_of

    def _warn_low_precision(self) -> None:
        if not self._warned_low_precision:
            self._warned_low_precision = True
            warnings.warn(low_precision_warning(type(self).__name__), stacklevel=6)

    # ---- AMP hand-over ------------------------------------------------------------------------
    def _set_auxiliary_var(self, key: str, value) -> None:
        """Hand a value to the next update, e.g. ``('found_inf', flag)`` from GradScaler."""
        self._auxiliary_vars[key] = value

    def _get_auxiliary_var(self, key: str):
        """The value set with :meth:`_set_auxiliary_var`, or None."""
        return self._auxiliary_vars.get(key)

    # ---- the state, under Paddle's names ------------------------------------------------------
    @property
    def _accumulators(self) -> dict:
        return self._state.accumulators

    @property
    def _master_weights(self) -> dict:
        return self._state.masters

    def take_grad_clips(self) -> list:
        """``[(clip, params)]`` for every group that clips, leaving no clip in the groups: the
        caller clips from now on (sharding does, with a global norm summed over the ranks)."""
        clips = []
        for group in self._param_groups:
            if group["grad_clip"] is not None:
                clips.append((group["grad_clip"], group["params"]))
                group["grad_clip"] = None
        return clips

    def restrict_to(self, params) -> None:
        """Update only ``params`` from now on and drop every other parameter's state (what
        sharding does on each rank: the other ranks own the rest)."""
        keep = {id(p) for p in params}
        for group in self._param_groups:
            group["params"] = [p for p in group["params"] if id(p) in keep]
        self._parameter_list = [p for p in self._parameter_list if id(p) in keep]
        self._state.forget([p for p in params])

    # ---- gradients ----------------------------------------------------------------------------
    def clear_grad(self, set_to_zero: bool = True) -> None:
        """Zero every parameter's ``.grad`` in place, or drop it with ``set_to_zero=False``."""
        for p in self._parameter_list:
            p.clear_grad(set_to_zero)  # zeroing is deferred to the next write (Tensor._grad)

    clear_gradients = clear_grad

    # ---- checkpoints --------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """The optimizer's state, as copies: accumulators, master weights, the scheduler.

        Accumulators are keyed ``f'{param.name}_{acc}_0'`` (Paddle's names), e.g.
        ``linear_0.w_0_moment1_0``, ``linear_0.w_0_beta1_pow_acc_0``. With fp32 master weights
        there is ``'master_weights': {param.name: Tensor(float32)}``; with an LRScheduler,
        ``'LR_Scheduler': scheduler.state_dict()``.
        """
        return optimizer_state_dict(self)

    def set_state_dict(self, state_dict: dict) -> None:
        """Load what :meth:`state_dict` returned (Tensors or arrays); all-or-nothing.

        Every entry is checked (shape, dtype of master weights, completeness, every field of
        the scheduler's state) before anything changes, so a failed load leaves the optimizer
        and its scheduler exactly as they were. A ``'master_weights'`` entry replaces all
        master weights (as in Paddle).

        Raises:
            KeyError: the learning rate is an LRScheduler and the state dict has no
                ``'LR_Scheduler'`` (Paddle's error too).
            ValueError: an accumulator or master weight has the wrong shape, a master weight is
                not float32, a parameter's set of accumulators is incomplete, or a field of
                ``'LR_Scheduler'`` is out of range.
            TypeError: a field of ``'LR_Scheduler'`` has the wrong type.
        """
        load_optimizer_state(self, state_dict)

    set_dict = set_state_dict  # Paddle's older name
