"""A load into a narrower float refuses values that would overflow there.

``set_state_dict`` casts each value to its target's dtype (round to nearest even). A finite
value beyond the target's range (1e5 into float16, 3.4e38 into bfloat16, 2**40 as an int64
into float16) would become inf: the load is refused instead, naming the key, the largest value
and the target's largest finite value, and nothing is loaded. Values that round into range
(65519 into float16 is 65504) load; an inf or a NaN already in the source loads as it is.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from all_or_nothing import state_of

import minitorch_amp as mt
from minitorch_amp import nn


def model(dtype: str):
    """Two Linears with ``dtype`` parameters."""
    mt.seed(0)
    net = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))
    net.to(dtype=dtype)
    return net


def values_for(net, key: str | None = None, value=None) -> dict:
    """``net``'s state as float32 arrays (plus one); ``values[key]`` has ``value``'s dtype and
    ``value`` at its first index."""
    values = {k: v.numpy().astype("float32") + 1 for k, v in net.state_dict().items()}
    if key is not None:
        values[key] = values[key].astype(np.asarray(value).dtype)
        values[key].flat[0] = value
    return values


@pytest.mark.parametrize(
    ("dtype", "value", "largest"),
    [
        ("float16", 1e5, "65504"),
        ("float16", 65520.0, "65504"),  # the first value that rounds to inf
        ("float16", -1e5, "65504"),
        ("float16", np.int64(2**40), "65504"),
        ("bfloat16", 3.4e38, "3.38953e+38"),
        ("float32", 1e300, "3.4028"),
    ],
    ids=["1e5 to fp16", "65520 to fp16", "-1e5 to fp16", "int 2**40 to fp16", "bf16", "fp64"],
)
def test_a_finite_value_that_overflows_the_target_dtype_is_refused(dtype, value, largest):
    net = model(dtype)
    before = state_of(net)
    values = values_for(net, "1.bias", value)  # 0.weight and 0.bias come first
    with pytest.raises(ValueError) as info:
        net.set_state_dict(values)
    message = str(info.value)
    assert state_of(net) == before
    assert "'1.bias'" in message and dtype in message and largest in message
    assert re.search(r"nothing was loaded", message)
    assert re.search(r"float32 model|rescale", message)  # what to do


def test_the_message_names_the_largest_magnitude_in_the_value():
    net = model("float16")
    values = values_for(net)
    values["0.weight"][1, 2] = -7e5
    values["0.weight"][0, 0] = 1e5
    with pytest.raises(ValueError, match=r"'0.weight' holds 700000,"):
        net.set_state_dict(values)


@pytest.mark.parametrize(
    ("dtype", "value", "loaded"),
    [
        ("float16", 65504.0, 65504.0),
        ("float16", 65519.0, 65504.0),  # rounds down to the largest float16
        ("float16", np.int64(-65504), -65504.0),
        ("bfloat16", 3.39e38, 3.3895313892515355e38),  # rounds down to the largest
    ],
)
def test_values_that_round_into_the_target_range_load(dtype, value, loaded):
    net = model(dtype)
    net.set_state_dict(values_for(net, "1.bias", value))
    assert float(net[1].bias.numpy()[0]) == loaded


@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
def test_an_inf_or_nan_already_in_the_source_loads_as_it_is(value):
    net = model("float16")
    net.set_state_dict(values_for(net, "1.bias", value))
    got = net[1].bias.numpy()[0]
    assert (np.isnan(got) and np.isnan(value)) or got == value


def test_a_source_inf_next_to_an_overflowing_finite_value_is_still_refused():
    net = model("float16")
    before = state_of(net)
    values = values_for(net)
    values["1.weight"][0, 0] = np.inf
    values["1.weight"][0, 1] = 1e6
    with pytest.raises(ValueError, match=r"'1.weight' holds 1e\+06,"):
        net.set_state_dict(values)
    assert state_of(net) == before


@pytest.mark.parametrize("spelling", ["set_state_dict", "set_dict", "load_dict", "load_state_dict"])
def test_every_load_spelling_refuses_an_overflowing_value(spelling):
    net = model("float16")
    before = state_of(net)
    with pytest.raises(ValueError, match=r"'1.bias'.*float16"):
        getattr(net, spelling)(values_for(net, "1.bias", 1e5))
    assert state_of(net) == before


def test_widening_loads_and_float32_loads_are_unchanged():
    net = model("float32")
    values = values_for(net)
    values["0.weight"] = values["0.weight"].astype("float16")
    values["0.weight"][0, 0] = 65504
    net.set_state_dict(values)
    assert float(net[0].weight.numpy()[0, 0]) == 65504.0


@pytest.mark.parametrize(("dtype", "value"), [("float16", 1e5), ("bfloat16", 3.4e38)])
def test_set_value_never_narrows_so_a_finite_value_never_lands_as_inf(dtype, value):
    # Paddle's set_value (and copy_ here) takes only the tensor's own dtype: a wider value is
    # refused before anything is written, so 1e5 cannot become a float16 inf inside it. (An
    # inf the caller made with their own cast, np.float16(1e5), is data and is written.)
    weight = model(dtype)[0].weight
    before = weight.numpy().copy()
    for wide in (
        np.full(weight.shape, value, dtype="float32"),
        mt.to_tensor(np.full(weight.shape, value, dtype="float32")),
    ):
        with pytest.raises(TypeError, match=f"cast it first, e.g. value.astype\\('{dtype}'\\)"):
            weight.set_value(wide)
        with pytest.raises(TypeError, match="cast it first"):
            weight.copy_(wide)
    np.testing.assert_array_equal(weight.numpy(), before)
