"""What a test needs from the machine: skip where it is missing, fail where CI promised it.

``.ci/run`` installs the test extra (ruff, mkdocs, matplotlib, scikit-learn, NVRTC, MPI) and
has g++ and nvcc, so under ``CI=true`` a missing tool is a broken CI image, not a reason to
skip: the test fails and says what is missing. A green CI therefore means these tests ran.
On a developer's machine the same test skips with the same message.
"""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """``CI`` is set to anything but empty, ``0``, ``false`` or ``no`` (CI services set true)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing(message: str) -> NoReturn:
    """Skip the calling test because ``message`` says what is missing; fail under CI."""
    if in_ci():
        pytest.fail(f"CI=true but {message}: CI provides it, so this test must run", False)
    pytest.skip(message)


def program(name: str, hint: str) -> str:
    """The path of the program ``name`` (``hint``: where it comes from)."""
    path = shutil.which(name)
    if path is None:
        missing(f"{name} is not installed ({hint})")
    return path


def module(name: str, hint: str):
    """The imported module ``name``; usable at module level too (skips the whole file)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        if in_ci():
            raise
        pytest.skip(f"{name} is not installed ({hint})", allow_module_level=True)


def cuda_headers() -> Path:
    """The CUDA include folder (cuda_fp16.h), for NVRTC and the g++ kernel emulators."""
    from minitorch_amp.backend import nvrtc

    try:
        return nvrtc.include_dir()
    except nvrtc.NvrtcUnavailableError as exc:
        missing(str(exc))


def nvrtc_compiler() -> None:
    """NVRTC and the CUDA headers, as CuPy's loader uses them (no GPU needed)."""
    from minitorch_amp.backend import nvrtc

    try:
        nvrtc.version()
        nvrtc.include_dir()
    except nvrtc.NvrtcUnavailableError as exc:
        missing(str(exc))


def mpiexec() -> str:
    """The ``mpiexec`` the launcher would use (MPI comes with the test extra)."""
    from minitorch_amp.distributed.launch import find_mpiexec

    try:
        return find_mpiexec()
    except FileNotFoundError as exc:
        missing(str(exc))
