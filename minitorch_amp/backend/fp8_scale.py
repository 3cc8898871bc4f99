"""The delayed-scaling update of one FP8 tensor role in one launch: ``cuda/fp8_scale.cu``.

After a delayed-scaling cast has folded its amax into a zeroed slot, Transformer
Engine's update takes the history's maximum, turns it into the next scale and its inverse,
and rotates the history. Spelled in CuPy array operations that is about a dozen launches per
cast, and an FP8 Linear step casts nine times; ``fp8_delayed_scale_update`` does it all in
one block, and also copies out the inverse scale the cast used (what ``ScalingState.cast``
returns) before overwriting it.

The NumPy twin, the specification, is ``amp/fp8/scaling.py``'s
``update_amax_history_and_scale``: it calls :func:`update` on CuPy arrays when raw kernels
are on, and runs its own array operations otherwise (NumPy, or
``MINITORCH_AMP_RAW_KERNELS=0``). The kernel gives the twin's bits for every float32 input
(subnormal amaxes and scales, NaN, inf, zeros of both signs, negative entries loaded from a
checkpoint) under CuPy's ``-ftz=true``: ``tests/test_fp8_scale_kernel.py`` checks it on the
CPU emulator, ``tests/test_fp8_scale_gpu.py`` on a GPU.

Example (the host-side numerator the kernel takes):
    >>> float(numerator(448.0, 3)), float(numerator(57344.0, 0.5))
    (56.0, 40548.33203125)
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np

from . import device as _device
from . import kernels
from .device import get_array_module
from .dtypes import float32

__all__ = [
    "ALGOS",
    "InCast",
    "check_in_cast",
    "numerator",
    "prepare_in_cast",
    "update",
    "update_in_cast",
]

FILE = "fp8_scale.cu"
NAME = "fp8_delayed_scale_update"
SCALE = kernels.register(FILE, names=(NAME,))
ALGOS = {"max": 0, "most_recent": 1}  # the kernel's algo codes
_THREADS = 256  # kScaleThreads in cuda/fp8_scale.cu (and kThreads in fp8_cast.cu)
_NULL = np.int64(0)  # a null pointer: RawKernel passes an int64 by value, 8 zero bytes


def numerator(fp8_max: float, margin: float) -> np.float32:
    """``fp8_max / 2**margin``, computed in float64 and rounded once to float32, as the
    twin rounds it (the kernel takes this value)."""
    return np.float32(fp8_max * 2.0**-margin)


def update(amax_history, scale, scale_inv, fp8_max: float, margin: float, algo: str, amax=None):
    """Transformer Engine's delayed-scaling update of CuPy arrays, in place, in one launch;
    returns the inverse scale before the update (a new float32 [1]: the one the step's cast
    used). What it computes is ``update_amax_history_and_scale``, with this step's amax in
    ``amax_history[0]``, or, when ``amax`` is given, in ``amax`` (moved into the history and
    zeroed for the next cast to fold into):

    * ``amax = max(amax_history)`` for ``'max'`` (NaN if any entry is NaN),
      ``amax_history[0]`` for ``'most_recent'``;
    * ``scale = float32(fp8_max * 2**-margin) / amax`` where ``0 < amax < inf``, else
      unchanged; float32's largest value where the quotient overflows;
      ``scale_inv = 1 / scale``, each rounded once to float32;
    * ``amax_history`` rotated by -1 and its first entry zeroed.

    Args:
        amax_history: float32 [n], n >= 1, C-contiguous; scale, scale_inv: float32 [1];
            all CuPy arrays on one device, all updated.
        fp8_max: the format's largest finite value; margin: >= 0.
        algo: ``'max'`` or ``'most_recent'``.
        amax: None, or a float32 [1] on the same device holding this step's amax (an
            array of its own: the kernel's pointers are ``__restrict__``, never a history view).

    Raises:
        TypeError, ValueError: an argument of the wrong dtype, shape, layout, device or
            value, or NumPy arrays (their update is the twin's); nothing is written then.
    """
    _check(amax_history, scale, scale_inv, fp8_max, margin, algo, amax)
    with amax_history.device:
        used = _device.cupy.empty(1, float32)
        args = (amax_history, scale, scale_inv, used, _NULL if amax is None else amax)
        args += (np.int32(amax_history.size),)
        args += (numerator(fp8_max, margin), np.int32(ALGOS[algo]))
        kernels.launch(FILE, NAME, (1,), (_THREADS,), args)
    return used


def update_in_cast(
    amax_history, scale, scale_inv, fp8_max: float, margin: float, algo: str, amax, blocks_done,
    checked: bool = False,
):  # fmt: skip
    """``(args, used)``: :func:`update` as the tail of a cast (``cuda/fp8_cast.cu``: its last
    block runs the same code once every block has folded its amax into ``amax``), so a
    delayed cast and its update are one launch. ``args`` are the seven arguments the cast
    kernels take after their own (pass them as ``fp8_kernels``' ``update=``), ``used`` the new
    float32 [1] that receives the inverse scale the cast used (what :func:`update` returns).

    Args:
        amax_history, scale, scale_inv, fp8_max, margin, algo, amax: as :func:`update`
            takes them (``amax`` required: the slot every block of the cast folds into).
        blocks_done: uint32 [1] on the same device, 0 (the kernel counts its blocks there and
            sets it back to 0).
        checked: True when these very arguments passed the checks before.

    Raises:
        TypeError, ValueError: as :func:`update`, or a wrong ``amax`` or ``blocks_done``;
            nothing is written or allocated then.
    """
    args = (amax_history, scale, scale_inv, fp8_max, margin, algo, amax, blocks_done)
    return prepare_in_cast(*args, checked=checked)()


class InCast(NamedTuple):
    """:func:`update_in_cast` on arguments checked once: each call gives a cast's ``(args,
    used)``, with only ``used`` made anew (a scaling state keeps one: its arrays and recipe
    are the same cast after cast)."""

    amax_history: object
    scale_inv: object
    blocks_done: object
    scalars: tuple  # the history's length (int32), the numerator (float32), the algo (int32)

    def __call__(self) -> tuple:
        with self.amax_history.device:
            used = _device.cupy.empty(1, float32)
        history, scale_inv, blocks_done, scalars = self
        return (history, scale_inv, used, blocks_done, *scalars), used


def prepare_in_cast(
    amax_history, scale, scale_inv, fp8_max: float, margin: float, algo: str, amax, blocks_done,
    checked: bool = False,
) -> InCast:  # fmt: skip
    """The :class:`InCast` of :func:`update_in_cast`'s arguments (checked here unless
    ``checked``: they passed :func:`check_in_cast` before)."""
    if not checked:
        check_in_cast(amax_history, scale, scale_inv, fp8_max, margin, algo, amax, blocks_done)
    scalars = (np.int32(amax_history.size), numerator(fp8_max, margin), np.int32(ALGOS[algo]))
    return InCast(amax_history, scale_inv, blocks_done, scalars)


def check_in_cast(amax_history, scale, scale_inv, fp8_max, margin, algo, amax, blocks_done):
    """Raise unless :func:`update_in_cast` may run on these arguments (what it checks)."""
    _check(amax_history, scale, scale_inv, fp8_max, margin, algo, amax)
    if amax is None:
        raise ValueError("update_in_cast: pass amax, the slot every block of the cast folds into")
    xp = get_array_module(amax_history)
    if (
        get_array_module(blocks_done) is not xp
        or blocks_done.dtype != np.uint32
        or blocks_done.shape != (1,)
    ):
        raise ValueError("blocks_done must be a uint32 array of shape [1] on amax_history's device")


def _check(amax_history, scale, scale_inv, fp8_max, margin, algo, amax) -> None:
    """Raise, before anything is written, unless the arguments are what the kernel reads."""
    if algo not in ALGOS:
        raise ValueError(f"algo must be 'max' or 'most_recent', got {algo!r}")
    for label, value in (("fp8_max", fp8_max), ("margin", margin)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0:
            raise ValueError(f"{label} must be a number >= 0, got {value!r}")
    xp = get_array_module(amax_history)
    if xp is np:
        raise TypeError(
            "fp8_scale.update launches a CUDA kernel and takes CuPy arrays; NumPy arrays are "
            "updated by amp.fp8.scaling.update_amax_history_and_scale (the twin)"
        )
    arrays = (("amax_history", amax_history), ("scale", scale), ("scale_inv", scale_inv))
    arrays += (("amax", amax),) if amax is not None else ()
    for label, array in arrays:
        if get_array_module(array) is not xp:
            raise ValueError(
                f"{label} must be on amax_history's device; move the scaling state there first"
            )
        if array.dtype != float32:
            raise TypeError(f"{label} must be float32, got {array.dtype}")
    if amax_history.ndim != 1 or amax_history.size < 1:
        raise ValueError(f"amax_history must be 1-D with >= 1 entry, got {amax_history.shape}")
    if amax_history.size >= 2**31:
        raise ValueError(f"amax_history must hold below 2**31 entries, got {amax_history.size}")
    if not amax_history.flags.c_contiguous:
        raise ValueError("amax_history must be C-contiguous; pass xp.ascontiguousarray(it)")
    for label, array in arrays[1:]:
        if array.shape != (1,):
            raise ValueError(f"{label} must have shape [1], got {list(array.shape)}")
