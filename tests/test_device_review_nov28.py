"""Defects a review of devices, memory and conversions found (2026-11-28)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import nn
from minitorch_amp.autograd.dispatch import hooks
from minitorch_amp.backend.device_errors import DeviceError
from minitorch_amp.device import Place


def trained(opt_class, multi_precision=False):
    mt.seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 64))
    kwargs = {"multi_precision": True} if multi_precision else {}
    opt = opt_class(parameters=model.parameters(), learning_rate=0.1, **kwargs)
    model(mt.randn([4, 64])).sum().backward()
    opt.step()
    return model, opt


def test_a_conversion_after_a_step_frees_the_originals_and_fits_a_full_device():
    model, opt = trained(mt.optimizer.Adam)
    opt.clear_grad(set_to_zero=False)
    gc.collect()
    before = mt.device.memory_allocated()
    mt.device.set_memory_limit(before)  # full: every cast goes through the host
    try:
        model.to(dtype="float16")
    finally:
        mt.device.set_memory_limit(None)
    # the fp32 weights went (and the step's scratch buffers, made again at the next step)
    assert mt.device.memory_allocated() <= before - 2 * 64 * 64 * 2
    assert all(p.dtype == mt.float16 for p in model.parameters())


@pytest.mark.parametrize("multi_precision", [False, True])
@pytest.mark.parametrize("opt_class", [mt.optimizer.SGD, mt.optimizer.Momentum, mt.optimizer.Adam])
def test_the_step_after_a_conversion_trains_as_with_the_plan_kept(
    opt_class, multi_precision, monkeypatch
):
    runs = []
    for release in (True, False):
        if not release:
            monkeypatch.setattr(hooks, "new_arrays", ())  # the plans kept: the old way
        model, opt = trained(opt_class, multi_precision)
        model.to(dtype="float16")
        model(mt.randn([4, 64], dtype="float16")).sum().backward()
        opt.step()
        state = opt.state_dict()
        runs.append(
            [p.numpy() for p in model.parameters()]
            + [v.numpy() for v in state.values() if isinstance(v, mt.Tensor)]
        )
    assert len(runs[0]) == len(runs[1])
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


def test_a_place_of_an_unknown_kind_or_index_is_refused_where_it_is_made():
    for args in [("xpu",), ("gpu", -1), ("cpu", 1), ("gpu", 1.0)]:
        with pytest.raises(DeviceError, match="Place"):
            Place(*args)
    assert isinstance(DeviceError("x"), ValueError)
    assert Place("CPU") == Place("cpu") and Place(" Cuda ", 1) == Place("gpu", 1)
    assert mt.get_device() == "cpu" or mt.device.device_count() > 0


def test_the_memory_functions_take_an_int_as_a_gpu_number():
    C = mt.device.cuda
    calls = [
        C.memory_allocated,
        C.max_memory_allocated,
        C.memory_reserved,
        C.max_memory_reserved,
        mt.device.reset_max_memory_allocated,
        mt.device.memory_available,
        mt.device.get_memory_limit,
    ]
    for f in calls:
        if mt.device.device_count() > 0:
            f(0)
        else:  # refused as a GPU this machine lacks, not as a wrong type
            with pytest.raises(DeviceError, match="cannot use 'gpu:0'"):
                f(0)
        with pytest.raises(DeviceError, match="0 or more"):
            f(-1)
    if mt.device.device_count() > 0:
        assert C.memory_allocated(0) == C.memory_allocated("gpu:0")


def test_device_cuda_has_paddles_reserved_memory_and_empty_cache():
    C = mt.device.cuda
    keep = mt.zeros([1024])
    assert C.memory_reserved("cpu") == C.memory_allocated("cpu") > 0
    assert C.max_memory_reserved("cpu") == C.max_memory_allocated("cpu")
    assert C.empty_cache() is None and keep.shape == [1024]
    with pytest.raises(AttributeError, match=r"mt\.device\.cuda\.memory_allocated"):
        mt.cuda.memory_allocated  # noqa: B018 - PyTorch's spelling says where it is


def test_layer_astype_converts_every_parameter_and_buffer_and_returns_the_layer():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    model.register_buffer("steps", mt.to_tensor([3], dtype="int64"))
    weight = model[0].weight
    assert model.astype("float16") is model and model[0].weight is weight
    assert {t.dtype for t in model.parameters() + model.buffers()} == {mt.float16}
    assert model.astype(mt.float32)[1].bias.dtype == mt.float32
    with pytest.raises(ValueError, match="needs a dtype"):
        model.astype()


def test_a_place_equals_and_hashes_as_its_canonical_name_only():
    gpu, cpu = Place("gpu", 0), Place("cpu")
    for place, name in [(gpu, "gpu:0"), (cpu, "cpu")]:
        assert place == name and name in {place} and hash(place) == hash(name)
    for place, other in [(gpu, "cuda:0"), (gpu, "gpu"), (cpu, "CPU"), (cpu, " cpu ")]:
        assert place != other and other not in {place}
