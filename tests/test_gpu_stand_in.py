"""benchmarks/gpu_stand_in.py: the GPU path of a training step, run on the CPU with CuPy and a
Hopper GPU stood in for. What an eager O2 step launches is pinned here, so a change that adds
a launch to the GPU step (issue 24's kernels per step) shows on every machine, and the
profiling commands that use the stand-in run."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import minitorch_amp as mt
from minitorch_amp.backend import device as _device
from minitorch_amp.backend import kernels

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "examples")]
import gpu_stand_in  # noqa: E402
from host_profile import build_step  # noqa: E402

# One eager O2 SimpleNet step (3 x Linear, ReLU, MSE, GradScaler, SGD) on a Hopper GPU: the
# forward's input cast and three GEMMs with their bias, the loss; the scaled loss's backward,
# the first layer's float16 weight gradient by the cast's backward; the unscale and its
# check, the fused update, the scale's update.
O2_STEP = Counter(
    {
        "gemm_sm90<false,false,__half,__half,128,false>": 3,  # forward, bias fused
        "gemm_sm90<true,false,__half,__half,128,false>": 3,  # weight gradients
        "gemm_sm90<false,true,__half,__half,128,false>": 2,  # input gradients
        "bias_grad<__half, __half, __half>": 3,
        "cast_f32_to_f16": 2,
        "cast_f16_to_f32": 1,
        "squared_error<float>": 1,
        "squared_error_backward<float>": 1,
        "scale_loss": 1,
        "unscale_and_check<__half>": 1,
        "sgd_step<__half, __half>": 1,
        "inverse_scale_and_clear": 1,
        "update_loss_scaling": 1,
    }
)
# and CuPy's own: the pool's allocations, ReLU (cupy.maximum, a kernel each) and no-op
# contiguity checks; one upload (the scaler's initial scale, kept on the device)
O2_CUPY = {"empty": 14, "ascontiguousarray": 16, "maximum": 2, "asarray": 1}


def one_step(mode: str, optimizer: str = "SGD", hopper: bool = True):
    with gpu_stand_in.stand_in(hopper) as stand:
        mt.set_device("gpu:0")
        step = build_step(mode, 64, 8, optimizer)
        step()  # the first step makes the state (masters, the optimizer's buffers)
        stand.clear()
        step()
        return Counter(name for _, name in stand.launches), dict(stand.calls)


def test_an_eager_o2_step_on_a_hopper_gpu_launches_these_kernels():
    launched, cupy_calls = one_step("O2")
    assert launched == O2_STEP
    assert cupy_calls == O2_CUPY
    kernels_per_step = sum(launched.values()) + cupy_calls["maximum"]
    assert kernels_per_step <= 30  # issue 24's target for an eager O2 step


def test_an_sm80_gpu_takes_the_mma_sync_gemm_for_the_same_step():
    launched, _ = one_step("O2", hopper=False)
    gemms = {name: n for name, n in launched.items() if name.startswith("gemm")}
    assert sum(gemms.values()) == 8 and all(n.startswith("gemm_f16<") for n in gemms)


@pytest.mark.parametrize("mode", ["fp32", "O1"])
@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
def test_every_mode_runs_on_the_stand_in(mode, optimizer):
    launched, cupy_calls = one_step(mode, optimizer)
    update = "adam_step<float, float>" if optimizer == "Adam" else "sgd_step<float, float>"
    assert launched[update] == 1  # float32 weights, one fused update for the three layers
    if mode == "O1":  # each Linear's input and weight cast in one launch
        assert launched["cast_pair_f32_to_f16"] == 3 and sum(launched.values()) == 21
    else:  # cuBLAS through CuPy's matmul
        assert cupy_calls["matmul"] >= 3 and sum(launched.values()) == 6


def test_the_stand_in_puts_everything_back():
    launch, cupy = kernels.launch, _device.cupy
    one_step("O2")
    assert (kernels.launch, _device.cupy) == (launch, cupy)
    assert str(mt.get_device()) == "cpu"


def test_the_stand_in_and_cupyx_go_back_and_leave_modules_imported_inside():
    import importlib

    before = sys.modules.get("cupyx")
    sys.modules.pop("tabnanny", None)
    with gpu_stand_in.stand_in():
        assert sys.modules["cupyx"] is not before and sys.modules["cupyx"].scatter_add
        importlib.import_module("tabnanny")  # a module first imported inside (torch, say)
    assert sys.modules.get("cupyx") is before and "tabnanny" in sys.modules


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float8_e4m3fn", "uint8"])
def test_an_arrays_address_is_its_first_byte_whatever_its_layout_and_dtype(dtype):
    import ml_dtypes
    import numpy as np

    a = np.zeros((4, 6), getattr(ml_dtypes, dtype, dtype))
    read_only = a.copy()
    read_only.flags.writeable = False
    views = (a, a.T, a[1:], a[:, 2:], a.T[1:], a[:, ::2], a.reshape(-1)[3:], np.asarray(a[1, 1]))
    for view in (*views, a[:0], read_only):
        assert gpu_stand_in._address(view) == view.ctypes.data, (view.shape, view.strides)


def test_host_profile_profiles_the_gpu_path_on_the_stand_in():
    command = [sys.executable, str(ROOT / "benchmarks" / "host_profile.py"), "--gpu-stand-in"]
    command += ["--sizes", "tiny", "--modes", "O2", "--optimizer", "SGD", "--steps", "2"]
    out = subprocess.run(
        [*command, "--warmup", "0", "--top", "3"], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("gpu:0: a stand-in for a GPU, on the CPU, CuPy 14.0.0 (a NumPy")
    assert f"| raw kernel launches (kernels.launch) | {sum(O2_STEP.values())} |" in out.stdout
