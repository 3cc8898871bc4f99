"""``Optimizer``: the base of SGD, Momentum, Adam and AdamW (Paddle 2.x dygraph semantics).

One ``step()``, for each parameter group, in Paddle's order:

1. collect ``(param, grad)`` for every trainable parameter that has a gradient;
2. ``pairs = grad_clip(pairs)`` (e.g. ``ClipGradByGlobalNorm``; returns new gradient tensors);
3. per parameter: ``g = regularizer(p, g)`` (``L2Decay``: ``g + coeff * p``);
4. per parameter: ``self._update(p, g, state, lr, hyper)``, the optimizer's own maths, in place.

``lr`` is ``get_lr() * group['learning_rate'] * param.optimize_attr['learning_rate']``.
Step 4 is the one place a subclass writes maths. It sees plain arrays (``p`` is updated in
place, ``g`` must not be modified, ``state`` holds the accumulators), so the fp32
master-weight path of AMP (``multi_precision``) runs the very same ``_update`` on the master.
On the GPU, steps 3-4 run fused instead: one ``_fused_update`` per dtype bucket of a group,
the same maths in one kernel (``fused_step.py``, ``cuda/optim.cu``).

AMP, the two things GradScaler and ``amp.decorate`` rely on:

* ``multi_precision=True``: each float16 parameter gets an fp32 *master weight*, created at
  its first update as an exact cast of the parameter and kept in
  ``self._master_weights[param.name]``. The update runs on the master in fp32, then writes
  the float16 parameter from it, rounded to nearest even (**optimize-cast**: under O2 this
  is the only place a weight is cast, once per parameter per update).
* ``found_inf``: a bool array of shape [1] saying the scaled gradients overflowed; when it
  is set the step changes nothing at all (a skipped AMP step). GradScaler passes it
  explicitly (``_step(found_inf)``, ``_minimize(found_inf, ...)``); Paddle's
  ``_set_auxiliary_var('found_inf', flag)`` hands it to the next ``step()`` or
  ``minimize()`` too. A flag on the GPU is read by the fused update, never by the host.

The learning rate reaches the fused kernel through a device buffer (``_lr_buffer``), written
when ``get_lr()`` changes: a step captured as a CUDA graph follows a scheduler's new rate.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np

from ..autograd.dispatch import hooks
from ..autograd.tensor import Tensor
from ..backend import device as _device
from ..backend import dtypes as _dtypes
from ..backend import graphs as _graphs
from ..backend.cast_counter import count_cast
from . import atomic
from .fused_step import apply_fused, has_fused_twin, update_path
from .lr import LRScheduler
from .mixed_precision import (
    as_found_inf,
    found_inf_is_set,
    get_master_weight,
    low_precision_warning,
)
from .param_groups import as_groups, as_regularizer, check_learning_rate
from .state_dict import load_optimizer_state, optimizer_state_dict
from .torch_compat import TorchOptimizerMethods

__all__ = ["Optimizer"]

# Keys of a parameter group that every optimizer understands; subclasses add theirs.
_BASE_GROUP_KEYS = ("params", "learning_rate", "weight_decay", "grad_clip")


class Optimizer(TorchOptimizerMethods):
    """Base class of the optimizers; holds parameters, groups, accumulators and the lr.

    Args:
        learning_rate: a float, or an ``lr.LRScheduler`` (the user calls its ``step()``).
        parameters: the parameters to optimize (required), e.g. ``model.parameters()``; or a
            list of param groups ``{'params': [...], 'learning_rate': ratio,
            'weight_decay': ...}`` where ``learning_rate`` multiplies the global rate and
            any other key overrides the optimizer's argument of that name for the group.
        weight_decay: None, a float (``L2Decay(coeff)``: ``g += coeff * p``) or a
            regularizer from ``minitorch_amp.regularizer``.
        grad_clip: called as ``grad_clip([(param, grad), ...])`` before regularization, e.g.
            ``nn.ClipGradByGlobalNorm(1.0)``.
        name: unused; kept for Paddle compatibility.
        multi_precision: keep an fp32 master weight for every float16 parameter (AMP O2);
            ``amp.decorate(level='O2')`` turns it on. Float32 parameters are unaffected.

    Attributes:
        _parameter_list: every parameter, in order. ``_param_groups``: the groups (dicts).
        _accumulators: ``id(param) -> {name: array}``, created lazily at a param's first
            update, in float32 for float16 params and in the param's dtype otherwise.
        _multi_precision: the flag above (``decorate`` sets it as Paddle does).
        _master_weights: ``param.name -> Tensor(float32)``, the master weights (Paddle keys
            them by name), created lazily at a float16 parameter's first update.
        _auxiliary_vars: values other AMP pieces hand over, e.g. ``'found_inf'``.
    """

    _group_keys: tuple[str, ...] = ()  # the subclass's hyper-parameters a group may override
    _takes_found_inf = True  # GradScaler calls _step(found_inf) / _minimize(found_inf, ...)
    _fused_update = None  # a subclass's fused twin of _update (see fused_step.py), if it has one
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
        self._master_weights: dict[str, Tensor] = {}
        self._master_owner: dict[str, int] = {}  # name -> id(param), to catch duplicate names
        self._master_seen: dict[str, tuple] = {}  # name -> the param as last left (see there)
        self._auxiliary_vars: dict = {}
        self._warned_low_precision = False
        self._accumulators: dict[int, dict] = {}
        self._extra_params: list[Tensor] = []  # updated through minimize(parameters=...)
        self._lr_buffers: dict = {}  # Place -> HostFed: the lr the fused kernel reads
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
        for group in as_groups(parameters, type(self).__name__):
            self._add_param_group(group, defaults)

    # ---- parameters and groups ---------------------------------------------------------------
    def _add_param_group(self, group: dict, defaults: dict) -> None:
        group = self._make_group(group, defaults)
        for param in group["params"]:
            if id(param) in self._group_of:
                raise ValueError(
                    f"parameter {param.name!r} appears twice in the parameters given to "
                    f"{type(self).__name__}; pass each parameter once"
                )
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

    def _param_lr(self, param, group: dict, base_lr: float) -> float:
        """``base_lr * _lr_multiplier(param, group)``, in float64 (the fused kernel's order)."""
        return base_lr * self._lr_multiplier(param, group)

    def _lr_multiplier(self, param, group: dict) -> float:
        """The group's and the parameter's learning-rate ratios, multiplied."""
        attr = getattr(param, "optimize_attr", None)
        ratio = 1.0 if attr is None else attr.get("learning_rate", 1.0)
        return float(group["learning_rate"]) * float(ratio)

    def _lr_buffer(self, place):
        """The device buffer holding ``get_lr()`` for the fused kernel on ``place``, current."""
        buffer = self._lr_buffers.get(place)
        if buffer is None:
            buffer = self._lr_buffers[place] = _graphs.HostFed(place, np.float64)
        buffer.follow(self.get_lr)
        return buffer.array

    # ---- the update ---------------------------------------------------------------------------
    def step(self) -> None:
        """Update every trainable parameter that has a gradient, from that gradient.

        Parameters with ``stop_gradient=True`` or no ``.grad`` are skipped (they keep their
        values and their accumulators). When the auxiliary var ``'found_inf'`` is true the
        whole update is skipped; the var is cleared either way.
        """
        self._step(self._take_found_inf())

    def _step(self, found_inf=None) -> None:
        """:meth:`step`, skipped on the device when ``found_inf`` (a bool [1] array) is set."""
        found_inf = as_found_inf(found_inf)
        if self._skip_on_host(found_inf):
            return
        plan = [(group, self._pairs(group["params"])) for group in self._param_groups]
        self._run(plan, found_inf)

    @staticmethod
    def _pairs(params) -> list:
        """``(param, grad)`` of every parameter that trains and has a gradient."""
        return [(p, p._grad) for p in params if not p.stop_gradient and p._grad is not None]

    def _run(self, plan: list, found_inf) -> None:
        """Clip and prepare every group, then update them: all or nothing (``atomic.py``)."""
        base_lr = self.get_lr()
        plan = atomic.clipped(plan)
        atomic.prepare(self, plan)  # creates state; undone if it fails
        for group, pairs in plan:
            self._apply_group(group, pairs, base_lr, found_inf)
        if hooks.counters and self._kernel_name:  # operator statistics: one call per param
            for _, pairs in plan:
                for param, _ in pairs:
                    for count in hooks.counters:
                        count(self._kernel_name, param._data.dtype)

    def _skip_on_host(self, found_inf) -> bool:
        """Whether a set flag on the host (free to read) skips the whole step."""
        on_host = found_inf is not None and _device.get_array_module(found_inf) is np
        return on_host and found_inf_is_set(found_inf, self._host_read_name())

    def _host_read_name(self):
        """What reads found_inf on the host, for the sync debug mode: an optimizer without a
        fused update (on a GPU it reads the device flag); None for one with it (its NumPy
        twin reads the CPU backend's flag, which on a GPU the kernel reads)."""
        if has_fused_twin(type(self)):
            return None
        return f"{type(self).__name__}.step() (no fused update to skip on the device)"

    def _take_found_inf(self):
        """The ``'found_inf'`` auxiliary var (Paddle's hand-over), removed: it is used once."""
        return as_found_inf(self._auxiliary_vars.pop("found_inf", None))

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
        return self._minimize(
            self._take_found_inf(), loss, startup_program, parameters, no_grad_set
        )

    def _minimize(self, found_inf, loss, startup_program=None, parameters=None, no_grad_set=None):
        """:meth:`minimize`, skipped on the device when ``found_inf`` is set."""
        found_inf = as_found_inf(found_inf)
        params = self._parameter_list if parameters is None else list(parameters)
        skip = set(no_grad_set or ())
        skip_ids = {id(x) for x in skip if isinstance(x, Tensor)}
        skip_names = {x for x in skip if isinstance(x, str)}
        params_grads = [
            (p, p._grad)
            for p in params
            if not p.stop_gradient
            and p._grad is not None
            and id(p) not in skip_ids
            and p.name not in skip_names
        ]
        if self._skip_on_host(found_inf):
            return [], params_grads
        by_group: dict[int, list] = {}
        for pair in params_grads:
            group = self._group_of.get(id(pair[0]), self._default_group)
            by_group.setdefault(id(group), []).append(pair)
        groups = [*self._param_groups, self._default_group]
        self._run([(g, by_group[id(g)]) for g in groups if id(g) in by_group], found_inf)
        return [], params_grads

    def _apply_group(self, group: dict, pairs: list, base_lr: float, found_inf) -> None:
        """Update the clipped pairs: per parameter (NumPy), or fused per dtype bucket (CuPy)."""
        if update_path(self, pairs) != "per-param numpy":
            apply_fused(self, group, pairs, found_inf)  # found_inf read on the device
            return
        if found_inf is not None and found_inf_is_set(found_inf, self._host_read_name()):
            return  # a device flag, but no fused update for this optimizer: one host read
        for param, grad in pairs:
            self._apply_update(param, grad, group, base_lr)

    def _apply_update(self, param: Tensor, grad, group: dict, base_lr: float) -> None:
        """Update one parameter in place: regularize the grad, then run ``_update``.

        The grad may be wider than the parameter (float32 grads of float16 params, from
        ``decorate(master_grad=True)``); it is used as float32 either way.
        """
        state = self._state_for(param, group)
        data = param._data
        low_precision = data.dtype in _dtypes.LOW_PRECISION  # float16, bfloat16
        master = self._master_weight(param) if low_precision and self._multi_precision else None
        if master is not None:
            p = master._data
        else:
            if low_precision:
                self._warn_low_precision()
            # NOTE: without a master, a float16 parameter is still updated on a float32 copy
            # and written back rounded to nearest even: lr * g is often below half of
            # float16's spacing at p, so a float16 update would round the step away. But the
            # copy is made from the rounded float16 value each step, so many small steps in a
            # row still vanish; only a kept fp32 master (multi_precision) accumulates them.
            p = data.astype(_dtypes.accumulation_dtype(data.dtype), copy=False)
        g = (grad._data if isinstance(grad, Tensor) else grad).astype(p.dtype, copy=False)
        g = self._prepare_grad(p, g, self._regularizer_for(param, group), group)
        self._update(p, g, state, self._param_lr(param, group, base_lr), self._hyper(param, group))
        if master is not None:
            # NOTE: optimize-cast. The float16 weight that forward and backward read is
            # written here, from the updated master, rounded to nearest even; under O2 no
            # other weight cast happens. On the GPU optim.cu does update + write in one pass.
            data[...] = p.astype(data.dtype)
            count_cast("optimizer")
        elif p is not data:
            data[...] = p

    def _state_for(self, param: Tensor, group: dict) -> dict:
        """``param``'s accumulators, created at its first update."""
        state = self._accumulators.get(id(param))
        if state is None:
            _graphs.refuse_in_capture(
                "creating optimizer state", "run the step eagerly once before capturing it"
            )
            state = self._create_accumulators(param, group)
            self._accumulators[id(param)] = state
            if id(param) not in self._group_of:
                self._extra_params.append(param)  # first update, so not there yet
        return state

    def _master_weight(self, param: Tensor) -> Tensor:
        """``param``'s fp32 master weight, created (an exact cast) at its first update."""
        return get_master_weight(self._master_weights, self._master_owner, param, self._master_seen)

    def _warn_low_precision(self) -> None:
        if not self._warned_low_precision:
            self._warned_low_precision = True
            warnings.warn(low_precision_warning(type(self).__name__), stacklevel=5)

    # ---- AMP hand-over ------------------------------------------------------------------------
    def _set_auxiliary_var(self, key: str, value) -> None:
        """Hand a value to the next update, e.g. ``('found_inf', flag)`` from GradScaler."""
        self._auxiliary_vars[key] = value

    def _get_auxiliary_var(self, key: str):
        """The value set with :meth:`_set_auxiliary_var`, or None."""
        return self._auxiliary_vars.get(key)

    def _regularizer_for(self, param, group: dict):
        """The parameter's own regularizer (ParamAttr) wins over the group's."""
        return getattr(param, "regularizer", None) or group["_regularizer"]

    def _prepare_grad(self, p, g, regularizer, group: dict):
        """The gradient ``_update`` sees: ``regularizer(p, g)``. Returns a new array if changed."""
        return g if regularizer is None else regularizer(p, g)

    def _hyper(self, param, group: dict) -> dict:
        """The hyper-parameters ``_update`` reads for ``param`` (its group by default)."""
        return group

    def _create_accumulators(self, param, group: dict) -> dict:
        """Fresh state for ``param``: ``{name: array}``, e.g. ``{'velocity': zeros}``."""
        return {}

    def _update(self, p, g, state: dict, lr: float, hyper: dict) -> None:
        """The optimizer's maths on arrays: update ``p`` and ``state`` in place.

        Args:
            p: the parameter values (float32 or wider), modified in place.
            g: the regularized gradient, same shape and dtype; must not be modified.
            state: this parameter's accumulators, modified in place.
            lr: the learning rate for this parameter (per-group and per-param ratios applied).
            hyper: the parameter group (hyper-parameters such as ``beta1``).
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement _update()")

    @staticmethod
    def _new_accumulator(param, fill: float = 0.0, shape=None):
        """A filled array on ``param``'s device, float32 for float16 params (as Paddle)."""
        data = param._data
        xp = _device.get_array_module(data)
        dtype = _dtypes.accumulation_dtype(data.dtype)
        array = xp.full(data.shape if shape is None else shape, fill, dtype=dtype)
        return _device.to_place(array, _device.place_of(data))

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

        Every entry is checked (shape, dtype of master weights, completeness, the scheduler's
        keys) before anything changes, so a failed load leaves the optimizer exactly as it was.
        A ``'master_weights'`` entry replaces all master weights (as in Paddle).

        Raises:
            ValueError: an accumulator or master weight has the wrong shape, a master weight is
                not float32, or a parameter's set of accumulators is incomplete.
        """
        load_optimizer_state(self, state_dict)

    set_dict = set_state_dict  # Paddle's older name
