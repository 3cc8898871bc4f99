"""Compile a ``.cu`` file with NVRTC, the way the loader does, without a GPU or CuPy.

CuPy compiles ``cuda/*.cu`` at run time with NVRTC, which has CUDA's own headers but none of
the C++ standard library that ``nvcc`` offers, so a kernel that builds with ``nvcc`` can still
fail at run time. This module drives NVRTC directly through ``ctypes`` (the
``nvidia-cuda-nvrtc`` wheel provides the library, ``nvcc``'s toolkit the headers) with the
same options and name expressions the loader registers, so the tests catch that on any
machine.
"""

from __future__ import annotations

import ctypes
import glob
import os
import shutil
import sys
from pathlib import Path


class NvrtcUnavailableError(RuntimeError):
    """The NVRTC library or the CUDA headers could not be found."""


def _library_candidates() -> list[str]:
    found = []
    for root in sys.path:
        found += sorted(glob.glob(os.path.join(root, "nvidia", "*", "lib", "libnvrtc.so.*")))
        found += sorted(
            glob.glob(os.path.join(root, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so*"))
        )
    home = cuda_home()
    if home is not None:
        found += sorted(glob.glob(str(home / "lib64" / "libnvrtc.so*")))
    return [f for f in found if "builtins" not in f and ".alt." not in f]


def cuda_home() -> Path | None:
    """The CUDA toolkit: ``$CUDA_PATH``/``$CUDA_HOME``, else the one ``nvcc`` belongs to."""
    candidates = [Path(os.environ[v]) for v in ("CUDA_PATH", "CUDA_HOME") if os.environ.get(v)]
    nvcc = shutil.which("nvcc")
    if nvcc is not None:
        candidates.append(Path(os.path.realpath(nvcc)).parent.parent)
        # a wrapper script (e.g. /usr/local/bin/nvcc exec'ing the real one): read its target
        for word in Path(nvcc).read_text(errors="ignore").split():
            if word.endswith("/bin/nvcc"):
                candidates.append(Path(word).parent.parent)
    candidates.append(Path("/usr/local/cuda"))
    for home in candidates:
        if (home / "include" / "cuda_fp16.h").exists():
            return home
    return None


def include_dir() -> Path:
    home = cuda_home()
    if home is None or not (home / "include" / "cuda_fp16.h").exists():
        raise NvrtcUnavailableError("the CUDA headers (cuda_fp16.h) were not found; install nvcc")
    return home / "include"


_lib = None


def _load():
    global _lib
    if _lib is None:
        candidates = _library_candidates()
        if not candidates:
            raise NvrtcUnavailableError("libnvrtc was not found; pip install nvidia-cuda-nvrtc")
        # NVRTC dlopens its builtins library by name: load it first from the same folder.
        for builtins in sorted(
            glob.glob(os.path.join(os.path.dirname(candidates[0]), "libnvrtc-builtins.so.*"))
        ):
            if ".alt." not in builtins:
                ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
        _lib = ctypes.CDLL(candidates[0])
        _lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    return _lib


def library_path() -> str:
    """The file of the NVRTC library in use (loaded on the first call)."""
    return _load()._name


def version() -> tuple[int, int]:
    lib = _load()
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


def compile_source(
    source: str, name: str, options=(), name_expressions=(), arch: str = "compute_80"
) -> dict:
    """Compile ``source`` to PTX; return ``{'ptx': str, 'log': str, 'lowered': {expr: name}}``.

    Raises:
        RuntimeError: compilation failed (the message holds NVRTC's log).
        NvrtcUnavailableError: no NVRTC library or CUDA headers on this machine.
    """
    lib = _load()
    prog = ctypes.c_void_p()
    _check(
        lib,
        lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None),
    )
    try:
        for expr in name_expressions:
            _check(lib, lib.nvrtcAddNameExpression(prog, expr.encode()))
        opts = [*options, f"-arch={arch}", f"-I{include_dir()}"]
        array = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        status = lib.nvrtcCompileProgram(prog, len(opts), array)
        log = _read(lib, prog, "nvrtcGetProgramLogSize", "nvrtcGetProgramLog")
        if status != 0:
            raise RuntimeError(f"NVRTC failed to compile {name} for {arch}:\n{log}")
        lowered = {}
        for expr in name_expressions:
            out = ctypes.c_char_p()
            _check(lib, lib.nvrtcGetLoweredName(prog, expr.encode(), ctypes.byref(out)))
            lowered[expr] = out.value.decode()
        ptx = _read(lib, prog, "nvrtcGetPTXSize", "nvrtcGetPTX")
        return {"ptx": ptx, "log": log, "lowered": lowered}
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _read(lib, prog, size_fn: str, get_fn: str) -> str:
    size = ctypes.c_size_t()
    _check(lib, getattr(lib, size_fn)(prog, ctypes.byref(size)))
    buffer = ctypes.create_string_buffer(size.value)
    _check(lib, getattr(lib, get_fn)(prog, buffer))
    return buffer.value.decode(errors="replace")


def _check(lib, status: int) -> None:
    if status != 0:
        raise RuntimeError(f"NVRTC error {status}: {lib.nvrtcGetErrorString(status).decode()}")
