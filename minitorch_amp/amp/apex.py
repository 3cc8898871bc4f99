"""NVIDIA apex's ``amp`` API (``initialize``, ``scale_loss``, ``master_params``) on our parts.

Not a second engine: ``initialize`` wraps each model's forward in :class:`auto_cast` (O1, O2)
and calls :func:`decorate` (O2: float16 parameters, fp32 master weights inside the
optimizer); ``scale_loss`` drives one :class:`GradScaler` per loss. apex code ports as is::

    model, opt = amp.initialize(model, opt, opt_level="O1")
    with amp.scale_loss(loss, opt) as scaled_loss:
        scaled_loss.backward()        # on exit: grads unscaled, overflow checked, scale updated
    nn.utils.clip_grad_norm_(amp.master_params(opt), max_norm)   # optional
    opt.step()                        # skips itself when the grads overflowed

opt_levels: ``O0`` fp32 (static scale 1); ``O1`` forward under ``auto_cast('O1')``, dynamic
scale; ``O2`` ``decorate('O2')`` + forward under ``auto_cast('O2')``, outputs cast to
float32, dynamic scale. (apex's ``O3``, pure fp16 without master weights, is not offered.)

The skip needs no host read: ``scale_loss`` hands the device found_inf to the optimizer
(``_set_auxiliary_var('found_inf', ...)``) and the optimizer's next ``step()`` skips on it.
"""

from __future__ import annotations

import contextlib
import re
import warnings

import numpy as np

from ..autograd.tensor import Tensor
from ..backend import device as _device
from ..backend.dtypes import convert_dtype, float32
from .apex_forward import _is_patched, _patch_forward
from .apex_stash import merge, restore, stash_grads
from .decorate import decorate
from .grad_scaler import GradScaler

__all__ = ["initialize", "load_state_dict", "master_params", "scale_loss", "state_dict"]

_OPT_LEVELS = ("O0", "O1", "O2")
_DEFAULT_SCALE = {"O0": 1.0, "O1": "dynamic", "O2": "dynamic"}


class _AmpState:
    """What :func:`initialize` set up; the other functions read it. ``initialize`` resets it."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.initialized = False
        self.enabled = False
        self.opt_level = None
        self.master_weights = False
        self.verbosity = 0
        self.scalers: list[GradScaler] = []  # one per loss_id
        # apex's _unskipped of a fixed loss_scale, per loss_id: every scale_loss exit counts
        # (a dynamic scaler's count is its own incr_count, reset by growth and overflow)
        self.static_unskipped: list[int] = []
        self.holding_scaled_grads: set[int] = set()  # id(optimizer), after delay_unscale


_amp_state = _AmpState()


def initialize(
    models,
    optimizers=None,
    enabled: bool = True,
    opt_level: str = "O1",
    *,
    loss_scale=None,
    min_loss_scale: float | None = None,
    max_loss_scale: float = 2.0**24,
    master_weights: bool | None = None,
    cast_model_outputs=None,
    num_losses: int = 1,
    verbosity: int = 0,
):
    """Set models and optimizers up for mixed precision at ``opt_level`` (call once).

    Args:
        models: a Layer or a list of Layers (fp32, as built).
        optimizers: None, an optimizer or a list of optimizers over those models.
        enabled: False returns everything untouched and makes ``scale_loss`` yield the loss.
        opt_level: ``'O0'``, ``'O1'`` or ``'O2'`` (the letter O).
        loss_scale: ``'dynamic'`` or a fixed number (default: dynamic; 1.0 at O0).
        min_loss_scale: floor of the dynamic scale (default 1.0; apex has none).
        max_loss_scale: ceiling of the dynamic scale.
        master_weights: O2 only: fp32 master weights (default True).
        cast_model_outputs: dtype of floating model outputs (default float32 at O2, as is
            at O1).
        num_losses: how many losses get their own scaler (``scale_loss(loss_id=...)``).
        verbosity: 1 prints apex's "Gradient overflow" line (a host read per step; apex
            defaults to 1, we to 0).

    Returns:
        ``models`` if ``optimizers`` is None, else ``(models, optimizers)``, each in the shape
        given (one object or a list).

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn, optimizer
        >>> from minitorch_amp.amp import apex as amp
        >>> model = nn.Linear(4, 2, bias_attr=False)
        >>> opt = optimizer.SGD(learning_rate=0.1, parameters=model.parameters())
        >>> model, opt = amp.initialize(model, opt, opt_level="O1", loss_scale=128.0)
        >>> model(mt.ones([3, 4])).dtype  # the matmul ran in float16 under auto_cast
        dtype('float16')
        >>> loss = model(mt.ones([3, 4])).astype("float32").mean()
        >>> with amp.scale_loss(loss, opt) as scaled_loss:
        ...     scaled_loss.backward()
        >>> opt.step()
        >>> amp.state_dict()
        {'loss_scaler0': {'loss_scale': 128.0, 'unskipped': 1}}
    """
    if not isinstance(enabled, (bool, np.bool_)):
        raise TypeError(f"enabled must be True or False, got {enabled!r}; pass opt_level='O1'")
    if not isinstance(opt_level, str) or opt_level not in _OPT_LEVELS:
        raise ValueError(
            f"Unexpected optimization level {opt_level!r}. Options are 'O0', 'O1', 'O2'. "
            "Note that in 'O0', 'O1', etc., the prefix O is the letter O, not the number zero."
        )
    model_list, models_single = _as_list(models)
    opt_list, opts_single = _as_list(optimizers)
    for model in model_list:
        if not callable(getattr(model, "forward", None)):
            raise TypeError(f"initialize: models must be Layers, got {type(model).__name__}")
        if _is_patched(model):
            raise RuntimeError(
                f"this {type(model).__name__} was already passed through amp.initialize; "
                "call initialize once, on the fp32 model as built"
            )
    for opt in opt_list:
        _check_optimizer(opt)
    if master_weights is not None and opt_level != "O2":
        raise ValueError(f"master_weights applies to opt_level='O2' only, not {opt_level!r}")
    if not (isinstance(num_losses, int) and num_losses >= 1):
        raise ValueError(f"num_losses must be a positive integer, got {num_losses!r}")
    scale = _DEFAULT_SCALE[opt_level] if loss_scale is None else loss_scale
    dynamic = scale == "dynamic"
    if not dynamic and (isinstance(scale, (str, bool)) or not isinstance(scale, (int, float))):
        raise ValueError(f"loss_scale must be 'dynamic' or a number, got {loss_scale!r}")
    scaler_args = {
        "init_loss_scaling": min(max_loss_scale, 2.0**16) if dynamic else float(scale),
        "incr_every_n_steps": 2000,  # apex's scale_window
        "use_dynamic_loss_scaling": dynamic,
        "min_loss_scaling": 1.0 if min_loss_scale is None else min_loss_scale,
        "max_loss_scaling": max_loss_scale,
    }
    scalers = [GradScaler(**scaler_args) for _ in range(num_losses)]  # validates the numbers
    out_dtype = float32 if cast_model_outputs is None and opt_level == "O2" else cast_model_outputs
    out_dtype = None if out_dtype is None else convert_dtype(out_dtype)
    use_master = opt_level == "O2" and master_weights is not False

    if enabled and opt_level == "O2":  # decorate checks everything before changing anything
        if opt_list:
            model_list, opt_list = decorate(
                model_list, opt_list, level="O2", master_weight=use_master
            )
        else:
            model_list = decorate(model_list, level="O2", master_weight=use_master)
    # Everything is checked (a refusal above left the previous initialize in force): from
    # here on, change things.
    _amp_state.reset()
    if enabled and opt_level in ("O1", "O2"):
        for model in model_list:
            _patch_forward(model, opt_level, out_dtype)
    _amp_state.initialized = True
    _amp_state.enabled = bool(enabled)
    if enabled:
        _amp_state.opt_level = opt_level
        _amp_state.verbosity = int(verbosity)
        _amp_state.scalers = scalers
        _amp_state.static_unskipped = [0] * len(scalers)
        _amp_state.master_weights = use_master
    return _mirror(model_list, models_single, opt_list, opts_single, optimizers is None)


@contextlib.contextmanager
def scale_loss(loss: Tensor, optimizers, loss_id: int = 0, model=None, delay_unscale=False):
    """Yield ``loss * scale``; on exit unscale the new grads, flag overflow, update the scale.

    After the block every parameter's ``.grad`` is unscaled (grads accumulated before the
    block are kept and added), and each optimizer's next ``step()`` skips if any of them
    overflowed. Pass every optimizer whose parameters this backward reaches.

    Args:
        loss: the loss Tensor.
        optimizers: an optimizer or a list of them.
        loss_id: which scaler (``initialize(num_losses=...)``).
        model: unused (apex's signature).
        delay_unscale: leave the grads scaled (accumulation micro-steps); a later
            ``scale_loss`` without it unscales everything. Do not ``step()`` in between.

    Raises:
        RuntimeError: ``initialize`` was not called.
    """
    if not _amp_state.initialized:
        raise RuntimeError(
            "amp.scale_loss() needs amp.initialize() first: "
            "model, optimizer = amp.initialize(model, optimizer, opt_level='O1')"
        )
    if not _amp_state.enabled:
        yield loss
        return
    n = len(_amp_state.scalers)
    if isinstance(loss_id, bool) or not isinstance(loss_id, int) or not 0 <= loss_id < n:
        raise ValueError(f"loss_id={loss_id!r}, but initialize(num_losses={n}) made ids 0..{n - 1}")
    opts = list({id(o): o for o in _as_list(optimizers)[0]}.values())  # each one once
    if not opts:
        raise ValueError("scale_loss(loss, optimizers) needs the optimizer(s) this loss trains")
    for opt in opts:
        _check_optimizer(opt)
    scaler = _amp_state.scalers[loss_id]
    if (
        not scaler.is_use_dynamic_loss_scaling()
        and scaler.get_init_loss_scaling() == 1.0
        and not _amp_state.master_weights
    ):  # apex's short cut: nothing to scale, nothing to check
        yield loss if loss.dtype == float32 else loss.astype(float32)
        return
    stashes = []
    if not delay_unscale:  # apex's "grad copy elision": backward writes fresh grads
        stashes = [stash_grads(o) for o in opts if id(o) not in _amp_state.holding_scaled_grads]
    try:
        yield scaler.scale(loss)
    except BaseException:
        for stash in stashes:
            restore(stash)
        raise
    if delay_unscale:
        _amp_state.holding_scaled_grads.update(id(o) for o in opts)
        return
    for opt in opts:
        scaler.unscale_(opt)  # only the fresh grads: the stashed ones are unscaled already
    found_inf = scaler._recorded_found_inf()
    scaler.update()  # apex updates at exit; also resets the scaler's state machine
    if not scaler.is_use_dynamic_loss_scaling():  # apex counts a fixed scale's steps too
        _amp_state.static_unskipped[loss_id] += 1
    if _amp_state.verbosity and bool(found_inf[0]):  # a host read, only when asked for
        print(
            f"Gradient overflow.  Skipping step, loss scaler {loss_id} reducing loss scale to "
            f"{scaler.get_loss_scaling()}"
        )
    for stash in stashes:
        found_inf = merge(stash, found_inf)
    xp = _device.get_array_module(found_inf)
    for opt in opts:
        pending = opt._get_auxiliary_var("found_inf")  # an overflow of an earlier micro-step
        # (a copy: the scaler's flag is a buffer the next unscale clears)
        flag = found_inf.copy() if pending is None else xp.logical_or(pending, found_inf)
        opt._set_auxiliary_var("found_inf", flag)
        _amp_state.holding_scaled_grads.discard(id(opt))


def master_params(optimizer):
    """Yield the parameters whose grads to clip after ``scale_loss`` (apex's generator).

    apex clips its fp32 master grads; here the fp32 masters live inside the optimizer and
    read the parameters' own grads, which are unscaled on exit from ``scale_loss``. The
    clipping norm of float16 grads is computed in float32, so clipping these is exact.
    """
    _check_optimizer(optimizer)
    yield from optimizer._parameter_list


def state_dict() -> dict:
    """``{'loss_scaler0': {'loss_scale': float, 'unskipped': int}, ...}`` (host reads).

    ``unskipped`` is apex's: clean steps since the scale last moved for a dynamic scale;
    for a fixed one, every ``scale_loss`` exit so far (apex never resets that count).
    """
    _require_initialized("state_dict")
    return {
        f"loss_scaler{i}": {
            "loss_scale": s.get_loss_scaling(),
            "unskipped": _unskipped(i, s),
        }
        for i, s in enumerate(_amp_state.scalers)
    }


def _unskipped(i: int, scaler: GradScaler) -> int:
    if scaler.is_use_dynamic_loss_scaling():
        return scaler.state_dict()["incr_count"]
    return _amp_state.static_unskipped[i]


def load_state_dict(state_dict: dict) -> None:
    """Restore :func:`state_dict`'s output; checked completely before anything changes.

    Raises:
        RuntimeError: keys other than ``loss_scaler<i>``.
        ValueError: an entry without a positive ``loss_scale`` or a valid ``unskipped`` (an
            integer >= 0, and under the window 2000 for a dynamic scale: a fixed scale's
            count grows without bound, as in apex).
    """
    _require_initialized("load_state_dict")
    if not _amp_state.enabled:
        return
    unexpected = [k for k in state_dict if not re.fullmatch(r"loss_scaler\d+", str(k))]
    if unexpected:
        raise RuntimeError(
            "Error(s) in loading state_dict. Unexpected key(s) in state_dict: "
            + ", ".join(f'"{k}"' for k in unexpected)
            + ". Nothing was loaded."
        )
    scalers = _amp_state.scalers
    if len(state_dict) != len(scalers):
        warnings.warn(
            f"state_dict contains {len(state_dict)} loss scalers, while {len(scalers)} "
            "are used; entries beyond num_losses are skipped",
            stacklevel=2,
        )
    loads, static_counts = [], {}
    for key, entry in state_dict.items():
        index = int(key[len("loss_scaler") :])
        if index >= len(scalers):
            continue
        scaler = scalers[index]
        try:
            scale, unskipped = entry["loss_scale"], entry["unskipped"]
        except (TypeError, KeyError) as exc:
            raise ValueError(f"{key!r} must be {{'loss_scale': float, 'unskipped': int}}") from exc
        dynamic = scaler.is_use_dynamic_loss_scaling()
        limit = scaler.get_incr_every_n_steps() if dynamic else float("inf")
        ok_count = isinstance(unskipped, (int, np.integer)) and not isinstance(unskipped, bool)
        if not (ok_count and 0 <= unskipped < limit):
            within = f"[0, {limit})" if dynamic else ">= 0"
            raise ValueError(f"{key!r}: 'unskipped' must be an integer {within}")
        sd = scaler.state_dict()
        # a fixed scale's count is the facade's: the scaler's incr_count stays 0
        count = int(unskipped) if dynamic else 0
        sd.update(scale=np.array([scale], dtype=np.float64), incr_count=count)
        _check_scale_value(key, scale)
        if scaler.is_enable():  # checked as its own load_state_dict checks
            loads.append(scaler._prepare_load(sd))
        if not dynamic:
            static_counts[index] = int(unskipped)
    for commit in loads:  # every scaler checked: load them all
        commit()
    for index, count in static_counts.items():
        _amp_state.static_unskipped[index] = count


# ---- helpers ------------------------------------------------------------------------------
def _check_scale_value(key: str, scale) -> None:
    ok = isinstance(scale, (int, float, np.floating)) and not isinstance(scale, bool)
    if not (ok and 0 < scale < float("inf")):
        raise ValueError(f"{key!r}: 'loss_scale' must be a positive finite number, got {scale!r}")


def _require_initialized(what: str) -> None:
    if not _amp_state.initialized:
        raise RuntimeError(f"amp.{what}() needs amp.initialize() to have been called first")


def _check_optimizer(opt) -> None:
    if not all(hasattr(opt, a) for a in ("_parameter_list", "_set_auxiliary_var")):
        raise TypeError(
            f"amp needs minitorch_amp optimizers (SGD, Momentum, Adam, ...), got "
            f"{type(opt).__name__}"
        )


def _as_list(value):
    """``(list, was_single)``; None gives ``([], True)``."""
    if value is None:
        return [], True
    if isinstance(value, (list, tuple)):
        return list(value), False
    return [value], True


def _mirror(models, models_single, opts, opts_single, no_opts):
    models_out = models[0] if models_single else models
    if no_opts:
        return models_out
    return models_out, (opts[0] if opts_single else opts)
