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

from minitorch_amp.backend import gemm_sm90
from minitorch_amp.backend.dtypes import float16


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
    monkeypatch.setattr(gemm_sm90, "_encode", encode_tiled)
    monkeypatch.setattr(gemm_sm90, "_maps", type(gemm_sm90._maps)())
    return fake


def operand(rows, cols):
    return np.zeros((rows, cols), float16).view(HostArray)


def header(tensor_map) -> tuple[int, int]:
    return tuple(np.frombuffer(tensor_map.tobytes()[:16], np.uint64).tolist())


def test_the_same_operand_is_encoded_once_and_its_map_found_after(driver):
    a = operand(256, 128)
    first = gemm_sm90.encode(a, k_major=True, rows=128)
    again = gemm_sm90.encode(a, k_major=True, rows=128)
    assert len(driver.calls) == 1
    assert again.tobytes() == first.tobytes()
    assert header(first) == (a.data.ptr, 256)


def test_a_different_shape_stride_box_or_address_gets_its_own_map(driver):
    a = operand(256, 128)
    gemm_sm90.encode(a, k_major=True, rows=128)
    gemm_sm90.encode(a, k_major=False, rows=128)  # another box
    gemm_sm90.encode(a, k_major=True, rows=256)  # another box height
    gemm_sm90.encode(a.reshape(128, 256), k_major=True, rows=128)  # same address, new shape
    gemm_sm90.encode(a[128:], k_major=True, rows=128)  # another address
    assert len(driver.calls) == 5
    assert len({call[:4] + (call[5],) for call in driver.calls}) == 5


def test_the_cache_keeps_only_the_most_recently_used_maps(driver, monkeypatch):
    monkeypatch.setattr(gemm_sm90, "MAP_CACHE_SIZE", 2)
    a, b, c = operand(64, 64), operand(64, 64), operand(64, 64)
    for x in (a, b, a, c):  # a is used again before c pushes the oldest (b) out
        gemm_sm90.encode(x, k_major=True, rows=128)
    assert len(gemm_sm90._maps) == 2
    gemm_sm90.encode(a, k_major=True, rows=128)
    assert len(driver.calls) == 3  # a, b, c; a found twice
    gemm_sm90.encode(b, k_major=True, rows=128)
    assert len(driver.calls) == 4  # b was dropped


def test_a_refused_operand_raises_every_time_and_is_never_cached(driver):
    a = operand(64, 64)
    driver.status = 1  # CUDA_ERROR_INVALID_VALUE
    for _ in range(2):
        with pytest.raises(gemm_sm90.TensorMapError, match="MINITORCH_AMP_GEMM_KERNEL=sm80"):
            gemm_sm90.encode(a, k_major=True, rows=128)
    assert len(driver.calls) == 2 and not gemm_sm90._maps
    driver.status = 0
    assert header(gemm_sm90.encode(a, k_major=True, rows=128)) == (a.data.ptr, 128)


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
