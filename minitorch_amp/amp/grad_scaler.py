"""``GradScaler``: dynamic loss scaling, Paddle's ``paddle.amp.GradScaler`` (dygraph).

float16 gradients underflow: values below 2**-24 become 0. Loss scaling multiplies the loss
by ``S`` before backward, so every gradient is ``S`` times larger and stays representable,
then divides the gradients by ``S`` before the optimizer uses them. ``S`` is chosen
dynamically: when the gradients overflow (inf/nan) the step is skipped and ``S`` shrinks;
after ``incr_every_n_steps`` clean steps in a row ``S`` grows again.

One iteration, and where each piece runs::

    scaled = scaler.scale(loss)     # loss * S, recorded: backward gives S * grad
    scaled.backward()
    scaler.step(opt)                # unscale_: g *= 1/S, found_inf = any(!isfinite(g)) (device)
                                    # opt.step() skips everything when found_inf (device)
    scaler.update()                 # S, counters <- the dynamic rule (device)

Nothing above reads a device value on the host or uploads one, and nothing is allocated per
step: the scale, its inverse, the counters and each optimizer's found_inf are persistent
device buffers, so a whole AMP step can be captured as a CUDA graph and replayed.
:meth:`GradScaler.get_loss_scaling` and :meth:`GradScaler.state_dict` read the device, when
asked. The per-optimizer state machine ``INIT -> UNSCALED -> STEPPED -> (update) INIT``
catches misordered calls with Paddle's messages.
"""

from __future__ import annotations

import enum
import functools
import operator
import warnings

import numpy as np

from ..autograd.dispatch import apply, hooks
from ..autograd.tensor import Tensor
from ..backend import device as _device
from ..backend import sync as _sync
from ..backend.loss_scaling import by_dtype, inverse_scale, unscale_and_check
from ..backend.scale_update import update_loss_scaling
from .bf16 import disable_for_bfloat16
from .found_inf import reduce_found_inf, run_skipping
from .scaled_loss import ScaleLoss, check_scale_input
from .scaler_args import _NO_CLOSURE, _NO_NEW_SCALE, parse_scaler_args
from .scaler_rules import check_attr
from .scaler_settings import ScalerSettings

__all__ = ["AmpScaler", "GradScaler", "OptimizerState"]


class OptimizerState(enum.Enum):
    INIT = 0
    UNSCALED = 1
    STEPPED = 2


# Beyond Paddle: warn once when the scale sits at its floor and the gradients still overflow.
# The count lives on the device. Every _FLOOR_CHECK_EVERY updates it is handed to the deferred
# checks (backend.sync.defer): it is read at the user's next host read (a loss.item()), which
# waits for the device anyway, never by a synchronisation of its own. A NumPy count is on the
# host already: it is checked at every update, so the warning comes at the 100th.
_FLOOR_WARN_AFTER = 100  # consecutive overflowing updates at the floor
_FLOOR_CHECK_EVERY = 100


class AmpScaler(ScalerSettings):
    """Scale the loss, unscale and check the gradients, skip bad steps, adapt the scale.

    Paddle's older class (``paddle.amp.AmpScaler``: defaults ``init_loss_scaling=2**15``,
    ``incr_every_n_steps=1000``, Paddle's arguments only). :class:`GradScaler` is the same
    scaler with PyTorch's defaults (2**16, 2000) that also takes PyTorch's argument forms.

    The dynamic rule (:func:`~minitorch_amp.backend.scale_update.update_loss_scaling`)::

        overflow: good = 0; bad += 1; if bad == decr_every_n_nan_or_inf:
                      scale = min(scale, max(scale * decr_ratio, min_loss_scaling))
                      bad = 0
        clean:    bad = 0; good += 1; if good == incr_every_n_steps:
                      scale *= incr_ratio (if finite); good = 0

    Args:
        enable: False makes every method a pass-through (``scale`` returns the loss,
            ``step`` calls ``optimizer.step()``).
        init_loss_scaling: the initial scale.
        incr_ratio: growth factor (> 1). decr_ratio: backoff factor (in (0, 1)).
        incr_every_n_steps: clean steps in a row before growing.
        decr_every_n_nan_or_inf: overflowing steps *in a row* before shrinking.
        use_dynamic_loss_scaling: False keeps the scale fixed (overflowing steps still skip).
        min_loss_scaling: an overflow never shrinks the scale below this (beyond Paddle);
            a scale set below it (a PyTorch checkpoint at 2**-7) holds on overflow.
        max_loss_scaling: the scale never grows above this (beyond Paddle; apex's 2**24).
        verbose: print Paddle's "Found inf or nan" message when the scale shrinks (a host
            read per update, hence off by default; the sync debug mode reports it).

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn, optimizer
        >>> from minitorch_amp.amp import GradScaler
        >>> model = nn.Linear(2, 1)
        >>> opt = optimizer.SGD(learning_rate=0.1, parameters=model.parameters())
        >>> scaler = GradScaler(init_loss_scaling=1024.0, incr_every_n_steps=2)
        >>> for _ in range(2):
        ...     loss = model(mt.ones([4, 2])).mean()
        ...     scaler.scale(loss).backward()  # grads are 1024x too large
        ...     scaler.step(opt)  # unscale, check, step (skipped on inf/nan)
        ...     scaler.update()  # two clean steps in a row: grow
        ...     opt.clear_grad()
        >>> scaler.get_loss_scaling()
        2048.0
    """

    def __init__(
        self,
        enable: bool = True,
        init_loss_scaling: float = 2.0**15,
        incr_ratio: float = 2.0,
        decr_ratio: float = 0.5,
        incr_every_n_steps: int = 1000,
        decr_every_n_nan_or_inf: int = 1,
        use_dynamic_loss_scaling: bool = True,
        *,
        min_loss_scaling: float = 1.0,
        max_loss_scaling: float = float("inf"),
        verbose: bool = False,
    ):
        flags = dict(enable=enable, use_dynamic_loss_scaling=use_dynamic_loss_scaling)
        for name, value in (*flags.items(), ("verbose", verbose)):
            if not isinstance(value, (bool, np.bool_)):  # GradScaler("cuda") is no enable
                raise TypeError(
                    f"{type(self).__name__}: {name} must be True or False, got {value!r}"
                )
        self._enable = bool(enable)
        self._verbose = bool(verbose)
        self._incr_ratio = check_attr("incr_ratio", incr_ratio)
        self._decr_ratio = check_attr("decr_ratio", decr_ratio)
        self._incr_every_n_steps = check_attr("incr_every_n_steps", incr_every_n_steps)
        self._decr_every_n_nan_or_inf = check_attr(
            "decr_every_n_nan_or_inf", decr_every_n_nan_or_inf
        )
        self._min_loss_scaling = check_attr("min_loss_scaling", min_loss_scaling)
        self._max_loss_scaling = check_attr("max_loss_scaling", max_loss_scaling)
        if self._max_loss_scaling < self._min_loss_scaling:
            raise ValueError(f"max_loss_scaling {max_loss_scaling} < min {min_loss_scaling}")
        self._optimizer_states: dict[int, dict] = {}
        if not self._enable:  # as Paddle: no scale tensor, scale 1, static
            self._use_dynamic_loss_scaling, self._init_loss_scaling, self._scale = False, 1.0, None
            return
        self._use_dynamic_loss_scaling = bool(use_dynamic_loss_scaling)
        self._init_loss_scaling = self._checked_scale(init_loss_scaling)
        self._scale = Tensor._wrap(np.array([self._init_loss_scaling], "float32"))
        # Device counters, int32 [1] views of one array: Paddle's incr_count and decr_count,
        # and the overflowing updates at the floor.
        self._counters = np.zeros(3, "int32")
        self._inv_scale = None  # float32 [1], 1 / scale, recomputed on the device per unscale
        self._found_infs: dict[int, object] = {}  # id(optimizer) -> its bool [1] device flag
        self._follow(_device.current_place(), force=True)
        self._n_updates = 0
        self._floor_warned = False

    # ---- the training step --------------------------------------------------------------
    def scale(self, var):
        """``var * scale`` as a recorded op (float32 for a float16 loss), or ``var`` if disabled.

        ``var`` may also be a list or tuple of tensors, nested (Paddle 3.x, PyTorch): each
        tensor is scaled and the same structure returned.
        """
        check_scale_input(var, "var")  # the whole structure, before anything is scaled
        if self._enable and self._use_dynamic_loss_scaling:
            disable_for_bfloat16(self)  # Paddle: dynamic scaling is off for bfloat16
        if not self._enable:
            return var
        if not isinstance(var, Tensor):
            items = [self.scale(v) for v in var]
            return type(var)(*items) if hasattr(var, "_fields") else type(var)(items)
        self._follow(var.place)
        # a 0-d factor (the loss keeps its shape), copied: a later update() cannot change
        # what backward multiplies by (scaled_loss.py)
        return apply(ScaleLoss, var, self._scale)

    def unscale_(self, optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale in place and record found_inf.

        Call it before touching the gradients (clipping, logging); ``step`` then knows they
        are unscaled. At most once per optimizer between two ``update()`` calls.

        Raises:
            RuntimeError: already unscaled or stepped since the last ``update()``.
        """
        if not self._enable:
            return
        params = getattr(optimizer, "_parameter_list", None)
        if params is None:
            raise TypeError(f"GradScaler needs a minitorch_amp optimizer, not {type(optimizer)}")
        entry = self._entry(optimizer)
        if entry["state"] is OptimizerState.UNSCALED:
            raise RuntimeError(
                "unscale_() has already been called on this optimizer since the last update()."
            )
        if entry["state"] is OptimizerState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        buckets = by_dtype([g._data for g in map(_GRAD, params) if g is not None])
        found_inf = self._found_infs.get(id(optimizer))
        if found_inf is None:
            xp = _device.get_array_module(self._scale._data)
            found_inf = self._found_infs[id(optimizer)] = xp.zeros(1, dtype=bool)
        # 1/S and found_inf = False, on the device, in one launch
        inverse_scale(self._scale._data, self._inv_scale, clear=found_inf)
        for grads in buckets.values():
            unscale_and_check(grads, self._inv_scale, found_inf)
            for count in hooks.counters:  # operator statistics, when collected
                count("check_finite_and_unscale", grads[0].dtype)
        # Distributed: OR-ed over the ranks, which may hold different gradients (one rank's
        # inf, or sharded grads), so that every rank skips the same steps, keeps the same scale.
        reduce_found_inf(found_inf)
        entry["state"] = OptimizerState.UNSCALED
        entry["found_inf"] = found_inf

    def step(self, optimizer, *args, **kwargs):
        """Unscale (unless ``unscale_`` ran), then ``optimizer.step()``, which skips on inf/nan.

        Raises:
            TypeError: anything after the optimizer (PyTorch's ``step(opt, closure)``);
                nothing is unscaled or stepped.
            RuntimeError: ``step`` was already called for this optimizer since ``update()``.
        """
        if args or kwargs:
            raise TypeError(_NO_CLOSURE)
        if not self._enable:
            return optimizer.step()
        entry = self._unscaled_entry(optimizer, "step() has already been called")
        result = run_skipping(optimizer, entry["found_inf"], "step", (), {}, skipped=None)
        entry["state"] = OptimizerState.STEPPED
        if not self._use_dynamic_loss_scaling:  # a static scale: update() is optional
            # Paddle resets every optimizer here, which would unscale an optimizer that
            # unscale_() already handled a second time; we reset only this one.
            del self._optimizer_states[id(optimizer)]
        return result

    def minimize(self, optimizer, *args, **kwargs):
        """``step`` through ``optimizer.minimize(*args, **kwargs)``, then ``update``.

        Returns what ``optimizer.minimize`` returns (``(None, None)`` for a skipped step of an
        optimizer that cannot skip by itself).
        """
        if not self._enable:
            return optimizer.minimize(*args, **kwargs)
        entry = self._unscaled_entry(optimizer, "minimize() is being called after step()")
        found_inf = entry["found_inf"]
        result = run_skipping(optimizer, found_inf, "minimize", args, kwargs, skipped=(None, None))
        entry["state"] = OptimizerState.STEPPED
        if self._use_dynamic_loss_scaling:
            self._update_scale()
        self._optimizer_states = {}
        return result

    def update(self, new_scale=None) -> None:
        """Move the scale one step along the dynamic rule; reset every optimizer to INIT.

        Uses found_inf OR-ed over every optimizer unscaled since the last update (Paddle uses
        the last stepped optimizer's only). Runs on the device; no host read.

        Raises:
            TypeError: ``new_scale`` given (PyTorch's ``update(new_scale)``): Paddle's
                ``update()`` takes none; ``set_init_loss_scaling`` sets the scale.
            RuntimeError: dynamic scaling and no optimizer was unscaled or stepped.
        """
        if new_scale is not None:
            raise TypeError(f"GradScaler.update() got {new_scale!r}; {_NO_NEW_SCALE}")
        if not self._enable:
            return
        if self._use_dynamic_loss_scaling:
            self._update_scale()
        self._optimizer_states = {}

    def _update_scale(self) -> None:
        found_inf = self._recorded_found_inf()
        if found_inf is None:
            raise RuntimeError(
                "update() was called but no optimizer was unscaled or stepped since the last "
                "update(); the expected order is scaler.scale(loss).backward(), "
                "scaler.step(optimizer), scaler.update()."
            )
        scale, good, bad, at_floor = self._scale._data, *self._counter_views()
        if self._verbose:  # host reads, only when asked for (Paddle always prints)
            _sync.host_read("GradScaler(verbose=True).update()")
            if bool(found_inf[0]) and int(bad[0]) + 1 == self._decr_every_n_nan_or_inf:
                s = float(scale[0])
                print(
                    f"Found inf or nan, current scale is: {s}, decrease to: {s}*{self._decr_ratio}"
                )
        # Beyond Paddle: the same launch counts overflowing updates at the floor (warned once).
        update_loss_scaling(
            found_inf,
            scale,
            good,
            bad,
            at_floor,
            incr_every_n_steps=self._incr_every_n_steps,
            decr_every_n_nan_or_inf=self._decr_every_n_nan_or_inf,
            incr_ratio=self._incr_ratio,
            decr_ratio=self._decr_ratio,
            min_loss_scaling=self._min_loss_scaling,
            max_loss_scaling=self._max_loss_scaling,
        )
        self._n_updates += 1
        on_host = isinstance(at_floor, np.ndarray)
        if not self._floor_warned and (on_host or self._n_updates % _FLOOR_CHECK_EVERY == 0):
            _sync.defer(("GradScaler floor", id(self)), at_floor, self._warn_at_floor)

    def _warn_at_floor(self, at_floor) -> None:
        """The deferred floor check: ``at_floor`` is the host copy of the counter."""
        count = int(at_floor[0])
        if count < _FLOOR_WARN_AFTER or self._floor_warned:
            return
        self._floor_warned = True
        warnings.warn(
            f"GradScaler: the loss scale has sat at its floor min_loss_scaling="
            f"{self._min_loss_scaling} for {count} updates in a row and the "
            "gradients still overflow, so every one of those steps was skipped. Something "
            "in the forward pass produces inf/nan even without scaling: run it in float32 "
            "to find it, or keep the offending ops in float32 with "
            "auto_cast(custom_black_list=...). (This warning is shown once.)",
            RuntimeWarning,
            stacklevel=4,
        )

    # ---- bookkeeping ----------------------------------------------------------------------
    def _entry(self, optimizer) -> dict:
        return self._optimizer_states.setdefault(
            id(optimizer), {"state": OptimizerState.INIT, "found_inf": None}
        )

    def _unscaled_entry(self, optimizer, stepped_message: str) -> dict:
        """The optimizer's entry after unscaling it if needed; refuse a second step."""
        entry = self._entry(optimizer)
        if entry["state"] is OptimizerState.STEPPED:
            raise RuntimeError(f"{stepped_message} since the last update().")
        if entry["state"] is OptimizerState.INIT:
            self.unscale_(optimizer)
        return entry

    def _recorded_found_inf(self):
        """found_inf OR-ed over the optimizers unscaled since the last update, or None."""
        flags = [e["found_inf"] for e in self._optimizer_states.values()]
        flags = [f for f in flags if f is not None]
        if not flags:
            return None
        return functools.reduce(_device.get_array_module(flags[0]).logical_or, flags[1:], flags[0])

    def _counter_views(self):
        """(good_steps, bad_steps, overflows_at_floor): int32 [1] views of the counters."""
        return self._counters[0:1], self._counters[1:2], self._counters[2:3]

    def _follow(self, place, force: bool = False) -> None:
        """Keep the scale and the counters on ``place`` (the loss's device)."""
        if force or self._scale.place != place:
            self._scale = Tensor._wrap(_device.to_place(self._scale._data, place))
            self._counters = _device.to_place(self._counters, place)
            self._inv_scale = _device.xp_for(place).zeros_like(self._scale._data)
            self._found_infs = {}


class GradScaler(AmpScaler):
    """Paddle's ``paddle.amp.GradScaler``, which also takes PyTorch's argument forms.

    Paddle's: ``GradScaler(enable=True, init_loss_scaling=2**16, incr_ratio=2.0,
    decr_ratio=0.5, incr_every_n_steps=2000, decr_every_n_nan_or_inf=1,
    use_dynamic_loss_scaling=True)``; PyTorch's: ``GradScaler(device='cuda', init_scale=2**16,
    growth_factor=2.0, backoff_factor=0.5, growth_interval=2000, enabled=True)``, with or
    without the device first; keywords under either name; ours (keyword-only):
    ``min_loss_scaling``, ``max_loss_scaling``, ``verbose``. The device is checked and not
    used: the scale follows the loss's device. How each form is told apart, and what is
    refused, is in :mod:`minitorch_amp.amp.scaler_args`. See :class:`AmpScaler` for the rest.

    Raises:
        TypeError: mixed-up forms: ``GradScaler(True, 2.0**16, enabled=False)`` (a value by
            position and by keyword), a device string as ``enable=``, too many positionals.
        ValueError: one setting under both names (``enable=True, enabled=False``), an
            unknown device, or a bad value (``incr_ratio`` <= 1, ...).

    Example:
        >>> from minitorch_amp import amp
        >>> scaler = amp.GradScaler("cuda", init_scale=1024.0, growth_interval=100)
        >>> scaler.get_scale(), scaler.get_incr_every_n_steps(), scaler.is_enabled()
        (1024.0, 100, True)
    """

    def __init__(self, *args, **kwargs):
        options = parse_scaler_args(type(self).__name__, args, kwargs)
        options.setdefault("init_loss_scaling", 2.0**16)
        options.setdefault("incr_every_n_steps", 2000)
        super().__init__(**options)


# ---- helpers ------------------------------------------------------------------------------
_GRAD = operator.attrgetter("_grad")  # the property: a stale (cleared) gradient reads as zeros
