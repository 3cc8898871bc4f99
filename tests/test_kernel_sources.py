"""Every raw kernel the loader asks for exists, compiles the way the loader compiles it
(NVRTC, no GPU needed), and ships inside the wheel."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import minitorch_amp  # noqa: F401 - importing registers every launcher's kernels
from minitorch_amp.backend import kernels, nvrtc

ROOT = Path(__file__).resolve().parents[1]
CU_FILES = sorted(p.name for p in (ROOT / "cuda").glob("*.cu"))


def test_every_cu_file_is_registered_and_every_registration_has_a_file():
    assert sorted(kernels.REGISTRY) == CU_FILES
    for entry in kernels.REGISTRY.values():
        assert entry.path.exists(), entry.path


def without_comments(source: str) -> str:
    """``source`` with its ``//`` and ``/* */`` comments blanked out."""
    return re.sub(r"//[^\n]*|/\*.*?\*/", " ", source, flags=re.S)


def defines_kernel(source: str, expr: str) -> bool:
    """Whether ``source`` defines (with a body, outside comments) the kernel a name expression
    names: ``extern "C" __global__ void name(...) {`` for a plain name, and
    ``template <...> __global__ void name(...) {`` for ``name<...>``."""
    base = expr.split("<")[0].strip()
    head = r"template\s*<[^>]*>\s*__global__" if "<" in expr else r'extern\s+"C"\s+__global__'
    bounds = r"(?:__launch_bounds__\([^)]*\)\s+)?"
    pattern = rf"{head}\s+void\s+{bounds}{re.escape(base)}\s*\([^;{{}}]*\)\s*\{{"
    return re.search(pattern, without_comments(source)) is not None


@pytest.mark.parametrize("file", CU_FILES)
def test_every_registered_kernel_is_defined_in_its_file(file):
    source = kernels.REGISTRY[file].source()
    for expr in kernels.REGISTRY[file].names:
        assert defines_kernel(source, expr), f"{expr} has no __global__ definition in {file}"


DEFINED = 'extern "C" __global__ void scale(float* x, int n)\n{\n    x[0] *= 2;\n}\n'
TEMPLATE = "template <typename T>\n__global__ void __launch_bounds__(256)\n    step(T* x)\n{\n}\n"


@pytest.mark.parametrize(
    "source, expr, defined",
    [
        (DEFINED, "scale", True),
        ("// scale(float* x) is in another file\n", "scale", False),
        ('/* extern "C" __global__ void scale(float* x) { */\n', "scale", False),
        ('extern "C" __global__ void scale(float* x, int n);\n', "scale", False),  # no body
        ("__global__ void scale(float* x)\n{\n}\n", "scale", False),  # a C++-mangled name
        ("__device__ void scale(float* x)\n{\n}\n", "scale", False),
        (DEFINED.replace("scale(", "scale_v2("), "scale", False),
        (TEMPLATE, "step<float>", True),
        ("template __global__ void step<float>(float*);\n", "step<float>", False),
    ],
)
def test_the_definition_check_wants_a_real_kernel(source, expr, defined):
    assert defines_kernel(source, expr) is defined


# Each file for Ampere and Hopper, or for the one target it is registered for (sm_90a).
TARGETS = [
    (file, arch)
    for file in CU_FILES
    for arch in (
        (kernels.REGISTRY[file].arch,)
        if file in kernels.REGISTRY and kernels.REGISTRY[file].arch
        else ("compute_80", "compute_90")
    )
]


@pytest.mark.parametrize("file, arch", TARGETS)
def test_every_kernel_file_compiles_with_nvrtc_like_the_loader(file, arch, nvrtc_available):
    entry = kernels.REGISTRY[file]
    result = nvrtc.compile_source(entry.source(), file, entry.all_options(), entry.names, arch=arch)
    assert set(result["lowered"]) == set(entry.names)
    assert ".entry" in result["ptx"]


def test_nvrtc_rejects_standard_headers_like_the_loader_would(nvrtc_available):
    with pytest.raises(RuntimeError, match="cstdint"):
        nvrtc.compile_source("#include <cstdint>\n", "bad.cu")


def test_the_loader_finds_the_kernels_in_a_source_checkout():
    assert (kernels.cuda_dir() / CU_FILES[0]).exists()


@pytest.mark.slow
def test_a_built_wheel_contains_every_cu_file(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    (wheel,) = tmp_path.glob("minitorch_amp-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for file in CU_FILES:
        assert f"minitorch_amp/cuda/{file}" in names
    for file in sorted(p.name for p in (ROOT / "csrc").glob("*.c")):  # the CPU's C files
        assert f"minitorch_amp/csrc/{file}" in names
