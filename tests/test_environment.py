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
    for file in ("cast.cu", "amp.cu", "gemm_fp16.cu", "optim.cu"):
        assert f"  {file} " in out.stdout
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
    assert "  cast.cu        not run (no GPU)" in text


# ---- the kernel checks, run with NumPy on both sides -----------------------------------------
def test_kernel_checks_hold_each_launcher_to_its_twin():
    results = kernel_check.run_checks(np.array, np.asarray)
    assert dict(results) == dict.fromkeys(kernel_check.CHECKS, "compiles, matches its twin")


def test_kernel_checks_report_a_mismatch_and_a_failure():
    def corrupt(array):
        array = np.array(array)
        if array.dtype.kind == "f" and array.size:
            array.reshape(-1)[0] += 1  # one element off
        return array

    results = dict(kernel_check.run_checks(np.array, corrupt))
    assert set(results.values()) == {"MISMATCH with its twin"}

    def broken(array):
        raise OSError("CUDA_ERROR_NO_BINARY_FOR_GPU")

    results = dict(kernel_check.run_checks(broken, np.asarray))
    assert all(s == "FAILED: OSError: CUDA_ERROR_NO_BINARY_FOR_GPU" for s in results.values())


def test_every_registered_kernel_file_has_a_check():
    from minitorch_amp.backend import kernels

    assert set(kernels.REGISTRY) == set(kernel_check.CHECKS)


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
    found = variables_read_by_the_code() | {"CI"}  # CI: a one-word name the scan cannot tell
    assert found == set(ENVIRONMENT_VARIABLES)
    for name in ENVIRONMENT_VARIABLES:
        assert f"`{name}" in PAGE
