"""The backend: device choice, places, dtypes, primitives, and the layering rules."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp.backend import device, dtypes, primitives

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "minitorch_amp"


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        timeout=60,
    )


# ---- device selection ------------------------------------------------------------------------
def test_forcing_cpu_prints_no_notice_and_uses_numpy():
    out = run_python(
        "import minitorch_amp as mt; print(mt.get_device(), type(mt.ones([1]).data).__module__)",
        MINITORCH_AMP_DEVICE="cpu",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["cpu", "numpy"]
    assert out.stderr == ""


@pytest.mark.skipif(device.cupy is not None, reason="this machine has a GPU")
def test_forcing_gpu_without_gpu_fails_and_says_what_to_install():
    out = run_python("import minitorch_amp", MINITORCH_AMP_DEVICE="gpu")
    assert out.returncode != 0
    assert "MINITORCH_AMP_DEVICE=gpu" in out.stderr
    assert "pip install" in out.stderr and "cuda12" in out.stderr


@pytest.mark.skipif(device.cupy is not None, reason="this machine has a GPU")
def test_automatic_choice_without_gpu_prints_nothing_and_logs_why_at_info():
    out = run_python("import minitorch_amp; import minitorch_amp.nn", MINITORCH_AMP_DEVICE="")
    assert out.returncode == 0, out.stderr
    assert (out.stdout, out.stderr) == ("", "")  # every --help, every MPI rank: silent
    out = run_python(
        "import logging; logging.basicConfig(level=logging.INFO); import minitorch_amp",
        MINITORCH_AMP_DEVICE="",
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("minitorch_amp: running on the CPU with NumPy") == 1
    assert "INFO:minitorch_amp:" in out.stderr


def test_unknown_environment_value_is_an_error():
    out = run_python("import minitorch_amp", MINITORCH_AMP_DEVICE="tpu")
    assert out.returncode != 0
    assert "use 'cpu' or 'gpu'" in out.stderr


@pytest.mark.parametrize("text", ["tpu", "gpu:x", "cpu:1", "gpu:-1", ""])
def test_unknown_device_string_is_rejected_and_device_unchanged(text):
    before = mt.get_device()
    with pytest.raises(ValueError, match="unknown device"):
        mt.set_device(text)
    assert mt.get_device() == before


def test_device_must_be_a_string_or_place():
    with pytest.raises(TypeError, match="device must be a string"):
        mt.set_device(3)


@pytest.mark.skipif(device.cupy is not None, reason="this machine has a GPU")
def test_gpu_device_without_gpu_explains_why():
    with pytest.raises(device.DeviceError, match="CuPy"):
        mt.set_device("gpu:0")
    assert mt.get_device() == "cpu"
    with pytest.raises(device.DeviceError):
        mt.to_tensor([1.0], place="gpu")


def test_places_print_and_compare_like_paddle():
    assert repr(device.parse_device("cpu")) == "Place(cpu)"
    assert device.parse_device("CPU") == "cpu"
    assert mt.set_device("cpu") == device.CPU
    assert mt.get_device() == "cpu"
    assert mt.ones([2]).place == "cpu"
    assert mt.device.get_available_device()[0] == "cpu"


def test_get_array_module_is_numpy_for_numpy_arrays():
    assert device.get_array_module(np.ones(2), 3.0) is np


# ---- dtypes ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name", ["float16", "bfloat16", "float32", "float64", "int32", "int64", "bool"]
)
def test_supported_dtypes_round_trip_by_name(name):
    assert dtypes.convert_dtype(name) == np.dtype(name)
    assert mt.zeros([2], dtype=name).dtype == name


@pytest.mark.parametrize("bad", ["int8", "complex64", "float8", "uint16", object])
def test_unsupported_dtypes_are_rejected_with_the_supported_list(bad):
    with pytest.raises(TypeError, match="use one of: float16, bfloat16, float32"):
        dtypes.convert_dtype(bad)


def test_default_dtype_drives_python_floats_and_must_be_floating():
    mt.set_default_dtype("float64")
    assert mt.to_tensor([1.5]).dtype == "float64"
    assert mt.randn([2]).dtype == "float64"
    with pytest.raises(TypeError, match="must be floating"):
        mt.set_default_dtype("int32")
    assert mt.get_default_dtype() == "float64"


# ---- primitives: the numerics the ops rely on --------------------------------------------------
def test_fp16_matmul_accumulates_in_fp32():
    # 4096 ones: float16 accumulation stalls at 2048 (2048 + 1 rounds back to 2048).
    a = np.ones((1, 4096), np.float16)
    b = np.ones((4096, 1), np.float16)
    out = primitives.matmul(a, b)
    assert out.dtype == np.float16
    assert out[0, 0] == 4096


def test_fp16_matmul_rounds_once_to_nearest_even():
    # 1 + 2^-11 is exactly halfway between two float16 neighbours: ties go to even (1.0).
    a = np.array([[1.0, 2.0**-11]], np.float16)
    b = np.ones((2, 1), np.float16)
    assert primitives.matmul(a, b)[0, 0] == np.float16(1.0)
    a = np.array([[1.0, 3 * 2.0**-11]], np.float16)  # 1 + 3*2^-11 rounds up to 1 + 2^-9
    assert primitives.matmul(a, b)[0, 0] == np.float16(1 + 2.0**-9)


def test_matmul_transpose_flags():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((5, 4))
    np.testing.assert_allclose(primitives.matmul(a, b, transpose_b=True), a @ b.T)
    np.testing.assert_allclose(primitives.matmul(a.T, b, True, True), a @ b.T)


def test_fp16_sum_accumulates_in_fp32():
    x = np.ones(4096, np.float16)
    assert primitives.reduce_sum(x) == 4096
    assert primitives.reduce_sum(x).dtype == np.float16


@pytest.mark.parametrize(
    ("grad_shape", "shape"), [((4, 3), (3,)), ((4, 3), (4, 1)), ((2, 4, 3), (1, 3)), ((3,), ())]
)
def test_unbroadcast_sums_the_broadcast_axes(grad_shape, shape):
    g = np.arange(np.prod(grad_shape), dtype=np.float64).reshape(grad_shape)
    out = primitives.unbroadcast(g, shape)
    assert out.shape == shape
    assert out.sum() == g.sum()


def test_scatter_add_adds_repeated_indices():
    target = np.zeros(3)
    primitives.scatter_add(target, np.array([0, 0, 2]), np.array([1.0, 2.0, 5.0]))
    np.testing.assert_array_equal(target, [3.0, 0.0, 5.0])


# ---- architecture: the layering in DESIGN.md ---------------------------------------------------
LAYERS = ["backend", "autograd", "nn", "optimizer", "amp", "distributed"]
# a package may import only packages to its left (nn and optimizer are siblings, except that
# optimizer may use nn's clipping objects given to it, which it never imports)
FORBIDDEN = {
    "backend": {"autograd", "nn", "optimizer", "amp", "io", "distributed"},
    "autograd": {"nn", "optimizer", "amp", "io", "distributed"},
    "nn": {"optimizer", "amp", "io", "distributed"},
    "optimizer": {"amp", "io", "distributed"},
    "amp": {"distributed"},
}


def _imports(path: Path) -> set[str]:
    """Top-level minitorch_amp subpackages that ``path`` imports."""
    rel = path.relative_to(PACKAGE).parts
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(rel[: len(rel) - node.level])
                parts = base + (node.module.split(".") if node.module else [])
                if not node.module:
                    parts += [alias.name for alias in node.names]
                if parts:
                    found.add(parts[0])
            elif node.module and node.module.startswith("minitorch_amp."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("minitorch_amp."):
                    found.add(alias.name.split(".")[1])
    return found


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_lower_layers_never_import_higher_ones(layer):
    offenders = {}
    for path in (PACKAGE / layer).rglob("*.py"):
        bad = _imports(path) & FORBIDDEN[layer]
        if bad:
            offenders[str(path.relative_to(ROOT))] = sorted(bad)
    assert not offenders, f"layering violated: {offenders}"


def test_only_the_backend_imports_cupy():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.relative_to(PACKAGE).parts[0] == "backend":
            continue
        text = path.read_text()
        if "import cupy" in text or "from cupy" in text or "cupyx" in text:
            offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, f"only minitorch_amp/backend may import cupy: {offenders}"


@pytest.mark.parametrize("fast", [True, False], ids=["environ-dict", "os.environ.get"])
def test_kernel_settings_follow_the_environment_as_it_is_now(fast, monkeypatch):
    """``kernels.setting`` (read before each launch) sees every change at once, like
    ``os.environ.get``, also where CPython's own dict is not there to read."""
    from minitorch_amp.backend import kernels

    if not fast:
        monkeypatch.setattr(kernels, "_ENVIRON", None)
    name = "MINITORCH_AMP_TEST_SETTING"
    monkeypatch.delenv(name, raising=False)
    assert kernels.setting(name, "default") == "default"
    monkeypatch.setenv(name, "0")
    assert kernels.setting(name, "default") == "0"
    os.environ[name] = "é1"  # non-ASCII text comes back as it went in
    assert kernels.setting(name, "default") == "é1"
    del os.environ[name]
    assert kernels.setting(name, "default") == "default"
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "0")
    monkeypatch.setattr(kernels._device, "cupy", object())  # (a CuPy that is there)
    assert not kernels.enabled()
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "1")
    assert kernels.enabled()
