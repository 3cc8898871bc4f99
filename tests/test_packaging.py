"""Packaging conventions: one version, typed, extras a user can install one by one."""

from __future__ import annotations

import importlib.metadata
import re
import sys
from pathlib import Path

import pytest

import minitorch_amp

ROOT = Path(__file__).resolve().parents[1]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli")

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_version_has_one_source():
    # pyproject.toml reads it from __init__.py (hatch's version hook): no second literal.
    assert "version" not in PYPROJECT["project"]
    assert "version" in PYPROJECT["project"]["dynamic"]
    source = ROOT / PYPROJECT["tool"]["hatch"]["version"]["path"]
    assert source == Path(minitorch_amp.__file__)
    literals = re.findall(r"^__version__ = \"([^\"]+)\"$", source.read_text(), re.M)
    assert literals == [minitorch_amp.__version__]


def test_an_installed_copy_reports_the_same_version():
    try:
        installed = importlib.metadata.version("minitorch_amp")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("minitorch_amp is not installed, only imported from the checkout")
    assert installed == minitorch_amp.__version__


def test_the_package_says_it_is_typed():
    # PEP 561: type checkers read the package's annotations only when py.typed is present.
    assert (ROOT / "minitorch_amp" / "py.typed").is_file()


def test_extras_split_and_test_brings_them_all():
    extras = PYPROJECT["project"]["optional-dependencies"]
    for name in ("docs", "dist", "kernels-check", "examples", "cuda12", "cuda13", "test"):
        assert name in extras
    assert any(r.startswith("mkdocs") for r in extras["docs"])
    assert any(r.startswith("mpi4py") for r in extras["dist"])
    assert any(r.startswith("nvidia-cuda-nvrtc") for r in extras["kernels-check"])
    assert "minitorch_amp[examples,docs,dist,kernels-check]" in extras["test"]
    for cuda in ("cuda12", "cuda13"):  # CuPy with CUDA's libraries, for driver-only machines
        assert all("[ctk]" in r for r in extras[cuda])
