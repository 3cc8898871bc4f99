"""One tensor's FP8 scaling state (scale, its inverse, the amax history) and its update.

Every array here stays on the tensor's device and every update runs there (array operations,
or on a GPU one kernel, ``cuda/fp8_scale.cu``), so a training step with FP8 casts reads
nothing back to the host (and can be captured as a CUDA graph, like the loss scaler's step).

Example:
    >>> import numpy as np
    >>> from minitorch_amp.amp.fp8.recipe import DelayedScaling
    >>> state = ScalingState(DelayedScaling(amax_history_len=2), "float8_e4m3fn", np)
    >>> for step in range(3):
    ...     out, scale_inv = state.cast(np.array([1.0, -14.0], np.float32))
    ...     print(step, out.astype(np.float32).tolist(), state.scale.tolist())
    0 [1.0, -14.0] [32.0]
    1 [32.0, -448.0] [32.0]
    2 [32.0, -448.0] [32.0]
"""

from __future__ import annotations

import numpy as np

from ...backend import comm as _comm
from ...backend import fp8_kernels as _fp8_kernels
from ...backend import fp8_scale as _fp8_scale
from ...backend import kernels as _kernels
from ...backend.device import get_array_module as _xp
from ...backend.dtypes import FP8_MAX, float32
from ...backend.fp8 import FP8_DTYPE_CODE, cast_to_fp8
from .recipe import DelayedScaling, Float8CurrentScaling

__all__ = ["ScalingState", "current_scale", "reduce_amax", "update_amax_history_and_scale"]


def update_amax_history_and_scale(amax_history, scale, scale_inv, fp8_max, margin, algo):
    """Transformer Engine's delayed-scaling update, in place, on the arrays' device.

    ``amax_history[0]`` holds this step's amax (the cast wrote it). Then:

    * ``amax = max(amax_history)`` for ``'max'``, ``amax_history[0]`` for ``'most_recent'``;
    * ``scale = fp8_max / 2**margin / amax`` where ``amax`` is finite and > 0, else unchanged;
      float32's largest value where that quotient overflows (a tiny amax, as TE does);
      ``scale_inv = 1 / scale``;
    * ``amax_history`` rotated by -1 (this step's amax moves to the end, the oldest entry
      comes to the front) and its first entry zeroed, ready for the next step's amax.

    This is the specification of ``cuda/fp8_scale.cu``, which does it all in one launch:
    CuPy arrays go to that kernel (:func:`minitorch_amp.backend.fp8_scale.update`, the same
    bits) unless ``MINITORCH_AMP_RAW_KERNELS=0``; NumPy arrays run the array operations below.

    Args:
        amax_history: float32 [history_len]; scale, scale_inv: float32 [1] (all updated).
        fp8_max: the format's largest finite value; margin: >= 0; algo: 'max'|'most_recent'.
    """
    xp = _xp(amax_history)
    if xp is not np and _kernels.enabled():
        _fp8_scale.update(amax_history, scale, scale_inv, fp8_max, margin, algo)
        return
    amax = amax_history.max(keepdims=True) if algo == "max" else amax_history[:1].copy()
    # NOTE: max() over a history holding a NaN is NaN: that step keeps the old scale
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        fresh = _finite(np.float32(fp8_max * 2.0**-margin) / amax)
        usable = xp.isfinite(amax) & (amax > 0)
        scale[...] = xp.where(usable, fresh, scale).astype(float32)
        scale_inv[...] = (np.float32(1.0) / scale).astype(float32)
    amax_history[...] = xp.roll(amax_history, -1)
    amax_history[0] = 0.0


def reduce_amax(amax):
    """The float32 [1] ``amax``, max-reduced over the ranks in place (Transformer Engine's
    amax reduction over its ``fp8_group``; here the whole world, as ``GradScaler``'s
    found_inf): every rank then computes the same scale, so data-parallel replicas cast
    alike. Nothing happens outside a world of several ranks; a recipe with
    ``reduce_amax=False`` does not call it.

    NOTE: every rank must cast the same tensors in the same order, as it runs the same
    model; a rank that casts one more is a collective mismatch, raised on every rank.
    """
    if _several_ranks():
        _comm.get_world().all_reduce(amax, _comm.ReduceOp.MAX, caller="fp8 amax")
    return amax


def current_scale(amax, fp8_max, margin=0.0):
    """``fp8_max / 2**margin / amax`` for a float32 [1] ``amax``, 1 where amax is 0 or not
    finite, float32's largest value where the quotient overflows (current scaling: the scale
    of this very tensor), on ``amax``'s device."""
    xp = _xp(amax)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        fresh = _finite(np.float32(fp8_max * 2.0**-margin) / amax)
        return xp.where(xp.isfinite(amax) & (amax > 0), fresh, np.float32(1.0)).astype(float32)


def _finite(scale):
    """``scale`` with inf replaced by float32's largest value.

    NOTE: an amax below fp8_max / 3.4e38 (a tensor of subnormal float32s) makes the quotient
    inf, and x * inf is NaN for the tensor's zeros: Transformer Engine clamps such a scale to
    float32's largest, and so do we."""
    xp = _xp(scale)
    return xp.where(xp.isinf(scale), _FLOAT32_MAX, scale)


_FLOAT32_MAX = np.finfo(np.float32).max


class ScalingState:
    """The scaling state of one tensor role (a layer's input, weight or output gradient).

    Attributes:
        recipe: the :class:`DelayedScaling` or :class:`Float8CurrentScaling` in force.
        dtype: the FP8 dtype this role is cast to.
        scale, scale_inv: float32 [1] on the device; the scale the next cast uses.
        amax_history: float32 [amax_history_len] ([1] for current scaling): the amaxes seen,
            ``amax_history[0]`` the slot the next cast fills.
    """

    def __init__(self, recipe, dtype, xp):
        self.recipe = recipe
        self.dtype = np.dtype(dtype)
        length = recipe.amax_history_len if isinstance(recipe, DelayedScaling) else 1
        self.amax_history = xp.zeros(length, dtype=float32)
        self.scale = xp.ones(1, dtype=float32)
        self.scale_inv = xp.ones(1, dtype=float32)
        self._amax_slot = None  # the GPU cast's amax, zero between casts (_cast_fused)
        self._blocks_done = None  # and the count of its finished blocks, zero between casts
        self._checked_key = None  # the update's arguments checked last (_check_once)

    @classmethod
    def restored(cls, scale, scale_inv, amax_history, dtype=None) -> ScalingState:
        """A state loaded from a checkpoint (``checkpoint.py``), before the first
        ``fp8_autocast`` takes it up: its ``recipe`` is None until then, its ``dtype`` the
        format the checkpoint saved its scale for (None where it did not say)."""
        state = cls.__new__(cls)
        state.recipe, state.dtype = None, dtype
        state.scale, state.scale_inv, state.amax_history = scale, scale_inv, amax_history
        state._amax_slot = state._blocks_done = state._checked_key = None
        return state

    def cast(self, x, saturate: bool = True):
        """``(x in FP8, the inverse scale used)``; records amax and updates the scale.

        Delayed scaling casts with the current ``scale`` (the previous steps'), writes this
        tensor's amax into ``amax_history[0]`` and runs
        :func:`update_amax_history_and_scale`. On a GPU with raw kernels that is one launch:
        the cast folds its amax into a zeroed slot of the state's own, and its last block
        runs ``cuda/fp8_scale.cu``'s update (about 20 launches as array operations; two
        where the amax is reduced over ranks in between, or the tensor is empty).
        Current scaling computes the amax first and casts with the scale it gives.
        """
        out, scale_inv, _ = self._cast(x, saturate, transpose=False)
        return out, scale_inv

    def cast_transposed(self, x, saturate: bool = True):
        """``(x in FP8, the inverse scale used, the FP8 x transposed and contiguous)`` for a
        2-D ``x``: :meth:`cast` and the transposed copy an FP8 GEMM's K-major operand needs,
        on a GPU in the same pass over ``x`` (``cast_transpose_fp8``) instead of a cast and
        a transposing copy of the bytes (the H200 profile of an FP8 O2 step: 9 such copies,
        329 of its 1517 GPU µs). The same bytes, amax and scale as :meth:`cast`.

        Raises:
            ValueError: ``x`` is not 2-D (nothing is cast or recorded).
        """
        if x.ndim != 2:
            raise ValueError(f"cast_transposed takes a 2-D array, got shape {list(x.shape)}")
        return self._cast(x, saturate, transpose=True)

    def _cast(self, x, saturate: bool, transpose: bool):
        """``(out, scale_inv, out.T contiguous or None)``: :meth:`cast`'s work."""
        fp8_max = FP8_MAX[self.dtype]
        if isinstance(self.recipe, Float8CurrentScaling):
            xp = _xp(x)
            amax = xp.abs(x).max(keepdims=True).reshape(1) if x.size else xp.zeros(1)
            amax = amax.astype(float32)  # NOTE: no max(initial=...): CuPy lacks it
            self.amax_history[...] = amax
            self.scale[...] = current_scale(amax, fp8_max)
            self.scale_inv[...] = np.float32(1.0) / self.scale
            out, _ = cast_to_fp8(x, self.dtype, self.scale, saturate)
            return out, self.scale_inv.copy(), _transposed(out, transpose)
        if self._fused(x):
            return self._cast_fused(x, saturate, fp8_max, transpose)
        scale_inv = self.scale_inv.copy()  # the inverse of the scale this cast uses
        out, amax = cast_to_fp8(x, self.dtype, self.scale, saturate)
        self.amax_history[:1] = reduce_amax(amax) if self.recipe.reduce_amax else amax
        update_amax_history_and_scale(*self._update_args(fp8_max))
        return out, scale_inv, _transposed(out, transpose)

    def _update_args(self, fp8_max: float) -> tuple:
        """The arguments of the scale update: this state's arrays and its recipe's knobs."""
        recipe = self.recipe
        margin, algo = recipe.margin, recipe.amax_compute_algo
        return self.amax_history, self.scale, self.scale_inv, fp8_max, margin, algo

    def _check_once(self, args: tuple) -> _fp8_scale.InCast:
        """``update_in_cast`` for ``args``, checked once, not at every cast (some 10 µs of
        host time each): again only when an array (by identity, shape or dtype) or a recipe
        knob is not what passed the last time. Returns the kept ``fp8_scale.InCast``."""
        history, scale, scale_inv, fp8_max, margin, algo, amax, done = args
        key = (
            id(history), id(scale), id(scale_inv), id(amax), id(done),
            history.shape, scale.shape, scale_inv.shape, amax.shape, done.shape,
            history.dtype, scale.dtype, scale_inv.dtype, amax.dtype, done.dtype,
            fp8_max, margin, algo,
        )  # fmt: skip
        kept = self._checked_key
        if kept is not None and kept[0] == key:
            return kept[2]
        _fp8_scale.check_in_cast(*args)
        in_cast = _fp8_scale.prepare_in_cast(*args, checked=True)
        self._checked_key = (key, args, in_cast)  # (the arrays kept alive: ids stay theirs)
        return in_cast

    def _fused(self, x) -> bool:
        """Whether the delayed cast runs as the two kernels: CuPy arrays, raw kernels on."""
        return _xp(x) is not np and _xp(self.amax_history) is not np and _kernels.enabled()

    def _cast_fused(self, x, saturate: bool, fp8_max: float, transpose: bool = False):
        """The delayed cast in one launch, the twin's bits: the cast folds ``max |x|`` into a
        zeroed slot of the state's own (max(0, a) is a, NaN too), and its last block runs the
        update: it moves the amax into the history, zeroes the slot, copies out the inverse
        scale the cast used and updates the rest. Where the amax must first be reduced over
        ranks, or no block runs (an empty ``x``), the update is a launch of its own.

        NOTE: not ``amax_history[:1]``: that entry is 0 after every update, but a loaded
        state (a current-scaling checkpoint resumed with a history of 1) may hold an amax
        there, which the NumPy path overwrites and a fold would keep.
        """
        if self._amax_slot is None:  # the first fused cast: the slot and the count, zeroed
            xp = _xp(self.amax_history)
            with self.amax_history.device:
                self._amax_slot = xp.zeros(1, dtype=float32)
                self._blocks_done = xp.zeros(1, dtype=np.uint32)
        amax = self._amax_slot
        reduces = self.recipe.reduce_amax and _several_ranks()
        update = scale_inv = None
        if x.size and not reduces:  # the update in the cast's last block
            args = (*self._update_args(fp8_max), amax, self._blocks_done)
            update, scale_inv = self._check_once(args)()
        code, out_t = FP8_DTYPE_CODE[self.dtype], None
        if transpose:  # the transposed bytes in the same pass (a 2-D x)
            cast = _fp8_kernels.cast_transpose_fp8
            out, out_t, _ = cast(x, self.scale, code, saturate, amax, update)
            out_t = out_t.view(self.dtype)
        else:
            cast = _fp8_kernels.cast_fp8_with_amax
            out, _ = cast(x, self.scale, code, saturate, amax=amax, update=update)
        if update is None:
            if reduces:
                reduce_amax(amax)  # the ranks' maximum, in place
            scale_inv = _fp8_scale.update(*self._update_args(fp8_max), amax=amax)
        return out.view(self.dtype), scale_inv, out_t


def _several_ranks() -> bool:
    """Whether a world of more than one rank is set up (then amaxes are reduced over it)."""
    world = _comm.get_world()
    return world is not None and world.size > 1


def _transposed(out, wanted: bool):
    """:func:`transposed_bytes` of ``out`` when ``wanted``, else None."""
    return transposed_bytes(out) if wanted else None


def transposed_bytes(out):
    """An FP8 matrix's transpose, contiguous: the layout an FP8 GEMM reads. Copied as bytes
    (CuPy has no float8 type of its own to copy by), then viewed as ``out``'s dtype."""
    return _xp(out).ascontiguousarray(out.view(np.uint8).T).view(out.dtype)
