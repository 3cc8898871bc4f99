"""The raw-kernel loader: ``cuda/*.cu`` compiled by CuPy's NVRTC, once per device.

Each Python launcher module registers the kernels it needs from one ``.cu`` file::

    GEMM = register("gemm_fp16.cu", names=("gemm_f16<false,false>",), options=("-DTILE=128",))

A file whose instructions exist on one architecture only names it (``arch="sm_90a"`` for
``wgmma``): it is compiled for that target, and only launched on devices that have it.

A file with many large template instantiations (the GEMMs: seconds of NVRTC each) says
``split=True``: each of its kernels is then compiled into a module of its own, the first
time that kernel is launched, so a step waits only for the instantiations it launches, and
the kernel-cache warm-up (``backend/kernel_warmup.py``) spreads one file over many cores.

A file may build on another one of ``cuda/`` with ``#include "other.cu"`` (a line of its
own): ``nvcc`` follows it, and :meth:`KernelFile.source` inlines it, because NVRTC compiles
a string and CuPy keys its on-disk kernel cache on that string (an included file's change
must change the key).

and launches them with :func:`launch`. Registration is the single source of truth for what
is compiled and how: the loader uses it on the GPU, and the tests compile every registered
file with the same options and name expressions through NVRTC (``backend/nvrtc.py``) on
machines without one.

Rules every launch follows (``RawKernel`` checks nothing itself):

* scalars go in as explicit ``numpy.int32`` / ``numpy.float32`` (a Python int would be passed
  as a 64-bit ``long long``, a float as a ``double``);
* arrays are checked for dtype and C-contiguity first (:func:`check_array`), because a raw
  kernel ignores strides;
* a multi-tensor kernel's table (pointers, sizes, per-tensor scalars) is built on the host
  once per set of tensors and kept on the device (:func:`device_table`): an upload per step
  would synchronise nothing but would stop the step from being captured as a CUDA graph.
"""

from __future__ import annotations

import functools
import os
import re
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path

from . import device as _device
from . import graphs as _graphs
from . import sync as _sync

# NVRTC has no C++ standard library headers: kernels include only CUDA's own headers.
BASE_OPTIONS = ("--std=c++17",)


def cuda_dir() -> Path:
    """Where the ``.cu`` files are: inside the installed package, else the source checkout."""
    packaged = Path(__file__).resolve().parents[1] / "cuda"
    if packaged.is_dir() and any(packaged.glob("*.cu")):
        return packaged
    return Path(__file__).resolve().parents[2] / "cuda"


@dataclass(frozen=True)
class KernelFile:
    """One ``.cu`` file, the name expressions compiled from it, and its compile options.

    ``arch`` is the one target a file is built for (``"sm_90a"``), or None for files that
    compile for any device from sm_80 on (CuPy then picks the device's own target).
    ``split``: each kernel is compiled alone, into a module of its own (:meth:`unit`).
    """

    file: str
    names: tuple[str, ...]
    options: tuple[str, ...] = ()
    arch: str | None = None
    split: bool = False

    @property
    def path(self) -> Path:
        return cuda_dir() / self.file

    def source(self) -> str:
        """The file's text, with every ``#include "<file>.cu"`` of ``cuda/`` inlined."""
        return _inline_includes(self.path, ())

    def all_options(self) -> tuple[str, ...]:
        """The options besides the target (the NVRTC tests add the target themselves)."""
        return BASE_OPTIONS + self.options

    def loader_options(self) -> tuple[str, ...]:
        """What the loader passes to CuPy: the options, and the target when the file has one."""
        return self.all_options() + ((f"-arch={self.arch}",) if self.arch else ())

    def unit(self, name: str | None) -> tuple[str, tuple[str, ...]]:
        """The source and name expressions of the module that holds kernel ``name``.

        The whole file with all its names (``name`` None), or for a ``split`` file that one
        kernel alone, the file's text ending in a comment that names it: CuPy keys its
        on-disk cache on the source and options, not on the name expressions, so each kernel
        needs a source of its own.
        """
        if not self.split or name is None:
            return self.source(), self.names
        return f"{self.source()}\n// this module: {name}\n", (name,)

    def units(self) -> tuple[str | None, ...]:
        """What the loader compiles this file as: None (the whole file), or each kernel name."""
        return self.names if self.split else (None,)


_LOCAL_INCLUDE = re.compile(r'^#include "(\w+\.cu)"[ \t]*$', re.MULTILINE)


def _inline_includes(path: Path, seen: tuple[str, ...]) -> str:
    if path.name in seen:
        raise ValueError(f"{path.name} includes itself (through {' -> '.join(seen)})")

    def inline(match: re.Match) -> str:
        name = match.group(1)
        text = _inline_includes(path.parent / name, (*seen, path.name))
        return f"// ---- {name}, inlined by the loader ----\n{text}\n// ---- end of {name} ----"

    return _LOCAL_INCLUDE.sub(inline, path.read_text())


REGISTRY: dict[str, KernelFile] = {}


def register(
    file: str, names, options=(), arch: str | None = None, split: bool = False
) -> KernelFile:
    """Declare the kernels ``file`` provides (called at import by each launcher module).

    Two launchers may each register kernels of one file (``reduction.cu``: ``sum_squares``
    in ``primitives``, ``bias_grad`` in ``bias_grad``) with the same options and target: the
    file's entry then names both sets, and it is compiled once, with all of them. Each call
    returns the entry as it stands after it.
    """
    entry = KernelFile(file, tuple(names), tuple(options), arch, split)
    known = REGISTRY.get(file)
    if known is not None:
        if (known.options, known.arch, known.split) != (entry.options, entry.arch, split):
            raise ValueError(
                f"{file} is registered twice with different options, targets or splits"
            )
        added = tuple(name for name in entry.names if name not in known.names)
        entry = replace(known, names=known.names + added)
    REGISTRY[file] = entry
    return entry


def enabled() -> bool:
    """Raw kernels run on the GPU unless ``MINITORCH_AMP_RAW_KERNELS=0`` asks for CuPy's."""
    return _device.cupy is not None and setting("MINITORCH_AMP_RAW_KERNELS", "1") != "0"


# NOTE: os.environ.get costs about 2 µs on a slow host (its Mapping.get encodes the key,
# looks it up and decodes the value), and enabled() is asked before most launches: some 290
# times in the example GPT's step. The environment's own dict, with each key encoded once,
# gives the same answer in a tenth of that, and sees every change made through os.environ
# (monkeypatch.setenv included) at once.
_ENVIRON = getattr(os.environ, "_data", None)  # (CPython's; else os.environ.get)


@functools.cache
def _key(name: str):
    return os.environ.encodekey(name)


def setting(name: str, default: str) -> str:
    """``os.environ.get(name, default)``, read fast: for variables read before each launch."""
    if _ENVIRON is None:
        return os.environ.get(name, default)
    raw = _ENVIRON.get(_key(name))
    return default if raw is None else os.environ.decodevalue(raw)


@functools.cache
def _module(entry: KernelFile, device_id: int, unit: str | None = None):
    # keyed on the entry: names registered after a first compile make a module of their own
    source, names = entry.unit(unit)
    with _device.cupy.cuda.Device(device_id):
        module = _device.cupy.RawModule(
            code=source, options=entry.loader_options(), name_expressions=names
        )
        module.compile()
    return module


DEFAULT_SHARED_MEM = 48 * 1024  # dynamic shared memory a kernel may use without opting in

_functions: dict = {}  # (device id, file, name) -> (function, shared bytes it may use)


def get_function(file: str, name: str, shared_mem: int = 0):
    """The compiled kernel ``name`` of ``file`` on the current device, able to use
    ``shared_mem`` bytes of dynamic shared memory: compiled once per device, looked up once
    per kernel, opted into more than 48 KiB once (without the opt-in CUDA refuses every
    launch with "invalid argument"). The GPU tests read its registers and spills here.
    """
    key = (_device.cupy.cuda.runtime.getDevice(), file, name)
    entry = _functions.get(key)
    if entry is None or entry[1] < shared_mem:
        registered = REGISTRY.get(file)
        if registered is None or name not in registered.names:
            raise KeyError(f"{name!r} is not registered for {file}; register() it first")
        unit = name if registered.split else None
        kernel = _module(registered, key[0], unit).get_function(name)
        if shared_mem > DEFAULT_SHARED_MEM:
            kernel.max_dynamic_shared_size_bytes = shared_mem
        entry = _functions[key] = (kernel, max(shared_mem, DEFAULT_SHARED_MEM))
    return entry[0]


def launch(file: str, name: str, grid, block, args, shared_mem: int = 0) -> None:
    """Launch kernel ``name`` of ``file`` with ``args`` on the current device: the one way
    every raw kernel runs. ``grid``, ``block`` and ``args`` are tuples (arrays and NumPy
    scalars, see the rules above), ``shared_mem`` the dynamic shared memory in bytes. After
    the first launch of a kernel on a device this is a dict lookup and CuPy's own call."""
    get_function(file, name, shared_mem)(grid, block, args, shared_mem=shared_mem)


def array_kind(array):
    """What a kept launch's signature holds of an argument array (None stays None): its
    type, shape, strides and dtype, which decide every check and choice a launcher makes of
    it (its address aside)."""
    return None if array is None else (type(array), array.shape, array.strides, array.dtype)


def check_array(array, dtype, name: str) -> None:
    """Raise unless ``array`` has ``dtype`` and is C-contiguous (a raw kernel sees only bytes)."""
    if array.dtype != dtype:
        raise TypeError(f"{name} must be {dtype}, got {array.dtype}")
    if not array.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous; pass xp.ascontiguousarray({name})")


# ---- multi-tensor tables, uploaded once per set of tensors ---------------------------------
TABLE_CACHE_SIZE = 64
_tables: OrderedDict = OrderedDict()


def device_table(key, build):
    """The device copy of the array ``build()`` makes, built and uploaded once per ``key``.

    ``key`` must determine the table completely (the device, every pointer and size, every
    per-tensor scalar it holds): the same tensors in the next step find their table here, so
    a training step uploads nothing after its first iteration. The least recently used of
    more than ``TABLE_CACHE_SIZE`` tables is dropped. A table used while a CUDA graph is
    captured is kept alive by the graph.

    Raises:
        GraphError: the table is not cached and a capture is in progress (an upload cannot be
            captured).
    """
    table = _tables.get(key)
    if table is None:
        _graphs.refuse_in_capture(
            "building a multi-tensor kernel table",
            "its tensors differ from those of the eager steps before the capture (new "
            "parameters, or gradient buffers made anew); run the step eagerly once with the "
            "very tensors the graph will use, then capture",
        )
        host = build()
        _sync.upload("a multi-tensor kernel table")
        table = _device.cupy.asarray(host)
        _tables[key] = table
        if len(_tables) > TABLE_CACHE_SIZE:
            _tables.popitem(last=False)
    else:
        _tables.move_to_end(key)
    using(table)
    return table


def using(table) -> None:
    """``table`` (a device table a launcher kept itself) is launched again: a capture in
    progress keeps it alive for as long as the graph lives."""
    capture = _graphs.active()
    if capture is not None:
        capture.keep_alive.append(table)
