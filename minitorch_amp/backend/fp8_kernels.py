"""The FP8 casts' launchers: ``cuda/fp8_cast.cu`` (scaled cast + amax, and with the
transposed copy, each optionally with the delayed-scaling update in its last block), with
their NumPy twin; the FP8 GEMM's is ``backend/fp8_gemm.py``.

Formats are numbered as the kernels take them: ``0`` = E4M3 (``float8_e4m3fn``), ``1`` = E5M2
(``float8_e5m2``). FP8 arrays on the GPU are 8-bit storage: the launchers return ``uint8``
arrays, which the caller views as the ``ml_dtypes`` dtype (``out.view(float8_e4m3fn)``), and
take either. Every scale lives on the device (a float32 array of shape [1]) and is never
read on the host, so an FP8 step stays free of host syncs.

* :func:`cast_fp8_with_amax`: ``out = fp8(x * scale)`` and ``amax = max |x|``, one pass;
* :func:`cast_transpose_fp8`: the same, plus ``out.T`` made contiguous (Hopper's FP8 ``wgmma``
  reads both operands K-major, so a GEMM that needs the other layout takes this copy).

The twin (:func:`twin_cast`) is the specification, in NumPy and ``ml_dtypes``; the kernels
match it bit for bit (``tests/fp8_cast_emulator.cpp`` checks every float16 and bfloat16 value
and 10^6 float32 ones). On NumPy arrays every launcher runs the twin. :func:`check_cast`
holds the kernels to it on one small input, for ``python -m minitorch_amp``'s kernel check.

Example (the twin, without a GPU):
    >>> import numpy as np
    >>> out, amax = twin_cast(np.array([1.0, 500.0, -3e-3], "float32"), np.float32(1.0), 0)
    >>> out.tolist(), float(amax[0])  # 500 saturates to 448; -3e-3 is 1.54 units of 2**-9: 2
    ([56, 126, 130], 500.0)
"""

from __future__ import annotations

import math
from typing import NamedTuple

import ml_dtypes
import numpy as np

from . import device as _device
from . import kernels

E4M3, E5M2 = 0, 1
FORMATS = {E4M3: np.dtype(ml_dtypes.float8_e4m3fn), E5M2: np.dtype(ml_dtypes.float8_e5m2)}
FP8_MAX = {E4M3: 448.0, E5M2: 57344.0}

_bfloat16 = np.dtype(ml_dtypes.bfloat16)
_IN_TYPES = {
    np.dtype("float32"): "float",
    np.dtype("float16"): "__half",
    _bfloat16: "__nv_bfloat16",
}

CAST_FILE = "fp8_cast.cu"
CAST_KERNELS = kernels.register(
    CAST_FILE,
    names=tuple(f"cast_fp8_amax<{t}>" for t in _IN_TYPES.values())
    + tuple(f"cast_transpose_fp8_amax<{t}>" for t in _IN_TYPES.values()),
)
_THREADS = 256
_NULL = np.int64(0)  # a null pointer: RawKernel passes an int64 by value, 8 zero bytes
# the casts' last seven arguments when they run no delayed-scaling update (a null history)
_NO_UPDATE = (_NULL, _NULL, _NULL, _NULL, np.int32(0), np.float32(0), np.int32(0))
_MAX_BLOCKS = 4096
_TILE = 64  # cast_transpose_fp8_amax's tile (kTransposeTile)


def format_of(dtype, code=None) -> int:
    """The format code of an FP8 array: from its dtype, or ``code`` for 8-bit storage."""
    dtype = np.dtype(dtype)
    for fmt, fp8 in FORMATS.items():
        if dtype == fp8:
            if code is not None and code != fmt:
                raise ValueError(f"format code {code} contradicts the array's dtype {dtype}")
            return fmt
    if dtype == np.uint8 and code in FORMATS:
        return code
    raise TypeError(
        f"an FP8 operand must be float8_e4m3fn, float8_e5m2, or uint8 storage with its format "
        f"code (0 = E4M3, 1 = E5M2); got dtype {dtype} and code {code!r}"
    )


def _check_cast_args(x, scale, code: int, amax) -> None:
    if code not in FORMATS:
        raise ValueError(f"out_dtype_code must be 0 (E4M3) or 1 (E5M2), got {code!r}")
    if np.dtype(x.dtype) not in _IN_TYPES:
        raise TypeError(f"the FP8 cast reads float32, float16 or bfloat16, got {x.dtype}")
    for name, a in (("scale", scale), ("amax", amax)):
        if a is not None and (a.shape != (1,) or a.dtype != np.float32):
            raise ValueError(
                f"{name} must be a float32 array of shape [1], got {a.dtype} {a.shape}"
            )


# ---- the NumPy twins (the specification) ---------------------------------------------------


def twin_cast(x, scale, code: int, saturate: bool = True):
    """``(fp8 bits as uint8, amax float32 [1])`` of ``x * scale`` on NumPy, as the kernel does:
    the product in float32, rounded once to nearest even; with ``saturate`` finite overflow
    and +-inf become +-max, without it what ``astype`` gives (E4M3 NaN, E5M2 inf). The amax is
    ``max |x|`` of the unscaled input, NaN if any element is NaN, 0 for an empty ``x``."""
    with np.errstate(invalid="ignore", over="ignore"):  # (signalling NaNs, overflow to inf)
        v = np.asarray(x).astype(np.float32) * np.float32(np.asarray(scale).reshape(-1)[0])
    if saturate:
        big = FP8_MAX[code]
        v = np.where(np.isnan(v), v, np.clip(v, -big, big)).astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        out = v.astype(FORMATS[code]).view(np.uint8)
    magnitude = np.abs(np.asarray(x).astype(np.float32))
    amax = np.float32(np.nan) if np.isnan(magnitude).any() else magnitude.max(initial=0.0)
    return out, np.array([amax], np.float32)


# ---- the cast kernels ----------------------------------------------------------------------


def _twin_cast_into(x, scale, code: int, saturate: bool, amax):
    """:func:`twin_cast`, folding its amax into ``amax`` when one is given (as the kernel)."""
    out, fresh = twin_cast(x, scale, code, saturate)
    if amax is None:
        return out, fresh
    amax[...] = fresh if np.isnan(fresh[0]) or np.isnan(amax[0]) else np.maximum(amax, fresh)
    return out, amax


def _check_update(update, x, amax) -> None:
    """Raise unless ``update`` is None or what a cast of ``x`` can run in its last block."""
    if update is None:
        return
    if _device.get_array_module(x) is np:
        raise TypeError("update runs in the CUDA cast kernel: NumPy arrays take the twin's update")
    if amax is None or x.size == 0 or len(update) != len(_NO_UPDATE):
        raise ValueError(
            "update needs amax (the slot it reads), a non-empty x (no block runs for an empty "
            "one: launch backend.fp8_scale.update instead) and update_in_cast's arguments"
        )


def _aligned_input(x):
    """``x`` as the kernels read it: C-contiguous and 16-byte aligned (copied if not)."""
    if not x.flags.c_contiguous or x.data.ptr % 16 != 0:
        x = x.copy()  # a fresh allocation: contiguous and aligned
    return x


# ---- kept launches: a step's casts, checked and planned once -------------------------------
#
# An FP8 step casts the same few tensors step after step (9 casts in an FP8 SimpleNet step),
# and everything a cast checks and decides follows from :func:`_signature`; so a cast on a
# GPU keeps its launch (the kernel, grid, output shapes and scalar arguments) and the next
# cast like it only allocates its outputs and launches, as ``gemm_gpu.KEPT`` does for GEMMs.
KEPT_CALLS = 256  # signatures kept; the dict is emptied when full
KEPT: dict = {}  # signature -> _CastLaunch


def _signature(x, scale, code, saturate, amax, update, transposed: bool) -> tuple:
    """What a GPU cast's checks and choices follow from: the kinds of ``x`` (and whether it
    is 16-byte aligned), ``scale`` and ``amax``, whether an update runs (its arguments'
    count), the format code, ``saturate`` and the layout, as passed, and the device."""
    return (
        kernels.array_kind(x), x.data.ptr % 16 == 0, kernels.array_kind(scale),
        kernels.array_kind(amax), None if update is None else len(update),
        code, saturate, transposed, x.device.id,
    )  # fmt: skip


class _CastLaunch(NamedTuple):
    """One cast decided but for its arrays: ``(out, [out_t,] amax)`` of a call."""

    name: str
    grid: tuple | None  # None: nothing to launch (an empty x)
    shapes: tuple  # the uint8 outputs' shapes: (x's,) or (x's, its transpose's)
    scalars: tuple  # the kernel's arguments between amax and the update's

    def __call__(self, x, scale, amax, update):
        cp = _device.cupy
        with x.device:  # allocate and launch on x's GPU, whichever is current
            outs = tuple(cp.empty(shape, dtype=np.uint8) for shape in self.shapes)
            if amax is None:
                amax = cp.zeros(1, dtype=np.float32)
            if self.grid is not None:
                args = (x, scale, *outs, amax, *self.scalars, *(update or _NO_UPDATE))
                kernels.launch(CAST_FILE, self.name, self.grid, (_THREADS,), args)
        return (*outs, amax)


def _kept_call(x, scale, code, saturate, amax, update, transposed: bool):
    """``(key, result)``: a GPU call's signature (None for NumPy arrays) and, when a launch
    is kept under it, that launch's result on this call's arrays (else None)."""
    if _device.get_array_module(x) is np:
        return None, None
    key = _signature(x, scale, code, saturate, amax, update, transposed)
    kept = KEPT.get(key)
    return key, (None if kept is None else kept(x, scale, amax, update))


def _launch_kept(key, x, scale, amax, update, launch: _CastLaunch):
    """Run ``launch`` on the checked call's arrays; keep it under ``key`` when ``x`` needed
    no copy (a kept call is given ``x`` itself)."""
    with x.device:  # (CuPy copies onto the current GPU)
        aligned = _aligned_input(x)
    if aligned is x:
        if len(KEPT) >= KEPT_CALLS:
            KEPT.clear()
        KEPT[key] = launch
    return launch(aligned, scale, amax, update)


def cast_fp8_with_amax(
    x, scale, out_dtype_code: int, saturate: bool = True, amax=None, update=None
):  # fmt: skip
    """``(out, amax)``: ``x * scale`` cast to FP8 in one pass over ``x``, with its amax.

    Args:
        x: a CuPy float32, float16 or bfloat16 array (any shape; a strided or misaligned one
            is copied first).
        scale: float32 CuPy array of shape [1]: the multiplier (read on the device only).
        out_dtype_code: 0 = E4M3, 1 = E5M2.
        saturate: overflow (and +-inf) to +-max (the default, as Transformer Engine casts);
            False: E4M3 overflows to NaN and E5M2 to inf, as ``astype`` does.
        amax: optional float32 [1] to fold ``max |x|`` into (``max(amax, ...)``); by default
            a fresh one starting at 0.
        update: None, or ``backend.fp8_scale.update_in_cast``'s arguments (CuPy only, a
            non-empty ``x``, ``amax`` given): the kernel's last block then runs the delayed
            scaling update on ``amax``, in the same launch.

    Returns:
        ``out``: uint8 array of ``x``'s shape (the FP8 bits), ``amax``: float32 [1].
    """
    key, done = _kept_call(x, scale, out_dtype_code, saturate, amax, update, False)
    if done is not None:
        return done
    _check_cast_args(x, scale, out_dtype_code, amax)
    _check_update(update, x, amax)
    if key is None:  # NumPy: the twin
        return _twin_cast_into(x, scale, out_dtype_code, saturate, amax)
    n = x.size
    grid = (min(math.ceil(n / (4 * _THREADS)), _MAX_BLOCKS),) if n else None
    name = f"cast_fp8_amax<{_IN_TYPES[np.dtype(x.dtype)]}>"
    scalars = (np.int64(n), np.int32(out_dtype_code), np.int32(saturate))
    return _launch_kept(key, x, scale, amax, update, _CastLaunch(name, grid, (x.shape,), scalars))


def cast_transpose_fp8(
    x, scale, out_dtype_code: int, saturate: bool = True, amax=None, update=None
):  # fmt: skip
    """``(out, out_t, amax)``: :func:`cast_fp8_with_amax` of a 2-D ``x`` [R, C], plus
    ``out_t`` [C, R] = ``out.T`` made contiguous, in the same pass (and ``update`` too)."""
    key, done = _kept_call(x, scale, out_dtype_code, saturate, amax, update, True)
    if done is not None:
        return done
    _check_cast_args(x, scale, out_dtype_code, amax)
    _check_update(update, x, amax)
    if x.ndim != 2:
        raise ValueError(f"cast_transpose_fp8 takes a 2-D array, got shape {x.shape}")
    if x.shape[0] >= 2**31 or x.shape[1] >= 2**31:
        raise ValueError(f"each dimension must be below 2**31, got shape {x.shape}")
    if key is None:  # NumPy: the twin
        out, amax = _twin_cast_into(x, scale, out_dtype_code, saturate, amax)
        return out, np.ascontiguousarray(out.T), amax
    rows, cols = x.shape
    tiles = math.ceil(rows / _TILE) * math.ceil(cols / _TILE)
    grid = (min(tiles, _MAX_BLOCKS),) if tiles else None
    name = f"cast_transpose_fp8_amax<{_IN_TYPES[np.dtype(x.dtype)]}>"
    scalars = (np.int32(rows), np.int32(cols), np.int32(out_dtype_code), np.int32(saturate))
    launch = _CastLaunch(name, grid, ((rows, cols), (cols, rows)), scalars)
    return _launch_kept(key, x, scale, amax, update, launch)


# ---- each kernel against its twin (python -m minitorch_amp's kernel check) ------------------


def check_cast(to_device, to_host) -> bool:
    """Every float16 value, NaNs included, through both casts in both formats and overflow
    modes, scaled by 0.75: the bytes and the amax are the twin's (``to_device`` /
    ``to_host`` move arrays; NumPy on both sides checks the twin against itself)."""
    x = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    scale = np.float32([0.75])
    same = True
    for code in FORMATS:
        for saturate in (True, False):
            out, amax = cast_fp8_with_amax(to_device(x), to_device(scale), code, saturate)
            expected, expected_amax = twin_cast(x, scale, code, saturate)
            same = same and np.array_equal(np.asarray(to_host(out)), expected)
            same = same and bool(np.isnan(np.asarray(to_host(amax))[0]))  # NaNs in x
    grid = x[:4096][np.isfinite(x[:4096])][:3000].reshape(40, 75)
    out, out_t, amax = cast_transpose_fp8(to_device(grid), to_device(scale), E4M3)
    expected, expected_amax = twin_cast(grid, scale, E4M3)
    same = same and np.array_equal(np.asarray(to_host(out_t)), expected.T)
    return same and np.asarray(to_host(amax)).tolist() == expected_amax.tolist()
