"""The Hopper GEMM's launcher: ``cuda/gemm_sm90.cu``, its tensor maps and its shape rule.

``backend/gemm.py`` owns the contract (arguments, checks, the NumPy twin) and calls
:func:`usable` / :func:`launch` for every 2-D launch on a GPU; this module decides nothing
about numerics, only how the Hopper kernel is fed:

* **where it runs**: compute capability 9.0 (the kernel is built for ``sm_90a``: ``wgmma`` and
  ``setmaxnreg`` exist nowhere else), and operands TMA can address (16-byte aligned, rows a
  multiple of 16 bytes apart, ``K >= 1``). Everything else keeps ``gemm_fp16.cu``;
  ``MINITORCH_AMP_GEMM_KERNEL=sm80`` forces that kernel everywhere (benchmarks compare both);
* **tensor maps**: one ``CUtensorMap`` per operand, its box one 128-byte swizzle row wide
  (:func:`operand_box`), encoded and kept by ``backend/tensor_maps.py``, passed by value;
* **the shape rule** (:func:`plan`): tile width and split-K per problem;
* **the recipe** (:func:`recipe`): the plan, kernel names and ``int32`` sizes of a shape,
  worked out once and kept, as the tensor maps are.

Example (the pure parts run anywhere):
    >>> plan(512, 4096, 4096, sms=132)
    Plan(bn=128, splits=1, grid=128, pingpong=False)
    >>> operand_box(k_major=True, rows=128)
    (64, 128)
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from . import device as _device
from . import graphs as _graphs
from . import kernels, tensor_maps
from .dtypes import float16, float32
from .kernels import register

FILE = "gemm_sm90.cu"
ARCH = "sm_90a"
# Mirrors of cuda/gemm_sm90.cu's constants (tests/test_gemm_sm90.py checks they agree).
BM = 128
BK = 64
WG_N = 128
THREADS = 384
SMEM_TILES = 192 * 1024
TILE_WIDTHS = (128, 256)

_LAYOUTS = ((False, False), (False, True), (True, False))
_OUT_TYPES = {float16: "__half", float32: "float"}


def stage_bytes(bn: int) -> int:
    return (BM + bn) * BK * 2


def stages_for(bn: int) -> int:
    return SMEM_TILES // stage_bytes(bn)


def smem_bytes(bn: int) -> int:
    """Dynamic shared memory of one CTA: alignment slack, the stages, two barriers each, and
    the ping-pong schedule's two turn barriers."""
    return 1024 + stages_for(bn) * stage_bytes(bn) + 2 * 8 * stages_for(bn) + 2 * 8


def kernel_name(
    transpose_a: bool, transpose_b: bool, out_dtype, bn: int, pingpong: bool = False
) -> str:
    out = _OUT_TYPES[np.dtype(out_dtype)]
    flags = ",".join(str(x).lower() for x in (transpose_a, transpose_b))
    return f"gemm_sm90<{flags},{out},__half,{bn},{str(pingpong).lower()}>"


# The schedules: (tile width, ping-pong). Cooperative tiles are 128 x 128 or 128 x 256, both
# consumer warpgroups on one tile; ping-pong tiles are 128 x 128, one consumer each, so one
# consumer's epilogue runs while the other's wgmma keep the tensor cores busy.
SCHEDULES = ((128, False), (256, False), (128, True))
NAMES = tuple(
    kernel_name(ta, tb, out, bn, pp)
    for out in _OUT_TYPES
    for ta, tb in _LAYOUTS
    for bn, pp in SCHEDULES
)
KERNELS = register(FILE, names=NAMES, arch=ARCH, split=True)  # seconds per kernel


# ---- the shape rule ------------------------------------------------------------------------


class Plan(NamedTuple):
    bn: int  # tile width (the tile is 128 x bn)
    splits: int  # K split into this many ranges (1: no split)
    grid: int  # persistent CTAs
    pingpong: bool = False  # one consumer warpgroup per tile, alternating (bn = 128 only)


# The rule, from `python benchmarks/kernels.py --sweep` on an H100 80GB HBM3 (every schedule
# and split of each shape, kernels timed as CUDA-graph replays of 20 launches):
# * one wave of 128 x 128 tiles or less (512 x 4096 x 4096: 128 tiles): cooperative 128 x 128
#   (0.85x cuBLAS; 128 x 256 tiles leave half the SMs idle: 0.60x; ping-pong 0.82x);
# * more tiles than SMs and a short K (up to 32 blocks of 64: 2048^3, 1024 x 4096 x 1024,
#   4096 x 4096 x 512): ping-pong, whose epilogues hide behind the other consumer's wgmma
#   (0.81x, 0.80x, 0.70x against 0.78x, 0.72x, 0.67x cooperative);
# * more tiles and a long K (4096^3, 8192^3): cooperative 128 x 256 (0.86x, 0.95x);
# * split-K lost everywhere it was timed (0.15x-0.70x: the float32 partials and the reduce
#   cost more than idle SMs; timed with a separate reduce launch, since folded into the
#   GEMM's last split), so it is kept for what the sweep did not cover: a problem that fills
#   under half the SMs with a K long enough to share out.
PINGPONG_MAX_K_BLOCKS = 32  # ping-pong when K is at most this many blocks of 64 ...
SPLIT_BELOW_FILL = 0.5  # split K when the tiles fill less than this fraction of the SMs ...
SPLIT_MIN_BLOCKS = 8  # ... and every split keeps at least this many K blocks of 64


_forced: tuple[int, int, bool] | None = None


@contextlib.contextmanager
def forced_plan(bn: int, splits: int, pingpong: bool = False):
    """Use tile width ``bn``, ``splits`` and the schedule for every launch inside
    (``benchmarks/kernels.py --sweep`` times the alternatives with it; the tests run all)."""
    global _forced
    if (bn, bool(pingpong)) not in SCHEDULES or splits < 1:
        raise ValueError(
            f"(bn, pingpong) must be one of {SCHEDULES} and splits >= 1, "
            f"got {(bn, pingpong)}, {splits}"
        )
    previous, _forced = _forced, (bn, splits, bool(pingpong))
    try:
        yield
    finally:
        _forced = previous


def plan_forced() -> bool:
    """Whether a :func:`forced_plan` is in force (then ``gemm_gpu`` keeps no launch)."""
    return _forced is not None


def plan(m: int, n: int, k: int, sms: int) -> Plan:
    """Tile width, split-K and grid for an ``m x n x k`` product on ``sms`` SMs."""
    if _forced is not None:
        bn, splits, pingpong = _forced
        k_blocks = max(1, math.ceil(k / BK))
        splits = math.ceil(k_blocks / math.ceil(k_blocks / min(splits, k_blocks)))
        tiles = math.ceil(m / BM) * math.ceil(n / bn)
        return Plan(bn, splits, min(tiles * splits, sms), pingpong)
    tiles_m = math.ceil(m / BM)
    k_blocks = math.ceil(k / BK)
    tiles = tiles_m * math.ceil(n / 128)
    bn, pingpong = 128, False
    if tiles > sms:
        if k_blocks <= PINGPONG_MAX_K_BLOCKS:
            pingpong = True
        elif tiles_m * math.ceil(n / 256) >= sms:
            bn = 256
            tiles = tiles_m * math.ceil(n / bn)
    splits = 1
    if tiles < SPLIT_BELOW_FILL * sms and k_blocks >= 2 * SPLIT_MIN_BLOCKS:
        splits = max(1, min(sms // tiles, k_blocks // SPLIT_MIN_BLOCKS))
        splits = math.ceil(k_blocks / math.ceil(k_blocks / splits))  # no empty split
    return Plan(bn, splits, min(tiles * splits, sms), pingpong)


# ---- tensor maps (backend/tensor_maps.py encodes and keeps them) -----------------------------


def operand_box(k_major: bool, rows: int) -> tuple[int, int]:
    """The TMA box (contiguous extent, rows) of one operand: always 64 elements = 128 bytes
    wide; a K-major operand takes all ``rows`` of its tile at once, an MN-major one 64 k."""
    return (BK, rows) if k_major else (64, BK)


def operand_map(array, k_major: bool, rows: int):
    """The tensor map of an operand whose tiles have ``rows`` rows (:func:`operand_box`), as
    the 128-byte kernel argument; encoded once per address, shape and box
    (:func:`tensor_maps.encode`)."""
    return tensor_maps.encode(array, operand_box(k_major, rows))


# ---- dispatch ------------------------------------------------------------------------------

KERNEL_ENV = "MINITORCH_AMP_GEMM_KERNEL"


def requested() -> str:
    """``MINITORCH_AMP_GEMM_KERNEL``: ``auto`` (default), ``sm80`` or ``sm90``."""
    return _choice(kernels.setting(KERNEL_ENV, "auto"))


@functools.lru_cache(maxsize=16)
def _choice(setting: str) -> str:
    """The kernel ``setting`` (the variable's text) asks for (read per call, parsed once)."""
    choice = setting.strip().lower() or "auto"
    if choice not in ("auto", "sm80", "sm90"):
        raise ValueError(f"{KERNEL_ENV} must be auto, sm80 or sm90, got {choice!r}")
    return choice


def device_is_hopper() -> bool:
    """Whether the current device has compute capability 9.0 (asked once per device)."""
    cupy = _device.cupy
    return _compute_capability(cupy, cupy.cuda.runtime.getDevice()) == "90"


@functools.cache
def _compute_capability(cupy, device_id: int) -> str:
    return cupy.cuda.Device(device_id).compute_capability


def usable(a, b, k: int) -> bool:
    """Whether the Hopper kernel takes this launch (see the module docstring)."""
    choice = requested()
    if choice == "sm80":
        return False
    if not device_is_hopper():
        if choice == "sm90":
            raise RuntimeError(
                f"{KERNEL_ENV}=sm90 asks for the Hopper kernel, but this GPU has compute "
                f"capability {_device.cupy.cuda.Device().compute_capability}; unset it"
            )
        return False
    return k >= 1 and tensor_maps.tma_addressable(a) and tensor_maps.tma_addressable(b)


def sm_count() -> int:
    """The current device's multiprocessors, asked once per device (CuPy's
    ``Device.attributes`` queries every attribute the device has)."""
    return _sm_counts(_device.cupy.cuda.runtime.getDevice())


@functools.cache
def _sm_counts(device_id: int) -> int:
    return _device.cupy.cuda.Device(device_id).attributes["MultiProcessorCount"]


class Variant(NamedTuple):
    """One instantiation of the kernel: the file it is compiled from and its kernels' names
    (this module's for float16 operands; ``gemm_bf16_sm90.BFLOAT16`` for bfloat16)."""

    file: str
    kernel_name: Callable[..., str]  # (transpose_a, transpose_b, out_dtype, bn, pingpong)


FLOAT16 = Variant(FILE, kernel_name)


class Recipe(NamedTuple):
    """What a launch takes from its problem's sizes and types alone (:func:`recipe`)."""

    plan: Plan
    name: str  # the GEMM kernel
    shared_mem: int  # dynamic shared memory of one CTA
    sizes: tuple  # (M, N, K, ldc) as the kernel's int32 arguments


def recipe(m: int, n: int, k: int, transpose_a, transpose_b, out_dtype, variant) -> Recipe:
    """The plan, kernel names and int32 sizes of an ``m x n x k`` launch on this device.

    A training step launches the same few shapes again and again, and working these out
    anew each call (the shape rule and the name alone took a ninth of ``gemm.gemm``'s time
    in the H200's profile, docs/benchmarks.md) is wasted, so they are kept per shape, type,
    variant and SM count: ``RECIPE_CACHE_SIZE`` of them, least recently used dropped.
    Inside :func:`forced_plan` nothing is kept.
    """
    if _forced is not None:
        return _recipe(m, n, k, transpose_a, transpose_b, out_dtype, variant, sm_count())
    return _kept_recipe(m, n, k, transpose_a, transpose_b, out_dtype, variant, sm_count())


def _recipe(m, n, k, transpose_a, transpose_b, out_dtype, variant, sms) -> Recipe:
    p = plan(m, n, k, sms)
    return Recipe(
        p,
        variant.kernel_name(transpose_a, transpose_b, out_dtype, p.bn, p.pingpong),
        smem_bytes(p.bn),
        tuple(np.int32(x) for x in (m, n, k, n)),  # ldc = N: the output is C-contiguous
    )


RECIPE_CACHE_SIZE = 1024
_kept_recipe = functools.lru_cache(maxsize=RECIPE_CACHE_SIZE)(_recipe)


def launch(a, b, transpose_a, transpose_b, epilogue, out, flags: int, variant=FLOAT16) -> None:
    """Run ``out = epilogue(alpha * op(a) @ op(b))`` on 2-D contiguous CuPy arrays, with the
    kernels of ``variant`` (float16 operands unless told; ``backend/gemm.py`` has checked
    everything)."""
    k = a.shape[0] if transpose_a else a.shape[1]
    m, n = out.shape
    prepared = prepare(m, n, k, transpose_a, transpose_b, epilogue, out.dtype, flags, variant)
    prepared(a, b, epilogue.bias, out)


def prepare(m, n, k, transpose_a, transpose_b, epilogue, out_dtype, flags, variant=FLOAT16):
    """The :class:`Launch` of an ``m x n x k`` problem: everything but the arrays."""
    r = recipe(m, n, k, transpose_a, transpose_b, out_dtype, variant)
    p = r.plan
    scalars = (*r.sizes, epilogue.alpha, epilogue.beta, np.int32(flags), np.int32(p.splits))
    boxes = operand_box(not transpose_a, BM), operand_box(transpose_b, p.bn)
    grid = (p.grid, 1, 1)
    return Launch(variant.file, r.name, grid, r.shared_mem, *boxes, p.bn, p.splits, scalars)


class Launch(NamedTuple):
    """One Hopper launch decided but for its arrays: ``launch(a, b, bias, out)`` finds the
    operands' tensor maps (by address) and launches. ``backend/gemm.py`` keeps one per kind
    of call, so a step's repeated GEMMs skip the checks and the recipe."""

    file: str
    name: str
    grid: tuple
    shared_mem: int
    box_a: tuple  # the operands' TMA boxes (operand_box)
    box_b: tuple
    bn: int  # the tile's width (plan)
    splits: int  # split-K: more than 1 adds a float32 partial per split
    scalars: tuple  # (M, N, K, ldc, alpha, beta, flags, splits), as the kernel takes them

    def __call__(self, a, b, bias, out) -> None:
        map_a = tensor_maps.encode(a, self.box_a)
        map_b = tensor_maps.encode(b, self.box_b)
        partial, counts = out, _NULL
        if self.splits > 1:  # the splits' sums, and where each tile piece counts its splits done
            m, n = out.shape
            partial = _device.cupy.empty((self.splits, m, n), dtype=float32)
            tiles = math.ceil(m / BM) * math.ceil(n / self.bn)
            counts = split_counts(tiles * SPLIT_COUNTS_PER_TILE)
        bias = bias if bias is not None else out  # a valid pointer, never read without the flag
        args = (map_a, map_b, out, bias, partial, counts, *self.scalars)
        kernels.launch(self.file, self.name, self.grid, (THREADS, 1, 1), args, self.shared_mem)


_NULL = np.int64(0)  # a null pointer: RawKernel passes an int64 by value, 8 zero bytes
SPLIT_COUNTS_PER_TILE = 2 * 4  # a count per consumer warpgroup's warp (cuda/gemm_sm90.cu)
_SPLIT_COUNTS: dict = {}  # (device, stream) -> the zeroed uint32 array split launches count in
_OUTGROWN: list = []  # the arrays a bigger one replaced: a captured graph may still use them


def split_counts(n: int):
    """A zeroed uint32 array of at least ``n`` entries on the current device, kept for the
    current stream: a split-K launch counts each tile piece's finished splits there, and its
    last split sets the count back to 0, so the array is zero again for the next launch (and
    a replayed CUDA graph). Kept per stream: launches on two streams could overlap. An
    array outgrown by a bigger problem is kept alive too (a graph captured with it replays
    its launches into it).

    During a capture the array is the graph's own: its zero-fill is recorded, not run, and
    is replayed before the graph's launches. Kept for later launches, it would reach a
    later capture's stream (a stream's address is reused) unzeroed if this graph never ran.
    """
    cp = _device.cupy
    capture = _graphs.active()
    kept = _SPLIT_COUNTS if capture is None else capture.scratch
    key = ("split counts", cp.cuda.runtime.getDevice(), cp.cuda.get_current_stream().ptr)
    counts = kept.get(key)
    if counts is None or counts.size < n:
        if counts is not None and capture is None:  # (a capture's are kept alive below)
            _OUTGROWN.append(counts)
        counts = kept[key] = cp.zeros(n, dtype=np.uint32)
        if capture is not None:
            capture.keep_alive.append(counts)
    return counts
