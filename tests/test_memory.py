"""Device memory accounting on the CPU: live bytes, peak, budget, out-of-memory errors."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import device

pytestmark = pytest.mark.usefixtures("garbage_collected")


def test_a_tensor_is_counted_from_creation_until_its_storage_dies():
    before = device.memory_allocated()
    x = mt.zeros([1000], dtype="float32")
    assert device.memory_allocated() == before + 4000
    view = x.reshape([10, 100])  # a view: its owner is already counted
    assert device.memory_allocated() == before + 4000
    del x
    assert device.memory_allocated() == before + 4000  # the view keeps the storage alive
    del view
    gc.collect()
    assert device.memory_allocated() == before


def test_storage_saved_for_backward_stays_counted_until_the_graph_is_freed():
    w = mt.ones([1000], dtype="float32")
    w.stop_gradient = False
    before = device.memory_allocated()
    y = (w * 2.0).exp()  # w*2 is saved by exp's backward
    held = device.memory_allocated() - before
    assert held >= 2 * 4000
    y.sum().backward()
    del y
    gc.collect()
    assert device.memory_allocated() - before == 4000  # only w's grad is left


def test_peak_and_reset():
    device.reset_max_memory_allocated()
    base = device.memory_allocated()
    x = mt.zeros([2000], dtype="float64")
    del x
    assert device.max_memory_allocated() >= base + 16000
    device.reset_max_memory_allocated()
    assert device.max_memory_allocated() == device.memory_allocated()


def test_a_budget_turns_the_cpu_into_a_device_that_can_run_out():
    base = device.memory_allocated()
    device.set_memory_limit(base + 10000)
    assert device.get_memory_limit() == base + 10000
    assert device.memory_available() == 10000
    small = mt.zeros([1000], dtype="float32")  # 4000 bytes fit
    with pytest.raises(device.OutOfMemoryError, match=r"8000 bytes requested, 6000 available"):
        mt.zeros([2000], dtype="float32")
    assert device.memory_allocated() == base + 4000  # the failed allocation left no trace
    assert small.numpy().sum() == 0
    device.set_memory_limit(None)
    assert device.get_memory_limit() is None
    mt.zeros([1000], dtype="float32")


def test_arrays_under_one_kib_are_below_the_accounting_granularity():
    before = device.memory_allocated()
    tiny = mt.zeros([255], dtype="float32")  # 1020 bytes
    assert device.memory_allocated() == before
    del tiny


@pytest.mark.parametrize("bad", [-1, 1.5, "1GB"])
def test_invalid_budgets_are_rejected(bad):
    with pytest.raises(ValueError, match="non-negative int"):
        device.set_memory_limit(bad)
    assert device.get_memory_limit() is None


def test_a_budget_below_what_is_held_is_rejected_and_changes_nothing():
    keep = mt.zeros([1000])
    with pytest.raises(ValueError, match=r"below the .* bytes tensors already hold"):
        device.set_memory_limit(device.memory_allocated() - 1)
    assert device.get_memory_limit() is None
    del keep


def test_without_a_budget_available_memory_is_the_machines():
    assert device.memory_available() > 1 << 20


def test_out_of_memory_inside_an_op_leaves_its_inputs_alone():
    a = mt.to_tensor(np.arange(1000, dtype=np.float32))
    device.set_memory_limit(device.memory_allocated() + 100)
    with pytest.raises(device.OutOfMemoryError):
        a * 2.0
    np.testing.assert_array_equal(a.numpy(), np.arange(1000, dtype=np.float32))


def test_on_the_gpu_path_a_tensor_samples_its_pool_without_switching_device():
    """A CuPy array (here the stand-in's, a NumPy array too: ``benchmarks/gpu_stand_in.py``)
    is counted by the pool's peak, not by the CPU's ledger; on the current device no
    ``Device`` context is entered (CuPy's sets the device on the way out, each time), on
    another one it is."""
    import sys
    from pathlib import Path
    from unittest import mock

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import gpu_stand_in

    from minitorch_amp.autograd.tensor import Tensor
    from minitorch_amp.backend import memory

    with gpu_stand_in.stand_in() as stand:
        cupy = stand.cupy
        used = [4096]
        entered = []
        pool = mock.Mock(used_bytes=lambda: used[0])
        device = cupy.cuda.Device(0)
        with (
            mock.patch.object(memory, "_pool", lambda: pool),
            mock.patch.object(cupy.cuda, "Device", lambda i=0: entered.append(i) or device),
            mock.patch.dict(memory._gpu_peak, clear=True),
        ):
            cpu_before = memory._cpu.allocated
            Tensor._wrap(cupy.zeros((64, 64), np.float32))
            assert memory._gpu_peak == {0: 4096} and entered == []
            assert memory._cpu.allocated == cpu_before  # not the CPU's
            used[0] = 1024
            memory._sample_gpu_peak(0)
            assert memory._gpu_peak == {0: 4096}  # a peak, not the last sample
            used[0] = 8192
            memory._sample_gpu_peak(1)  # another device: switched to and back
            assert entered == [1] and memory._gpu_peak[1] == 8192
