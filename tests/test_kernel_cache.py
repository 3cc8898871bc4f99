"""The kernel cache of ``python -m minitorch_amp``: a second run compiles nothing, any change
to what made a kernel compiles it again, and a damaged entry is compiled again, never trusted.

NVRTC is replaced by a fake that counts its calls, so these tests compile no real kernel.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from minitorch_amp.backend import kernels, nvrtc
from minitorch_amp.utils import kernel_cache, kernel_check
from minitorch_amp.utils.kernel_cache import KernelCache

COMPILER = {"nvrtc": [12, 8], "library": ["/lib/libnvrtc.so.12", 1, 2], "headers": []}
NAMES = ("scale<float>",)


class FakeNvrtc:
    """``nvrtc.compile_source``'s double: PTX made from its arguments, and a count of calls."""

    def __init__(self):
        self.calls = []

    def __call__(self, source, name, options=(), name_expressions=(), arch="compute_80"):
        self.calls.append(name)
        lowered = {expr: f"_Z{len(expr)}{expr}" for expr in name_expressions}
        return {"ptx": f"// {name} {arch} {options}\n{source}", "log": "", "lowered": lowered}


@pytest.fixture
def fake_nvrtc(monkeypatch):
    fake = FakeNvrtc()
    monkeypatch.setattr(nvrtc, "compile_source", fake)
    monkeypatch.setattr(nvrtc, "version", lambda: (12, 8))
    monkeypatch.setattr(nvrtc, "include_dir", lambda: Path("/cuda/include"))
    monkeypatch.setattr(kernel_cache, "compiler_identity", lambda: dict(COMPILER))
    return fake


def compile_one(cache: KernelCache, source="__global__ void k() {}", options=("-DN=1",)):
    return cache.compile(source, "k.cu", options, NAMES, "compute_80")


def test_a_second_compile_of_the_same_kernel_is_read_from_the_cache(tmp_path, fake_nvrtc):
    cold = compile_one(KernelCache(tmp_path))
    warm = compile_one(KernelCache(tmp_path))  # a new run: nothing kept in memory
    assert fake_nvrtc.calls == ["k.cu"]
    assert (cold.cached, warm.cached) == (False, True)
    assert warm.result == cold.result
    assert warm.seconds == cold.seconds  # the warm run says how long the cold compile took


@pytest.mark.parametrize(
    "change",
    [
        {"source": "__global__ void k() { }"},
        {"options": ("-DN=2",)},
        {"name": "other.cu"},
        {"names": ("scale<half>",)},
        {"arch": "sm_90a"},
        {"compiler": {**COMPILER, "nvrtc": [13, 0]}},
        {"compiler": {**COMPILER, "library": ["/lib/libnvrtc.so.12", 1, 3]}},  # rebuilt
    ],
    ids=lambda change: next(iter(change)),
)
def test_the_key_changes_with_anything_that_changes_the_compiled_kernel(change):
    made = dict(
        source="__global__ void k() {}",
        name="k.cu",
        options=("-DN=1",),
        names=NAMES,
        arch="compute_80",
        compiler=COMPILER,
    )
    assert kernel_cache.cache_key(**made) == kernel_cache.cache_key(**dict(made))
    assert kernel_cache.cache_key(**made) != kernel_cache.cache_key(**{**made, **change})


def test_a_changed_source_or_option_is_compiled_again(tmp_path, fake_nvrtc):
    cache = KernelCache(tmp_path)
    compile_one(cache)
    assert not compile_one(cache, source="__global__ void k2() {}").cached
    assert not compile_one(cache, options=("-DN=2",)).cached
    assert compile_one(cache).cached  # the first entry is still there
    assert len(fake_nvrtc.calls) == 3


def entry_path(cache: KernelCache) -> Path:
    (path,) = cache.directory.glob("*.json")
    return path


def rewrite(path: Path, change) -> None:
    entry = json.loads(path.read_text())
    change(entry)
    path.write_text(json.dumps(entry))


CORRUPTIONS = {
    "truncated": lambda path: path.write_bytes(path.read_bytes()[:40]),
    "not UTF-8": lambda path: path.write_bytes(b"\xff\xfe\x00garbage"),
    "empty": lambda path: path.write_text(""),
    "a list": lambda path: path.write_text("[1, 2]"),
    "a folder": lambda path: (path.unlink(), path.mkdir()),
    "PTX changed": lambda path: rewrite(path, lambda e: e.update(ptx=e["ptx"] + "//x")),
    "another key": lambda path: rewrite(path, lambda e: e.update(key="0" * 64)),
    "a name missing": lambda path: rewrite(path, lambda e: e.update(lowered={})),
    "seconds not a number": lambda path: rewrite(path, lambda e: e.update(seconds="1")),
}


@pytest.mark.parametrize("corrupt", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_a_damaged_entry_is_compiled_again_and_replaced(tmp_path, fake_nvrtc, corrupt):
    cache = KernelCache(tmp_path)
    expected = compile_one(cache).result
    path = entry_path(cache)
    corrupt(path)
    again = compile_one(KernelCache(tmp_path))
    assert not again.cached and again.result == expected  # the compiler's, not the entry's
    if path.is_file():
        assert compile_one(KernelCache(tmp_path)).cached  # the entry was written anew
    assert len(fake_nvrtc.calls) == 2


def test_an_entry_is_written_whole_and_leaves_no_temporary_file(tmp_path, fake_nvrtc):
    cache = KernelCache(tmp_path / "new" / "folder")  # made on first use
    compile_one(cache)
    assert [p.suffix for p in cache.directory.iterdir()] == [".json"]
    assert json.loads(entry_path(cache).read_text())["key"] == entry_path(cache).stem


def test_a_failed_write_leaves_no_entry_and_the_kernel_is_still_reported(
    tmp_path, fake_nvrtc, monkeypatch
):
    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(kernel_cache.os, "fsync", full_disk)
    compiled = compile_one(KernelCache(tmp_path))
    assert not compiled.cached and compiled.result["ptx"]
    assert compiled.problem == "not cached: No space left on device"
    assert list(tmp_path.iterdir()) == []  # neither an entry nor a temporary file


def test_a_cache_folder_that_cannot_be_made_is_reported_not_fatal(tmp_path, fake_nvrtc):
    blocker = tmp_path / "a file"
    blocker.write_text("")
    compiled = compile_one(KernelCache(blocker / "kernels"))
    assert not compiled.cached and compiled.problem.startswith("not cached: ")


def test_the_cache_turned_off_compiles_every_time_and_writes_nothing(tmp_path, fake_nvrtc):
    cache = KernelCache(None)
    assert not compile_one(cache).cached and not compile_one(cache).cached
    assert compile_one(cache).problem is None
    assert len(fake_nvrtc.calls) == 3


def test_where_the_cache_lives(monkeypatch, tmp_path):
    monkeypatch.delenv(kernel_cache.CACHE_ENV, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert kernel_cache.cache_dir() == Path.home() / ".cache" / "minitorch_amp" / "kernels"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert kernel_cache.cache_dir() == tmp_path / "minitorch_amp" / "kernels"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # the XDG spec: ignore it
    assert kernel_cache.cache_dir() == Path.home() / ".cache" / "minitorch_amp" / "kernels"
    monkeypatch.setenv(kernel_cache.CACHE_ENV, str(tmp_path / "mine"))
    assert kernel_cache.cache_dir() == tmp_path / "mine"
    monkeypatch.setenv(kernel_cache.CACHE_ENV, "0")
    assert kernel_cache.cache_dir() is None


# ---- the report's kernel lines -------------------------------------------------------------
def test_a_second_report_compiles_nothing_and_says_what_a_cold_compile_took(tmp_path, fake_nvrtc):
    heading, lines = kernel_check.compile_checks(KernelCache(tmp_path))
    cold = dict(lines)
    assert heading == "kernels (cuda/*.cu), compiled with NVRTC 12.8, not run (no GPU):"
    assert sorted(fake_nvrtc.calls) == sorted(kernels.REGISTRY)
    heading, lines = kernel_check.compile_checks(KernelCache(tmp_path))
    warm = dict(lines)
    assert len(fake_nvrtc.calls) == len(kernels.REGISTRY)  # no call the second time
    for file, status in cold.items():
        arch, _, cold_words = status.partition(" ")
        seconds = cold_words.strip().removeprefix("compiled in ")
        assert seconds.endswith(" s") and float(seconds[:-2]) >= 0
        assert warm[file] == f"{arch:<12}from the cache (a cold compile took {seconds})"
    assert warm["gemm_sm90.cu"].startswith("sm_90a      from the cache")
