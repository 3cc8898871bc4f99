"""``Optimizer``: the base of SGD, Momentum, Adam and AdamW (Paddle 2.x dygraph semantics).

One ``step()``, for each parameter group, in Paddle's order:

1. collect ``(param, grad)`` for every trainable parameter that has a gradient;
2. ``pairs = grad_clip(pairs)`` (e.g. ``ClipGradByGlobalNorm``; returns new gradient tensors);
3. per parameter: ``g = regularizer(p, g)`` (``L2Decay``: ``g + coeff * p``);
4. per parameter: ``self._update(p, g, state, lr, hyper)``, the optimizer's own maths, in place.

``lr`` is ``get_lr() * group['learning_rate'] * param.optimize_attr['learning_rate']``.
Step 4 is the one place a subclass writes maths. It sees plain arrays (``p`` is updated in
place, ``g`` must not be modified, ``state`` holds the accumulators), so the fp32
master-weight path of AMP (``multi_precision``) runs the very same ``_update`` on fp32 copies.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np

from ..autograd.tensor import Tensor
from ..backend import device as _device
from ..backend import dtypes as _dtypes
from ..regularizer import L2Decay, WeightDecayRegularizer
from .lr import LRScheduler

__all__ = ["Optimizer"]

# Keys of a parameter group that every optimizer understands; subclasses add theirs.
_BASE_GROUP_KEYS = ("params", "learning_rate", "weight_decay", "grad_clip")


class Optimizer:
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

    Attributes:
        _parameter_list: every parameter, in order. ``_param_groups``: the groups (dicts).
        _accumulators: ``id(param) -> {name: array}``, created lazily at a param's first
            update, in float32 for float16 params and in the param's dtype otherwise.
    """

    _group_keys: tuple[str, ...] = ()  # the subclass's hyper-parameters a group may override

    def __init__(
        self, learning_rate=0.001, parameters=None, weight_decay=None, grad_clip=None, name=None
    ):
        self._learning_rate = _check_learning_rate(learning_rate)
        self._name = name
        self._accumulators: dict[int, dict] = {}
        self._extra_params: list[Tensor] = []  # updated through minimize(parameters=...)
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
        for group in _as_groups(parameters, type(self).__name__):
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
        group["_regularizer"] = _as_regularizer(group["weight_decay"])

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
        self._learning_rate = _check_learning_rate(value)

    def set_lr_scheduler(self, scheduler: LRScheduler) -> None:
        """Drive the learning rate by ``scheduler`` from now on."""
        if not isinstance(scheduler, LRScheduler):
            raise TypeError(f"set_lr_scheduler needs an LRScheduler, got {type(scheduler)}")
        self._learning_rate = scheduler

    def _param_lr(self, param, group: dict, base_lr: float) -> float:
        attr = getattr(param, "optimize_attr", None)
        ratio = 1.0 if attr is None else attr.get("learning_rate", 1.0)
        return base_lr * float(group["learning_rate"]) * float(ratio)

    # ---- the update ---------------------------------------------------------------------------
    def step(self) -> None:
        """Update every trainable parameter that has a gradient, from that gradient.

        Parameters with ``stop_gradient=True`` or no ``.grad`` are skipped (they keep their
        values and their accumulators).
        """
        base_lr = self.get_lr()
        for group in self._param_groups:
            pairs = [
                (p, p._grad) for p in group["params"] if not p.stop_gradient and p._grad is not None
            ]
            self._apply_group(group, pairs, base_lr)

    def minimize(self, loss, startup_program=None, parameters=None, no_grad_set=None):
        """Apply the gradients already computed, like :meth:`step` (Paddle dygraph).

        NOTE: in dygraph ``minimize`` does not run backward: call ``loss.backward()`` first.

        Args:
            loss: unused in dygraph (kept for the Paddle signature).
            startup_program: unused.
            parameters: update only these (default: the optimizer's parameters).
            no_grad_set: parameters (or their names) to leave alone.

        Returns:
            ``(optimize_ops, params_grads)``: ``[]`` and the ``(param, grad)`` pairs used.
        """
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
        base_lr = self.get_lr()
        by_group: dict[int, list] = {}
        for pair in params_grads:
            group = self._group_of.get(id(pair[0]), self._default_group)
            by_group.setdefault(id(group), []).append(pair)
        for group in [*self._param_groups, self._default_group]:
            if id(group) in by_group:
                self._apply_group(group, by_group[id(group)], base_lr)
        return [], params_grads

    def _apply_group(self, group: dict, params_grads: list, base_lr: float) -> None:
        if not params_grads:
            return
        if group["grad_clip"] is not None:
            params_grads = group["grad_clip"](params_grads)
        for param, grad in params_grads:
            if grad is not None:
                self._apply_update(param, grad, group, base_lr)

    def _apply_update(self, param: Tensor, grad, group: dict, base_lr: float) -> None:
        """Update one parameter in place: regularize the grad, then run ``_update``."""
        state = self._accumulators.get(id(param))
        if state is None:
            state = self._create_accumulators(param, group)
            self._accumulators[id(param)] = state
            if id(param) not in self._group_of:
                self._extra_params.append(param)  # first update, so not there yet
        data = param._data
        dtype = _dtypes.accumulation_dtype(data.dtype)
        # NOTE: a float16 parameter is updated on a float32 copy and written back rounded to
        # nearest even: lr * g is often below half of float16's spacing at p, so updating in
        # float16 would round the step away. The accumulators of float16 params are float32.
        # An fp32 master weight (AMP multi_precision) replaces this copy with a kept one.
        p = data if data.dtype == dtype else data.astype(dtype)
        g = (grad._data if isinstance(grad, Tensor) else grad).astype(dtype, copy=False)
        g = self._prepare_grad(p, g, self._regularizer_for(param, group), group)
        self._update(p, g, state, self._param_lr(param, group, base_lr), self._hyper(param, group))
        if p is not data:
            data[...] = p

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
            if p._grad is None:
                continue
            if set_to_zero:
                p._grad._data[...] = 0
            else:
                p._grad = None

    clear_gradients = clear_grad

    # ---- checkpoints --------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """The accumulators as Tensors keyed ``f'{param.name}_{acc}_0'`` (Paddle's names).

        Values are copies. ``'LR_Scheduler'`` holds ``scheduler.state_dict()`` when the
        learning rate is a scheduler. Example keys: ``linear_0.w_0_moment1_0``,
        ``linear_0.w_0_beta1_pow_acc_0``.
        """
        state: dict = {}
        for param in self._parameter_list + self._extra_params:
            accs = self._accumulators.get(id(param))
            if not accs:
                continue
            for acc, array in accs.items():
                key = self._state_key(param, acc)
                if key in state:
                    raise ValueError(
                        f"two parameters are both named {param.name!r}; state_dict keys are "
                        "built from parameter names, so give each parameter a unique name"
                    )
                t = Tensor._wrap(array.copy())
                t.name = key
                state[key] = t
        if isinstance(self._learning_rate, LRScheduler):
            state["LR_Scheduler"] = self._learning_rate.state_dict()
        return state

    def set_state_dict(self, state_dict: dict) -> None:
        """Load what :meth:`state_dict` returned (Tensors or arrays); all-or-nothing.

        Every entry is checked (shape, completeness, the scheduler's keys) before anything
        changes, so a failed load leaves the optimizer exactly as it was.

        Raises:
            ValueError: an accumulator has the wrong shape, or a parameter's set is incomplete.
        """
        if not isinstance(state_dict, dict):
            raise TypeError(f"set_state_dict needs a dict, got {type(state_dict).__name__}")
        staged, used = [], {"LR_Scheduler", "master_weights"}
        for param in self._parameter_list + self._extra_params:
            group = self._group_of.get(id(param), self._default_group)
            fresh = self._create_accumulators(param, group)
            keys = {acc: self._state_key(param, acc) for acc in fresh}
            found = [acc for acc, key in keys.items() if key in state_dict]
            if not found:
                continue
            if len(found) != len(keys):
                missing = [key for key in keys.values() if key not in state_dict]
                raise ValueError(f"set_state_dict: {missing} missing for {param.name!r}")
            for acc, key in keys.items():
                _copy_checked(fresh[acc], state_dict[key], key, param)
                used.add(key)
            staged.append((param, fresh))
        scheduler = self._learning_rate
        has_sched = isinstance(scheduler, LRScheduler) and "LR_Scheduler" in state_dict
        if has_sched:
            scheduler._check_state(state_dict["LR_Scheduler"])
        unused = [k for k in state_dict if k not in used]
        if unused:
            warnings.warn(
                f"set_state_dict: {len(unused)} entries match no parameter of this optimizer "
                f"(e.g. {unused[0]!r}); were the parameters renamed or a different model built?",
                stacklevel=2,
            )
        for param, fresh in staged:
            self._accumulators[id(param)] = fresh
        if has_sched:
            scheduler._load_state(state_dict["LR_Scheduler"])

    set_dict = set_state_dict  # Paddle's older name

    @staticmethod
    def _state_key(param, acc: str) -> str:
        if not param.name:
            raise ValueError(
                "state_dict needs named parameters; this Tensor has no name (use Parameter, "
                "which names itself, or set tensor.name)"
            )
        return f"{param.name}_{acc}_0"


# ---- helpers ------------------------------------------------------------------------------------
def _check_learning_rate(value):
    if isinstance(value, LRScheduler):
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"learning_rate must be a float or an lr.LRScheduler, got {type(value).__name__}"
        )
    if value < 0:
        raise ValueError(f"learning_rate must be >= 0, got {value}")
    return float(value)


def _as_regularizer(weight_decay):
    if weight_decay is None or isinstance(weight_decay, WeightDecayRegularizer):
        return weight_decay
    if isinstance(weight_decay, bool) or not isinstance(weight_decay, numbers.Real):
        raise TypeError(
            "weight_decay must be None, a float (L2 coefficient) or a regularizer such as "
            f"regularizer.L2Decay(1e-4), got {type(weight_decay).__name__}"
        )
    return L2Decay(float(weight_decay)) if weight_decay else None


def _as_groups(parameters, owner: str) -> list[dict]:
    """Normalise ``parameters`` into a non-empty list of ``{'params': [...], ...}`` dicts."""
    hint = (
        f"{owner} needs the parameters to optimize, e.g. "
        f"{owner}(learning_rate=0.01, parameters=model.parameters())"
    )
    if parameters is None:
        raise ValueError(f"parameters is None. {hint} (required in dygraph mode)")
    if isinstance(parameters, (Tensor, dict, set, str)):
        raise TypeError(
            f"parameters must be a list of Parameters or of param-group dicts, got "
            f"{type(parameters).__name__}. {hint}"
        )
    items = list(parameters)
    if items and all(isinstance(item, dict) for item in items):
        for group in items:
            if "params" not in group or isinstance(group["params"], (Tensor, set)):
                raise TypeError(f"each param group needs 'params': a list of Parameters. {hint}")
        groups = [{**group, "params": list(group["params"])} for group in items]
    elif any(isinstance(item, dict) for item in items):
        raise TypeError("parameters mixes Parameters and param-group dicts; use one or the other")
    else:
        groups = [{"params": items}]
    if sum(len(g["params"]) for g in groups) == 0:
        raise ValueError(f"parameters is empty: there is nothing to optimize. {hint}")
    return groups


def _copy_checked(target, value, key: str, param) -> None:
    """Copy ``value`` (a Tensor or array) into ``target`` after checking its shape."""
    array = value._data if isinstance(value, Tensor) else value
    if not (_device.is_array(array) or isinstance(array, np.ndarray)):
        raise TypeError(f"set_state_dict: {key!r} is a {type(value).__name__}, not a Tensor")
    if tuple(array.shape) != tuple(target.shape):
        raise ValueError(
            f"set_state_dict: {key!r} has shape {list(array.shape)} but parameter "
            f"{param.name!r} needs {list(target.shape)}; nothing was loaded"
        )
    target[...] = _device.to_place(array, _device.place_of(target))
