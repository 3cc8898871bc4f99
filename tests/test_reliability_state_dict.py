"""``set_state_dict`` loads every value or none.

Every value is checked and made ready (cast to its target's dtype, on the target's device)
before the first tensor is written; writing is then a plain copy into an array of the same
shape, dtype and device, which cannot fail. A value that cannot be loaded (the wrong shape, no
numbers at all: ``None``, strings, objects; numbers that an integer tensor cannot hold) is
refused with its key, and no tensor, gradient or version changes.
"""

from __future__ import annotations

import gc
import re

import numpy as np
import pytest
from all_or_nothing import arrays_of, failing_at, state_of
from hypothesis import event, given
from hypothesis import strategies as st

import minitorch_amp as mt
from minitorch_amp import device, nn
from minitorch_amp.backend import device as backend
from minitorch_amp.backend import memory

pytestmark = pytest.mark.usefixtures("garbage_collected")


def model(seed: int = 0):
    """Two Linears, a batch norm, an int64 buffer; the first weight has a gradient."""
    mt.seed(seed)
    net = nn.Sequential(nn.Linear(40, 30), nn.Linear(30, 20), nn.BatchNorm1D(20))
    net.register_buffer("steps", mt.to_tensor([5, 6], dtype="int64"))
    net[0].weight.grad = np.ones([40, 30], "float32")
    return net


def other_values() -> dict:
    """A complete, loadable state dict (NumPy arrays) with values unlike ``model()``'s."""
    return {k: v.numpy() + 1 for k, v in model(seed=1).state_dict().items()}


# ---- the defects ----------------------------------------------------------------------------
def test_a_value_that_cannot_be_cast_is_refused_before_anything_is_loaded():
    net = model()
    before = state_of(net)
    values = other_values()
    values["1.weight"] = np.full([30, 20], "0.5x")  # strings; 0.weight comes first
    with pytest.raises(ValueError) as info:
        net.set_state_dict(values)
    assert state_of(net) == before  # 0.weight too
    assert re.search(r"'1.weight'.*nothing was loaded", str(info.value))


def test_an_object_array_holding_none_is_refused_not_loaded_as_nan():
    net = model()
    before = state_of(net)
    values = other_values()
    values["0.bias"] = np.array([None] + [0.5] * 29, dtype=object)
    with pytest.raises(ValueError, match=r"'0.bias'.*nothing was loaded"):
        net.set_state_dict(values)
    assert state_of(net) == before


@pytest.mark.parametrize(
    "steps",
    [[1.5, 2.0], [np.nan, 2.0], [np.inf, 2.0], [2.0**70, 2.0]],
    ids=["a fraction", "nan", "inf", "out of int64's range"],
)
def test_an_integer_buffer_refuses_values_it_cannot_hold(steps):
    net = model()
    before = state_of(net)
    values = other_values()
    values["steps"] = np.array(steps)
    with pytest.raises(ValueError, match=r"'steps'.*int64.*nothing was loaded"):
        net.set_state_dict(values)
    assert state_of(net) == before


def test_an_integer_buffer_takes_whole_numbers_stored_as_floats():
    # Layer.to(dtype='float16') converts integer buffers too (as Paddle does), so a checkpoint
    # of such a model holds them as float16.
    net = model()
    values = other_values()
    values["steps"] = np.array([7.0, 2048.0], "float16")
    net.set_state_dict(values)
    assert net.steps.dtype == np.int64 and net.steps.numpy().tolist() == [7, 2048]


def test_a_load_without_room_to_stage_on_the_device_stages_on_the_host():
    net = model()
    values = {k: mt.to_tensor(v.astype("float64")) for k, v in other_values().items()}
    gc.collect()
    budget = device.memory_allocated() + 1000  # far less than one staged copy
    device.set_memory_limit(budget)
    device.reset_max_memory_allocated()
    net.set_state_dict(values)
    assert device.max_memory_allocated() <= budget
    for key, value in net.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), values[key].numpy().astype(value.dtype))


def test_the_layers_own_tensors_under_each_others_keys_are_swapped_not_smeared():
    net = nn.Sequential(nn.Linear(30, 30), nn.Linear(30, 30))
    first, second = net[0].weight.numpy().copy(), net[1].weight.numpy().copy()
    swapped = {**net.state_dict(), "0.weight": net[1].weight, "1.weight": net[0].weight}
    net.set_state_dict(swapped)  # every value is read before the first write
    np.testing.assert_array_equal(net[0].weight.numpy(), second)
    np.testing.assert_array_equal(net[1].weight.numpy(), first)


# ---- any failure, anywhere ------------------------------------------------------------------
def as_given(value: np.ndarray, form: str):
    """``value`` in one of the forms a state dict may hold."""
    if form == "tensor":
        return mt.to_tensor(value)
    if form == "float64 array":
        return value.astype("float64")
    if form == "float16 tensor":
        return mt.to_tensor(value.astype("float16"))
    if form == "list":
        return value.tolist()
    return value


BAD_VALUES = {
    "None inside": lambda v: np.array([None] * v.size, dtype=object).reshape(v.shape),
    "strings": lambda v: np.full(v.shape, "x"),
    "another shape": lambda v: np.zeros([v.size + 1]),
    "a fraction for an int": lambda v: np.full(v.shape, 0.5),
}
ERRORS = {
    "device full": lambda: device.OutOfMemoryError("injected: out of memory"),
    "host full": lambda: MemoryError("injected: the host is full"),
    "a bug": lambda: RuntimeError("injected: a failing step"),
}
FORMS = ["array", "tensor", "float64 array", "float16 tensor", "list"]


@given(
    forms=st.lists(st.sampled_from(FORMS), min_size=9, max_size=9),
    bad=st.none() | st.tuples(st.sampled_from(sorted(BAD_VALUES)), st.integers(0, 8)),
    error=st.sampled_from(sorted(ERRORS)),
    at=st.integers(1, 30),
    headroom=st.none() | st.integers(0, 20_000),
)
def test_a_failure_at_any_step_of_a_load_leaves_every_tensor_exactly_as_it_was(
    forms, bad, error, at, headroom
):
    net = model()
    before, arrays = state_of(net), arrays_of(net)
    values = {
        key: as_given(value, form) for (key, value), form in zip(other_values().items(), forms)
    }
    if bad is not None:
        kind, which = bad
        key = list(values)[which]
        if kind == "a fraction for an int":
            key = "steps"
        values[key] = BAD_VALUES[kind](np.asarray(net.state_dict()[key].numpy()))
    if headroom is not None:
        gc.collect()
        device.set_memory_limit(device.memory_allocated() + headroom)
    steps = [(backend, "to_place"), (backend, "asnumpy"), (memory, "track")]
    try:
        with failing_at(at, ERRORS[error], *steps):
            net.set_state_dict(values)
    except (ValueError, device.OutOfMemoryError, MemoryError, RuntimeError) as exc:
        failure = exc
    else:
        failure = None
    finally:
        device.set_memory_limit(None)
    if failure is not None:
        event(f"refused: {type(failure).__name__}")
        assert isinstance(failure, ValueError) or "injected" in str(failure), str(failure)
        assert state_of(net) == before
    else:
        event("loaded")
        assert bad is None
        for key, target in net.state_dict().items():
            want = np.asarray(mt.to_tensor(values[key]).numpy()).astype(target.dtype)
            assert target._version == 1
            np.testing.assert_array_equal(target.numpy(), want, err_msg=key)
        assert net[0].weight.grad.numpy().tolist() == np.ones([40, 30]).tolist()
    for name, array in arrays.items():  # loaded in place, or not at all: the same arrays
        assert arrays_of(net)[name] is array, name
