"""Shared test set-up: the ``gpu`` marker skips without CuPy + a device; hypothesis profiles."""

from __future__ import annotations

import importlib
import os

import needs
import pytest
from hypothesis import HealthCheck, settings

from minitorch_amp.backend import device

# tests/dist/ holds the scripts that mpiexec runs as ranks (tests/mpi_run.py), not tests.
collect_ignore_glob = ["dist/*.py"]

settings.register_profile(
    "ci",
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("dev", max_examples=15, deadline=None)
settings.register_profile("thorough", max_examples=400, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def gpu_available() -> bool:
    return device.cupy is not None


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs CuPy and a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _restore_global_state():
    """Each test starts on the default device and dtype, seed 0, no memory budget, and no
    sticky bfloat16 ``auto_cast`` (Paddle's global, which turns later GradScalers off)."""
    import minitorch_amp as mt
    from minitorch_amp.backend import bias_grad, fp8_gemm, fp8_kernels, gemm_gpu
    from minitorch_amp.optimizer import bucket_kernel

    auto_cast = importlib.import_module("minitorch_amp.amp.auto_cast")  # the module

    place = device.current_place()
    dtype = mt.get_default_dtype()
    last_amp_dtype = auto_cast._last_amp_dtype.set("float32")
    mt.seed(0)
    gemm_gpu.KEPT.clear()  # (GEMM launches kept by a test that patched the kernel choice)
    fp8_gemm.KEPT.clear()
    bias_grad.KEPT.clear()
    fp8_kernels.KEPT.clear()
    bucket_kernel._NO_OVERFLOW.clear()  # (a stood-in GPU's array must not reach another's test)
    yield
    device.set_device(place)
    mt.set_default_dtype(dtype)
    mt.device.set_memory_limit(None)
    auto_cast._last_amp_dtype.reset(last_amp_dtype)


@pytest.fixture
def cpu():
    """Run the test on the CPU backend, whatever the default device (``_restore_global_state``
    puts the device back after it)."""
    import minitorch_amp as mt

    mt.set_device("cpu")


@pytest.fixture
def garbage_collected():
    """Collect the garbage earlier tests in this process left (cycles still holding counted
    arrays) before the test: a memory test's own gc.collect() would otherwise free it in the
    middle of its measurement. Files that count memory use it module-wide (``pytestmark``);
    with pytest-xdist their neighbours in the process differ from run to run."""
    import gc

    gc.collect()


@pytest.fixture
def nvrtc_available():
    """Skip unless NVRTC and the CUDA headers are here; under CI=true fail instead (needs.py)."""
    needs.nvrtc_compiler()
