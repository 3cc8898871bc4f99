"""Property tests of a whole model under AMP: finite forward and backward, close to float32.

Two properties, each as a check of one input (``check_*``, NumPy only) and as a Hypothesis
search over a strategy of inputs (``assert_*``) that fails with the shrunk counterexample:

* :func:`assert_finite_under_amp`: under ``auto_cast(level, dtype)`` the forward (and the
  backward, with or without a loss scale) produces no inf/NaN. A failure raises
  :class:`AmpNotFiniteError`, whose ``report`` names the first op that produced one
  (:class:`~minitorch_amp.testing.op_trace.OpRecord`: the op, forward or backward, the ranges
  it read, its output dtype) and the same op in a float32 run of the same weights.
* :func:`assert_close_to_fp32`: an AMP copy and a float32 copy with the same weights, compared
  layer by layer through forward post-hooks; :class:`AmpDivergenceError` names the first layer
  (in the order the layers finish) whose output is further from float32 than the bound.

The model you pass is never changed: the properties run deep copies (decorated for O2).
Models with dropout should be in ``eval()`` mode for the differential property.

``dtype='float8'`` runs the AMP copy under ``auto_cast(level, dtype='bfloat16')`` and
``amp.fp8_autocast(recipe=fp8_recipe)`` (default ``DelayedScaling()``): Linear, matmul and
Conv2D as FP8 GEMMs. Each example starts from fresh FP8 scaling state, as a model's first
step does: delayed scaling then casts unscaled (scale 1, so E4M3 saturates above 448),
current scaling scales each tensor by its own amax (it never saturates). FP8's casts
saturate instead of overflowing; the finiteness property counts a saturation as the failure,
naming the ``cast_to_fp8`` whose plain conversion overflowed and the GEMM operand it was.

Example:
    >>> import numpy as np
    >>> import minitorch_amp as mt
    >>> from minitorch_amp import nn
    >>> layer = nn.Linear(4, 3)
    >>> layer.weight.set_value(np.ones((4, 3), "float32"))
    >>> try:
    ...     check_finite_under_amp(layer, mt.full([2, 4], 20000.0))
    ... except AmpNotFiniteError as err:
    ...     print(err.report.op.op, err.report.fp32.output)
    linear fp32[2, 3] in [8e+04, 8e+04]
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..amp import auto_cast, decorate
from ..amp.fp8 import fp8_autocast
from ..autograd.tensor import Tensor
from ..nn import Layer
from .op_trace import OpRecord, OpTrace, describe

__all__ = [
    "AmpDivergenceError",
    "AmpNotFiniteError",
    "NotFiniteReport",
    "check_close_to_fp32",
    "check_finite_under_amp",
]

LEVELS = ("O1", "O2", "OD")
DTYPES = ("float16", "bfloat16", "float8")
# Bound on max|amp - fp32| / max|fp32| of each layer's output: a few of the dtype's units
# of roundoff per layer, with room for the float32 accumulation order of a GEMM. float8: both
# GEMM inputs rounded to E4M3's 3 mantissa bits (2**-4 relative each), then to bfloat16.
DEFAULT_RTOL = {"float16": 1e-2, "bfloat16": 6e-2, "float8": 0.25}
_MANTISSA_BITS = {"float16": 10, "bfloat16": 7, "float8": 3, "float32": 23}


def _checked(level, dtype) -> tuple[str, str]:
    if not isinstance(level, str) or level.upper() not in LEVELS:
        raise ValueError(
            f"level must be one of {', '.join(LEVELS)} (as auto_cast takes it), got {level!r}"
        )
    if not isinstance(dtype, str) or dtype.lower() not in DTYPES:
        raise ValueError(
            f"dtype must be 'float16', 'bfloat16' or 'float8' (FP8 GEMMs under bfloat16 "
            f"AMP), got {dtype!r}"
        )
    return level.upper(), dtype.lower()


def _checked_recipe(dtype: str, recipe):
    """The FP8 recipe for ``dtype='float8'`` (default ``DelayedScaling()``), else None."""
    if dtype != "float8":
        if recipe is not None:
            raise ValueError(f"fp8_recipe= goes with dtype='float8', got dtype={dtype!r}")
        return None
    return fp8_autocast(recipe=recipe).recipe  # its TypeError names the two recipes


def _checked_scale(loss_scale) -> float | None:
    if loss_scale is None:
        return None
    if isinstance(loss_scale, bool) or not isinstance(loss_scale, (int, float, np.floating)):
        raise TypeError(f"loss_scale must be a number such as 2.0**15, or None; got {loss_scale!r}")
    if not (np.isfinite(loss_scale) and loss_scale > 0):
        raise ValueError(
            f"loss_scale must be positive and finite, such as 2.0**15; got {loss_scale}"
        )
    return float(loss_scale)


def _as_inputs(x) -> tuple:
    """An example as the model's positional inputs: a Tensor, an array, or a tuple of them."""
    items = x if isinstance(x, (tuple, list)) else (x,)
    out = []
    for item in items:
        if isinstance(item, np.ndarray):
            item = Tensor._wrap(item)
        if not isinstance(item, Tensor):
            raise TypeError(
                f"the inputs strategy drew a {type(item).__name__}; it must draw a Tensor, a "
                "NumPy array, or a tuple of them (one per positional argument of the model); "
                "see minitorch_amp.testing.model_strategies"
            )
        out.append(item)
    return tuple(out)


def _first_tensor(out) -> Tensor:
    if isinstance(out, Tensor):
        return out
    for item in out if isinstance(out, (tuple, list)) else ():
        if isinstance(item, Tensor):
            return item
    raise TypeError(f"the model returned {type(out).__name__}; pass loss_fn= to make a loss")


class ModelCopies:
    """The float32 copy and the AMP copy (decorated for O2) of ``model``, made once.

    ``model`` may also be a plain function of the inputs (a step function); it then runs as
    is in both runs (decorate its layers yourself for O2; its float32 run is the same function
    outside ``auto_cast``; the gradients its backward leaves are yours to clear; under FP8 its
    weights' scaling state carries from one example to the next).
    """

    def __init__(self, model, level: str, dtype: str, white=None, black=None, fp8_recipe=None):
        if not isinstance(model, Layer) and not callable(model):
            raise TypeError(f"model must be an nn.Layer or a function, got {type(model).__name__}")
        self.level, self.dtype = _checked(level, dtype)
        self.fp8 = _checked_recipe(self.dtype, fp8_recipe)
        self.amp_dtype = "bfloat16" if self.fp8 is not None else self.dtype
        self.lists = {"custom_white_list": white, "custom_black_list": black}
        if isinstance(model, Layer):
            self.fp32 = copy.deepcopy(model)
            self.amp = copy.deepcopy(model)
            if self.level == "O2":
                self.amp = decorate(models=self.amp, level="O2", dtype=self.amp_dtype)
        else:
            self.fp32 = self.amp = model

    def amp_model(self):
        """The AMP copy; under FP8 a fresh copy of it, so that every example starts from
        fresh scaling state (delayed scaling's history would carry one example into the
        next, and a search must see the same result for the same example)."""
        fresh = self.fp8 is not None and isinstance(self.amp, Layer)
        return copy.deepcopy(self.amp) if fresh else self.amp

    @contextlib.contextmanager
    def region(self, use_amp: bool):
        """``auto_cast`` for the AMP run (with ``fp8_autocast`` under FP8), off for float32."""
        fp8 = fp8_autocast(use_amp, self.fp8) if self.fp8 is not None else contextlib.nullcontext()
        with auto_cast(enable=use_amp, level=self.level, dtype=self.amp_dtype, **self.lists), fp8:
            yield

    def run(self, inputs: tuple, use_amp: bool, backward: bool, loss_scale, loss_fn):
        """One forward (and backward) of the AMP or the float32 copy; gradients are cleared."""
        model = self.amp_model() if use_amp else self.fp32
        with self.region(use_amp):
            out = model(*inputs)
            loss = (loss_fn or (lambda o: _first_tensor(o).mean()))(out) if backward else None
        if backward:
            if loss_scale is not None:  # as GradScaler.scale: times a float32 scale
                loss = loss * Tensor._wrap(np.array(loss_scale, dtype=np.float32))
            loss.backward()
            for p in model.parameters() if isinstance(model, Layer) else ():
                p.clear_grad()
        return out


@dataclass(frozen=True)
class NotFiniteReport:
    """Why an input failed :func:`check_finite_under_amp`.

    Attributes:
        op: the first op with an inf/NaN result under AMP (:class:`OpRecord`).
        fp32: the same op (name and application number) in the float32 run, or None where
            the float32 run has no such op (AMP's own casts, ``op.amp_cast``: numbered apart
            from the model's casts, never paired with one).
        example: the inputs, as NumPy arrays.
        level, dtype: the AMP settings.
        examples_run: how many inputs the search had run, this one included (0: a single check).
    """

    op: OpRecord
    fp32: OpRecord | None
    example: tuple
    level: str
    dtype: str
    examples_run: int = 0

    def __str__(self) -> str:
        inputs = "; ".join(describe(x) for x in self.example)
        if self.fp32 is None:
            fp32 = " no such op (a cast AMP inserted)"
        else:
            same = self.fp32.op == self.op.op  # else the plain op an FP8 one stands for
            name = "" if same else f" {self.fp32.op!r} #{self.fp32.occurrence}"
            fp32 = f"{name}\n{self.fp32.values()}"
        region = f"auto_cast(level={self.level!r}, dtype={self.dtype!r}), "
        if self.dtype == "float8":
            region = f"auto_cast(level={self.level!r}, dtype='bfloat16') with fp8_autocast,\n"
        return (
            f"under {region}the first inf/NaN came from\n{self.op}\nthe float32 run, "
            f"same op:{fp32}\nthe example: {inputs}"
        )


class AmpNotFiniteError(AssertionError):
    """An input for which the AMP run produced inf or NaN; ``report`` says where."""

    def __init__(self, report: NotFiniteReport):
        super().__init__(str(report))
        self.report = report


def check_finite_under_amp(
    model,
    x,
    *,
    level: str = "O1",
    dtype: str = "float16",
    backward: bool = False,
    loss_scale: float | None = None,
    loss_fn: Callable | None = None,
    custom_white_list=None,
    custom_black_list=None,
    fp8_recipe=None,
    copies: ModelCopies | None = None,
) -> None:
    """Run ``model(*x)`` under ``auto_cast`` (and, with ``backward``, the backward of
    ``loss_fn(output) * loss_scale``; default loss: the output's mean) and raise
    :class:`AmpNotFiniteError` if any op's result held inf or NaN.

    On failure the same inputs go once through a float32 copy, watched for the same op (for
    an FP8 op, the plain op it stands for: ``linear`` for ``fp8_linear``, and for a
    ``cast_to_fp8`` the GEMM it fed, whose inputs show what the cast read in float32); not
    for a cast AMP inserted (``report.op.amp_cast``), which float32 does not run.

    Raises:
        AmpNotFiniteError: the report names the first op, forward or backward.
        ValueError, TypeError: a bad level, dtype, model or input; they say what to pass.
    """
    loss_scale = _checked_scale(loss_scale)
    if copies is None:
        copies = ModelCopies(model, level, dtype, custom_white_list, custom_black_list, fp8_recipe)
    inputs = _as_inputs(x)
    with OpTrace() as trace:
        copies.run(inputs, True, backward, loss_scale, loss_fn)
    found = trace.first_bad
    if found is None:
        return
    fp32 = None  # a cast AMP inserted has no twin in the float32 run
    if not found.amp_cast:
        bad = found.twin()  # what float32 runs in its place (the plain GEMM of an FP8 op)
        with OpTrace(want=(bad.op, bad.occurrence, bad.slot)) as reference:
            copies.run(inputs, False, backward, loss_scale, loss_fn)
        fp32 = reference.wanted
    example = tuple(t.numpy() for t in inputs)
    raise AmpNotFiniteError(NotFiniteReport(found, fp32, example, copies.level, copies.dtype))


# ---- the differential property -------------------------------------------------------------
@dataclass(frozen=True)
class Divergence:
    """The first layer whose AMP output is further from float32 than allowed.

    ``error`` is ``max|amp - fp32| / max|fp32|`` over the layer's output (inf when the AMP
    output is not finite where float32's is); ``bound`` what was allowed.
    """

    layer: str
    error: float
    bound: float
    amp: str
    fp32: str
    layers_checked: tuple[str, ...]
    examples_run: int = 0

    def __str__(self) -> str:
        return (
            f"layer {self.layer!r} is the first to diverge from float32: relative error "
            f"{self.error:.3g} > bound {self.bound:.3g}\n  AMP:  {self.amp}\n  fp32: {self.fp32}"
            f"\n  layers in order: {', '.join(self.layers_checked)}"
        )


class AmpDivergenceError(AssertionError):
    """A layer's output under AMP is too far from float32; ``report`` is the
    :class:`Divergence`."""

    def __init__(self, report: Divergence):
        super().__init__(str(report))
        self.report = report


def _layer_outputs(model: Layer, inputs: tuple, region) -> list[tuple[str, str, np.ndarray]]:
    """``(label, layer name, output)`` for every layer's call, in the order they finish: the
    label ``name``, ``name#2`` for its second call, ``name[i]`` for its ``i``-th output."""
    seen: list[tuple[str, str, np.ndarray]] = []
    counts: dict[str, int] = {}

    def hook_for(name):
        def record(layer, args, out):
            n = counts[name] = counts.get(name, 0) + 1
            label = name if n == 1 else f"{name}#{n}"
            tensors = (
                [out]
                if isinstance(out, Tensor)
                else [o for o in out or () if isinstance(o, Tensor)]
            )
            for i, t in enumerate(tensors):
                shown = label if len(tensors) == 1 else f"{label}[{i}]"
                seen.append((shown, name, t.numpy()))

        return record

    names = [
        (name or type(model).__name__, layer)
        for name, layer in model.named_sublayers(include_self=True)
    ]
    handles = [layer.register_forward_post_hook(hook_for(name)) for name, layer in names]
    try:
        with region:
            model(*inputs)
    finally:
        for h in handles:
            h.remove()
    return seen


def _relative_error(a: np.ndarray, r: np.ndarray) -> float:
    """``max|a - r| / max|r|`` (``max|a - r|`` when ``r`` is all zeros); inf where one of the
    two is not finite and the other differs (an inf that float32 also has counts as equal)."""
    with np.errstate(all="ignore"):
        same = (a == r) | (np.isnan(a) & np.isnan(r))
        diff = np.where(same, 0.0, np.abs(a - r))
        if np.isnan(diff).any():
            return float("inf")
        worst = float(diff.max(initial=0.0))
        finite = np.abs(r[np.isfinite(r)])
        scale = float(finite.max(initial=0.0))
    return worst / scale if scale > 0 else worst


def _bound(dtype: str, rtol, ulps) -> float:
    """Allowed ``max|amp - fp32| / max|fp32|``: ``rtol``, or ``ulps`` units of ``dtype`` at
    the layer's largest value (``ulps * 2**-mantissa_bits`` relative, up to a factor 2)."""
    if ulps is not None:
        return float(ulps) * 2.0 ** -_MANTISSA_BITS[dtype]
    return DEFAULT_RTOL[dtype] if rtol is None else float(rtol)


def check_close_to_fp32(
    model: Layer,
    x,
    *,
    level: str = "O1",
    dtype: str = "float16",
    rtol: float | dict | None = None,
    ulps: float | None = None,
    custom_white_list=None,
    custom_black_list=None,
    fp8_recipe=None,
    copies: ModelCopies | None = None,
) -> None:
    """Compare every layer's output under AMP with the float32 copy's, in the order the
    layers finish, and raise :class:`AmpDivergenceError` at the first one off by more than
    ``rtol`` (relative to the layer's largest float32 value; a dict maps layer names to their
    own bound) or ``ulps`` units of ``dtype`` (float8: E4M3's). Default:
    ``DEFAULT_RTOL[dtype]``.
    """
    if not isinstance(model, Layer):
        raise TypeError(
            f"the differential property needs an nn.Layer (its sublayers are "
            f"compared), got {type(model).__name__}"
        )
    if copies is None:
        copies = ModelCopies(model, level, dtype, custom_white_list, custom_black_list, fp8_recipe)
    inputs = _as_inputs(x)
    amp = _layer_outputs(copies.amp_model(), inputs, copies.region(True))
    fp32 = _layer_outputs(copies.fp32, inputs, copies.region(False))
    names = tuple(label for label, _, _ in fp32)
    for (name, layer, a), (_, _, r) in zip(amp, fp32, strict=True):
        own = rtol.get(layer) if isinstance(rtol, dict) else rtol
        bound = _bound(copies.dtype, own, ulps)
        err = _relative_error(a.astype(np.float64), r.astype(np.float64))
        if not err <= bound:
            raise AmpDivergenceError(Divergence(name, err, bound, describe(a), describe(r), names))
