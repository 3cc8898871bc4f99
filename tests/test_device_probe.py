"""The start-up probe: a GPU is used only when CuPy can compile a kernel and load cuBLAS.

A driver-only machine with CuPy but without CUDA's libraries (``pip install cupy-cuda12x``
without its ``ctk`` extra) used to pick the GPU and fail at the first kernel compile. The
probe now fails over to the CPU with a message that says what to install. Its kernel is
``cuda/probe.cu``, compiled through the loader (``kernels.get_function``) like every other
one. These tests stand a fake CuPy in for the real one, so they run on every machine.
"""

from __future__ import annotations

import functools
import logging
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from minitorch_amp.backend import device, kernels

ROOT = Path(__file__).resolve().parents[1]


def fake_cupy(devices=1, nvrtc_error=None, cublas_error=None, compiled=None):
    """A stand-in for ``cupy`` with just what the probe and the loader touch; each module the
    loader compiles is appended to ``compiled``."""

    class RawModule:
        def __init__(self, code, options=(), name_expressions=()):
            assert "#include <cuda_fp16.h>" in code  # the probe needs CUDA's headers too
            self.code, self.options, self.names = code, options, name_expressions

        def compile(self):  # where CuPy runs NVRTC and loads the module
            if nvrtc_error is not None:
                raise nvrtc_error
            if compiled is not None:
                compiled.append(self)

        def get_function(self, name):
            assert name in self.names
            return name

    class Device:
        def __init__(self, index):
            self.id = index

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def get_cublas_handle():
        if cublas_error is not None:
            raise cublas_error
        return 1

    runtime = types.SimpleNamespace(getDeviceCount=lambda: devices, getDevice=lambda: 0)
    cuda = types.SimpleNamespace(
        runtime=runtime,
        Device=Device,
        device=types.SimpleNamespace(get_cublas_handle=get_cublas_handle),
    )
    return types.SimpleNamespace(cuda=cuda, RawModule=RawModule)


@pytest.fixture
def install(monkeypatch):
    """Put a fake CuPy in ``sys.modules`` for the probe to import; restore after the test.

    The loader's per-device caches are swapped for empty ones, so each test compiles anew
    (a GPU machine keeps its real compiled modules)."""
    monkeypatch.setattr(device, "cpu_reason", device.cpu_reason)
    monkeypatch.setattr(kernels, "_functions", {})
    monkeypatch.setattr(kernels, "_module", functools.cache(kernels._module.__wrapped__))

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


def test_the_probe_compiles_cuda_probe_cu_through_the_loader(install):
    compiled = []
    cupy = install(fake_cupy(compiled=compiled))
    before = device.cupy
    assert device._probe_cupy() == (cupy, None)
    [module] = compiled
    entry = kernels.REGISTRY["probe.cu"]
    assert entry is device.PROBE
    assert module.code == entry.source() == (ROOT / "cuda" / "probe.cu").read_text()
    assert module.options == entry.loader_options()
    assert module.names == entry.names == ("minitorch_amp_probe",)
    assert device.cupy is before  # the candidate stood in for the loader, and went away


def test_a_failed_probe_leaves_the_chosen_module_as_it_was(install):
    install(fake_cupy(nvrtc_error=OSError("libnvrtc.so.12: cannot open shared object file")))
    before = device.cupy
    assert device._probe_cupy()[0] is None
    assert device.cupy is before


# The backend package imported by a fresh interpreter whose CuPy compiles: device runs its
# probe while kernels, which imported device first in the old order, is complete. The parent
# package is a stub, so only backend/ is imported.
FRESH_IMPORT = """
import sys, types
compiled = []

class RawModule:
    def __init__(self, code, options=(), name_expressions=()):
        self.names = name_expressions

    def compile(self):
        compiled.append(self.names)

    def get_function(self, name):
        return name

class Device:
    def __init__(self, index):
        self.id = index

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

runtime = types.SimpleNamespace(getDeviceCount=lambda: 1, getDevice=lambda: 0)
blas = types.SimpleNamespace(get_cublas_handle=lambda: 1)
cupy = types.ModuleType("cupy")
cupy.cuda = types.SimpleNamespace(runtime=runtime, Device=Device, device=blas)
cupy.RawModule = RawModule
sys.modules["cupy"] = cupy
package = types.ModuleType("minitorch_amp")
package.__path__ = [ROOT + "/minitorch_amp"]
sys.modules["minitorch_amp"] = package

from minitorch_amp.backend import {first}
from minitorch_amp.backend import device
assert device.cupy is cupy, device.cpu_reason
assert compiled == [("minitorch_amp_probe",)], compiled
print("ok")
"""


@pytest.mark.parametrize("first", ["kernels", "device", "primitives"])
def test_a_fresh_import_probes_through_the_loader_whichever_module_comes_first(first):
    script = f"ROOT = {str(ROOT)!r}\n" + textwrap.dedent(FRESH_IMPORT).format(first=first)
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "MINITORCH_AMP_DEVICE": ""},
    )
    assert out.returncode == 0 and out.stdout == "ok\n", out.stderr
