"""tests/needs.py: a missing tool skips a test on a developer's machine and fails it in CI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import mpi_run
import needs
import pytest

ABSENT = "minitorch-amp-no-such-program"


@pytest.mark.parametrize("value", ["true", "1", "yes", "TRUE"])
def test_under_ci_a_missing_program_fails_the_test(value, monkeypatch):
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match=f"CI=true but {ABSENT} is not installed"):
        needs.program(ABSENT, "a test of needs.py")


@pytest.mark.parametrize("value", [None, "", "0", "false", "no"])
def test_outside_ci_a_missing_program_skips_the_test(value, monkeypatch):
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.skip.Exception, match=f"{ABSENT} is not installed"):
        needs.program(ABSENT, "a test of needs.py")


def test_a_missing_module_skips_outside_ci_and_raises_in_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="minitorch_amp_no_such_module"):
        needs.module("minitorch_amp_no_such_module", "a test of needs.py")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(ImportError):
        needs.module("minitorch_amp_no_such_module", "a test of needs.py")


def test_a_present_program_is_found_either_way(monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert needs.program("python3", "always here").endswith("python3")


# --- the suite's own tool tests, under CI=true with the tool missing -------------------------

ROOT = Path(__file__).resolve().parents[1]
# One test per fixture that looks its tool up on PATH (every sibling shares that fixture).
TOOL_TESTS = [
    "tests/test_gemm_emulator.py::test_emulated_layouts_are_bit_identical",  # g++
    "tests/test_gemm_sm90.py::test_emulated_layouts_and_widths_are_bit_identical",  # g++
    "tests/test_amp_kernel_emulator.py::test_a_set_flag_stays_set",  # g++
    "tests/test_fused_optim_kernel.py::test_all_empty_tensors_still_advance_the_beta_pows",  # g++
    "tests/test_docs.py::test_ruff_check_and_format_are_clean",  # ruff
    "tests/test_docs.py::test_the_docs_site_builds_strictly",  # mkdocs
]


def test_under_ci_each_tool_test_fails_when_its_tool_is_missing(tmp_path):
    """A fixture that skipped by itself would pass CI without running: each must fail here."""
    empty = tmp_path / "bin"
    empty.mkdir()
    report = tmp_path / "report.xml"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts="]
    command += [f"--junitxml={report}", *TOOL_TESTS]
    env = {**os.environ, "CI": "true", "PATH": str(empty)}  # g++, ruff, mkdocs: not found
    subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=300)
    outcomes = {}
    for case in ElementTree.parse(report).iter("testcase"):
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")  # a fixture that fails reports an error
        message = "" if failure is None else failure.get("message", "")
        outcomes[f"{case.get('classname')}::{case.get('name')}"] = message
    assert len(outcomes) == len(TOOL_TESTS), outcomes
    for test, message in outcomes.items():
        assert "CI=true but" in message and "is not installed" in message, (test, message)


def test_under_ci_a_missing_mpiexec_fails(monkeypatch):
    from minitorch_amp.distributed import launch

    def absent():
        raise FileNotFoundError("mpiexec was not found")

    monkeypatch.setattr(launch, "find_mpiexec", absent)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true but mpiexec was not found"):
        mpi_run.mpiexec_or_skip()
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="mpiexec was not found"):
        mpi_run.mpiexec_or_skip()


@pytest.mark.parametrize("missing", ["version", "include_dir"])
def test_under_ci_missing_nvrtc_or_cuda_headers_fail(missing, monkeypatch):
    from minitorch_amp.backend import nvrtc

    def absent():
        raise nvrtc.NvrtcUnavailableError(f"{missing}: not found")

    monkeypatch.setattr(nvrtc, missing, absent)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=f"CI=true but {missing}: not found"):
        needs.nvrtc_compiler()
    if missing == "include_dir":  # the g++ emulators' headers
        with pytest.raises(pytest.fail.Exception, match="CI=true but include_dir: not found"):
            needs.cuda_headers()
