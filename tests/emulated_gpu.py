"""A CPU stand-in for CuPy and the GPU, for running ``cuda/*.cu`` kernels in a g++ emulator.

``build(cpp, directory)`` compiles ``tests/<cpp>`` (which includes ``cuda_emulator.h`` and
one kernel file) as a shared library. :func:`install` then routes a launcher's CuPy calls to
NumPy arrays that pose as CuPy ones (:class:`HostArray`) and its ``kernels.launch`` calls to
the library, so the real launcher (its tables, chunking and argument types) drives the
kernel file, unchanged, on the CPU.

NOTE: like CuPy, a :class:`HostArray` refuses to take a plain NumPy array by assignment
(``device[...] = host`` raises TypeError): test helpers that would fail on a real GPU that
way fail here too.
"""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path
from types import SimpleNamespace

import needs
import numpy as np

from minitorch_amp.backend import device as _device
from minitorch_amp.backend import kernels

ROOT = Path(__file__).resolve().parents[1]


class HostArray(np.ndarray):
    """A NumPy array posing as a CuPy one for the launcher: ``.data.ptr`` and ``.device``."""

    @property
    def data(self):
        return SimpleNamespace(ptr=self.ctypes.data)

    @property
    def device(self):
        return NoDevice()

    def __setitem__(self, index, value):
        if type(value) is np.ndarray and value.ndim:  # what CuPy refuses: an implicit upload
            raise TypeError(
                "Unsupported type <class 'numpy.ndarray'> (as CuPy says): move the NumPy "
                "array to the device first (to_place / cupy.asarray)"
            )
        super().__setitem__(index, value)


class NoDevice:
    id = 0
    compute_capability = "80"  # what bfloat16's device check asks (Ampere: it has bfloat16)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def host_empty(n, dtype):
    return np.empty(n, dtype).view(HostArray)


def build(cpp: str, directory: Path) -> ctypes.CDLL:
    """Compile ``tests/<cpp>`` with g++ into a library with ``launch`` and ``last_error``."""
    compiler = needs.program("g++", "the kernel emulators are built with it")
    include = needs.cuda_headers()
    lib = directory / f"lib{Path(cpp).stem}.so"
    flags = ["-std=c++17", "-O1", "-shared", "-fPIC", "-ffp-contract=off", "-Wno-attributes"]
    flags += ["-Wno-unknown-pragmas", f"-I{include}", f"-I{ROOT / 'cuda'}"]
    out = subprocess.run(
        [compiler, *flags, str(ROOT / "tests" / cpp), "-o", str(lib)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    emulator = ctypes.CDLL(str(lib))
    emulator.launch.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    emulator.last_error.restype = ctypes.c_char_p
    return emulator


def install(emulator, monkeypatch, file: str, block: int) -> list:
    """Route CuPy to :class:`HostArray` and ``kernels.launch`` of ``file`` to ``emulator``;
    return the list of ``(name, grid)`` it launches."""
    launches = []
    names = kernels.REGISTRY[file].names

    def launch(kernel_file, name, grid, block_shape, args, shared_mem=0):
        assert kernel_file == file and name in names and tuple(block_shape) == (block,)
        holders = []
        for a in args:  # what RawKernel would pass: pointers, and the exact scalar types
            if isinstance(a, HostArray):
                holders.append(ctypes.c_void_p(a.ctypes.data))
            elif isinstance(a, np.float32):
                holders.append(ctypes.c_float(a))
            elif isinstance(a, np.int32):
                holders.append(ctypes.c_int(a))
            elif isinstance(a, np.int64):
                holders.append(ctypes.c_longlong(a))
            else:
                raise TypeError(f"kernel argument of type {type(a).__name__}")
        argv = (ctypes.c_void_p * len(holders))(*[ctypes.addressof(h) for h in holders])
        launches.append((name, tuple(grid)))
        assert emulator.launch(name.encode(), grid[0], block, argv) == 0, emulator.last_error()

    fake_cupy = SimpleNamespace(
        __version__="14.0.0",  # a CuPy with a bfloat16 dtype
        ndarray=HostArray,
        asarray=lambda a: np.array(a).view(HostArray),
        zeros=lambda n, dtype: np.zeros(n, dtype).view(HostArray),
        asnumpy=lambda a: np.array(a).view(np.ndarray),
        full=lambda shape, fill, dtype: np.full(shape, fill, dtype).view(HostArray),
        sign=np.sign,
        cuda=SimpleNamespace(Device=lambda index: NoDevice()),
    )
    monkeypatch.setattr(_device, "cupy", fake_cupy)
    monkeypatch.setattr(kernels, "launch", launch)
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "1")
    return launches
