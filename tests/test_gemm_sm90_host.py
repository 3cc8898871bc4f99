"""The Hopper GEMM's host side is paid once per operand, not once per launch.

A training step launches the same GEMMs on the same buffers step after step: the tensor maps
(``cuTensorMapEncodeTiled`` through ``ctypes``) are encoded once per operand and found in a
bounded cache afterwards, and the device's compute capability is asked once per device.
The driver call is replaced here by a stand-in that writes the address into the map, so
the cache can be checked on the CPU; the real call runs in ``test_gemm_sm90_gpu.py``.
"""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import numpy as np
import pytest
from emulated_gpu import HostArray

from minitorch_amp.backend import gemm_sm90, tensor_maps
from minitorch_amp.backend.dtypes import float16, float32


@pytest.fixture
def driver(monkeypatch):
    """A stand-in ``cuTensorMapEncodeTiled``: records each call, writes the operand's
    address and row stride into the map's first 16 bytes; ``driver.status`` is returned."""
    calls = []

    def encode_tiled(out, dtype, rank, address, dims, strides, box, steps, *modes):
        calls.append((address, dims[0], dims[1], strides[0], box[0], box[1]))
        header = (ctypes.c_uint64 * 2)(address, strides[0])
        ctypes.memmove(out, header, 16)
        return fake.status

    fake = SimpleNamespace(calls=calls, status=0)
    monkeypatch.setattr(tensor_maps, "_encode", encode_tiled)
    monkeypatch.setattr(tensor_maps, "_maps", type(tensor_maps._maps)())
    return fake


def operand(rows, cols):
    return np.zeros((rows, cols), float16).view(HostArray)


def header(tensor_map) -> tuple[int, int]:
    return tuple(np.frombuffer(tensor_map.tobytes()[:16], np.uint64).tolist())


def test_the_same_operand_is_encoded_once_and_its_map_found_after(driver):
    a = operand(256, 128)
    first = gemm_sm90.operand_map(a, k_major=True, rows=128)
    again = gemm_sm90.operand_map(a, k_major=True, rows=128)
    assert len(driver.calls) == 1
    assert again.tobytes() == first.tobytes()
    assert header(first) == (a.data.ptr, 256)


def test_a_different_shape_stride_box_or_address_gets_its_own_map(driver):
    a = operand(256, 128)
    gemm_sm90.operand_map(a, k_major=True, rows=128)
    gemm_sm90.operand_map(a, k_major=False, rows=128)  # another box
    gemm_sm90.operand_map(a, k_major=True, rows=256)  # another box height
    gemm_sm90.operand_map(a.reshape(128, 256), k_major=True, rows=128)  # same address, new shape
    gemm_sm90.operand_map(a[128:], k_major=True, rows=128)  # another address
    assert len(driver.calls) == 5
    assert len({call[:4] + (call[5],) for call in driver.calls}) == 5


def test_the_cache_keeps_only_the_most_recently_used_maps(driver, monkeypatch):
    monkeypatch.setattr(tensor_maps, "MAP_CACHE_SIZE", 2)
    a, b, c = operand(64, 64), operand(64, 64), operand(64, 64)
    for x in (a, b, a, c):  # a is used again before c pushes the oldest (b) out
        gemm_sm90.operand_map(x, k_major=True, rows=128)
    assert len(tensor_maps._maps) == 2
    gemm_sm90.operand_map(a, k_major=True, rows=128)
    assert len(driver.calls) == 3  # a, b, c; a found twice
    gemm_sm90.operand_map(b, k_major=True, rows=128)
    assert len(driver.calls) == 4  # b was dropped


def test_a_refused_operand_raises_every_time_and_is_never_cached(driver):
    a = operand(64, 64)
    driver.status = 1  # CUDA_ERROR_INVALID_VALUE
    for _ in range(2):
        with pytest.raises(tensor_maps.TensorMapError, match="MINITORCH_AMP_GEMM_KERNEL=sm80"):
            gemm_sm90.operand_map(a, k_major=True, rows=128)
    assert len(driver.calls) == 2 and not tensor_maps._maps
    driver.status = 0
    assert header(gemm_sm90.operand_map(a, k_major=True, rows=128)) == (a.data.ptr, 128)


class _Cupy:
    """A CuPy stand-in whose current device and capabilities the test sets."""

    def __init__(self, capabilities):
        self.asked, self.current = [], 0
        asked = self.asked

        class Device:
            def __init__(self, index):
                asked.append(index)
                self.compute_capability = capabilities[index]

        runtime = SimpleNamespace(getDevice=lambda: self.current)
        self.cuda = SimpleNamespace(Device=Device, runtime=runtime)


def test_the_device_check_asks_each_device_once(monkeypatch):
    cupy = _Cupy({0: "90", 1: "80"})
    monkeypatch.setattr(gemm_sm90._device, "cupy", cupy)
    assert [gemm_sm90.device_is_hopper() for _ in range(3)] == [True] * 3
    cupy.current = 1
    assert [gemm_sm90.device_is_hopper() for _ in range(3)] == [False] * 3
    assert cupy.asked == [0, 1]
    other = _Cupy({0: "80"})  # another CuPy (a test's stand-in) is asked anew
    monkeypatch.setattr(gemm_sm90._device, "cupy", other)
    assert not gemm_sm90.device_is_hopper() and other.asked == [0]


# ---- a launch's recipe: worked out once per shape ---------------------------------------------
@pytest.fixture
def launches(driver, monkeypatch):
    """``gemm_sm90.launch`` on stand-in operands: a device of 132 SMs, CuPy's ``empty`` a
    NumPy one, ``kernels.launch`` recorded as ``(file, name, grid, args, shared_mem)``."""
    recorded = []

    def record(file, name, grid, block, args, shared_mem=0):
        assert block == (gemm_sm90.THREADS, 1, 1)
        recorded.append((file, name, grid, args, shared_mem))

    empty = lambda shape, dtype: np.empty(shape, dtype).view(HostArray)  # noqa: E731
    zeros = lambda shape, dtype: np.zeros(shape, dtype).view(HostArray)  # noqa: E731
    cuda = SimpleNamespace(
        runtime=SimpleNamespace(getDevice=lambda: 0),
        get_current_stream=lambda: SimpleNamespace(ptr=0),
    )
    fake = SimpleNamespace(empty=empty, zeros=zeros, cuda=cuda)
    monkeypatch.setattr(gemm_sm90._device, "cupy", fake)
    monkeypatch.setattr(gemm_sm90, "_SPLIT_COUNTS", {})
    monkeypatch.setattr(gemm_sm90, "sm_count", lambda: 132)
    monkeypatch.setattr(gemm_sm90.kernels, "launch", record)
    gemm_sm90._kept_recipe.cache_clear()
    yield recorded
    gemm_sm90._kept_recipe.cache_clear()


def launch(m, n, k, out_dtype=float16, variant=gemm_sm90.FLOAT16, in_dtype=float16):
    from minitorch_amp.backend.gemm import _Epilogue

    a = np.zeros((m, k), in_dtype).view(HostArray)
    b = np.zeros((k, n), in_dtype).view(HostArray)
    out = np.zeros((m, n), out_dtype).view(HostArray)
    epilogue = _Epilogue(None, False, np.float32(0.5), np.float32(0.0))
    gemm_sm90.launch(a, b, False, False, epilogue, out, 2, variant)
    return out


def test_a_shape_launched_again_finds_its_recipe(launches):
    for _ in range(3):
        launch(512, 4096, 256)
    launch(256, 4096, 256)
    info = gemm_sm90._kept_recipe.cache_info()
    assert (info.misses, info.hits) == (2, 2)
    same = [(name, grid, shared) for _, name, grid, _, shared in launches[:3]]
    assert same[0] == same[1] == same[2]
    assert launches[0][4] == gemm_sm90.smem_bytes(gemm_sm90.plan(512, 4096, 256, 132).bn)


def test_the_arguments_follow_the_kernels_signature_split_or_not(launches):
    """``gemm_sm90(map_a, map_b, C, bias, partial, counts, M, N, K, ldc, alpha, beta, flags,
    splits)``: split-K is one launch, its splits added up by the last one of each tile."""
    out = launch(128, 64, 8192, float32)  # a quarter of a tile, K long: split
    p = gemm_sm90.plan(128, 64, 8192, 132)
    assert p.splits > 1 and len(launches) == 1
    ((file, name, grid, args, _),) = launches
    assert file == gemm_sm90.FILE and name == gemm_sm90.kernel_name(False, False, float32, p.bn)
    assert grid == (p.grid, 1, 1)
    partial, counts = args[4], args[5]
    assert partial.shape == (p.splits, 128, 64) and partial.dtype == np.float32
    # the counts: zeros, at least one per warp of each consumer of each tile, kept for the
    # next launch on this device and stream
    assert counts.dtype == np.uint32 and counts.size >= 1 * gemm_sm90.SPLIT_COUNTS_PER_TILE
    assert not counts.any() and gemm_sm90.split_counts(8) is counts
    assert args[2] is out and args[3] is out  # no bias: the output stands in, never read
    assert [type(x) for x in args[6:]] == [np.int32] * 4 + [np.float32] * 2 + [np.int32] * 2
    assert [x.item() for x in args[6:]] == [128, 64, 8192, 64, 0.5, 0.0, 2, p.splits]
    launch(256, 256, 256)  # not split: no partials, a null counts pointer
    args = launches[1][3]
    assert args[4] is args[2] and type(args[5]) is np.int64 and args[5] == 0


def test_a_capture_makes_its_own_split_counts_and_leaves_the_kept_ones(launches, monkeypatch):
    """Made inside a capture, the counts' zero-fill is recorded, not run: the array is the
    graph's (kept alive with it), never served to eager launches or to a later capture."""
    eager = gemm_sm90.split_counts(8)
    first = SimpleNamespace(scratch={}, keep_alive=[])
    monkeypatch.setattr(gemm_sm90._graphs, "active", lambda: first)
    inside = gemm_sm90.split_counts(8)
    assert inside is not eager and gemm_sm90.split_counts(8) is inside
    assert any(kept is inside for kept in first.keep_alive)
    later = SimpleNamespace(scratch={}, keep_alive=[])
    monkeypatch.setattr(gemm_sm90._graphs, "active", lambda: later)
    assert gemm_sm90.split_counts(8) is not inside  # (the same device and stream address)
    monkeypatch.setattr(gemm_sm90._graphs, "active", lambda: None)
    assert gemm_sm90.split_counts(8) is eager


def test_each_variant_launches_its_own_kernels_and_keeps_its_own_recipe(launches):
    from minitorch_amp.backend import gemm_bf16_sm90
    from minitorch_amp.backend.dtypes import bfloat16

    launch(256, 256, 256)
    launch(256, 256, 256, bfloat16, gemm_bf16_sm90.BFLOAT16, bfloat16)
    (file16, name16, *_), (file_bf16, name_bf16, *_) = launches
    assert (file16, file_bf16) == (gemm_sm90.FILE, gemm_bf16_sm90.FILE)
    assert "__half" in name16 and "__nv_bfloat16" in name_bf16
    assert gemm_sm90._kept_recipe.cache_info().misses == 2


def test_a_forced_plan_is_used_and_never_kept(launches):
    with gemm_sm90.forced_plan(256, 2, pingpong=False):
        launch(2048, 2048, 256)
    assert gemm_sm90._kept_recipe.cache_info().currsize == 0
    ((_, name, _, args, _),) = launches
    assert name == gemm_sm90.kernel_name(False, False, float16, 256) and args[-1] == 2
    assert args[5].size >= 16 * 8 * gemm_sm90.SPLIT_COUNTS_PER_TILE  # 16 x 8 tiles of 128 x 256
    launch(2048, 2048, 256)  # the rule's own plan afterwards: ping-pong, K not split
    assert gemm_sm90.plan(2048, 2048, 256, 132) == gemm_sm90.Plan(128, 1, 132, pingpong=True)
    assert len(launches) == 2
    assert launches[1][1] == gemm_sm90.kernel_name(False, False, float16, 128, pingpong=True)


def test_a_bigger_split_problem_grows_the_counts_and_keeps_the_outgrown_array(
    launches, monkeypatch
):
    # a CUDA graph captured with the smaller array replays its launches into it: kept alive
    monkeypatch.setattr(gemm_sm90, "_OUTGROWN", [])
    launch(128, 64, 8192)  # one tile, K split
    small = launches[0][3][5]
    with gemm_sm90.forced_plan(128, 2):
        launch(1024, 1024, 1024)  # 64 tiles, K split in two
    big = launches[1][3][5]
    assert big.size >= 64 * gemm_sm90.SPLIT_COUNTS_PER_TILE > small.size
    assert len(gemm_sm90._OUTGROWN) == 1 and gemm_sm90._OUTGROWN[0] is small
    launch(128, 64, 8192)  # the small problem again: the big array serves it
    assert launches[2][3][5] is big
