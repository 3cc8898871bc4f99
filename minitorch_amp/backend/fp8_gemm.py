"""The Hopper FP8 GEMM's launcher, ``cuda/gemm_fp8_sm90.cu``, and its NumPy twin.

:func:`fp8_gemm` computes ``out = (a @ b) * scale_a * scale_b`` of two FP8 arrays,
accumulated in float32, with the inverse scales as ``torch._scaled_mm`` takes them (float32
arrays of shape [1], read on the device only), rounded once to float32, float16 or bfloat16;
it can write into a given ``out`` (a gradient buffer) and add a ``bias`` of the result's dtype
in its epilogue. Formats and their codes are ``fp8_kernels``' (``0`` = E4M3, ``1`` = E5M2).
:func:`twin_gemm` is the specification; on NumPy arrays :func:`fp8_gemm` runs it, on CuPy
arrays the sm_90a kernel where it applies (else the twin's arithmetic on CuPy).
:func:`check_gemm` holds the kernel to its twin for ``python -m minitorch_amp``'s check.

Example (the twin, without a GPU):
    >>> import numpy as np
    >>> a = np.array([[1.0, 2.0]], "float32").astype(FORMATS[E4M3])
    >>> b = np.array([[3.0], [0.5]], "float32").astype(FORMATS[E4M3])
    >>> one = np.ones(1, np.float32)
    >>> twin_gemm(a, b, one, np.float32([0.5]), np.float32, bias=np.float32([0.25])).tolist()
    [[2.25]]
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from . import device as _device
from . import gemm_sm90 as _sm90
from . import kernels, tensor_maps
from .fp8_kernels import _NULL, E4M3, E5M2, FORMATS, _bfloat16, format_of
from .kernels import array_kind as kind


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


GEMM_FILE = "gemm_fp8_sm90.cu"
_OUT_TYPES = {
    np.dtype("float32"): "float",
    np.dtype("float16"): "__half",
    _bfloat16: "__nv_bfloat16",
}
EPILOGUE_DTYPES = tuple(_OUT_TYPES)  # what the epilogue rounds to
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
    split=True,
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
    key = None  # a GPU call's signature: a call made before is launched as it was
    if _device.get_array_module(a) is not np:
        key = _signature(a, b_t, scale_a, scale_b, out_dtype, a_code, b_code, out, bias)
        kept = KEPT.get(key)
        if kept is not None:
            return kept(a, b_t, scale_a, scale_b, out, bias)
    codes = _check_gemm_args(a, b_t, scale_a, scale_b, out_dtype, a_code, b_code)
    m, n = a.shape[0], b_t.shape[0]
    check_gemm_out(out, a, (m, n), out_dtype)
    check_gemm_bias(bias, a, n, out_dtype)
    if _device.get_array_module(a, b_t) is np:
        return _into(out, twin_gemm(a, b_t.T, scale_a, scale_b, out_dtype, *codes, bias=bias))
    with a.device:  # allocate, copy and launch on the operands' GPU, whichever is current
        out, launch = _first_launch(a, b_t, scale_a, scale_b, out_dtype, codes, out, bias)
    contiguous = a.flags.c_contiguous and b_t.flags.c_contiguous
    contiguous = contiguous and (bias is None or bias.flags.c_contiguous)
    if launch is not None and key is not None and contiguous:  # (else a call copies first)
        if len(KEPT) >= KEPT_CALLS:
            KEPT.clear()
        KEPT[key] = launch
    return out


def _first_launch(a, b_t, scale_a, scale_b, out_dtype, codes, out, bias):
    """``(out, launch)``: a checked CuPy call's product, and the launch to keep for calls
    like it (None when the kernel does not apply and CuPy computed it)."""
    cp = _device.cupy
    (m, k), n = a.shape, b_t.shape[0]
    a8 = cp.ascontiguousarray(a.view(np.uint8))
    b8 = cp.ascontiguousarray(b_t.view(np.uint8))
    if not _kernel_applies(a8, b8, m, n, k):
        product = _gemm_on_cupy(a8, b8, scale_a, scale_b, out_dtype, codes)
        return _into(out, add_bias(product, bias)), None
    bn, grid = gemm_plan(m, n, _sm90.sm_count())
    name = gemm_kernel_name(out_dtype, *codes, bn)
    sizes = tuple(np.int32(x) for x in (m, n, k, n))  # M, N, K, ldc
    launch = _Launch(name, (grid, 1, 1), _sm90.smem_bytes(bn), bn, np.dtype(out_dtype), sizes)
    if bias is not None:
        bias = cp.ascontiguousarray(bias)
    return launch(a8, b8, scale_a, scale_b, out, bias), launch


# ---- kept launches: a step's FP8 GEMMs, checked and planned once ---------------------------
#
# As ``gemm_gpu.py`` keeps the 16-bit GEMM's: everything a call checks and decides (the
# formats, shapes, the kernel and its plan) follows from its :func:`_signature`, so the first
# call on C-contiguous operands keeps its launch under it, and the next call with that
# signature allocates its output (unless ``out``), finds its tensor maps and launches.
KEPT_CALLS = 1024  # signatures kept; the dict is emptied when full (a step needs a few)
KEPT: dict = {}  # signature -> _Launch


def _signature(a, b_t, scale_a, scale_b, out_dtype, a_code, b_code, out, bias):
    """What a GPU call's checks and choices follow from (None: nothing is kept): the
    operands' shapes, strides, dtypes and codes, the other arrays' kinds, the output dtype,
    TMA's alignment of the operands, the device (its id, whether it is a Hopper GPU, its SM
    count) and ``MINITORCH_AMP_GEMM_KERNEL``."""
    if type(b_t) is not type(a):
        return None
    return (
        a.shape, a.strides, a.dtype, a_code, b_t.shape, b_t.strides, b_t.dtype, b_code,
        kind(scale_a), kind(scale_b), out_dtype, kind(out), kind(bias),
        (a.data.ptr | b_t.data.ptr) % 16 == 0,
        a.device.id, _sm90.device_is_hopper(), _sm90.sm_count(),
        kernels.setting(_sm90.KERNEL_ENV, ""),
    )  # fmt: skip


class _Launch(NamedTuple):
    """One FP8 GEMM launch decided but for its arrays: ``launch(a, b_t, scale_a, scale_b,
    out, bias)`` on C-contiguous operands of one-byte elements."""

    name: str
    grid: tuple
    shared_mem: int
    bn: int  # the tile's width
    out_dtype: np.dtype
    sizes: tuple  # (M, N, K, ldc) as the kernel's int32 arguments

    def __call__(self, a, b_t, scale_a, scale_b, out, bias):
        m, n = int(self.sizes[0]), int(self.sizes[1])
        with a.device:  # allocate and launch on the operands' GPU, whichever is current
            if out is None:
                out = _device.cupy.empty((m, n), dtype=self.out_dtype)
            # Each FP8 row as K / 2 two-byte words: gemm_sm90.py's maps, boxes of 128 bytes.
            map_a = _sm90.operand_map(a.view(np.uint8).view(np.float16), True, _sm90.BM)
            map_b = _sm90.operand_map(b_t.view(np.uint8).view(np.float16), True, self.bn)
            args = (map_a, map_b, out, _NULL if bias is None else bias, scale_a, scale_b)
            block = (_sm90.THREADS, 1, 1)
            kernels.launch(
                GEMM_FILE, self.name, self.grid, block, args + self.sizes, self.shared_mem
            )
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


# ---- the kernel against its twin (python -m minitorch_amp's kernel check) ---------------


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
