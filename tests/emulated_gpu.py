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

import contextlib
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


def on_device(a) -> HostArray:
    """A copy of ``a`` posing as a CuPy array (what ``cupy.asarray`` would make)."""
    out = np.empty(np.shape(a), np.asarray(a).dtype).view(HostArray)
    np.copyto(out, a)
    return out


def to_host(a):
    """``a`` as a plain NumPy array (None stays None): what ``cupy.asnumpy`` would give."""
    return None if a is None else np.asarray(a).view(np.ndarray)


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
            elif isinstance(a, np.float64):
                holders.append(ctypes.c_double(a))
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
        empty=lambda n, dtype: np.empty(n, dtype).view(HostArray),
        asnumpy=lambda a: np.array(a).view(np.ndarray),
        full=lambda shape, fill, dtype: np.full(shape, fill, dtype).view(HostArray),
        sign=np.sign,
        cuda=SimpleNamespace(
            Device=lambda index: NoDevice(), runtime=SimpleNamespace(getDevice=lambda: 0)
        ),
        get_default_memory_pool=lambda: SimpleNamespace(used_bytes=lambda: 0),
    )
    monkeypatch.setattr(_device, "cupy", fake_cupy)
    monkeypatch.setattr(kernels, "launch", launch)
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "1")
    return launches


# ---- a stand-in that refuses host reads ---------------------------------------------------------
class StrictArray(HostArray):
    """A :class:`HostArray` that, while :func:`host_reads_refused` is on, refuses to become a
    host value: ``bool()``, ``int()``, ``float()``, ``operator.index``, ``item``, ``tolist``
    and boolean-mask indexing raise :class:`HostReadError`, with a traceback to the read.

    As on CuPy, a reduction or an integer index gives a 0-d array, not a NumPy scalar, so
    a value taken out of a device array stays a device value until something reads it.
    """

    def __array_wrap__(self, array, context=None, return_scalar=False):
        return super().__array_wrap__(array, context, False)  # 0-d stays an array

    def __getitem__(self, index):
        if _is_mask(index):
            _refuse(f"boolean-mask indexing a[mask] (mask of shape {np.shape(index)})")
        out = super().__getitem__(index)
        return out if isinstance(out, np.ndarray) else np.asarray(out).view(type(self))

    def __setitem__(self, index, value):
        if _is_mask(index):
            _refuse(f"boolean-mask assignment a[mask] = v (mask of shape {np.shape(index)})")
        super().__setitem__(index, value)

    def __bool__(self):
        _refuse("bool() of a device array (a Python if on it)")
        return super().__bool__()

    def __int__(self):
        _refuse("int() of a device array")
        return super().__int__()

    def __float__(self):
        _refuse("float() of a device array")
        return super().__float__()

    def __index__(self):
        _refuse("operator.index() of a device array")
        return super().__index__()

    def item(self, *args):
        _refuse("ndarray.item()")
        return super().item(*args)

    def tolist(self):
        _refuse("ndarray.tolist()")
        return super().tolist()

    def get(self):
        _refuse("ndarray.get()")
        return np.array(self).view(np.ndarray)


class HostReadError(AssertionError):
    """A device value was read on the host while :func:`host_reads_refused` was on."""


_refused: list = []  # while refusing: what was refused (a caller may catch the error)
_refusing = [False]


@contextlib.contextmanager
def host_reads_refused():
    """While on, every host read of a :class:`StrictArray` raises :class:`HostReadError`;
    yields the list of what was refused, for a check that no caller swallowed the error."""
    _refused.clear()
    _refusing[0] = True
    try:
        yield _refused
    finally:
        _refusing[0] = False


def _refuse(what: str) -> None:
    if _refusing[0]:
        _refused.append(what)
        raise HostReadError(f"host read of a device value: {what} (on a GPU, a sync)")


def _is_mask(index) -> bool:
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(p, np.ndarray) and p.dtype == np.bool_ and p.ndim for p in parts)


# CuPy calls that wait for the GPU whatever their arguments: their result's size depends on
# the data
_SYNCING = ("nonzero", "flatnonzero", "argwhere", "unique", "extract", "compress")


class StrictDevice(NoDevice):
    """``cupy.cuda.Device``: a context, ``use()``; ``synchronize()`` is a host wait."""

    def __init__(self, index=0):
        self.id = index

    def use(self):
        pass

    def synchronize(self):
        _refuse("Device.synchronize()")


class _StrictCupy:
    """``cupy``: NumPy's functions on :class:`StrictArray` (results wrapped), minus reads."""

    __version__ = "14.0.0"
    ndarray = StrictArray

    def __init__(self):
        import ml_dtypes

        self.bfloat16 = ml_dtypes.bfloat16  # CuPy 14's is ml_dtypes'
        stream = SimpleNamespace(done=True, synchronize=lambda: _refuse("Stream.synchronize()"))
        pool = SimpleNamespace(
            used_bytes=lambda: 0, free_bytes=lambda: 0, free_all_blocks=lambda: 0
        )
        runtime = SimpleNamespace(
            getDevice=lambda: 0, getDeviceCount=lambda: 1, memGetInfo=lambda: (2**34, 2**34)
        )
        self.cuda = SimpleNamespace(
            Device=StrictDevice,
            runtime=runtime,
            get_current_stream=lambda: stream,
            memory=SimpleNamespace(OutOfMemoryError=MemoryError),
        )
        self.get_default_memory_pool = lambda: pool

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if name in _SYNCING:
            return _syncing(name, getattr(np, name))
        value = getattr(np, name)
        if name == "where":
            return _where
        if name == "repeat":
            return _repeat
        return _wrapped(value) if callable(value) and not isinstance(value, type) else value

    def asarray(self, a, dtype=None):
        if isinstance(a, StrictArray):
            return a if dtype is None else a.astype(dtype)
        return np.array(a, dtype=dtype).view(StrictArray)  # an upload

    array = asarray

    def asnumpy(self, a):
        _refuse("cupy.asnumpy()")
        return np.array(a).view(np.ndarray)


def _wrap(out):
    if isinstance(out, np.ndarray) and not isinstance(out, StrictArray):
        return out.view(StrictArray)
    if isinstance(out, tuple):
        return tuple(map(_wrap, out))
    if isinstance(out, np.generic):
        return np.asarray(out).view(StrictArray)
    return out


def _wrapped(function):
    def call(*args, **kwargs):
        return _wrap(function(*args, **kwargs))

    return call


def _syncing(name, function):
    def call(*args, **kwargs):
        _refuse(f"cupy.{name}()")
        return _wrap(function(*args, **kwargs))

    return call


def _where(condition, *values):
    if not values:
        _refuse("cupy.where(condition) with one argument (nonzero)")
    return _wrap(np.where(condition, *values))


def _repeat(a, repeats, axis=None):
    """CuPy 14's ``repeat``: one count broadcasts; a list or array of counts is made a
    device array whose sum is read back to size the result (``_repeat_perelement``)."""
    if not isinstance(repeats, (int, np.integer)):
        _refuse("cupy.repeat with a list or array of repeats (CuPy 14 reads their sum)")
    return _wrap(np.repeat(a, repeats, axis))


def install_strict(monkeypatch):
    """CuPy becomes :class:`_StrictCupy` (raw kernels stay as set: use them off); returns it.

    NOTE: a :class:`StrictArray` is a NumPy array, so code that asks ``isinstance(x,
    np.ndarray)`` takes it for a host one; ``backend.sync.defer`` does, and is made to keep
    a stand-in flag for later as it keeps a CuPy one.
    """
    from minitorch_amp.backend import sync

    fake = _StrictCupy()
    monkeypatch.setattr(_device, "cupy", fake)
    monkeypatch.setattr(sync, "_deferred", {})
    real = sync.defer

    def defer(key, flag, report):
        if isinstance(flag, StrictArray):
            sync._deferred[key] = (flag, report)
        else:
            real(key, flag, report)

    monkeypatch.setattr(sync, "defer", defer)
    return fake


def poisoned_empty(shape, dtype):
    """``cupy.empty`` for the emulators: float memory full of NaN, so that an element a kernel
    leaves unwritten shows (NumPy's reused memory can hold the right values: a flaky pass)."""
    out = np.empty(shape, dtype)
    if out.dtype.kind == "f":
        out.fill(np.nan)
    return out.view(HostArray)
