"""Training-level properties of the dynamic loss scale, over a stream of batches.

:func:`check_loss_scale_stream` trains a fresh copy of a model on a list of batches with
``GradScaler`` and checks, at every step:

* a step whose unscaled gradients hold inf/NaN (found independently of the scaler, by
  reading the gradients after ``unscale_``) leaves every parameter bit-identical, and the
  optimizer's state too (``state_dict()``: O2's float32 master weights, the moments);
* no more than ``max_skip_streak`` steps in a row are skipped;
* after ``update()`` the loss scale lies in ``scale_band`` (inclusive).

With ``dtype='float8'`` the copy trains under ``auto_cast(level, dtype='bfloat16')`` and
``amp.fp8_autocast(recipe=fp8_recipe)``, its delayed-scaling history carried from batch to
batch as in training, and needs no loss scaler: the default is ``GradScaler(enable=False)``,
bfloat16's range holds the gradients and FP8's casts saturate. A step whose gradients hold
inf/NaN with no enabled scaler to skip it is then the failure (it would write them into the
parameters); ``scaler=lambda: GradScaler(use_dynamic_loss_scaling=False)`` skips them.

It raises :class:`LossScaleError` (an ``AssertionError``) naming the step and the rule, and
returns the :class:`ScaleHistory` otherwise. ``assert_loss_scale_healthy``
(:mod:`~minitorch_amp.testing.model_search`) runs it over a Hypothesis strategy of streams.

Example:
    >>> import minitorch_amp as mt
    >>> from minitorch_amp import nn
    >>> model = nn.Linear(4, 2)
    >>> batches = [mt.full([3, 4], v) for v in (1.0, 1e5, 1e5, 1.0)]
    >>> history = check_loss_scale_stream(
    ...     model, batches, scaler=lambda: mt.amp.GradScaler(init_loss_scaling=1024.0),
    ...     max_skip_streak=2)
    >>> history.skipped, history.scales
    ([False, True, True, False], [1024.0, 512.0, 256.0, 256.0])
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..amp import GradScaler, auto_cast, decorate
from ..amp.fp8 import fp8_autocast
from ..nn import Layer
from ..optimizer import SGD
from .assertions import assert_bit_equal
from .model_properties import _as_inputs, _checked, _checked_recipe, _first_tensor

__all__ = ["LossScaleError", "ScaleHistory", "check_loss_scale_stream"]


@dataclass
class ScaleHistory:
    """Per step: whether it was skipped and the loss scale after ``update()``."""

    skipped: list[bool] = field(default_factory=list)
    scales: list[float] = field(default_factory=list)

    def longest_skip_streak(self) -> int:
        """The most steps in a row that were skipped."""
        longest = run = 0
        for skipped in self.skipped:
            run = run + 1 if skipped else 0
            longest = max(longest, run)
        return longest


class LossScaleError(AssertionError):
    """A stream of batches broke a loss-scale property; ``step`` (0-based) and ``history``
    say where, ``batches`` is the stream."""

    def __init__(self, message: str, step: int, history: ScaleHistory, batches=()):
        super().__init__(
            f"step {step}: {message}\n  skipped: {history.skipped}\n  scales:  {history.scales}"
        )
        self.step = step
        self.history = history
        self.batches = list(batches)


def _finite_grads(params) -> bool:
    for p in params:
        if p.grad is not None:
            with np.errstate(all="ignore"):
                if not np.isfinite(p.grad.numpy().astype(np.float32)).all():
                    return False
    return True


def _optimizer_state(opt) -> dict:
    """``opt.state_dict()`` flattened to ``{key: value}``: each Tensor a NumPy copy (the
    accumulators; each master weight under ``'master_weights/<name>'``), the rest as given."""
    flat = {}

    def walk(prefix: str, value) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(f"{prefix}{key}/", item)
        else:
            flat[prefix[:-1]] = value.numpy() if hasattr(value, "numpy") else value

    walk("", opt.state_dict())
    return flat


def _state_change(before: dict, after: dict) -> str | None:
    """What a skipped step changed in the optimizer's state (None: nothing)."""
    if before.keys() != after.keys():
        return f"its entries went from {sorted(before)} to {sorted(after)}"
    for key, old in before.items():
        if not isinstance(old, np.ndarray):
            if after[key] != old:
                return f"{key!r}: {old!r} became {after[key]!r}"
            continue
        try:
            assert_bit_equal(after[key], old)
        except AssertionError as err:
            return f"{key!r}: {err}"
    return None


def check_loss_scale_stream(
    model: Layer,
    batches,
    *,
    optimizer: Callable | None = None,
    scaler: Callable | None = None,
    loss_fn: Callable | None = None,
    level: str = "O1",
    dtype: str = "float16",
    max_skip_streak: int | None = None,
    scale_band: tuple[float, float] | None = None,
    fp8_recipe=None,
) -> ScaleHistory:
    """Train a copy of ``model`` on ``batches`` with AMP and a ``GradScaler``; check the rules.

    Args:
        model: an ``nn.Layer``; a deep copy is trained (decorated for O2), never ``model``.
        batches: a list of examples: a Tensor, or a tuple whose first item is the model's
            input and whose rest go to ``loss_fn(output, *rest)``.
        optimizer: ``optimizer(parameters) -> Optimizer``; default SGD with learning rate 0.01.
        scaler: ``scaler() -> GradScaler``; default ``GradScaler()`` (scale 2**15), under
            ``'float8'`` ``GradScaler(enable=False)``.
        loss_fn: default the output's mean.
        level, dtype: as ``auto_cast`` takes them, or ``dtype='float8'``.
        max_skip_streak: the most skipped steps allowed in a row (None: any).
        scale_band: ``(low, high)``: the scale after every update stays in it (None: any).
        fp8_recipe: with ``dtype='float8'``: the recipe (default ``DelayedScaling()``).

    Raises:
        LossScaleError: a skipped step changed a parameter or the optimizer's state (its
            ``state_dict()``: master weights, moments), or a rule broke.
    """
    level, dtype = _checked(level, dtype)
    recipe = _checked_recipe(dtype, fp8_recipe)
    if recipe is not None:
        dtype, scaler = "bfloat16", scaler or (lambda: GradScaler(enable=False))
    if not isinstance(model, Layer):
        raise TypeError(f"model must be an nn.Layer, got {type(model).__name__}")
    if not isinstance(batches, (list, tuple)):
        raise TypeError(
            f"batches must be a list of examples, got {type(batches).__name__}; to draw "
            "streams use hypothesis.strategies.lists(...) with assert_loss_scale_healthy"
        )
    net = copy.deepcopy(model)
    opt = (optimizer or (lambda params: SGD(learning_rate=0.01, parameters=params)))(
        net.parameters()
    )
    if level == "O2":
        net, opt = decorate(models=net, optimizers=opt, level="O2", dtype=dtype)
    sc = (scaler or GradScaler)()
    params = net.parameters()
    history = ScaleHistory()
    streak = 0
    for step, batch in enumerate(batches):
        x, *rest = batch if isinstance(batch, (tuple, list)) else (batch,)
        with auto_cast(level=level, dtype=dtype), fp8_autocast(recipe is not None, recipe):
            out = net(*_as_inputs(x))
            loss = loss_fn(out, *rest) if loss_fn else _first_tensor(out).mean()
        sc.scale(loss).backward()
        sc.unscale_(opt)
        skipped = not _finite_grads(params)
        before = [p.numpy() for p in params]
        state = _optimizer_state(opt) if skipped else None
        sc.step(opt)
        sc.update()
        opt.clear_grad()
        history.skipped.append(skipped)
        history.scales.append(float(sc.get_loss_scaling()))
        if skipped and not sc.is_enabled():
            raise LossScaleError(
                "the gradients hold inf/NaN and no enabled GradScaler skipped the step: the "
                "optimizer wrote them into the parameters (GradScaler() is off for bfloat16 "
                "and float8; scaler=lambda: amp.GradScaler(use_dynamic_loss_scaling=False) "
                "skips such steps)",
                step,
                history,
                batches,
            )
        if skipped:
            for p, old in zip(params, before):
                try:
                    assert_bit_equal(p.numpy(), old)
                except AssertionError as err:
                    raise LossScaleError(
                        f"a skipped step changed parameter {p.name}: {err}", step, history, batches
                    ) from None
            changed = _state_change(state, _optimizer_state(opt))
            if changed is not None:
                raise LossScaleError(
                    f"a skipped step changed the optimizer's state (a master weight, a "
                    f"moment): {changed}",
                    step,
                    history,
                    batches,
                )
        streak = streak + 1 if skipped else 0
        if max_skip_streak is not None and streak > max_skip_streak:
            raise LossScaleError(
                f"{streak} steps in a row were skipped (at most {max_skip_streak} allowed)",
                step,
                history,
                batches,
            )
        if scale_band is not None and not scale_band[0] <= history.scales[-1] <= scale_band[1]:
            raise LossScaleError(
                f"the loss scale {history.scales[-1]:g} left the band "
                f"[{scale_band[0]:g}, {scale_band[1]:g}]",
                step,
                history,
                batches,
            )
    return history
