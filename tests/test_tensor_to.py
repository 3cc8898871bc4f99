"""Tensor.to and Layer.to: Paddle's three forms, PyTorch's spellings, nothing in a wrong slot."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import nn


def test_to_dtype_in_every_spelling():
    x = mt.to_tensor([1.0, 2.0])
    for dtype in ("float16", mt.float16, np.float16, np.dtype("float16"), "paddle.float16"):
        assert x.to(dtype).dtype == np.float16
    assert x.to(dtype="float64").dtype == np.float64
    assert x.to("float32") is x  # nothing changes: the tensor itself (Paddle)


def test_to_device_and_device_with_dtype():
    x = mt.to_tensor([1.0, 2.0])
    assert x.to("cpu") is x and x.to(mt.CPUPlace()) is x
    y = x.to("cpu", "float64")
    assert y.dtype == np.float64 and str(y.place) == "cpu"
    assert x.to(device="cpu", dtype="float16", blocking=True).dtype == np.float16
    assert x.to("cpu", non_blocking=True) is x  # PyTorch's keyword


def test_to_another_tensor_takes_its_dtype_and_device():
    x, other = mt.to_tensor([1.0]), mt.to_tensor([1], dtype="int32")
    assert x.to(other).dtype == np.int32
    assert x.to(other=other).dtype == np.int32


def test_to_is_recorded():
    x = mt.to_tensor([1.5], stop_gradient=False)
    x.to("float16").astype("float32").sum().backward()
    assert x.grad.dtype == np.float32 and x.grad.numpy()[0] == 1.0


@pytest.mark.parametrize(
    "args, kwargs, error",
    [
        ((), {}, TypeError),
        (("float16", "cpu"), {}, TypeError),  # a device in blocking's slot
        (("cpu", "float16", True, 1), {}, TypeError),
        (("cpu",), {"device": "cpu"}, TypeError),
        (("float8",), {}, ValueError),
        ((0,), {}, TypeError),
        ((), {"dtype": "cpu"}, TypeError),
        ((), {"device": "float16"}, TypeError),
        ((), {"memory_format": None}, TypeError),
        (("cpu",), {"blocking": "yes"}, TypeError),
    ],
)
def test_arguments_in_the_wrong_slot_are_refused(args, kwargs, error):
    with pytest.raises(error):
        mt.to_tensor([1.0]).to(*args, **kwargs)


def test_layer_to_accepts_a_dtype_first():
    fc = nn.Linear(2, 2)
    w = fc.weight
    assert fc.to("float16") is fc and w.dtype == np.float16 and fc.weight is w
    fc.to(mt.float32)
    assert w.dtype == np.float32
    with pytest.raises(TypeError, match="dtype"):
        fc.to("float16", dtype="float32")
    assert w.dtype == np.float32


def test_layer_to_reads_its_arguments_as_tensor_to_does():
    """A dtype passed as ``device=`` is refused, as ``Tensor.to`` refuses it (it was taken
    as the dtype); ``to(tensor)`` takes the tensor's dtype; ``to()`` changes nothing."""
    fc = nn.Linear(2, 2)
    w = fc.weight
    with pytest.raises(ValueError, match="'float16' is a dtype, not a device"):
        fc.to(device="float16")
    assert w.dtype == np.float32
    assert fc.to(mt.ones([1], dtype="float16")) is fc and w.dtype == np.float16
    assert fc.to() is fc and w.dtype == np.float16
    with pytest.raises(TypeError, match="unexpected keyword argument 'dtpye'"):
        fc.to(dtpye="float32")
    assert fc.to("cpu", "float32", True) is fc and w.dtype == np.float32
    assert fc.to(None, "float16") is fc and w.dtype == np.float16  # Paddle's positional form
    assert mt.ones([1]).to(None, "float16").dtype == np.float16
