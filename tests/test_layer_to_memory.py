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

pytestmark = pytest.mark.usefixtures("garbage_collected")

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

    # NOTE: "peak <= budget" could not fail: the CPU accounting refuses to pass the budget. What
    # the host path promises is stronger: the device never held both copies, so the peak never
    # rose above what the float32 model held before the conversion.
    assert device.max_memory_allocated() == budget - largest_fp16
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


# ---- the memory rule at its threshold ------------------------------------------------------
def paddle_rule(numel: int, itemsize: int) -> float:
    """Paddle PR 36862, verbatim: the free memory a cast needs before it runs on the device."""
    return ((numel * itemsize) / 256 + 1) * 256 * 1.2


@pytest.mark.parametrize("numel", [0, 1, 127, 128, 1000, 123_457])
@pytest.mark.parametrize("target", [F16, F32, F64])
def test_conversion_bytes_is_paddles_formula(numel, target):
    assert tensor_convert.conversion_bytes(numel, target) == paddle_rule(numel, target.itemsize)


@pytest.mark.parametrize("target", [F16, F64])
@pytest.mark.parametrize("free_offset, path", [(0.8, "device"), (-0.2, "host")])
def test_the_memory_rule_is_pinned_one_byte_either_side_of_its_threshold(
    target, free_offset, path, host_path_calls
):
    """1000 float32 elements to float16 need 2707.2 bytes free, to float64 9907.2: 2708 (or
    9908) free casts on the device, 2707 (or 9907) goes through the host. Dropping the x1.2
    factor (2256) or the 256-byte unit (2400) moves both sides onto the device."""
    numel = 1000  # 4000 bytes of float32: above the accounting's 1 KiB granularity
    threshold = paddle_rule(numel, target.itemsize)
    assert threshold == pytest.approx(2707.2 if target == F16 else 9907.2)
    free = round(threshold + free_offset)  # the whole byte just above or just below
    layer = nn.Linear(numel, 1, bias_attr=False)
    before = layer.weight.numpy().copy()
    gc.collect()
    device.set_memory_limit(device.memory_allocated() + free)
    host_path_calls.clear()
    layer.to(dtype=target)
    assert host_path_calls == ([(numel, 1)] if path == "host" else [])
    assert layer.weight.dtype == target
    np.testing.assert_array_equal(layer.weight.numpy(), before.astype(target))


def counted(nbytes: int) -> int:
    """What the CPU accounting charges for an array of ``nbytes`` (nothing under 1 KiB)."""
    return nbytes if nbytes >= 1024 else 0


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
    before = device.memory_allocated()
    budget = before + int(headroom * model_bytes)
    device.set_memory_limit(budget)
    try:
        net.to(dtype=target)
    except device.OutOfMemoryError:
        assert_unchanged(net, snap)
        assert target.itemsize > source.itemsize  # only widening can run out
    else:
        # Every original is freed: the device holds the converted model and nothing else.
        # (A peak within the budget could not fail: the CPU accounting enforces it.)
        gc.collect()
        change = sum(counted(p.size * target.itemsize) - counted(p.size * source.itemsize)
                     for p in net.parameters())  # fmt: skip
        assert device.memory_allocated() == before + change
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
