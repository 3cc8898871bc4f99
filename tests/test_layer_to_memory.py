"""Layer.to's memory check (Paddle PR 36862) under a CPU device budget.

A cast needs room for the converted copy next to the original. When the device has too
little, the tensor goes through the host so the device never holds both copies; when even
that cannot fit, the error names the tensor and the bytes and nothing is lost.
"""

from __future__ import annotations

import gc
import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitorch_amp as mt
from minitorch_amp import device, nn
from minitorch_amp.nn.layer import tensor_convert

F16, F32, F64 = np.dtype("float16"), np.dtype("float32"), np.dtype("float64")


def model():
    mt.seed(0)
    # the largest parameter comes first, so the budget is tightest when it is converted
    return nn.Sequential(nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 64), nn.Linear(64, 8))


def snapshot(layer):
    return {k: (v.dtype, v.numpy().copy()) for k, v in layer.state_dict().items()}


def assert_unchanged(layer, snap):
    for key, value in layer.state_dict().items():
        dtype, values = snap[key]
        assert value.dtype == dtype, key
        np.testing.assert_array_equal(value.numpy(), values, err_msg=key)


@pytest.fixture
def host_path_calls(monkeypatch):
    """The shapes of the tensors a conversion casts on the host (its other host copies, kept
    to undo a failure, are not host casts)."""
    calls = []
    original = tensor_convert._cast_through_host_

    def spy(t, *args, **kwargs):
        calls.append(t._data.shape)
        return original(t, *args, **kwargs)

    monkeypatch.setattr(tensor_convert, "_cast_through_host_", spy)
    return calls


def test_a_budget_for_the_model_plus_one_fp16_copy_is_enough(host_path_calls):
    net = model()
    params = net.parameters()
    identities = [id(p) for p in params]
    expected = [p.numpy().astype(F16) for p in params]
    largest_fp16 = max(p.size for p in params) * 2
    gc.collect()
    budget = device.memory_allocated() + largest_fp16
    device.set_memory_limit(budget)
    device.reset_max_memory_allocated()
    host_path_calls.clear()

    net.to(dtype="float16")

    assert device.max_memory_allocated() <= budget
    assert host_path_calls == [(256, 128)]  # only the largest had to go through the host
    assert [id(p) for p in net.parameters()] == identities
    for p, want in zip(net.parameters(), expected):
        assert p.dtype == F16
        np.testing.assert_array_equal(p.numpy(), want)  # bit-identical to a direct cast


def test_the_same_budget_cannot_hold_a_second_full_copy():
    net = model()
    gc.collect()
    largest_fp16 = max(p.size for p in net.parameters()) * 2
    device.set_memory_limit(device.memory_allocated() + largest_fp16)
    with pytest.raises(device.OutOfMemoryError):  # casting everything first, then swapping
        copies = [mt.to_tensor(p.numpy().astype(F16)) for p in net.parameters()]
        del copies


def test_the_optimizer_still_updates_converted_parameters():
    net = model()
    opt = mt.optimizer.SGD(learning_rate=0.1, parameters=net.parameters(), multi_precision=True)
    gc.collect()
    device.set_memory_limit(device.memory_allocated() + 128 * 256 * 2)
    net.to(dtype="float16")
    device.set_memory_limit(None)  # the master weights need room of their own
    before = [p.numpy().copy() for p in net.parameters()]
    with mt.amp.auto_cast(level="O2"):
        loss = net(mt.randn([4, 256])).astype("float32").mean()
    loss.backward()
    opt.step()
    assert all(p.dtype == F16 for p in net.parameters())
    assert any((p.numpy() != b).any() for p, b in zip(net.parameters(), before))


def test_grads_and_buffers_follow_and_integer_buffers_stay():
    net = model()
    norm = nn.BatchNorm1D(8)
    net.add_sublayer("norm", norm)
    net.register_buffer("steps", mt.to_tensor([3, 4]))
    net(mt.randn([2, 256])).mean().backward()
    gc.collect()
    device.set_memory_limit(device.memory_allocated() + 128 * 256 * 2)
    net._to_impl(dtype="float16", floating_only=True)
    for p in net.parameters():
        assert p.dtype == F16 and p.grad.dtype == F16
    assert norm._mean.dtype == F16 and norm._variance.dtype == F16
    assert net.steps.dtype == np.dtype("int64")


def test_a_conversion_that_cannot_fit_is_refused_before_anything_changes():
    net = model()
    net.to(dtype="float16")
    snap = snapshot(net)
    gc.collect()
    device.set_memory_limit(device.memory_allocated() + 1000)
    with pytest.raises(device.OutOfMemoryError, match=r"needs \d+ more bytes.*Nothing was"):
        net.float()  # float32 needs twice the room
    assert_unchanged(net, snap)


def test_when_the_original_cannot_be_freed_the_tensor_is_restored_bit_exactly():
    net = model()
    snap = snapshot(net)
    held_elsewhere = [p._data for p in net.parameters()]  # the host path frees nothing now
    gc.collect()
    device.set_memory_limit(device.memory_allocated() + 1000)
    with pytest.raises(
        device.OutOfMemoryError,
        match=r"cannot convert '0.weight' .*needs 65536 bytes.*Nothing was converted",
    ):
        net.to(dtype="float16")
    assert_unchanged(net, snap)
    assert all(p._data is a for p, a in zip(net.parameters(), held_elsewhere))


layer_sizes = st.lists(st.integers(1, 48), min_size=2, max_size=5)


@given(
    sizes=layer_sizes,
    source=st.sampled_from([F32, F16]),
    target=st.sampled_from([F16, F32, F64]),
    headroom=st.floats(0.0, 2.0),
)
def test_any_stack_and_budget_either_converts_within_budget_or_changes_nothing(
    sizes, source, target, headroom
):
    device.set_memory_limit(None)
    mt.seed(1)
    net = nn.Sequential(*[nn.Linear(a, b) for a, b in itertools.pairwise(sizes)])
    net.to(dtype=source)
    snap = snapshot(net)
    model_bytes = sum(p._data.nbytes for p in net.parameters())
    gc.collect()
    budget = device.memory_allocated() + int(headroom * model_bytes)
    device.set_memory_limit(budget)
    device.reset_max_memory_allocated()
    try:
        net.to(dtype=target)
    except device.OutOfMemoryError:
        assert_unchanged(net, snap)
        assert target.itemsize > source.itemsize  # only widening can run out
    else:
        assert device.max_memory_allocated() <= budget
        for key, value in net.state_dict().items():
            assert value.dtype == target
            np.testing.assert_array_equal(value.numpy(), snap[key][1].astype(target))
    finally:
        device.set_memory_limit(None)


@pytest.mark.gpu
def test_the_host_path_runs_on_a_real_gpu_under_a_pool_limit(host_path_calls):
    mt.set_device("gpu:0")
    net = model()
    expected = [p.numpy().astype(F16) for p in net.parameters()]
    used = device.memory_allocated()
    device.set_memory_limit(used + 128 * 256 * 2 + 4096)
    host_path_calls.clear()
    try:
        net.to(dtype="float16")
    finally:
        device.set_memory_limit(None)
    assert (256, 128) in host_path_calls  # the largest parameter went through the host
    for p, want in zip(net.parameters(), expected):
        assert p.place == "gpu:0"
        np.testing.assert_array_equal(p.numpy(), want)
