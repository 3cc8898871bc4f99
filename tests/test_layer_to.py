"""``Layer.to`` / ``float`` / ``float16``: in-place conversion with Paddle's semantics.

In place means the Parameter objects survive (an optimizer built before keeps updating the
very tensors the model uses), their grads follow, and buffers are converted too.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import nn
from minitorch_amp.autograd.tensor import Tensor
from minitorch_amp.backend import device
from minitorch_amp.nn.layer.convert import convert_tensor_
from minitorch_amp.optimizer import SGD


class Counted(nn.Layer):
    """A Linear, a batch norm, a float buffer and an integer buffer."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.bn = nn.BatchNorm1D(4)
        self.register_buffer("scale", mt.ones([4]))
        self.register_buffer("steps", mt.to_tensor([7], dtype="int64"))

    def forward(self, x):
        return self.bn(self.fc(x)) * self.scale


def dtypes_of(layer) -> dict:
    return {name: str(t.dtype) for name, t in layer.state_dict().items()}


def test_to_dtype_is_in_place_and_keeps_every_parameter_object():
    model = Counted()
    params = {name: p for name, p in model.named_parameters()}
    values = {name: p.numpy().copy() for name, p in params.items()}
    assert model.to(dtype="float16") is model
    for name, p in model.named_parameters():
        assert p is params[name] and p.dtype == np.float16
        np.testing.assert_array_equal(p.numpy(), values[name].astype(np.float16))  # RNE
    # Paddle's Layer.to converts integer buffers too (floating_only=False; issue #54777).
    assert set(dtypes_of(model).values()) == {"float16"}
    assert model.steps.numpy().tolist() == [7.0]
    assert model._dtype == "float16" and model.fc._dtype == "float16"


def test_grads_are_converted_with_their_parameters():
    fc = nn.Linear(3, 2)
    fc(mt.ones([2, 3])).sum().backward()
    grad = fc.weight.grad
    expected = grad.numpy().astype(np.float16)
    fc.to(dtype="float16")
    assert fc.weight.grad is grad and grad.dtype == np.float16
    np.testing.assert_array_equal(grad.numpy(), expected)


def test_an_optimizer_built_before_to_still_updates_the_model():
    mt.seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    opt = SGD(0.5, parameters=model.parameters())
    model.to(dtype="float16")
    before = [p.numpy().copy() for p in model.parameters()]
    model(mt.randn([2, 3]).astype("float16")).astype("float32").sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # float16 params without master weights
        opt.step()
    assert all(p.dtype == np.float16 for p in opt._parameter_list)
    assert all(p is q for p, q in zip(opt._parameter_list, model.parameters()))
    assert all((p.numpy() != b).any() for p, b in zip(model.parameters(), before))


def test_floating_only_leaves_integer_buffers_alone():
    model = Counted()
    model._to_impl(dtype="float16", floating_only=True)
    assert model.steps.dtype == np.int64 and model.scale.dtype == np.float16


def test_include_sublayers_false_converts_only_the_layers_own_tensors():
    model = Counted()
    model._to_impl(dtype="float16", include_sublayers=False)
    assert model.scale.dtype == np.float16 and model.steps.dtype == np.float16
    assert model.fc.weight.dtype == np.float32 and model.fc._dtype == "float32"


def test_to_with_no_arguments_and_to_the_current_device_change_nothing():
    model = Counted()
    before = {k: (v.dtype, v.numpy().tobytes()) for k, v in model.state_dict().items()}
    weight = model.fc.weight._data
    assert model.to() is model
    assert model.to(device=device.get_device(), blocking=False) is model
    assert model.fc.weight._data is weight  # nothing to do: no copy either
    assert {k: (v.dtype, v.numpy().tobytes()) for k, v in model.state_dict().items()} == before


def test_float16_keeps_batch_norm_in_float32_by_default_and_float_goes_back():
    model = Counted()
    assert model.float16() is model
    assert model.fc.weight.dtype == np.float16 and model.scale.dtype == np.float16
    assert model.bn.weight.dtype == np.float32 and model.bn._mean.dtype == np.float32
    assert model.steps.dtype == np.int64
    model.float()
    assert set(dtypes_of(model).values()) == {"float32", "int64"}


def test_float16_with_excluded_layers_by_type_and_by_instance():
    model = Counted()
    model.float16(excluded_layers=[nn.Linear])
    assert model.fc.weight.dtype == np.float32
    assert model.bn.weight.dtype == np.float16  # the default exclusion is replaced
    other = Counted()
    other.float16(excluded_layers=other.fc)
    assert other.fc.weight.dtype == np.float32 and other.scale.dtype == np.float16


def test_bad_excluded_layers_raise_and_change_nothing():
    model = Counted()
    with pytest.raises(TypeError, match="excluded_layers must be either"):
        model.float16(excluded_layers=[nn.Linear, "BatchNorm1D"])
    assert set(dtypes_of(model).values()) == {"float32", "int64"}


def test_bfloat16_converts_floating_tensors_and_keeps_batch_norm_float32():
    model = Counted()
    model.bfloat16()  # as float16(): integer buffers and (by default) batch norm stay
    kinds = dtypes_of(model)
    assert {k: v for k, v in kinds.items() if not k.startswith("bn.")} == {
        "fc.weight": "bfloat16", "fc.bias": "bfloat16", "scale": "bfloat16", "steps": "int64"
    }  # fmt: skip
    assert {v for k, v in kinds.items() if k.startswith("bn.")} == {"float32"}
    model.to(dtype="bfloat16")  # Layer.to converts everything, integers included (Paddle)
    assert set(dtypes_of(model).values()) == {"bfloat16"}


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"device": "tpu"}, ValueError, "unknown device"),
        ({"device": 0}, ValueError, "device must be"),
        ({"device": "gpu:x"}, ValueError, "unknown device"),
        ({"dtype": "float16", "blocking": "yes"}, TypeError, "blocking must be"),
        ({"dtype": "float16", "blocking": 1}, TypeError, "blocking must be"),
        ({"dtype": "complex64"}, TypeError, "unsupported dtype"),
    ],
)
def test_bad_arguments_raise_before_anything_is_converted(kwargs, error, match):
    model = Counted()
    with pytest.raises(error, match=match):
        model.to(**kwargs)
    assert set(dtypes_of(model).values()) == {"float32", "int64"}


@pytest.mark.skipif(device.cupy is not None, reason="checks the CPU-only message")
def test_a_gpu_on_a_cpu_only_machine_is_a_value_error():
    with pytest.raises(ValueError, match="cannot use 'gpu'"):
        Counted().to(device="gpu", dtype="float16")


@pytest.mark.gpu
def test_to_gpu_and_back_keeps_objects_values_and_grads():
    model = Counted()
    model.fc(mt.ones([2, 3])).sum().backward()
    weight, grad = model.fc.weight, model.fc.weight.grad
    values = weight.numpy().copy()
    model.to(device="gpu:0", dtype="float16")
    assert model.fc.weight is weight and weight.place == device.Place("gpu", 0)
    assert grad.place == device.Place("gpu", 0) and grad.dtype == np.float16
    model.to(device="cpu", dtype="float32")
    assert weight.place == device.CPU and grad.place == device.CPU
    np.testing.assert_array_equal(weight.numpy(), values.astype(np.float16).astype(np.float32))


def test_convert_tensor_is_in_place_on_the_object_and_its_grad():
    t = Tensor(np.array([1.0, 0.1, 70000.0], "float32"), stop_gradient=False)
    t.grad = np.array([0.5, 1e-8, 3.0], "float32")
    grad = t.grad
    assert convert_tensor_(t, "float16") is t
    assert t.dtype == np.float16 and t.grad is grad and grad.dtype == np.float16
    assert t.numpy()[1] == np.float16(0.1) and np.isinf(t.numpy()[2])  # RNE; overflow -> inf
    assert grad.numpy()[1] == 0  # 1e-8 underflows in float16


# ---- state-dict hooks --------------------------------------------------------------------
def test_state_dict_hooks_may_replace_the_result_and_can_be_removed():
    model = Counted()
    seen = []
    handle = model.fc.register_state_dict_hook(lambda sd: seen.append(list(sd)))
    top = model.register_state_dict_hook(lambda sd: {"only": sd["fc.weight"]})
    assert list(model.state_dict()) == ["only"]
    assert seen == [["scale", "steps", "fc.weight", "fc.bias"]]  # what is in so far
    top.remove()
    handle.remove()
    assert len(model.state_dict()) == 8 and len(seen) == 1
    assert list(model.state_dict(use_hook=False)) == list(model.state_dict())


def test_set_state_dict_loads_into_the_real_tensors_despite_hooks():
    model, source = Counted(), Counted()
    model.register_state_dict_hook(lambda sd: {k: Tensor._wrap(v._data * 0) for k, v in sd.items()})
    weight = model.fc.weight
    model.set_state_dict(source.state_dict())
    assert model.fc.weight is weight
    np.testing.assert_array_equal(weight.numpy(), source.fc.weight.numpy())
