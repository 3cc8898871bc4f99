"""Kernels compiled by ``python -m minitorch_amp`` without a GPU, kept between runs.

Without a GPU the report compiles every file of ``cuda/`` with NVRTC (``backend/nvrtc.py``),
about 20 s for each Hopper GEMM on a 2-core CPU. What NVRTC returns (the PTX, its log and the
lowered names) is kept in one JSON file per compile, named by the SHA-256 of everything that
can change it: the source with its includes inlined, the file name, the options, the target,
the name expressions, and the compiler (NVRTC's version, the library file's path, size and
date, and those of the CUDA headers). A changed kernel, option or compiler is a new key, so an
entry is never stale, only unused.

An entry is written to a temporary file in the cache folder and moved into place with
``os.replace``: a reader sees a whole entry or none. An entry that cannot be read, does not
parse, names another key, lacks a name expression, or whose PTX does not match its checksum is
ignored, compiled again and overwritten. A cache that cannot be written is reported, and the
kernel is still checked.

Where: ``$MINITORCH_AMP_KERNEL_CACHE`` when set (``0`` turns the cache off), else
``$XDG_CACHE_HOME/minitorch_amp/kernels``, else ``~/.cache/minitorch_amp/kernels``. On a GPU
the kernels are compiled by CuPy, which keeps its own cache (``~/.cupy/kernel_cache``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

CACHE_ENV = "MINITORCH_AMP_KERNEL_CACHE"
FORMAT = 1  # bump when an entry's layout changes: old entries then no longer match a key


def cache_dir() -> Path | None:
    """The cache folder, as the environment sets it; None when ``MINITORCH_AMP_KERNEL_CACHE=0``."""
    setting = os.environ.get(CACHE_ENV, "").strip()
    if setting == "0":
        return None
    if setting:
        return Path(setting).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    root = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"  # XDG: relative ignored
    return root / "minitorch_amp" / "kernels"


def _stamp(path: Path) -> list:
    """A file's path, size and modification time: a reinstalled file gets a new stamp."""
    try:
        stat = path.stat()
    except OSError:
        return [str(path), None, None]
    return [str(path), stat.st_size, stat.st_mtime_ns]


def compiler_identity() -> dict:
    """What besides the source decides NVRTC's output: its version, library and headers."""
    from ..backend import nvrtc

    headers = Path(nvrtc.include_dir())
    return {
        "nvrtc": list(nvrtc.version()),
        "library": _stamp(Path(nvrtc.library_path()).resolve()),
        "headers": [_stamp(headers / h) for h in ("cuda.h", "cuda_fp16.h", "cuda_bf16.h")],
    }


def cache_key(source: str, name: str, options, names, arch: str, compiler: dict) -> str:
    """The SHA-256 of everything that makes the compiled kernel, as hex."""
    made = {
        "format": FORMAT,
        "source": source,
        "name": name,
        "options": list(options),
        "names": list(names),
        "arch": arch,
        "compiler": compiler,
    }
    return hashlib.sha256(json.dumps(made, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Compiled:
    """One kernel file compiled: NVRTC's result, how long the cold compile took, whether it
    came from the cache, and why it could not be stored (None when it was, or not asked)."""

    result: dict
    seconds: float
    cached: bool
    problem: str | None = None


class KernelCache:
    """Compile with NVRTC unless ``directory`` holds the same compile; None turns it off."""

    def __init__(self, directory: Path | None):
        self.directory = None if directory is None else Path(directory)
        self._compiler: dict | None = None

    def compile(self, source: str, name: str, options, names, arch: str) -> Compiled:
        """``nvrtc.compile_source``'s result for these arguments, from the cache if it is
        there and whole, else compiled (and stored)."""
        from ..backend import nvrtc

        names = tuple(names)
        key = None
        if self.directory is not None:
            if self._compiler is None:
                self._compiler = compiler_identity()
            key = cache_key(source, name, options, names, arch, self._compiler)
            entry = self._load(key, names)
            if entry is not None:
                result = {k: entry[k] for k in ("ptx", "log", "lowered")}
                return Compiled(result, entry["seconds"], cached=True)
        start = time.perf_counter()
        result = nvrtc.compile_source(source, name, options, names, arch)
        seconds = time.perf_counter() - start
        problem = None if key is None else self._store(key, result, seconds)
        return Compiled(result, seconds, cached=False, problem=problem)

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def _load(self, key: str, names: tuple) -> dict | None:
        """The entry for ``key`` if it is whole and its own; None otherwise (never raises)."""
        try:
            entry = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):  # missing, a folder, not UTF-8, not JSON
            return None
        if not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("key") != key:
            return None
        ptx, log, lowered, seconds = (entry.get(k) for k in ("ptx", "log", "lowered", "seconds"))
        if not (isinstance(ptx, str) and ptx and isinstance(log, str)):
            return None
        if not (isinstance(lowered, dict) and set(lowered) == set(names)):
            return None
        if not all(isinstance(value, str) for value in lowered.values()):
            return None
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            return None
        if not (math.isfinite(seconds) and seconds >= 0):
            return None
        if entry.get("ptx_sha256") != hashlib.sha256(ptx.encode()).hexdigest():
            return None
        return entry

    def _store(self, key: str, result: dict, seconds: float) -> str | None:
        """Write the entry atomically; the reason it could not be written, else None."""
        entry = {
            "format": FORMAT,
            "key": key,
            "seconds": seconds,
            "ptx_sha256": hashlib.sha256(result["ptx"].encode()).hexdigest(),
            **{k: result[k] for k in ("ptx", "log", "lowered")},
        }
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=self.directory, prefix=".", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as file:
                    json.dump(entry, file)
                    file.flush()
                    os.fsync(file.fileno())
                os.replace(temporary, self._path(key))
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
        except OSError as exc:
            return f"not cached: {exc.strerror or exc}"
        return None
