"""``fp8_autocast``: Linear and matmul run as FP8 GEMMs inside (Transformer Engine's
``te.fp8_autocast(enabled=True, fp8_recipe=...)``, spelled for this package's ``amp``).

It composes with ``auto_cast``: AMP still picks each op's dtype (bf16/fp16 at O1 and O2,
fp32 master weights with ``decorate``), and inside ``fp8_autocast`` the products of
``F.linear`` / ``nn.Linear``, ``matmul`` and ``@``, and ``F.conv2d`` / ``nn.Conv2D``
(through its im2col GEMM) are FP8 GEMMs whose results come back in that dtype. Everything
else is untouched.

Scaling state lives with the weight: each weight that enters an FP8 GEMM gets three
:class:`~minitorch_amp.amp.fp8.scaling.ScalingState` (its input, itself, its output
gradient), kept across regions while the weight lives and the recipe stays equal. A product
of two activations uses current scaling. Within one outermost region a weight is cast to
FP8 once, however many times it is used (the per-step weight cast, cached).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np

from ...autograd import Tensor, fp8_route
from ...autograd.dispatch import apply
from ...autograd.grad_mode import ReentrantContext
from ...backend.device import get_array_module
from ...backend.dtypes import bfloat16, float16, float32
from .conv import Fp8Conv2D, check_conv
from .gemm import Fp8Linear, Fp8Matmul, check_linear, quantize
from .recipe import DelayedScaling, Float8CurrentScaling
from .scaling import ScalingState, transposed_bytes

__all__ = ["fp8_autocast", "fp8_meta", "is_fp8_enabled"]

_FLOATS = (float16, bfloat16, float32)  # what an FP8 GEMM takes in (float64 stays exact)


@dataclass
class GemmMeta:
    """The three scaling states of one weight's GEMMs (TE's ``fp8_meta``)."""

    recipe: object
    input: ScalingState
    weight: ScalingState
    grad: ScalingState

    @classmethod
    def new(cls, recipe, xp) -> GemmMeta:
        fwd, bwd = recipe.dtype(False), recipe.dtype(True)
        states = (ScalingState(recipe, d, xp) for d in (fwd, fwd, bwd))
        return cls(recipe, *states)


@dataclass
class _Region:
    recipe: object
    weights: dict = field(default_factory=dict)  # id -> [weight, FP8, scale_inv, FP8.T, version]


_metas: dict[int, tuple] = {}  # id(weight) -> (weakref to it, GemmMeta)


def fp8_meta(weight: Tensor) -> GemmMeta | None:
    """The scaling states of ``weight``'s FP8 GEMMs (None before its first one or a
    checkpoint's; a loaded state has ``recipe`` None until its first ``fp8_autocast``)."""
    entry = _metas.get(id(weight))
    return entry[1] if entry is not None and entry[0]() is weight else None


def is_fp8_enabled() -> bool:
    """Whether an enabled ``fp8_autocast`` is in force here (TE's ``is_fp8_enabled``)."""
    return fp8_route.region.get() is not None


def _meta_for(weight: Tensor, recipe, xp) -> GemmMeta:
    meta = fp8_meta(weight)
    if meta is not None and meta.recipe is None:  # loaded from a checkpoint: take it up
        meta = _take_up(weight, meta, recipe)
    if meta is None or meta.recipe != recipe:  # a different recipe starts afresh
        meta = set_fp8_meta(weight, GemmMeta.new(recipe, xp))
    return meta


def set_fp8_meta(weight: Tensor, meta: GemmMeta) -> GemmMeta:
    """Attach ``meta`` to ``weight`` (for as long as the weight lives)."""
    key = id(weight)
    _metas[key] = (weakref.ref(weight, lambda _, key=key: _metas.pop(key, None)), meta)
    return meta


def _take_up(weight: Tensor, loaded: GemmMeta, recipe) -> GemmMeta | None:
    """The first recipe to meet a loaded state: delayed scaling with the saved history
    length and formats continues from it; current scaling, which keeps no state, starts
    afresh (None).

    Raises:
        ValueError: a delayed recipe with another history length, or another FP8 format
            than the one a saved scale was made for (nothing changed).
    """
    if isinstance(recipe, Float8CurrentScaling):
        return None
    saved = len(loaded.input.amax_history)
    if saved != recipe.amax_history_len:
        raise ValueError(
            f"the FP8 scaling state loaded for a weight of shape {weight.shape} has "
            f"amax_history_len={saved}, but fp8_autocast's recipe has amax_history_len="
            f"{recipe.amax_history_len}; resume with DelayedScaling(amax_history_len={saved}"
            ", ...), or load the checkpoint without its '._fp8_meta.' entries to start the "
            "scales afresh"
        )
    fwd, bwd = np.dtype(recipe.dtype(False)), np.dtype(recipe.dtype(True))
    roles = (("input", loaded.input, fwd), ("weight", loaded.weight, fwd))
    roles += (("grad", loaded.grad, bwd),)
    for role, state, dtype in roles:
        if state.dtype is not None and state.dtype != dtype:
            raise ValueError(
                f"the FP8 scale loaded for the {role} of a weight of shape {weight.shape} was "
                f"made for {state.dtype.name}, but fp8_autocast's recipe casts it to "
                f"{dtype.name} (fp8_format={recipe.fp8_format.name}); a scale is "
                "fp8_max / amax, so resume with the saved fp8_format, or load the checkpoint "
                "without its '._fp8_meta.' entries to start the scales afresh"
            )
    for _, state, dtype in roles:
        state.recipe, state.dtype = recipe, dtype
    loaded.recipe = recipe
    return loaded


class fp8_autocast(ReentrantContext):  # noqa: N801 - TE's name; a context and a decorator
    """Run Linear, matmul and Conv2D as FP8 GEMMs inside (on NumPy: emulated exactly).

    Args:
        enabled: False turns FP8 off inside (also inside an enabled region).
        recipe: a :class:`~minitorch_amp.amp.fp8.DelayedScaling` (the default:
            ``DelayedScaling()``, TE's defaults) or
            :class:`~minitorch_amp.amp.fp8.Float8CurrentScaling`.
        fp8_recipe: TE's name for ``recipe`` (give one of the two).
        fp8_group: the ranks over which delayed scaling max-reduces each amax before its
            scale update; None (the only choice): all of them, once a parallel env with
            several ranks is started (TE's default), so data-parallel ranks share scales.

    Raises:
        TypeError: ``enabled`` is not a bool, or the recipe is not one of the two recipes.
        ValueError: an ``fp8_group`` other than None.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import amp, nn
        >>> layer = nn.Linear(4, 3)
        >>> with amp.fp8_autocast(recipe=amp.DelayedScaling(amax_history_len=16)):
        ...     y = layer(mt.ones([2, 4]))
        >>> state = amp.fp8_meta(layer.weight).input  # amax 1 recorded, scale 448 / 1 next
        >>> y.dtype, state.amax_history[-1].item(), state.scale.tolist()
        (dtype('float32'), 1.0, [448.0])
    """

    def __init__(self, enabled: bool = True, recipe=None, fp8_recipe=None, fp8_group=None):
        if not isinstance(enabled, bool):
            raise TypeError(f"enabled must be True or False, got {enabled!r}")
        if fp8_group is not None:
            raise ValueError(
                f"fp8_group must be None (all ranks: the amaxes are reduced over the whole "
                f"world, as the gradients of DataParallel are), got {fp8_group!r}"
            )
        if recipe is not None and fp8_recipe is not None:
            raise TypeError("give the recipe once: recipe= or fp8_recipe= (TE's name)")
        recipe = recipe if recipe is not None else fp8_recipe
        if recipe is None:
            recipe = DelayedScaling()
        if not isinstance(recipe, (DelayedScaling, Float8CurrentScaling)):
            raise TypeError(
                f"recipe must be amp.DelayedScaling(...) or amp.Float8CurrentScaling(...), "
                f"got {type(recipe).__name__}"
            )
        self.enabled = enabled
        self.recipe = recipe

    def _enter(self):
        if not self.enabled:
            return fp8_route.region.set(None)
        outer = fp8_route.region.get()
        region = _Region(self.recipe)
        if outer is not None and outer.recipe == self.recipe:
            region.weights = outer.weights  # one weight cast per outermost region
        return fp8_route.region.set(region)

    def _exit(self, saved) -> None:
        fp8_route.region.reset(saved)


def _weight_fp8(region: _Region, weight: Tensor, meta: GemmMeta, transpose: bool = False):
    """The FP8 copy of ``weight`` and its inverse scale, cast once per region and version of
    the weight (an optimizer step or ``set_value`` inside the region casts it again); with
    ``transpose`` (a Linear's 2-D weight) also the copy's transpose, made by the same cast
    (or, for a weight a convolution cast first, from the copy: never a second cast, which
    would record a second amax)."""
    entry = region.weights.get(id(weight))
    if entry is None or entry[0] is not weight or entry[4] != weight._version:
        w_q, scale_inv, *w_qt = quantize(meta.weight, weight._data, transpose=transpose)
        entry = [weight, w_q, scale_inv, *w_qt, None][:4] + [weight._version]
        region.weights[id(weight)] = entry
    if not transpose:
        return entry[1], entry[2]
    if entry[3] is None:
        entry[3] = transposed_bytes(entry[1])
    return entry[1], entry[2], entry[3]


def _floating(t) -> bool:
    return isinstance(t, Tensor) and t._data.dtype in _FLOATS


def _is_weight(t) -> bool:
    """A leaf that wants a gradient (a parameter), 2-D: it gets delayed scaling."""
    return t._node is None and not t.stop_gradient and t.ndim == 2


def _gemm(
    kind: str, region: _Region, x, y, bias=None, transpose_x=False, transpose_y=False, **conv
):
    """The route ``Tensor.matmul``, ``F.linear`` and ``F.conv2d`` take inside a region
    (None: not FP8, the usual op runs)."""
    if not (_floating(x) and _floating(y)) or x.ndim == 0 or y.ndim < 2:
        return None
    if bias is not None and not _floating(bias):
        return None
    xp = get_array_module(y._data)
    recipe = region.recipe
    if kind == "conv2d":
        check_conv(x.shape, y.shape, **conv)  # before the scaling state records anything
        meta = _meta_for(y, recipe, xp)
        weight_fp8 = _weight_fp8(region, y, meta)
        return apply(Fp8Conv2D, x, y, meta=meta, weight_fp8=weight_fp8, **conv)
    if kind == "linear" or (not transpose_x and not transpose_y and _is_weight(y)):
        check_linear(x.shape, y.shape, None if bias is None else bias.shape)  # (as above)
        if bias is not None and tuple(bias.shape) != (y.shape[1],):  # a bias that broadcasts:
            return _gemm(kind, region, x, y) + bias  # added by the add op, which unbroadcasts
        if y._node is None:  # a tensor that lives on (a parameter, frozen or not): delayed
            meta = _meta_for(y, recipe, xp)
            weight_fp8 = _weight_fp8(region, y, meta, transpose=True)
        else:  # made this step (``F.linear(x, w.T)``): no history to take a scale from
            meta = _current(recipe, xp)
            weight_fp8 = quantize(meta.weight, y._data, transpose=True)
        return apply(Fp8Linear, x, y, bias, meta=meta, weight_fp8=weight_fp8)
    if x.ndim < 2:
        return None
    flags = {"transpose_x": transpose_x, "transpose_y": transpose_y}
    return apply(Fp8Matmul, x, y, meta=_current(recipe, xp), **flags)


def _current(recipe, xp) -> GemmMeta:
    """Fresh current-scaling states in ``recipe``'s formats, for a product's operands that
    have no history (activations, a weight made this step)."""
    return GemmMeta.new(Float8CurrentScaling(recipe.fp8_format), xp)


fp8_route.route.gemm = _gemm
