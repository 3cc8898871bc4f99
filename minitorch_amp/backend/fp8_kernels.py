"""The FP8 kernels' launchers: ``cuda/fp8_cast.cu`` (scaled cast + amax, and with the
transposed copy) and ``cuda/gemm_fp8_sm90.cu`` (the Hopper FP8 GEMM), with their NumPy twins.

Formats are numbered as the kernels take them: ``0`` = E4M3 (``float8_e4m3fn``), ``1`` = E5M2
(``float8_e5m2``). FP8 arrays on the GPU are 8-bit storage: the launchers return ``uint8``
arrays, which the caller views as the ``ml_dtypes`` dtype (``out.view(float8_e4m3fn)``), and
take either. Every scale lives on the device (a float32 array of shape [1]) and is never
read on the host, so an FP8 step stays free of host syncs.

* :func:`cast_fp8_with_amax`: ``out = fp8(x * scale)`` and ``amax = max |x|``, one pass;
* :func:`cast_transpose_fp8`: the same, plus ``out.T`` made contiguous (Hopper's FP8 ``wgmma``
  reads both operands K-major, so a GEMM that needs the other layout takes this copy);
* :func:`fp8_gemm`: ``out = (a @ b) * scale_a * scale_b`` accumulated in float32, with the
  inverse scales as ``torch._scaled_mm`` takes them.

The twins (:func:`twin_cast`, :func:`twin_gemm`) are the specification, in NumPy and
``ml_dtypes``; the kernels match the cast twin bit for bit (``tests/fp8_cast_emulator.cpp``
checks every float16 and bfloat16 value and 10^6 float32 ones). On NumPy arrays every
launcher runs its twin. :func:`check_cast` and :func:`check_gemm` hold each kernel to its
twin on one small input, for ``python -m minitorch_amp``'s kernel check.

Example (the twin, without a GPU):
    >>> import numpy as np
    >>> out, amax = twin_cast(np.array([1.0, 500.0, -3e-3], "float32"), np.float32(1.0), 0)
    >>> out.tolist(), float(amax[0])  # 500 saturates to 448; -3e-3 is 1.54 units of 2**-9: 2
    ([56, 126, 130], 500.0)
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from . import device as _device
from . import gemm_sm90 as _sm90
from . import kernels, tensor_maps

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
_TILE = 32


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


def twin_gemm(a, b, scale_a, scale_b, out_dtype, a_code=None, b_code=None, bias=None):
    """``out_dtype((a @ b) * (scale_a * scale_b))`` on NumPy: the FP8 operands decoded exactly,
    products and sums in float32, the two inverse scales multiplied in float32 first; then
    :func:`add_bias` when a ``bias`` [N] of ``out_dtype`` is given."""
    a32 = np.asarray(a).view(FORMATS[format_of(a.dtype, a_code)]).astype(np.float32)
    b32 = np.asarray(b).view(FORMATS[format_of(b.dtype, b_code)]).astype(np.float32)
    alpha = np.float32(np.asarray(scale_a).reshape(-1)[0]) * np.float32(
        np.asarray(scale_b).reshape(-1)[0]
    )
    return add_bias(((a32 @ b32) * alpha).astype(out_dtype), bias)


@np.errstate(over="ignore", invalid="ignore")  # inf and NaN are values here, as on the GPU
def add_bias(product, bias):
    """``product + bias`` (``bias`` None: ``product``), the add the kernel's epilogue does:
    for float16 and bfloat16 NumPy and ml_dtypes widen both to float32 (exactly), add and
    round once to the product's dtype, as the epilogue does (float32: one float32 add)."""
    return product if bias is None else product + bias


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
    _check_cast_args(x, scale, out_dtype_code, amax)
    _check_update(update, x, amax)
    if _device.get_array_module(x) is np:  # NumPy: the twin
        return _twin_cast_into(x, scale, out_dtype_code, saturate, amax)
    cp = _device.cupy
    x = _aligned_input(x)
    out = cp.empty(x.shape, dtype=np.uint8)
    if amax is None:
        amax = cp.zeros(1, dtype=np.float32)
    n = x.size
    if n:
        grid = (min(math.ceil(n / (4 * _THREADS)), _MAX_BLOCKS),)
        name = f"cast_fp8_amax<{_IN_TYPES[np.dtype(x.dtype)]}>"
        args = (x, scale, out, amax, np.int64(n), np.int32(out_dtype_code), np.int32(saturate))
        kernels.launch(CAST_FILE, name, grid, (_THREADS,), args + (update or _NO_UPDATE))
    return out, amax


def cast_transpose_fp8(
    x, scale, out_dtype_code: int, saturate: bool = True, amax=None, update=None
):  # fmt: skip
    """``(out, out_t, amax)``: :func:`cast_fp8_with_amax` of a 2-D ``x`` [R, C], plus
    ``out_t`` [C, R] = ``out.T`` made contiguous, in the same pass (and ``update`` too)."""
    _check_cast_args(x, scale, out_dtype_code, amax)
    _check_update(update, x, amax)
    if x.ndim != 2:
        raise ValueError(f"cast_transpose_fp8 takes a 2-D array, got shape {x.shape}")
    if x.shape[0] >= 2**31 or x.shape[1] >= 2**31:
        raise ValueError(f"each dimension must be below 2**31, got shape {x.shape}")
    if _device.get_array_module(x) is np:  # NumPy: the twin
        out, amax = _twin_cast_into(x, scale, out_dtype_code, saturate, amax)
        return out, np.ascontiguousarray(out.T), amax
    cp = _device.cupy
    x = _aligned_input(x)
    rows, cols = x.shape
    out = cp.empty((rows, cols), dtype=np.uint8)
    out_t = cp.empty((cols, rows), dtype=np.uint8)
    if amax is None:
        amax = cp.zeros(1, dtype=np.float32)
    tiles = math.ceil(rows / _TILE) * math.ceil(cols / _TILE)
    if tiles:
        name = f"cast_transpose_fp8_amax<{_IN_TYPES[np.dtype(x.dtype)]}>"
        args = (x, scale, out, out_t, amax, np.int32(rows), np.int32(cols))
        args += (np.int32(out_dtype_code), np.int32(saturate), *(update or _NO_UPDATE))
        grid = (min(tiles, _MAX_BLOCKS),)
        kernels.launch(CAST_FILE, name, grid, (_THREADS,), args)
    return out, out_t, amax


# ---- the FP8 GEMM --------------------------------------------------------------------------

GEMM_FILE = "gemm_fp8_sm90.cu"
_OUT_TYPES = {
    np.dtype("float32"): "float",
    np.dtype("float16"): "__half",
    _bfloat16: "__nv_bfloat16",
}
_FORMAT_PAIRS = ((E4M3, E4M3), (E4M3, E5M2), (E5M2, E4M3))  # torch._scaled_mm's, too
TILE_WIDTHS = (128, 256)
K_MULTIPLE = 16  # TMA: the rows of a K-major FP8 operand must be 16 bytes apart


def gemm_kernel_name(out_dtype, a_code: int, b_code: int, bn: int) -> str:
    return f"gemm_fp8_sm90<{_OUT_TYPES[np.dtype(out_dtype)]},{a_code},{b_code},{bn}>"


GEMM_KERNELS = kernels.register(
    GEMM_FILE,
    names=tuple(
        gemm_kernel_name(out, a, b, bn)
        for out in _OUT_TYPES
        for a, b in _FORMAT_PAIRS
        for bn in TILE_WIDTHS
    ),
    arch=_sm90.ARCH,
)


def gemm_plan(m: int, n: int, sms: int) -> tuple[int, int]:
    """``(tile width, grid)``: 128 x 256 tiles when they still fill every SM (fewer loads
    per product), else 128 x 128; one persistent CTA per SM at most."""
    tiles_m = math.ceil(m / _sm90.BM)
    bn = 256 if tiles_m * math.ceil(n / 256) >= sms else 128
    return bn, min(tiles_m * math.ceil(n / bn), sms)


def _check_gemm_args(a, b_t, scale_a, scale_b, out_dtype, a_code, b_code) -> tuple[int, int]:
    codes = (format_of(a.dtype, a_code), format_of(b_t.dtype, b_code))
    if codes not in _FORMAT_PAIRS:
        raise ValueError(
            "an FP8 GEMM takes E4M3 x E4M3, E4M3 x E5M2 or E5M2 x E4M3, not E5M2 x E5M2"
        )
    if a.ndim != 2 or b_t.ndim != 2 or a.shape[1] != b_t.shape[1]:
        raise ValueError(f"fp8 GEMM shapes do not match: a {a.shape}, b as [N, K] {b_t.shape}")
    if np.dtype(out_dtype) not in _OUT_TYPES:
        raise TypeError(f"out_dtype must be float32, float16 or bfloat16, got {out_dtype}")
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s.shape != (1,) or s.dtype != np.float32:
            raise ValueError(
                f"{name} must be a float32 array of shape [1], got {s.dtype} {s.shape}"
            )
    return codes


def fp8_gemm(a, b, scale_a, scale_b, out_dtype, a_code=None, b_code=None, out=None, bias=None):
    """``out_dtype((a @ b) * scale_a * scale_b)``, float32 accumulation (``torch._scaled_mm``).

    Args:
        a: [M, K] FP8 (``float8_e4m3fn`` / ``float8_e5m2``, or uint8 storage with ``a_code``).
        b: [K, N] FP8, as NumPy sees it; ``w.T`` of a contiguous ``w`` [N, K] costs no copy
            (the kernel reads B K-major), any other layout is copied K-major first.
        scale_a, scale_b: the inverse scales, float32 arrays of shape [1] on the operands'
            device (read on the device only).
        out_dtype: float32, float16 or bfloat16.
        out: None, or a C-contiguous ``out_dtype`` array [M, N] of the operands' kind to
            write the result into (a parameter's gradient buffer: no copy after the GEMM);
            it is returned.
        bias: None, or an ``out_dtype`` array [N] of the operands' kind added in the
            epilogue to the product as stored (:func:`add_bias`): a Linear's matmul and add
            in one launch.

    Raises:
        ValueError, TypeError: operands, scales or ``out`` of the wrong shape, dtype, format
            or kind; nothing is launched or written then.

    NumPy operands run the twin; CuPy ones the Hopper kernel where it applies (compute
    capability 9.0, ``K % 16 == 0``, ``MINITORCH_AMP_GEMM_KERNEL`` not ``sm80``), else the
    twin's arithmetic on CuPy (decoded through a 256-entry table, float32 matmul).
    """
    return fp8_gemm_nt(a, b.T, scale_a, scale_b, out_dtype, a_code, b_code, out, bias)


def fp8_gemm_nt(
    a, b_t, scale_a, scale_b, out_dtype, a_code=None, b_code=None, out=None, bias=None
):  # fmt: skip
    """:func:`fp8_gemm` with B given K-major, as ``b_t`` [N, K] (what the kernel reads)."""
    codes = _check_gemm_args(a, b_t, scale_a, scale_b, out_dtype, a_code, b_code)
    m, k = a.shape
    n = b_t.shape[0]
    check_gemm_out(out, a, (m, n), out_dtype)
    check_gemm_bias(bias, a, n, out_dtype)
    if _device.get_array_module(a, b_t) is np:
        return _into(out, twin_gemm(a, b_t.T, scale_a, scale_b, out_dtype, *codes, bias=bias))
    cp = _device.cupy
    a8 = cp.ascontiguousarray(a.view(np.uint8))
    b8 = cp.ascontiguousarray(b_t.view(np.uint8))
    if not _kernel_applies(a8, b8, m, n, k):
        product = _gemm_on_cupy(a8, b8, scale_a, scale_b, out_dtype, codes)
        return _into(out, add_bias(product, bias))
    if out is None:
        out = cp.empty((m, n), dtype=out_dtype)
    bn, grid = gemm_plan(m, n, _sm90.sm_count())
    # Each FP8 row as K / 2 two-byte words: gemm_sm90.py's maps, boxes of 128 bytes.
    map_a = _sm90.operand_map(a8.view(np.float16), k_major=True, rows=_sm90.BM)
    map_b = _sm90.operand_map(b8.view(np.float16), k_major=True, rows=bn)
    i32 = np.int32
    bias = _NULL if bias is None else cp.ascontiguousarray(bias)
    args = (map_a, map_b, out, bias, scale_a, scale_b, i32(m), i32(n), i32(k), i32(n))
    name = gemm_kernel_name(out_dtype, *codes, bn)
    kernels.launch(GEMM_FILE, name, (grid, 1, 1), (_sm90.THREADS, 1, 1), args, _sm90.smem_bytes(bn))
    return out


def check_gemm_out(out, a, shape: tuple, out_dtype) -> None:
    """Raise unless ``out`` is None or what an FP8 GEMM of the operand ``a``'s kind can write
    its ``shape`` ``out_dtype`` result into (``fp8_matmul`` checks its ``out`` here too)."""
    if out is None:
        return
    if _device.get_array_module(out) is not _device.get_array_module(a) or not hasattr(
        out, "flags"
    ):
        raise TypeError("fp8 GEMM: out must be an array of the operands' kind (NumPy or CuPy)")
    if out.dtype != np.dtype(out_dtype) or out.shape != shape or not out.flags.c_contiguous:
        raise ValueError(
            f"fp8 GEMM: out ({out.dtype} {list(out.shape)}, C-contiguous: "
            f"{out.flags.c_contiguous}) must be a C-contiguous {np.dtype(out_dtype)} array of "
            f"the product's shape {list(shape)}"
        )


def check_gemm_bias(bias, a, n: int, out_dtype) -> None:
    """Raise unless ``bias`` is None or an ``out_dtype`` [N] array of the operand ``a``'s
    kind (what the epilogue adds)."""
    if bias is None:
        return
    if _device.get_array_module(bias) is not _device.get_array_module(a) or not hasattr(
        bias, "flags"
    ):
        raise TypeError("fp8 GEMM: bias must be an array of the operands' kind (NumPy or CuPy)")
    if bias.dtype != np.dtype(out_dtype) or bias.shape != (n,):
        raise ValueError(
            f"fp8 GEMM: bias ({bias.dtype} {list(bias.shape)}) must be a {np.dtype(out_dtype)} "
            f"array of shape [{n}]; add another bias to the result instead"
        )


def _into(out, result):
    """``result`` written into ``out`` (returned), or ``result`` itself when ``out`` is None."""
    if out is None:
        return result
    out[...] = result
    return out


def _kernel_applies(a8, b8, m: int, n: int, k: int) -> bool:
    if _sm90.requested() == "sm80" or not _sm90.device_is_hopper():
        return False
    if k < K_MULTIPLE or k % K_MULTIPLE or min(m, n) < 1:
        return False
    return all(tensor_maps.tma_addressable(x.view(np.float16)) for x in (a8, b8))


def _gemm_on_cupy(a8, b8, scale_a, scale_b, out_dtype, codes):
    """The twin's arithmetic on CuPy: decode through a table kept on the device, float32
    matmul, the scales' float32 product, one rounding."""
    cp = _device.cupy
    decoded = []
    for x, code in ((a8, codes[0]), (b8, codes[1])):
        key = ("fp8 decode table", cp.cuda.runtime.getDevice(), code)
        table = kernels.device_table(
            key,
            lambda code=code: np.arange(256, dtype=np.uint8).view(FORMATS[code]).astype(np.float32),
        )
        decoded.append(table[x])
    alpha = scale_a * scale_b
    return (cp.matmul(decoded[0], decoded[1].T) * alpha).astype(out_dtype)


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


def check_gemm(to_device, to_host) -> bool:
    """Small integers (exact float32 sums in any order) through every format pair, with tails
    in M, N and K, each output dtype once plain and once with a bias in the epilogue: the
    result's bytes are the twin's. On a GPU it needs compute capability 9.0 (else the
    launcher runs the twin's arithmetic on CuPy, which proves nothing here)."""
    rng = np.random.default_rng(0)
    scale_a, scale_b = np.float32([0.5]), np.float32([0.375])
    same = True
    for (a_code, b_code), out_dtype in zip(_FORMAT_PAIRS, _OUT_TYPES):
        a = rng.integers(-4, 5, (136, 272)).astype(np.float32).astype(FORMATS[a_code])
        b_t = rng.integers(-4, 5, (200, 272)).astype(np.float32).astype(FORMATS[b_code])
        bias = (rng.standard_normal(200) * 3).astype(np.float32).astype(out_dtype)
        a8, b8 = a.view(np.uint8), b_t.view(np.uint8)
        moved = [to_device(v) for v in (a8, b8, scale_a, scale_b)]
        for add in (None, bias):
            on_device = None if add is None else to_device(add.view(np.uint8)).view(out_dtype)
            out = fp8_gemm_nt(*moved, out_dtype, a_code, b_code, bias=on_device)
            expected = twin_gemm(a, b_t.T, scale_a, scale_b, out_dtype, bias=add)
            same = same and np.array_equal(
                np.asarray(to_host(out)).view(np.uint8), expected.view(np.uint8)
            )
    return same
