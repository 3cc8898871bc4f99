"""What the kept-launch tests share (``tests/test_*_kept.py``): the stand-in GPU with its
launches recorded, arrays on it, a call made as if first, and two launches compared.

Each launcher that keeps its launches (``gemm_gpu``, ``fp8_gemm``, ``bias_grad``,
``fp8_kernels``) is held to one rule: the next call like a kept one launches exactly what a
fresh call would. On the CPU with CuPy stood in for (``benchmarks/gpu_stand_in.py``).
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from unittest import mock

import numpy as np

from minitorch_amp.backend import gemm_gpu, kernels

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import gpu_stand_in


@contextlib.contextmanager
def recording_stand_in(hopper: bool = True):
    """The stand-in (a Hopper GPU, or an sm_80 one), with ``kernels.launch`` recording
    ``(file, name, grid, args, shared_mem)`` in ``stand.recorded``: the kept-launch tests'
    GPU."""
    calls = []

    def record(file, name, grid, block, args, shared_mem=0):
        calls.append((file, name, grid, args, shared_mem))

    with (
        gpu_stand_in.stand_in(hopper=hopper) as stand,
        mock.patch.object(kernels, "launch", record),
    ):
        stand.recorded = calls
        stand.hopper = hopper
        yield stand


def on_gpu(array):
    return np.ascontiguousarray(array).view(gpu_stand_in.StandInArray)


def same(x, y) -> bool:
    """Launch arguments alike: arrays by shape, strides and dtype (each call allocates its
    own output); scalars by type and value; tensor maps by bytes (the stand-in's hold the
    operand's address, shape, row stride and box)."""
    if isinstance(x, np.ndarray):
        return (x.shape, x.strides, x.dtype) == (y.shape, y.strides, y.dtype)
    return type(x) is type(y) and np.asarray(x).tobytes() == np.asarray(y).tobytes()


def fresh(call, kept=None):
    """``call()`` with nothing kept in ``kept`` (``gemm_gpu.KEPT`` unless told), which holds
    what it held before afterwards: the launch a first call of its kind makes."""
    kept = gemm_gpu.KEPT if kept is None else kept
    saved = dict(kept)
    kept.clear()
    try:
        return call()
    finally:
        kept.clear()
        kept.update(saved)


def assert_same_launch(first, second):
    (file, name, grid, args, shared), (file2, name2, grid2, args2, shared2) = first, second
    assert (file, name, grid, shared) == (file2, name2, grid2, shared2)
    assert len(args) == len(args2) and all(map(same, args, args2))


def hopper_stand_in():
    """The Hopper stand-in, launches recorded, as a test module's fixture:
    ``gpu = pytest.fixture(hopper_stand_in)``."""
    with recording_stand_in() as stand:
        yield stand
