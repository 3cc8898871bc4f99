"""One error type and one message style for every device or dtype mistake (issue 27 item 7).

``Tensor.to``, ``Layer.to``, ``set_device``, ``place=`` and ``dtype=`` arguments, the AMP
device checks, the creation functions and ``MINITORCH_AMP_DEVICE`` all raise
``DeviceError``, which is also a ValueError, TypeError and RuntimeError (what these mistakes
raised before), with a message that says what was given, what is accepted and what to do.
"""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.backend import device, dtypes
from minitorch_amp.backend.device_errors import DeviceError

ROOT = Path(__file__).resolve().parents[1]
CPU_ONLY = pytest.mark.skipif(device.cupy is not None, reason="checks the CPU-only message")

MISTAKES = {
    "Tensor.to(unknown device)": lambda: mt.ones([2]).to("tpu"),
    "Layer.to(unknown device)": lambda: nn.Linear(2, 2).to("tpu"),
    "Layer._to_impl(unknown device)": lambda: nn.Linear(2, 2)._to_impl("tpu"),  # Paddle's
    "set_device(unknown device)": lambda: mt.set_device("tpu"),
    "to_tensor(place=unknown device)": lambda: mt.to_tensor([1.0], place="tpu"),
    "zeros(place=a number)": lambda: mt.zeros([2], place=3),
    "CUDAPlace(a negative number)": lambda: mt.CUDAPlace(-1),
    "Tensor.to(a number)": lambda: mt.ones([2]).to(3),
    "to_tensor(dtype=unknown dtype)": lambda: mt.to_tensor([1.0], dtype="float8"),
    "astype(unknown dtype)": lambda: mt.ones([2]).astype("complex64"),
    "Layer.to(dtype=unknown dtype)": lambda: nn.Linear(2, 2).to(dtype="complex64"),
    "Layer.to(neither)": lambda: nn.Linear(2, 2).to("float8"),
    "Tensor.to(dtype=a device)": lambda: mt.ones([2]).to(dtype="cpu"),
    "set_default_dtype(an integer dtype)": lambda: mt.set_default_dtype("int32"),
    "is_float16_supported(unknown device)": lambda: amp.is_float16_supported("xxx"),
    "autocast(unknown device_type)": lambda: mt.autocast("npu"),
    "randn(spread shape)": lambda: mt.randn(32, 16),
}


@pytest.mark.parametrize("call", MISTAKES.values(), ids=MISTAKES.keys())
def test_every_device_or_dtype_mistake_raises_device_error(call):
    with pytest.raises(DeviceError):
        call()


def test_device_error_is_also_each_type_these_mistakes_raised_before():
    # unknown device: ValueError (Paddle's type); dtype: TypeError; no GPU: RuntimeError
    assert issubclass(DeviceError, ValueError)
    assert issubclass(DeviceError, TypeError)
    assert issubclass(DeviceError, RuntimeError)
    assert mt.backend.DeviceError is device.DeviceError is DeviceError is mt.device.DeviceError


@CPU_ONLY
@pytest.mark.parametrize("text", ["cuda", "gpu", "cuda:0"], ids=["cuda", "paddle-s", "cuda-0"])
def test_layer_to_and_tensor_to_refuse_a_missing_gpu_alike(text):
    with pytest.raises(DeviceError) as on_layer:
        nn.Linear(2, 2).to(text)
    with pytest.raises(DeviceError) as on_tensor:
        mt.ones([2]).to(text)
    layer_message = str(on_layer.value).removeprefix("Layer.to(): ")
    assert layer_message == str(on_tensor.value).removeprefix("Tensor.to(): ")
    assert f"cannot use {text!r}" in layer_message and "'cpu'" in layer_message


@pytest.mark.parametrize("text", ["tpu", "gpu:x", "float8", "int4"])
def test_layer_to_and_tensor_to_give_the_same_message_for_the_same_argument(text):
    with pytest.raises(DeviceError) as on_layer:
        nn.Linear(2, 2).to(text)
    with pytest.raises(DeviceError) as on_tensor:
        mt.ones([2]).to(text)
    layer_message = str(on_layer.value).removeprefix("Layer.to(): ")
    assert layer_message == str(on_tensor.value).removeprefix("Tensor.to(): ")
    assert repr(text) in layer_message and "'cuda:N'" in layer_message


@pytest.mark.parametrize(
    "call",
    [
        lambda: mt.set_device("float16"),
        lambda: mt.ones([2]).to(device="float16"),
        lambda: mt.to_tensor([1.0], place="bfloat16"),
        lambda: mt.zeros([2], place="float32"),
    ],
)
def test_a_dtype_given_as_a_device_is_called_a_dtype(call):
    with pytest.raises(DeviceError, match=r"is a dtype, not a device; pass it as dtype="):
        call()


@pytest.mark.parametrize(
    "call",
    [
        lambda: mt.to_tensor([1.0], dtype="cpu"),
        lambda: nn.Linear(2, 2).to(dtype="cuda"),
        lambda: mt.ones([2]).astype("gpu:0"),
        lambda: mt.ones([2]).to("cpu", "gpu"),
    ],
)
def test_a_device_given_as_a_dtype_is_called_a_device(call):
    with pytest.raises(DeviceError, match=r"is a device, not a dtype; pass it as the device"):
        call()


def test_a_dtype_like_string_that_is_neither_lists_both_and_suggests_the_close_names():
    model = nn.Linear(2, 2)
    with pytest.raises(DeviceError) as info:
        model.to("float8")
    message = str(info.value)
    assert "'float8' is neither a device ('cpu', 'gpu', 'gpu:N', 'cuda'" in message
    assert ", ".join(str(d) for d in dtypes.SUPPORTED) in message
    assert model.weight.dtype == "float32"  # nothing converted


def test_the_dtype_list_is_read_from_the_registry(monkeypatch):
    monkeypatch.setattr(dtypes, "SUPPORTED", (*dtypes.SUPPORTED, np.dtype("int16")))
    for call in (
        lambda: mt.to_tensor([1.0], dtype="complex64"),
        lambda: nn.Linear(2, 2).to("float8"),
        lambda: mt.ones([2]).to(dtype="cpu"),
    ):
        with pytest.raises(DeviceError, match=r"bool, .*int16"):
            call()
    assert mt.to_tensor([1], dtype="int16").dtype == "int16"  # the registry is the rule


@pytest.mark.parametrize(
    ("call", "given", "accepted", "todo"),
    [
        (lambda: mt.set_device("tpu"), "'tpu'", "'gpu:N', 'cuda'", "get_available_device()"),
        (lambda: mt.zeros([2], place=3), "unknown device 3", "a Place, got int", "use 'cpu'"),
        (lambda: mt.to_tensor([1.0], dtype="float16x"), "'float16x'", "bfloat16, float32",
         "did you mean float16"),
        (lambda: mt.ones([2]).astype(16), "unsupported dtype 16", "a number is not a dtype",
         "use one of: float16"),
    ],
)  # fmt: skip
def test_messages_say_what_was_given_what_is_accepted_and_what_to_do(call, given, accepted, todo):
    with pytest.raises(DeviceError) as info:
        call()
    for part in (given, accepted, todo):
        assert part in str(info.value)


def test_a_refused_set_device_leaves_the_device():
    before = mt.get_device()
    for bad in ("tpu", "float16", 3):
        with pytest.raises(DeviceError):
            mt.set_device(bad)
    assert mt.get_device() == before


# ---- MINITORCH_AMP_DEVICE takes the strings .to() takes -----------------------------------------
def fake_gpus(monkeypatch, count: int):
    runtime = types.SimpleNamespace(getDeviceCount=lambda: count)
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime))
    monkeypatch.setattr(device, "_probe_cupy", lambda: (fake, None))
    return fake


@pytest.mark.parametrize(
    ("value", "kind"), [("cuda", "gpu"), ("CUDA", "gpu"), ("gpu", "gpu"), ("cuda:1", "gpu:1")]
)
def test_the_environment_variable_accepts_cuda_and_device_numbers(monkeypatch, value, kind):
    fake = fake_gpus(monkeypatch, count=2)
    monkeypatch.setenv("MINITORCH_AMP_DEVICE", value)
    assert device._choose_backend() == (fake, kind)


def test_the_environment_variable_refuses_a_gpu_number_this_machine_lacks(monkeypatch):
    fake_gpus(monkeypatch, count=1)
    monkeypatch.setenv("MINITORCH_AMP_DEVICE", "cuda:3")
    with pytest.raises(DeviceError, match=r"has 1 GPU\(s\); use 'gpu:0' to 'gpu:0'"):
        device._choose_backend()


@pytest.mark.parametrize("value", ["tpu", "cpu:1", "float16"])
def test_the_environment_variable_refuses_what_to_refuses(monkeypatch, value):
    fake_gpus(monkeypatch, count=1)
    monkeypatch.setenv("MINITORCH_AMP_DEVICE", value)
    with pytest.raises(DeviceError, match=r"use 'cpu'"):
        device._choose_backend()


@CPU_ONLY
def test_the_environment_variable_cuda_on_a_cpu_only_machine_says_why_not():
    out = subprocess.run(
        [sys.executable, "-c", "import minitorch_amp"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"MINITORCH_AMP_DEVICE": "cuda", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert out.returncode != 0
    assert "DeviceError: MINITORCH_AMP_DEVICE=cuda but CuPy" in out.stderr
    assert "not understood" not in out.stderr


# ---- creation functions: PyTorch's spread-out shape ---------------------------------------------
@pytest.mark.parametrize(
    ("call", "fix"),
    [
        (lambda: mt.randn(32, 16), "randn([32, 16])"),
        (lambda: mt.randn(32, 16, 8), "randn([32, 16, 8])"),
        (lambda: mt.rand(2, 3), "rand([2, 3])"),
        (lambda: mt.uniform(2, 3), "uniform([2, 3])"),
        (lambda: mt.zeros(2, 3), "zeros([2, 3])"),
        (lambda: mt.ones(2, 0), "ones([2, 0])"),
        (lambda: mt.empty(4, 5), "empty([4, 5])"),
        (lambda: mt.full(2, 3, 4), "full([2, 3], 4)"),
        (lambda: mt.randint(0, 10, 2, 3), "randint(0, 10, [2, 3])"),
        (lambda: mt.normal(0.0, 1.0, 2, 3), "normal(0.0, 1.0, [2, 3])"),
    ],
)
def test_a_spread_out_shape_is_answered_with_paddles_one_list(call, fix):
    with pytest.raises(DeviceError, match="Paddle takes the shape as one list") as info:
        call()
    assert str(info.value).endswith(f"use {fix}")


def test_the_paddle_forms_of_the_creation_functions_still_work():
    assert mt.randn([32, 16]).shape == [32, 16]
    assert mt.zeros(3).shape == [3]  # an int shape (Paddle)
    assert mt.full(32, 16).shape == [32]  # full(shape, fill_value)
    assert mt.randint(0, 10, 3).shape == [3]
    assert mt.zeros([2], "float16").dtype == "float16"


def test_a_layer_called_on_a_python_list_says_to_make_a_tensor():
    with pytest.raises(TypeError, match=r"linear: got a Python list .*to_tensor\(data\)"):
        nn.Linear(2, 2)([[1.0, 2.0]])


@pytest.mark.parametrize(
    "layer, data",
    [
        (lambda: nn.Conv2D(1, 1, 3), [[[[1.0] * 4] * 4]]),
        (lambda: nn.Conv1D(1, 1, 3), np.ones((1, 1, 4), np.float32)),
    ],
    ids=["conv2d-list", "conv1d-array"],
)
def test_a_convolution_called_on_host_data_says_to_make_a_tensor(layer, data):
    conv = layer()
    weight = conv.weight.numpy().copy()
    with pytest.raises(TypeError, match=r"conv[12]d: got a (list|ndarray) .*to_tensor\(data\)"):
        conv(data)
    assert np.array_equal(conv.weight.numpy(), weight)


@pytest.mark.parametrize("name", ["float16", "float32", "float64", "int32", "int64"])
def test_a_supported_dtype_in_the_other_byte_order_is_still_refused(name):
    """``convert_dtype`` answers a supported np.dtype from a dict; a byte-swapped one has the
    same class but is not supported, and is refused as before."""
    native = np.dtype(name)
    assert dtypes.convert_dtype(native) is native
    with pytest.raises(TypeError, match="unsupported dtype"):
        dtypes.convert_dtype(native.newbyteorder("S"))


def test_a_place_compared_with_any_string_answers_and_hashes_as_its_name():
    """Comparing is not using: ``place == 'gpu'`` on a machine without CuPy is False, not
    a DeviceError; a Place equals only its canonical name among strings and hashes as it,
    so ``'cpu' in {place}`` agrees with ``place == 'cpu'``."""
    cpu = mt.ones([1]).place
    assert cpu == "cpu" and cpu != " CPU " and cpu == mt.CPUPlace()
    assert cpu != "gpu" and cpu != "cuda:1" and cpu != "xpu" and cpu != "float16"
    assert cpu in ["gpu", "cpu"] and "cpu" in {cpu} and {cpu: 1}["cpu"] == 1
    assert device.Place("gpu", 1) != "cuda:1" and "gpu:1" in {device.Place("gpu", 1)}
