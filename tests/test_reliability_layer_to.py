"""``Layer.to``, ``float()`` and ``float16()`` convert all of a model or none of it.

A conversion writes tensor after tensor, and the memory check may send any of them through
the host. Before it replaces an array it keeps what it needs to put it back: the array itself
while the device has room to hold it until the end, a host copy otherwise. So when a tensor or
a gradient cannot be converted (out of memory, or any other error), every parameter, gradient
and buffer is put back as it was (values, dtype, device; the very same array wherever it is
still alive) and the error says that nothing was converted.
"""

from __future__ import annotations

import gc
import itertools
import weakref

import numpy as np
import pytest
from all_or_nothing import arrays_of, failing_at, owned_tensors, state_of, values_of
from hypothesis import event, given
from hypothesis import strategies as st

import minitorch_amp as mt
from minitorch_amp import device, nn
from minitorch_amp.backend import device as backend
from minitorch_amp.backend import memory

pytestmark = pytest.mark.usefixtures("garbage_collected")

F16, F32, F64 = np.dtype("float16"), np.dtype("float32"), np.dtype("float64")


def assert_same_arrays(model, arrays: dict) -> None:
    for name, t in owned_tensors(model).items():
        assert t._data is arrays[name], f"{name} holds another array than before"


def nothing_converted(exc: BaseException) -> bool:
    """The error (or a note added to it) says the model is as it was."""
    text = " ".join([str(exc), *getattr(exc, "__notes__", [])]).lower()
    return "nothing was converted" in text


def budget_from_now(extra_bytes: int) -> int:
    gc.collect()
    budget = device.memory_allocated() + extra_bytes
    device.set_memory_limit(budget)
    return budget


# ---- the defects ----------------------------------------------------------------------------
def test_a_gradient_that_cannot_be_converted_leaves_its_parameter_unconverted_too():
    fc = nn.Linear(256, 128)  # a 32768-element weight
    fc.to(dtype="float16")
    fc.weight.grad = np.full([256, 128], 0.5, F16)
    before = state_of(fc)
    grad_array = fc.weight.grad._data  # held here too: converting the grad frees nothing
    # room for both widened copies once each float16 original is freed, which is what the
    # up-front check assumes; the held gradient breaks that assumption half-way
    budget_from_now(2 * 32768 * 2 + 512)
    with pytest.raises(device.OutOfMemoryError) as info:
        fc.to(dtype="float32")
    assert state_of(fc) == before  # the weight is float16 again, not float32 beside an f16 grad
    assert fc.weight.grad._data is grad_array
    assert "the gradient of 'weight'" in str(info.value)
    assert nothing_converted(info.value)


def test_an_error_inside_the_host_path_puts_the_weights_back():
    fc = nn.Linear(256, 128)
    before = state_of(fc)
    budget_from_now(1000)  # no room for a copy next to the original: the host path it is
    upload = (backend, "to_place")  # its first call is the host path's copy back
    failure = failing_at(1, lambda: RuntimeError("injected: the copy back failed"), upload)
    with failure, pytest.raises(RuntimeError, match="injected") as info:
        fc.to(dtype="float16")
    assert fc.weight.shape == [256, 128]  # not the empty array the host path parks there
    assert state_of(fc) == before
    assert nothing_converted(info.value)


def test_with_room_to_spare_a_failure_puts_back_the_very_arrays_it_replaced():
    # An optimizer tells an outside write by its parameter's array: a failed conversion that
    # had room to keep the originals must not look like one.
    def net():
        mt.seed(0)
        return nn.Sequential(nn.Linear(64, 32), nn.Linear(32, 16), nn.BatchNorm1D(16))

    allocation = (memory, "track")
    dry = net()
    with failing_at(10**9, RuntimeError, allocation) as dry_run:
        dry.to(dtype="float16")
    model = net()
    before = state_of(model)
    originals = {name: weakref.ref(t._data) for name, t in owned_tensors(model).items()}
    last_copy = failing_at(dry_run.calls, lambda: RuntimeError("injected"), allocation)
    with last_copy, pytest.raises(RuntimeError, match="injected"):
        model.to(dtype="float16")
    assert state_of(model) == before
    for name, t in owned_tensors(model).items():
        assert t._data is originals[name](), name


def test_float_converts_every_layer_or_none():
    net = nn.Sequential(nn.Linear(128, 64), nn.Linear(256, 128))  # the second is the larger
    net.float16()
    before = state_of(net)
    # room to widen the first layer but not the second: refused before anything changes
    budget_from_now(64 * 128 * 2 + 1000)
    with pytest.raises(device.OutOfMemoryError, match="Nothing was converted"):
        net.float()
    assert state_of(net) == before


@pytest.mark.parametrize("flag", [True, False, np.True_])
def test_a_budget_is_a_number_of_bytes_not_a_bool(flag):
    with pytest.raises(ValueError, match=r"bytes.*got .*bool"):
        device.set_memory_limit(flag)  # True used to become a budget of one byte
    assert device.get_memory_limit() is None


# ---- any failure, anywhere ------------------------------------------------------------------
def model(sizes: list[int], dtype, grads: str):
    """A stack of Linears, a batch norm and an int buffer; some weights have (stale) grads."""
    mt.seed(3)
    layers = [nn.Linear(a, b) for a, b in itertools.pairwise(sizes)]
    net = nn.Sequential(*layers, nn.BatchNorm1D(sizes[-1]))
    net.register_buffer("steps", mt.to_tensor([5, 6], dtype="int64"))
    net._to_impl(dtype=dtype, floating_only=True)
    rng = np.random.default_rng(len(sizes))
    for i, p in enumerate(net.parameters()):
        if grads != "none" and i % 2 == 0:
            p.grad = rng.standard_normal(p.shape).astype(p.dtype)
            if grads == "stale":
                p.clear_grad()  # a deferred zero-fill: the buffer keeps its old bits
    return net


CONVERSIONS = {
    "to(float16)": lambda net: net.to(dtype="float16"),
    "to(float64)": lambda net: net.to(dtype="float64"),
    "to(cpu, float32)": lambda net: net.to(device="cpu", dtype="float32"),
    "float16()": lambda net: net.float16(),
    "float()": lambda net: net.float(),
}
ERRORS = {
    "device full": lambda: device.OutOfMemoryError("injected: out of memory"),
    "host full": lambda: MemoryError("injected: the host is full"),
    "a bug": lambda: RuntimeError("injected: a failing step"),
}


@given(
    sizes=st.lists(st.integers(1, 160), min_size=2, max_size=4),
    source=st.sampled_from([F16, F32]),
    grads=st.sampled_from(["none", "fresh", "stale"]),
    conversion=st.sampled_from(sorted(CONVERSIONS)),
    error=st.sampled_from(sorted(ERRORS)),
    at=st.integers(1, 40),
    headroom=st.one_of(st.none(), st.floats(0.0, 0.5), st.floats(0.5, 2.0)),
    hold=st.booleans(),
)
def test_a_failure_at_any_step_leaves_every_tensor_exactly_as_it_was(
    sizes, source, grads, conversion, error, at, headroom, hold
):
    expected = model(sizes, source, grads)
    CONVERSIONS[conversion](expected)  # what the conversion does when nothing fails
    net = model(sizes, source, grads)
    before = state_of(net)
    held = arrays_of(net) if hold else None  # something else holds the arrays too
    if headroom is not None:
        budget_from_now(int(headroom * sum(t._data.nbytes for t in owned_tensors(net).values())))
    steps = [(memory, "track"), (backend, "to_place"), (backend, "asnumpy")]
    try:
        with failing_at(at, ERRORS[error], *steps):
            CONVERSIONS[conversion](net)
    except (device.OutOfMemoryError, MemoryError, RuntimeError) as exc:
        event(f"failed: {type(exc).__name__}")
        assert nothing_converted(exc), str(exc)
        assert state_of(net) == before
        if held is not None:
            assert_same_arrays(net, held)
    else:
        event("converted")
        assert values_of(net) == values_of(expected)  # all of it, exactly as without failures
    finally:
        device.set_memory_limit(None)
