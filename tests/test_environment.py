"""``python -m minitorch_amp``, ``utils.run_check()`` and the environment-variable page.

Like ``paddle.utils.run_check()`` and ``python -m torch.utils.collect_env``, one command says
what an installation runs on and whether it works; docs/environment.md lists every
environment variable the code reads.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp.utils import (
    ENVIRONMENT_VARIABLES,
    collect_env,
    format_report,
    kernel_check,
    run_check,
)
from minitorch_amp.utils.kernel_cache import KernelCache

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "environment.md").read_text()


def test_python_dash_m_reports_the_backend_and_exits_0():
    out = subprocess.run(
        [sys.executable, "-m", "minitorch_amp", "--no-compile"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MINITORCH_AMP_DIST_TIMEOUT": "42"},
        cwd=ROOT,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    backend = re.search(r"^backend: +(\S+ \((NumPy|CuPy)\))", out.stdout, re.M)
    assert backend is not None, out.stdout
    assert backend.group(1).startswith(mt.get_device())  # names the backend in use
    for fact in ("minitorch_amp:", "python:", "numpy:", "cupy:", "nvrtc:", "gpus:"):
        assert f"\n{fact}" in out.stdout
    assert "  MINITORCH_AMP_DIST_TIMEOUT=42" in out.stdout  # the variables in effect
    for file in ("cast.cu", "amp.cu", "gemm_fp16.cu", "gemm_sm90.cu", "optim.cu"):
        assert f"  {file} " in out.stdout
    assert "\ngemm kernel:" in out.stdout
    assert "minitorch_amp works well on 1 " in out.stdout


def test_run_check_trains_every_level_and_says_so(capsys):
    run_check()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Running verify minitorch_amp program ..."  # Paddle's words
    assert lines[1].startswith("minitorch_amp works well on 1 ")
    assert lines[2] == "minitorch_amp is installed successfully!"


def test_run_check_fails_loudly_when_a_level_does_not_learn(monkeypatch):
    from minitorch_amp.utils import training_check as module

    monkeypatch.setattr(module, "_train", lambda level: (1.0, float("nan")))
    with pytest.raises(RuntimeError, match=r"does not train correctly .* level fp32"):
        run_check()


def test_the_report_wraps_at_88_columns_and_lists_variables_in_effect(monkeypatch):
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "0")
    info = collect_env()
    assert info["environment"]["MINITORCH_AMP_RAW_KERNELS"] == "0"
    info["backend"] = "cpu (NumPy): " + "a long reason " * 12
    text = format_report(info, [("cast.cu", "not run (no GPU)")])
    assert max(len(line) for line in text.splitlines()) <= 88
    assert "  MINITORCH_AMP_RAW_KERNELS=0" in text
    assert re.search(r"^  cast.cu +not run \(no GPU\)$", text, re.M)


def test_kernel_names_and_statuses_stand_in_two_columns():
    from minitorch_amp.backend import kernels

    files = list(kernels.REGISTRY)
    text = format_report(collect_env(), [(file, "not run (no GPU)") for file in files])
    rows = [line for line in text.splitlines() if line.endswith("not run (no GPU)")]
    assert [row.split()[0] for row in rows] == files
    longest = max(map(len, files))  # gemm_bf16_sm90.cu: two spaces after it, too
    assert {row.index("not run") for row in rows} == {2 + longest + 2}


# ---- the kernel checks, run with NumPy on both sides -----------------------------------------
def test_kernel_checks_hold_each_launcher_to_its_twin():
    from minitorch_amp.backend import kernels

    results = dict(kernel_check.run_checks(np.array, np.asarray))
    checked = {file: results.pop(file) for file in kernel_check.CHECKS}
    assert checked == dict.fromkeys(kernel_check.CHECKS, "compiles, matches its twin")
    assert set(results) == set(kernels.REGISTRY) - set(kernel_check.CHECKS)  # listed, too:
    assert all(status.startswith("not run: no check against") for status in results.values())


def test_kernel_checks_report_a_mismatch_and_a_failure():
    def corrupt(array):
        array = np.array(array)
        if array.dtype.kind == "f" and array.size:
            array.reshape(-1)[0] += 1  # one element off
        return array

    results = dict(kernel_check.run_checks(np.array, corrupt))
    assert {results[file] for file in kernel_check.CHECKS} == {"MISMATCH with its twin"}

    def broken(array):
        raise OSError("CUDA_ERROR_NO_BINARY_FOR_GPU")

    results = dict(kernel_check.run_checks(broken, np.asarray))
    statuses = {results[file] for file in kernel_check.CHECKS}
    assert statuses == {"FAILED: OSError: CUDA_ERROR_NO_BINARY_FOR_GPU"}


def test_the_hopper_gemm_check_is_not_run_on_another_gpu(monkeypatch):
    # a GPU of compute capability 8.0, pretended: arrays "on the device" are not NumPy's
    monkeypatch.setattr(kernel_check._device, "get_array_module", lambda *arrays: object())
    monkeypatch.setattr(kernel_check._gemm_sm90, "device_is_hopper", lambda: False)
    results = dict(kernel_check.run_checks(np.array, np.asarray))
    assert results["gemm_sm90.cu"] == (
        "not run: needs compute capability 9.0 (wgmma, TMA); gemm_fp16.cu runs here"
    )


def test_each_gemm_check_chooses_its_kernel_and_restores_the_variable(monkeypatch):
    from minitorch_amp.backend import gemm_sm90

    monkeypatch.setenv(gemm_sm90.KERNEL_ENV, "auto")
    seen = []
    real = kernel_check._gemm.gemm

    def spy(*args, **kwargs):
        seen.append(os.environ[gemm_sm90.KERNEL_ENV])
        return real(*args, **kwargs)

    monkeypatch.setattr(kernel_check._gemm, "gemm", spy)
    assert kernel_check.CHECKS["gemm_fp16.cu"](np.array, np.asarray)
    assert kernel_check.CHECKS["gemm_sm90.cu"](np.array, np.asarray)
    assert set(seen[:2]) == {"sm80"} and set(seen[2:]) == {"sm90"} and len(seen) == 8
    assert os.environ[gemm_sm90.KERNEL_ENV] == "auto"


def test_without_a_gpu_each_file_is_compiled_for_its_own_target(monkeypatch):
    from minitorch_amp.backend import kernels, nvrtc

    compiled = {}
    monkeypatch.setattr(nvrtc, "version", lambda: (12, 8))
    monkeypatch.setattr(nvrtc, "include_dir", lambda: "/cuda/include")
    monkeypatch.setattr(
        nvrtc,
        "compile_source",
        lambda source, file, options, names, arch: compiled.update({file: arch}),
    )
    heading, lines = kernel_check.compile_checks(KernelCache(None))
    results = dict(lines)
    assert compiled["gemm_sm90.cu"] == "sm_90a"  # it refuses (#error) any other target
    assert compiled["gemm_fp16.cu"] == "compute_80"
    assert set(compiled) == set(kernels.REGISTRY)
    assert heading == "kernels (cuda/*.cu), compiled with NVRTC 12.8, not run (no GPU):"
    assert re.fullmatch(r"sm_90a {6}compiled in \d+\.\d s", results["gemm_sm90.cu"])


def test_a_kernel_that_does_not_compile_is_reported_failed(monkeypatch):
    from minitorch_amp.backend import nvrtc

    def refuse(source, file, options, names, arch):
        raise RuntimeError(f"NVRTC failed to compile {file} for {arch}:\nerror: ...")

    monkeypatch.setattr(nvrtc, "version", lambda: (12, 8))
    monkeypatch.setattr(nvrtc, "include_dir", lambda: "/cuda/include")
    monkeypatch.setattr(nvrtc, "compile_source", refuse)
    results = dict(kernel_check.compile_checks(KernelCache(None))[1])
    assert results["amp.cu"] == (
        "FAILED to compile for compute_80: NVRTC failed to compile amp.cu for compute_80:"
    )


@pytest.mark.gpu
def test_on_a_gpu_every_kernel_matches_its_twin():
    from minitorch_amp.backend import gemm_sm90

    results = dict(kernel_check.check_kernels()[1])
    if not gemm_sm90.device_is_hopper():
        assert results.pop("gemm_sm90.cu").startswith("not run: needs compute capability 9.0")
    assert set(results.values()) == {"compiles, matches its twin"}


# ---- which GEMM kernel the report names ------------------------------------------------------
def test_the_report_names_the_gemm_kernel_and_its_setting(monkeypatch):
    from minitorch_amp.utils.environment import gemm_kernel

    monkeypatch.delenv("MINITORCH_AMP_GEMM_KERNEL", raising=False)
    if mt.get_device() == "cpu":
        assert gemm_kernel() == "the NumPy twin (no GPU; MINITORCH_AMP_GEMM_KERNEL=auto)"
    monkeypatch.setenv("MINITORCH_AMP_GEMM_KERNEL", "sm75")
    assert gemm_kernel() == (
        "error: MINITORCH_AMP_GEMM_KERNEL must be auto, sm80 or sm90, got 'sm75'"
    )


def test_python_dash_m_exits_1_when_the_gemm_setting_is_wrong():
    out = subprocess.run(
        [sys.executable, "-m", "minitorch_amp", "--no-compile"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MINITORCH_AMP_GEMM_KERNEL": "hopper"},
        cwd=ROOT,
        timeout=300,
    )
    assert out.returncode == 1
    assert "MINITORCH_AMP_GEMM_KERNEL must be auto, sm80 or sm90, got 'hopper'" in out.stderr
    assert "  MINITORCH_AMP_GEMM_KERNEL=hopper" in out.stdout  # among the variables in effect


def test_every_registered_kernel_file_has_a_check():
    from minitorch_amp.backend import kernels

    assert set(kernels.REGISTRY) == set(kernel_check.CHECKS)


# ---- the page shows what the command prints -------------------------------------------------
SHOWN = re.findall(r"```text\n(.*?)```", PAGE, re.S)
NUMBERS = {
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
}


def test_the_page_shows_the_options_as_help_prints_them(capsys, monkeypatch):
    from minitorch_amp.__main__ import main

    monkeypatch.setenv("HOME", "/root")  # the machine the page's output comes from
    for name in ("MINITORCH_AMP_KERNEL_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "88")
    with pytest.raises(SystemExit):
        main(["--help"])
    printed = capsys.readouterr().out.replace("optional arguments:", "options:")  # 3.10
    assert printed in SHOWN


def test_the_page_shows_every_kernel_as_the_report_prints_it():
    from minitorch_amp.backend import kernels
    from minitorch_amp.utils.environment import kernel_line

    said = re.search(r"each raw kernel file of `cuda/`, (\w+) of them", PAGE)
    assert NUMBERS[said.group(1)] == len(kernels.REGISTRY)
    runs = [block for block in SHOWN if "compute_80" in block]
    assert len(runs) == 2  # the first run, and the second from the cache
    times = []
    for block in runs:
        rows = [line for line in block.splitlines() if line.startswith("  ") and ".cu " in line]
        assert [row.split()[0] for row in rows] == list(kernels.REGISTRY)
        for row in rows:  # the columns as the command aligns them
            file, status = row.split(maxsplit=1)
            assert row == kernel_line(file, status)
        times.append([re.search(r"(\d+\.\d) s", row).group(1) for row in rows])
    cold, warm = runs
    assert "from the cache" not in cold and warm.count("from the cache") == len(times[1])
    assert times[0] == times[1]  # the second run reads the first run's compile times


# ---- the environment-variable page -----------------------------------------------------------
NAME = re.compile(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)+")


def variables_read_by_the_code() -> set[str]:
    """Every NAME_LIKE string constant of a file that touches ``os.environ``.

    Scans the library, the examples, the benchmarks and the tests' conftest (the tests' own
    helpers pass private variables to their subprocesses, which are no user's business).
    """
    files = [*ROOT.glob("minitorch_amp/**/*.py"), *ROOT.glob("examples/*.py")]
    files += [*ROOT.glob("benchmarks/*.py"), ROOT / "tests" / "conftest.py"]
    found = set()
    for path in files:
        source = path.read_text()
        if "environ" not in source and "getenv" not in source:
            continue
        for node in ast.walk(ast.parse(source)):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            if NAME.fullmatch(node.value) and node.value not in NOT_VARIABLES:
                found.add(node.value)
    return found


# NAME_LIKE constants in those files that are not environment variables
NOT_VARIABLES = {"ENVIRONMENT_VARIABLES"}  # minitorch_amp.utils.__all__


def test_the_scan_finds_the_variables_we_know_of():
    found = variables_read_by_the_code()
    assert {"MINITORCH_AMP_DEVICE", "MINITORCH_AMP_DIST_TIMEOUT", "PMI_SIZE"} <= found


def test_the_page_lists_every_environment_variable_the_code_reads():
    missing = sorted(v for v in variables_read_by_the_code() if f"`{v}" not in PAGE)
    assert not missing, f"docs/environment.md does not document {missing}"


def test_the_report_knows_every_variable_the_code_reads():
    found = variables_read_by_the_code() | {"CI", "CC"}  # one-word names the scan cannot tell
    assert found == set(ENVIRONMENT_VARIABLES)
    for name in ENVIRONMENT_VARIABLES:
        assert f"`{name}" in PAGE
