"""The start-up probe: a GPU is used only when CuPy can compile a kernel and load cuBLAS.

A driver-only machine with CuPy but without CUDA's libraries (``pip install cupy-cuda12x``
without its ``ctk`` extra) used to pick the GPU and fail at the first kernel compile. The
probe now fails over to the CPU with a message that says what to install. These tests stand
a fake CuPy in for the real one, so they run on every machine.
"""

from __future__ import annotations

import logging
import sys
import types

import pytest

from minitorch_amp.backend import device


def fake_cupy(devices=1, nvrtc_error=None, cublas_error=None):
    """A stand-in for ``cupy`` with just what the probe touches."""

    class RawModule:
        def __init__(self, code, options=()):
            assert "#include <cuda_fp16.h>" in code  # the probe needs CUDA's headers too
            self.code = code

        def get_function(self, name):
            if nvrtc_error is not None:
                raise nvrtc_error
            return name

    def get_cublas_handle():
        if cublas_error is not None:
            raise cublas_error
        return 1

    runtime = types.SimpleNamespace(getDeviceCount=lambda: devices)
    cuda = types.SimpleNamespace(
        runtime=runtime, device=types.SimpleNamespace(get_cublas_handle=get_cublas_handle)
    )
    return types.SimpleNamespace(cuda=cuda, RawModule=RawModule)


@pytest.fixture
def install(monkeypatch):
    """Put a fake CuPy in ``sys.modules`` for the probe to import; restore after the test."""
    monkeypatch.setattr(device, "cpu_reason", device.cpu_reason)

    def put(module):
        monkeypatch.setitem(sys.modules, "cupy", module)
        return module

    return put


def test_a_working_cupy_is_chosen(install):
    cupy = install(fake_cupy())
    assert device._probe_cupy() == (cupy, None)


def test_missing_nvrtc_fails_over_to_the_cpu_and_says_what_to_install(install):
    install(fake_cupy(nvrtc_error=OSError("libnvrtc.so.12: cannot open shared object file")))
    cupy, reason = device._probe_cupy()
    assert cupy is None
    assert "cannot compile a kernel with NVRTC" in reason
    assert "libnvrtc.so.12" in reason  # the library's own words, first line
    assert 'pip install "cupy-cuda12x[ctk]"' in reason


def test_missing_cublas_fails_over_to_the_cpu_and_says_what_to_install(install):
    install(fake_cupy(cublas_error=RuntimeError("CUBLAS library not found")))
    cupy, reason = device._probe_cupy()
    assert cupy is None
    assert "cannot load cuBLAS" in reason and "CUBLAS library not found" in reason
    assert "[ctk]" in reason


def test_no_device_is_reported_before_the_libraries_are_tried(install):
    install(fake_cupy(devices=0, nvrtc_error=AssertionError("must not be reached")))
    cupy, reason = device._probe_cupy()
    assert cupy is None and "no GPU was found" in reason


def test_automatic_choice_warns_once_on_the_minitorch_amp_logger(install, monkeypatch, caplog):
    install(fake_cupy(nvrtc_error=OSError("libnvrtc.so.12: cannot open shared object file")))
    monkeypatch.delenv("MINITORCH_AMP_DEVICE", raising=False)
    with caplog.at_level(logging.DEBUG, logger="minitorch_amp"):
        assert device._choose_backend() == (None, "cpu")
    [record] = caplog.records
    assert record.name == "minitorch_amp" and record.levelno == logging.WARNING
    assert "running on the CPU with NumPy" in record.getMessage()
    assert "MINITORCH_AMP_DEVICE=cpu" in record.getMessage()  # how to choose it quietly
    assert "NVRTC" in device.cpu_reason


def test_not_installed_is_only_info(install, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    monkeypatch.delenv("MINITORCH_AMP_DEVICE", raising=False)
    with caplog.at_level(logging.DEBUG, logger="minitorch_amp"):
        assert device._choose_backend() == (None, "cpu")
    [record] = caplog.records
    assert record.levelno == logging.INFO
    assert device.cpu_reason.startswith("CuPy is not installed")


def test_forcing_the_gpu_without_nvrtc_is_an_error_that_says_why(install, monkeypatch):
    install(fake_cupy(nvrtc_error=OSError("libnvrtc.so.12: cannot open shared object file")))
    monkeypatch.setenv("MINITORCH_AMP_DEVICE", "gpu")
    with pytest.raises(device.DeviceError, match=r"MINITORCH_AMP_DEVICE=gpu but .*NVRTC"):
        device._choose_backend()
