"""FP8 scaling recipes, with Transformer Engine's names: ``Format``, ``DelayedScaling`` and
``Float8CurrentScaling`` (``transformer_engine.common.recipe``).

A recipe is configuration only (frozen, hashable); the scales and amax histories it
governs live on the device in :class:`~minitorch_amp.amp.fp8.scaling.ScalingState`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from numbers import Integral, Real

import numpy as np

from ...backend.dtypes import FP8_MAX, float8_e4m3fn, float8_e5m2

__all__ = ["DelayedScaling", "Float8CurrentScaling", "Format"]

_TINY = np.finfo(np.float32).tiny  # float32's smallest normal value
_MAX_MARGIN = int(np.log2(min(FP8_MAX.values()) / float(_TINY)))  # 134: E4M3's 448 / 2**134 >= tiny


class Format(Enum):
    """Which FP8 format the forward tensors (activations, weights) and the backward ones
    (output gradients) take: ``(forward dtype, backward dtype)``.

    E4M3: both E4M3 (more precision, max 448). E5M2: both E5M2. HYBRID (the default): E4M3
    forward, E5M2 backward, whose range (max 57344, smallest subnormal 2**-16) gradients need.
    """

    E4M3 = (float8_e4m3fn, float8_e4m3fn)
    E5M2 = (float8_e5m2, float8_e5m2)
    HYBRID = (float8_e4m3fn, float8_e5m2)

    @property
    def fwd_dtype(self):
        return self.value[0]

    @property
    def bwd_dtype(self):
        return self.value[1]


def _format(fp8_format) -> Format:
    """``fp8_format`` as a training format: E4M3 or HYBRID.

    NOTE: pure E5M2 is refused, as Transformer Engine's recipes refuse it ("Pure E5M2
    training is not supported"): with two mantissa bits the forward pass loses too much,
    and an FP8 tensor core takes E5M2 for at most one operand (the GPU GEMM: E4M3 x E4M3,
    E4M3 x E5M2 or E5M2 x E4M3)."""
    if isinstance(fp8_format, str) and fp8_format.upper() in Format.__members__:
        fp8_format = Format[fp8_format.upper()]
    if fp8_format is Format.E5M2:
        raise ValueError(
            "fp8_format E5M2 for every tensor is not supported (as in Transformer Engine): "
            "use Format.HYBRID (E4M3 forward, E5M2 gradients: the default) or Format.E4M3"
        )
    if isinstance(fp8_format, Format):
        return fp8_format
    raise ValueError(
        f"unknown fp8_format {fp8_format!r}; use Format.HYBRID (E4M3 forward, E5M2 "
        "gradients) or Format.E4M3 (or their names as strings)"
    )


class _Recipe:
    """What both recipes share: the two formats."""

    fp8_format: Format

    def dtype(self, backward: bool):
        """The FP8 dtype of a forward tensor (False) or of an output gradient (True)."""
        return self.fp8_format.bwd_dtype if backward else self.fp8_format.fwd_dtype


@dataclass(frozen=True)
class DelayedScaling(_Recipe):
    """Per-tensor scales taken from a history of the tensor's absolute maxima (TE's
    ``DelayedScaling``): a cast uses the scale the previous steps left, records this step's
    amax, and the scale is updated for the next step, all on the device (no host sync).

    The update (TE's ``amax_and_scale_update``), after each cast of a tensor:

    * ``amax = max(amax_history)`` (``'max'``) or ``amax_history[0]``, this step's
      (``'most_recent'``);
    * ``scale = fp8_max / amax / 2**margin`` where ``amax`` is finite and above 0, else the old
      scale (a step with a NaN or only zeros does not move it); ``scale_inv = 1 / scale``;
    * the history is rotated by one (``roll(-1)``) and its first entry zeroed, for the next
      step's amax: it holds the last ``amax_history_len`` amaxes.

    Args:
        margin: scale down by ``2**margin`` more, headroom for growth (>= 0).
        fp8_format: :class:`Format` (or its name): HYBRID (default) or E4M3 (E5M2 for
            every tensor is refused, as Transformer Engine refuses it).
        amax_history_len: how many steps' amaxes the scale looks back on (>= 1).
        amax_compute_algo: ``'max'`` (default) or ``'most_recent'``.
        reduce_amax: True (default): in a parallel env of several ranks, each amax is
            max-reduced over the ranks before its scale update, so data-parallel replicas
            cast alike (TE's ``reduce_amax``). False: each rank keeps its own scales and
            calls no collective, for an FP8 region that runs on some ranks only (an
            evaluation of a model copy on rank 0, docs/fp8.md); with the default the
            ranks' collectives would differ (``CollectiveMismatchError``).

    Raises:
        ValueError: an unknown format (or E5M2 for every tensor) or algorithm, a negative
            margin or one so large that no scale is left, a history below 1.
        TypeError: a ``reduce_amax`` that is not a bool.

    Example:
        >>> recipe = DelayedScaling(margin=1, amax_history_len=16)
        >>> recipe.fp8_format.name, recipe.scale_for(amax=7.0, fp8_max=448.0)  # 448 / 7 / 2
        ('HYBRID', 32.0)
    """

    margin: int = 0
    fp8_format: Format = Format.HYBRID
    amax_history_len: int = 1024
    amax_compute_algo: str = "max"
    reduce_amax: bool = True

    def __post_init__(self):
        object.__setattr__(self, "fp8_format", _format(self.fp8_format))
        if not isinstance(self.reduce_amax, bool):
            raise TypeError(
                f"reduce_amax must be True (scales shared by the ranks) or False (each rank's "
                f"own), got {self.reduce_amax!r}"
            )
        if isinstance(self.margin, (bool, np.bool_)) or not isinstance(self.margin, Real):
            raise TypeError(f"margin must be a number >= 0, got {self.margin!r}")
        if not self.margin >= 0:
            raise ValueError(
                f"margin must be >= 0 (the scale leaves 2**margin of headroom), got "
                f"{self.margin}; use 0 for none"
            )
        if not np.float32(min(FP8_MAX.values()) * 2.0 ** -float(self.margin)) >= _TINY:
            raise ValueError(
                f"margin {self.margin} leaves no usable scale: fp8_max / 2**margin is below "
                f"float32's normal range (margin <= {_MAX_MARGIN}); a margin of a few binades "
                "is headroom enough (TE's default: 0)"
            )
        n = self.amax_history_len
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, Integral) or n < 1:
            raise ValueError(
                f"amax_history_len must be an integer >= 1 (1 keeps only the latest amax), "
                f"got {n!r}"
            )
        object.__setattr__(self, "amax_history_len", int(n))  # a NumPy integer: the same
        margin = self.margin  # an int stays an int (TE's type), other numbers are floats
        object.__setattr__(
            self, "margin", int(margin) if isinstance(margin, Integral) else float(margin)
        )
        if self.amax_compute_algo not in ("max", "most_recent"):
            raise ValueError(
                f"amax_compute_algo must be 'max' or 'most_recent', got {self.amax_compute_algo!r}"
            )

    def scale_for(self, amax: float, fp8_max: float) -> float:
        """The scale for ``amax`` on the host: ``fp8_max / amax / 2**margin`` (for docs and
        tests; the training step computes it on the device)."""
        return fp8_max / amax / 2.0**self.margin


@dataclass(frozen=True)
class Float8CurrentScaling(_Recipe):
    """Per-tensor scales from the tensor itself (TE's ``Float8CurrentScaling``): amax of this
    very tensor, ``scale = fp8_max / amax`` (1 when amax is 0 or not finite), then the cast.
    Nothing is remembered between steps; a spike is scaled for at once, at the price of a
    second pass over the tensor (or a kernel that computes the amax first).

    Args:
        fp8_format: :class:`Format` (or its name): HYBRID (default) or E4M3 (E5M2 for
            every tensor is refused, as Transformer Engine refuses it).

    Raises:
        ValueError: an unknown format, or E5M2 for every tensor.
    """

    fp8_format: Format = Format.HYBRID

    def __post_init__(self):
        object.__setattr__(self, "fp8_format", _format(self.fp8_format))


def fp8_max(dtype) -> float:
    """448.0 for float8_e4m3fn, 57344.0 for float8_e5m2."""
    return FP8_MAX[dtype]
