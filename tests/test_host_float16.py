"""``csrc/float16.c`` and its loader (``backend/host_c.py``): compiled at first use, cached,
refused with a clear error, and replaced by NumPy where it cannot be built.

Its bits against NumPy's ``astype`` (every float16, every rounding edge, random and swept
float32 patterns): ``tests/test_float16_rounding.py``, which runs each check on both paths.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from minitorch_amp.backend import host_c, host_float16
from minitorch_amp.backend.cast import convert

ROOT = Path(__file__).resolve().parents[1]


def can_compile() -> bool:
    return host_c.compiler() is not None and os.environ.get(host_c.SWITCH_ENV, "") != "0"


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """An empty cache folder, and the loader as a new process finds it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    host_c.forget("float16")
    yield tmp_path / "minitorch_amp" / "host"
    host_c.forget("float16")


@pytest.fixture
def c():
    module = host_float16.compiled()
    if module is None:
        pytest.skip(host_c.status("float16"))
    return module


def test_a_machine_with_a_c_compiler_converts_with_the_compiled_file():
    """CI has gcc: this fails, rather than skips, if the file stops compiling there."""
    if not can_compile():
        pytest.skip(host_c.status("float16"))
    assert host_float16.compiled() is not None, host_c.status("float16")
    assert host_c.status("float16").startswith("compiled C (")


def test_the_first_load_compiles_into_the_cache_and_the_next_reads_it(fresh, monkeypatch):
    if not can_compile():
        pytest.skip("no C compiler here")
    module = host_c.load("float16")
    assert module is not None, host_c.status("float16")
    (entry,) = fresh.glob("float16-*")  # one entry, no temporary file left behind
    assert str(entry) in host_c.status("float16")
    host_c.forget("float16")
    monkeypatch.setattr(host_c, "_compile", lambda *a: pytest.fail("compiled again"))
    assert host_c.load("float16") is not None
    out = np.empty(3, np.float16)
    host_c.load("float16").from_float32(np.array([1, 2**-24, 7e4], np.float32), out)
    assert out.tolist() == [1.0, 2.0**-24, np.inf]


def test_a_damaged_cache_entry_is_compiled_again(fresh, tmp_path, monkeypatch):
    if not can_compile():
        pytest.skip("no C compiler here")
    assert host_c.load("float16") is not None
    (entry,) = fresh.glob("float16-*")
    # NOTE: a second cache folder: writing into the file this process has loaded (mapped)
    # would crash it, which is why the loader only ever replaces files whole
    other = tmp_path / "other"
    monkeypatch.setenv("XDG_CACHE_HOME", str(other))
    damaged = other / "minitorch_amp" / "host" / entry.name
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(b"not a shared library")
    host_c.forget("float16")
    assert host_c.load("float16") is not None, host_c.status("float16")
    assert damaged.read_bytes() == entry.read_bytes()


def test_a_cache_folder_that_cannot_be_made_means_a_folder_of_this_process(
    fresh, tmp_path, monkeypatch
):
    if not can_compile():
        pytest.skip("no C compiler here")
    blocked = tmp_path / "a file"
    blocked.write_text("")
    monkeypatch.setattr(host_c, "cache_dir", lambda: blocked / "host")  # mkdir fails
    assert host_c.load("float16") is not None, host_c.status("float16")
    assert "minitorch_amp_host_" in host_c.status("float16")


def test_switched_off_or_without_a_compiler_numpy_converts_and_the_status_says_why(
    fresh, monkeypatch
):
    monkeypatch.setenv(host_c.SWITCH_ENV, "0")
    assert host_c.load("float16") is None
    assert host_c.status("float16") == "NumPy (MINITORCH_AMP_HOST_C=0)"
    monkeypatch.delenv(host_c.SWITCH_ENV)
    host_c.forget("float16")
    monkeypatch.setattr(host_c, "compiler", lambda: None)
    assert host_c.load("float16") is None
    assert "no C compiler" in host_c.status("float16")
    assert not fresh.exists() or not any(fresh.iterdir())  # nothing was written


def test_a_file_that_does_not_compile_is_reported_with_the_compilers_words(
    fresh, tmp_path, monkeypatch
):
    if not can_compile():
        pytest.skip("no C compiler here")
    broken = tmp_path / "csrc"
    broken.mkdir()
    (broken / "float16.c").write_text("this is not C;\n")
    monkeypatch.setattr(host_c, "csrc_dir", lambda: broken)
    assert host_c.load("float16") is None
    status = host_c.status("float16")
    assert status.startswith("NumPy (compiling float16.c failed: ") and "error" in status
    assert not list(fresh.glob("*float16*"))  # no entry and no temporary file


def test_convert_takes_the_compiled_path(c, monkeypatch):
    calls = []
    monkeypatch.setitem(host_c._loaded, "float16", (_Counting(c, calls), "compiled C (counted)"))
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    half = convert(x, "float16")
    wide = convert(half.T, "float32")  # a strided view: copied to C order first
    assert calls == ["from_float32", "to_float32"]
    np.testing.assert_array_equal(half.view(np.uint16), x.astype(np.float16).view(np.uint16))
    np.testing.assert_array_equal(wide, half.T.astype(np.float32))
    assert wide.flags.c_contiguous and wide.shape == (64, 8)


class _Counting:
    """The compiled module, recording which function is called."""

    def __init__(self, module, calls):
        self.module, self.calls = module, calls

    def __getattr__(self, name):
        self.calls.append(name)
        return getattr(self.module, name)


@pytest.mark.parametrize(
    "function, src, dst, error, words",
    [
        ("from_float32", np.zeros(4, np.float64), np.zeros(4, np.float16), TypeError, "'f'"),
        ("from_float32", np.zeros(4, np.float32), np.zeros(3, np.float16), ValueError, "length"),
        ("to_float32", np.zeros(4, np.float16), np.zeros(4, np.float16), TypeError, "'e'"),
        ("to_float32", np.zeros(8, np.float16)[::2], np.zeros(4, np.float32), ValueError, "cont"),
        (
            "to_float32",
            np.zeros(4, np.float16),
            np.zeros((4, 2), np.float32).T[0],
            ValueError,
            "cont",
        ),
    ],
    ids=["float64 source", "lengths", "float16 target", "strided source", "strided target"],
)
def test_wrong_buffers_raise_and_nothing_is_written(c, function, src, dst, error, words):
    before = dst.copy()
    with pytest.raises(error, match=words):
        getattr(c, function)(src, dst)
    assert dst.tobytes() == before.tobytes()


def test_a_read_only_target_is_refused(c):
    dst = np.zeros(4, np.float16)
    dst.flags.writeable = False
    with pytest.raises((ValueError, BufferError)):
        c.from_float32(np.ones(4, np.float32), dst)
    assert not dst.any()


def test_large_arrays_release_the_interpreter_and_convert_the_same(c):
    x = np.random.default_rng(1).standard_normal(300_001).astype(np.float32) * 1e-5
    out = np.empty(x.size, np.float16)
    c.from_float32(x, out)
    np.testing.assert_array_equal(out.view(np.uint16), x.astype(np.float16).view(np.uint16))
    back = np.empty(x.size, np.float32)
    c.to_float32(out, back)
    np.testing.assert_array_equal(back, out.astype(np.float32))


def test_the_environment_report_names_the_path():
    out = subprocess.run(
        [sys.executable, "-m", "minitorch_amp", "--no-compile"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), host_c.SWITCH_ENV: "0"},
    )
    assert "\ncpu float16:   NumPy (MINITORCH_AMP_HOST_C=0)" in out.stdout, out.stdout
    assert "\ncpu gelu:      NumPy (MINITORCH_AMP_HOST_C=0)" in out.stdout
