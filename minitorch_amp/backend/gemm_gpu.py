"""The 16-bit GEMM's GPU side: ``cuda/gemm_fp16.cu``'s names and tiles, the batch, the choice
of kernel, and the launches kept per kind of call.

``backend/gemm.py`` owns the contract (arguments, checks, the NumPy twin) and hands a
checked call on a GPU to :func:`launch`. A batch runs as one launch where it can (see
``gemm.py``'s docstring); a 2-D launch goes to ``gemm_sm90.cu`` on a Hopper GPU when TMA
can address its operands, else to ``gemm_fp16.cu`` (:func:`_launch_2d`), and is kept under
the call's :func:`signature`, so that ``gemm.gemm`` answers the next call like it from
:data:`KEPT` without checking or planning it again.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from . import device as _device
from . import gemm_bf16_sm90 as _sm90_bf16
from . import gemm_sm90 as _sm90
from . import kernels
from .dtypes import bfloat16, float16, float32
from .kernels import register

# Tile sizes and pipeline depth of cuda/gemm_fp16.cu (tests/test_gemm.py checks they agree).
BLOCK_M = 128
BLOCK_N = 128
BLOCK_K = 32
STAGES = 4
THREADS = 256
SHARED_MEM_BYTES = STAGES * (BLOCK_M + BLOCK_N) * BLOCK_K * 2  # 64 KiB of 16-bit tiles

FILE = "gemm_fp16.cu"
_LAYOUTS = {(False, False): "false,false", (False, True): "false,true", (True, False): "true,false"}
_OUT_TYPES = {float16: "__half", float32: "float"}
_BF16_OUT_TYPES = {bfloat16: "__nv_bfloat16", float32: "float"}
_INT32_MAX = 2**31 - 1


def kernel_name(transpose_a: bool, transpose_b: bool, out_dtype, in_dtype=float16) -> str:
    """The name expression of the instantiation for this layout, output and input dtype."""
    layout = _LAYOUTS[(transpose_a, transpose_b)]
    if np.dtype(in_dtype) == bfloat16:
        return f"gemm_bf16<{layout},{_BF16_OUT_TYPES[np.dtype(out_dtype)]}>"
    return f"gemm_f16<{layout},{_OUT_TYPES[np.dtype(out_dtype)]}>"


NAMES = tuple(kernel_name(ta, tb, out) for out in _OUT_TYPES for ta, tb in _LAYOUTS)
# The bfloat16 instantiations: the same body with the bf16 mma.sync.
BF16_NAMES = tuple(
    kernel_name(ta, tb, out, bfloat16) for out in _BF16_OUT_TYPES for ta, tb in _LAYOUTS
)
KERNELS = register(FILE, names=NAMES + BF16_NAMES, options=(f"-DGEMM_STAGES={STAGES}",), split=True)


def rows_cols(shape, transpose: bool) -> tuple[int, int]:
    """Rows and columns of ``op(x)`` for an array of ``shape``."""
    return (shape[-1], shape[-2]) if transpose else (shape[-2], shape[-1])


# ---- kept calls: a step's GEMMs, checked and planned once --------------------------------
#
# A training step makes the same few GEMM calls step after step: the same shapes, dtypes,
# flags and devices, often the same buffers. Everything a call checks and decides (the
# arguments, the kernel, its plan, its scalar arguments) follows from what
# :func:`signature` lists, so a 2-D call keeps its launch (``gemm_sm90.Launch`` or
# ``_MmaSync``) under its signature, and the next call with that signature only allocates
# its output and launches: the tensor maps are still looked up by address (their own cache).
# A float16 call's own Python on the Hopper path, on the CPU with the GPU stood in for
# (``benchmarks/launch_cost.py --stand-in``, docs/benchmarks.md): 19.7 µs before, 7.8 after.
KEPT_CALLS = 1024  # signatures kept; the dict is emptied when full (a step needs a dozen)
KEPT: dict = {}  # signature -> _Kept


def signature(a, b, transpose_a, transpose_b, bias, relu, alpha, beta, c, out_dtype, product):
    """What a GPU call's checks and choices depend on (None: nothing may be kept): the
    arrays' shapes, strides and dtypes (``b``, ``bias`` and ``c`` with their type: a NumPy
    one is refused, not kept), the flags as the caller passed them, the scalars as the
    kernel gets them (:func:`_scalar`), TMA's alignment of the operands, and the device: its
    id, whether it is a Hopper GPU and its SM count (asked of the current device: a cheap,
    safe superset) and ``MINITORCH_AMP_GEMM_KERNEL``. Inside ``gemm_sm90.forced_plan``
    nothing is kept."""
    if type(b) is not type(a) or _sm90.plan_forced():
        return None
    return (
        a.shape, a.strides, a.dtype, b.shape, b.strides, b.dtype,
        (a.data.ptr | b.data.ptr) % 16 == 0,
        kernels.array_kind(bias), kernels.array_kind(c),
        transpose_a, transpose_b, relu, _scalar(alpha), _scalar(beta),
        out_dtype, product,
        a.device.id, _sm90.device_is_hopper(), _sm90.sm_count(),
        kernels.setting(_sm90.KERNEL_ENV, ""),
    )  # fmt: skip


def _scalar(x):
    """``alpha`` or ``beta`` in a signature: as the kernel gets it. A Python float with its
    sign (``-0.0 == 0.0``, but the kernel's ``alpha * acc`` keeps the sign), anything else as
    its float32 bytes (a 0-d array, which does not hash, an ``np.float32``, a bool)."""
    if x.__class__ is float:
        return x, math.copysign(1.0, x)
    return np.float32(x).tobytes()


def launch(a, b, transpose_a, transpose_b, epilogue, c, shape, out_dtype, key) -> object:
    """``out`` (``c``, else a new array of ``shape`` and ``out_dtype``) computed on the GPU
    by a checked call (``gemm.py``'s). A call done by one launch is kept under ``key``: a
    2-D call, and a batch done by one ``gemm_fp16.cu`` launch (:func:`_on_gpu`)."""
    with a.device:  # launch where the data is, not on whichever device is current
        out = c if c is not None else _device.cupy.empty(shape, dtype=out_dtype)
        if len(shape) > 2 or (transpose_a and transpose_b):
            made = _on_gpu(a, b, transpose_a, transpose_b, epilogue, out, shape[:-2])
        else:
            made = _launch_2d(a, b, transpose_a, transpose_b, epilogue, out)
    if key is not None and made is not None:
        if len(KEPT) >= KEPT_CALLS:
            KEPT.clear()
        KEPT[key] = _Kept(out.shape, out.dtype, made)
    return out


class _Kept(NamedTuple):
    """A kept call: its output's shape and dtype, and its launch."""

    shape: tuple
    dtype: np.dtype
    launch: object  # gemm_sm90.Launch or _MmaSync: launch(a, b, bias, out)

    def __call__(self, a, b, bias, c):
        with a.device:
            out = c if c is not None else _device.cupy.empty(self.shape, dtype=self.dtype)
            self.launch(a, b, bias, out)
        return out


def _on_gpu(a, b, transpose_a, transpose_b, epilogue, out, batch) -> _MmaSync | None:
    """Launch the kernel once, or once per batch entry, writing into ``out``. Returns the
    launch when one ``gemm_fp16.cu`` launch on the arrays' first bytes did the whole call
    (it reads each array at its address: the next call like this one gives it ``a``, ``b``
    and ``out`` themselves), else None."""
    if transpose_a and transpose_b:  # no kernel for TT (no backward pass needs it)
        a = _device.cupy.ascontiguousarray(a.swapaxes(-1, -2))
        transpose_a = False
        _on_gpu(a, b, transpose_a, transpose_b, epilogue, out, batch)
        return None  # (its launch reads the copy)
    if not batch:
        return _launch_2d(a, b, transpose_a, transpose_b, epilogue, out)
    if b.ndim == 2 and not transpose_a and a.shape[:-2] == batch:
        # the batch folds into M: (..., M, K) @ (K, N) is one (batch * M, K) @ (K, N)
        rows = math.prod(a.shape[:-1])
        a2 = a.reshape(rows, a.shape[-1])
        made = _launch_2d(a2, b, False, transpose_b, epilogue, out.reshape(rows, out.shape[-1]))
        return made if isinstance(made, _MmaSync) else None  # (the Hopper one maps a2's shape)
    entries, (m, n) = math.prod(batch), out.shape[-2:]
    if entries == 0:
        return None
    a3, b3 = (x.reshape(-1, *x.shape[-2:]) for x in (a, b))
    k = rows_cols(a.shape, transpose_a)[1]
    strides = _batch_stride(a, batch), _batch_stride(b, batch)
    # a launch per entry where no one stride walks the entries ((2, 1) with (1, 3)), or where
    # each entry is big enough for the Hopper kernel to win back its launch
    big = m * n * k >= HOPPER_ENTRY_FROM and _sm90.usable(a3[0], b3[0], k)
    if None in strides or big:
        for index in np.ndindex(*batch):
            a2, b2 = _batch_item(a, index), _batch_item(b, index)
            _launch_2d(a2, b2, transpose_a, transpose_b, epilogue, out[index])
        return None
    # every entry in one launch (the kernel's gridDim.y), MAX_BATCHES at a time
    out3 = out.reshape(entries, m, n)
    for start in range(0, entries, MAX_BATCHES):
        count = min(MAX_BATCHES, entries - start)
        a2, b2 = (x3[start if stride else 0] for x3, stride in zip((a3, b3), strides))
        batched = (count, *strides, m * n)
        made = _launch_2d(a2, b2, transpose_a, transpose_b, epilogue, out3[start], batched)
    one = entries <= MAX_BATCHES and isinstance(made, _MmaSync)  # (not the Hopper kernel's:
    return made if one else None  # its maps hold a2's shape; entry 0 starts where a starts)


MAX_BATCHES = 65535  # entries per launch: gridDim.y's limit
# NOTE: M * N * K of one entry from which a launch per entry on the Hopper kernel should beat
# one mma.sync launch for all (an estimate, not measured: mma.sync runs at 0.3-0.4x cuBLAS on
# an H100, the Hopper kernel at 0.88-0.94x, and a launch costs 40-50 us of host time, so the
# Hopper kernel wins once an entry takes it about 20 us, some 2**32 multiply-adds).
HOPPER_ENTRY_FROM = 2**32


def _batch_stride(x, batch) -> int | None:
    """Elements between consecutive batch entries of the C-contiguous ``x``: a matrix's size
    when ``x`` has the whole batch, 0 when it has none (one matrix for all), else None."""
    if x.shape[:-2] == batch:
        return x.shape[-2] * x.shape[-1]
    if math.prod(x.shape[:-2]) == 1:
        return 0
    return None


def _batch_item(x, index):
    """``x``'s matrix for entry ``index`` of the broadcast batch shape."""
    own = index[len(index) - (x.ndim - 2) :]
    return x[tuple(i if size != 1 else 0 for i, size in zip(own, x.shape[:-2]))]


def _launch_2d(a, b, transpose_a, transpose_b, epilogue, out, batched=(1, 0, 0, 0)):
    """One launch on 2-D contiguous arrays; ``out`` already holds ``c`` when ``beta != 0``.
    Returns the launch made, kept for the next call like this one (None: nothing launched).

    The one place that picks the kernel: ``gemm_sm90.cu`` (wgmma + TMA; bfloat16 through
    ``gemm_bf16_sm90.cu``) on compute capability 9.0 when TMA can address the operands, else
    this file's ``gemm_fp16.cu`` (``mma.sync``, sm_80 and later; ``gemm_f16`` or
    ``gemm_bf16``). All compute the same specification.

    ``batched`` is ``(entries, stride_a, stride_b, stride_out)``: ``a``, ``b`` and ``out``
    are the first entry's matrices, the others ``stride_*`` elements further on (0: the same
    matrix). More than one entry runs on ``gemm_fp16.cu``, whose blocks take their entry
    from ``blockIdx.y``: one launch where a launch per entry cost its host time each
    (attention's scores and weighted sums, a matrix per batch row and head).
    """
    m, n = out.shape
    k = rows_cols(a.shape, transpose_a)[1]
    if m == 0 or n == 0:
        return None
    lda, ldb = a.shape[1], b.shape[1]
    if max(m, n, k, lda, ldb, math.ceil(m / BLOCK_M) * math.ceil(n / BLOCK_N)) > _INT32_MAX:
        raise ValueError(f"gemm dimensions must fit in int32, got M={m}, N={n}, K={k}")
    flags = epilogue.flags()
    if batched[0] == 1 and _sm90.usable(a, b, k):
        variant = _sm90_bf16.BFLOAT16 if a.dtype == bfloat16 else _sm90.FLOAT16
        dtype = out.dtype
        launch = _sm90.prepare(m, n, k, transpose_a, transpose_b, epilogue, dtype, flags, variant)
    else:
        grid, name, sizes, tail = _mma_sync_recipe(
            m, n, k, lda, ldb, flags, batched, transpose_a, transpose_b, out.dtype, a.dtype
        )
        launch = _MmaSync(name, grid, (*sizes, epilogue.alpha, epilogue.beta, *tail))
    launch(a, b, epilogue.bias, out)
    return launch


class _MmaSync(NamedTuple):
    """One ``gemm_fp16.cu`` launch decided but for its arrays (as ``gemm_sm90.Launch``)."""

    name: str
    grid: tuple
    scalars: tuple  # (M, N, K, lda, ldb, ldc, alpha, beta, flags, the three batch strides)

    def __call__(self, a, b, bias, out) -> None:
        bias = bias if bias is not None else out  # a valid pointer, never read without the flag
        args = (a, b, out, bias, *self.scalars)
        kernels.launch(FILE, self.name, self.grid, (THREADS, 1, 1), args, SHARED_MEM_BYTES)


@functools.lru_cache(maxsize=1024)
def _mma_sync_recipe(m, n, k, lda, ldb, flags, batched, transpose_a, transpose_b, out, in_):
    """The grid, kernel name and scalar arguments of a ``gemm_fp16.cu`` launch, before and
    after ``alpha, beta``: ``(M, N, K, lda, ldb, ldc)`` as int32, then ``flags`` and the
    three batch strides. Kept per shape, as ``gemm_sm90.recipe`` keeps the Hopper kernel's
    (a step launches the same few shapes again and again)."""
    entries, stride_a, stride_b, stride_out = batched
    blocks = math.ceil(m / BLOCK_M) * math.ceil(n / BLOCK_N)
    sizes = tuple(np.int32(x) for x in (m, n, k, lda, ldb, n))  # ldc = N: out is C-contiguous
    tail = (np.int32(flags), *(np.int64(x) for x in (stride_a, stride_b, stride_out)))
    return (blocks, entries, 1), kernel_name(transpose_a, transpose_b, out, in_), sizes, tail
