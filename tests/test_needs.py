"""tests/needs.py: a missing tool skips a test on a developer's machine and fails it in CI."""

from __future__ import annotations

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
