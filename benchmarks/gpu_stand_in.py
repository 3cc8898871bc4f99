"""CuPy and a Hopper GPU stood in for on the CPU: the GPU path's own Python, timed anywhere.

On a GPU, the host time of an eager step is the library's Python around each op, plus
CuPy's share: its launches and its memory pool. The first part is the same Python on any
machine, and it is most of the step (docs/benchmarks.md: the H200's host profile). Inside
:func:`stand_in`, that Python runs on the CPU:

- ``backend.device.cupy`` is a module of NumPy's functions whose arrays pose as CuPy ones
  (:class:`StandInArray`: ``.data.ptr``, ``.device``), counted per call;
- ``kernels.launch`` records the launch (file and kernel name) and runs nothing;
- the Hopper GEMM asks its device questions of an H100/H200 (compute capability 9.0, 132
  SMs, ``hopper=True``) or of an sm_80 GPU (``hopper=False``), and its tensor maps hold
  what they describe (address, shape, row stride, box, element size), not the driver's
  encoding (no driver call is made);
- the C files of the CPU backend are off (``host_c.load`` finds none, as on a machine
  without a compiler): the stand-in's arrays are NumPy arrays underneath, and no path that
  takes them for host arrays should reach compiled code that returns plain ones.

So a step takes the GPU path's every branch, launch and allocation, with nothing computed
by the kernels: its results are meaningless, its host time is the library's Python with
CuPy's share left out (NumPy's calls on a tiny step's arrays cost about a microsecond each,
where a CuPy launch costs several). Read such a time as what a change saves on the GPU's
host, not as the GPU's step time.

    with gpu_stand_in.stand_in() as stand:
        mt.set_device("gpu:0")
        step()
        stand.launches   # [(file, kernel name)] of the step, in order
        stand.calls      # Counter: CuPy function name -> calls
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import time
import types
from collections import Counter
from types import SimpleNamespace
from unittest import mock

import numpy as np

SM_COUNT = 132  # an H100 SXM's and an H200's multiprocessors
# The example GPT on the stand-in: its 4 layers and 4 heads (every op of its step) on tiny
# arrays, where NumPy's arithmetic on the stand-in's arrays is small beside the Python (at
# the example's own size it is not: float16 arithmetic is slow in NumPy). Batch 1.
GPT_SIZE = {"context": 8, "width": 16}


class StandInDevice:
    """``cupy.cuda.Device``: a context with an ``id``, and what the library asks of one."""

    def __init__(self, index: int = 0, hopper: bool = True):
        self.id = index
        self.compute_capability = "90" if hopper else "80"
        self.attributes = {"MultiProcessorCount": SM_COUNT}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def use(self):
        pass

    def synchronize(self):
        pass


_DEVICE = StandInDevice()


class StandInArray(np.ndarray):
    """A NumPy array posing as a CuPy one: ``.data.ptr`` (kept, as CuPy's is) and
    ``.device``."""

    device = _DEVICE

    @property
    def data(self):
        data = self.__dict__.get("_data")
        if data is None:
            data = self.__dict__["_data"] = SimpleNamespace(ptr=_address(self))
        return data

    def get(self):
        return np.array(self).view(np.ndarray)


def _address(array) -> int:
    """The array's first byte: through the buffer protocol where NumPy allows it (about
    0.7 µs; an ``ml_dtypes`` array, which the protocol has no code for, as bytes; a
    transposed view through its transpose, which starts at the same byte), else
    ``ndarray.ctypes`` (about 3 µs: a step's new arrays would pay it in every GEMM call,
    where CuPy's ``data.ptr`` costs a tenth of a microsecond)."""
    for contiguous in (array, array.T):
        if not contiguous.flags.c_contiguous:
            continue
        try:
            return ctypes.addressof(ctypes.c_byte.from_buffer(contiguous))
        except (TypeError, ValueError, BufferError):  # read-only, or a bfloat16's dtype
            pass
        try:
            as_bytes = contiguous.reshape(-1).view(np.uint8)
            return ctypes.addressof(ctypes.c_byte.from_buffer(as_bytes))
        except (TypeError, ValueError, BufferError):
            break  # read-only
    return array.ctypes.data


def wrap(out, array_type=StandInArray):
    """A NumPy result as CuPy returns it: a device array (0-d for a scalar)."""
    if isinstance(out, np.ndarray) and not isinstance(out, array_type):
        return out.view(array_type)
    if isinstance(out, np.generic):
        return np.asarray(out).view(array_type)
    if isinstance(out, tuple):
        return tuple(wrap(o, array_type) for o in out)
    return out


class _Event:
    """``cupy.cuda.Event``: host time at ``record``."""

    def record(self, stream=None):
        self.time = time.perf_counter()

    def synchronize(self):
        pass


class Generator:
    """``cupy.random.Generator``: NumPy's, its arrays stand-ins (each draw counted by
    ``counted``)."""

    def __init__(self, *args, counted=None, **kwargs):
        self._rng = np.random.default_rng(*args, **kwargs)
        self._counted = counted

    def __getattr__(self, name):
        draw = self._counted(f"random.{name}", getattr(self._rng, name))
        setattr(self, name, draw)
        return draw


class StandInCupy:
    """``cupy``: NumPy's functions on :class:`StandInArray`, each call counted in
    ``calls``; a function is looked up and wrapped once, then kept as an attribute."""

    __version__ = "14.0.0 (a NumPy stand-in)"  # (bfloat16 asks for CuPy 14)
    ndarray = StandInArray

    def __init__(self, hopper: bool = True):
        import ml_dtypes

        self.calls: Counter = Counter()
        self.bfloat16 = ml_dtypes.bfloat16  # CuPy 14's is ml_dtypes'
        device = StandInDevice(0, hopper)
        stream = SimpleNamespace(ptr=0, done=True, synchronize=lambda: None)
        pool = SimpleNamespace(
            used_bytes=lambda: 0,
            total_bytes=lambda: 0,
            free_bytes=lambda: 0,
            get_limit=lambda: 0,
            free_all_blocks=lambda: None,
        )
        runtime = SimpleNamespace(
            getDevice=lambda: 0,
            getDeviceCount=lambda: 1,
            memGetInfo=lambda: (2**36, 2**37),
            getDeviceProperties=lambda index: {"name": b"a stand-in for a GPU, on the CPU"},
        )
        allocator = [lambda size: None]
        self.cuda = SimpleNamespace(
            Device=lambda index=0: device,
            runtime=runtime,
            Event=_Event,
            get_elapsed_time=lambda start, end: (end.time - start.time) * 1e3,
            get_current_stream=lambda: stream,
            get_allocator=lambda: allocator[0],
            set_allocator=lambda f: allocator.__setitem__(0, f),
            memory=SimpleNamespace(OutOfMemoryError=MemoryError),
        )
        self.random = SimpleNamespace(
            default_rng=lambda *args, **kwargs: Generator(*args, counted=self._counted, **kwargs)
        )
        self.get_default_memory_pool = lambda: pool

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(np, name)
        if callable(value) and not isinstance(value, type):
            value = self._counted(name, value)
        setattr(self, name, value)  # found here from now on, without __getattr__
        return value

    def _counted(self, name, function):
        calls = self.calls

        def call(*args, **kwargs):
            calls[name] += 1
            return wrap(function(*args, **kwargs))

        return call

    def ascontiguousarray(self, a, dtype=None):
        self.calls["ascontiguousarray"] += 1
        same_dtype = dtype is None or np.dtype(dtype) == a.dtype
        if isinstance(a, StandInArray) and a.flags.c_contiguous and same_dtype:
            return a  # CuPy's: the array itself
        return wrap(np.ascontiguousarray(a, dtype=dtype))

    def asarray(self, a, dtype=None):
        self.calls["asarray"] += 1
        if isinstance(a, StandInArray):
            return a if dtype is None else a.astype(dtype)
        return np.array(a, dtype=dtype).view(StandInArray)

    array = asarray

    def asnumpy(self, a):
        self.calls["asnumpy"] += 1
        return np.array(a).view(np.ndarray)


def stand_in_cupyx(cupy: StandInCupy) -> dict:
    """``sys.modules`` entries for what the library takes from ``cupyx``: ``scatter_add``
    (NumPy's ``add.at``) and ``scipy.special.erf`` (the CPU backend's), counted by ``cupy``
    as ``cupyx.scatter_add`` and ``cupyx.erf``."""
    from minitorch_amp.backend import special

    def scatter_add(target, index, values):
        np.add.at(np.asarray(target), np.asarray(index), np.asarray(values))

    cupyx = types.ModuleType("cupyx")
    cupyx.scatter_add = cupy._counted("cupyx.scatter_add", scatter_add)
    cupyx.scipy = types.ModuleType("cupyx.scipy")
    cupyx.scipy.special = types.ModuleType("cupyx.scipy.special")
    cupyx.scipy.special.erf = cupy._counted("cupyx.erf", special.erf)
    return {"cupyx": cupyx, "cupyx.scipy": cupyx.scipy, "cupyx.scipy.special": cupyx.scipy.special}


@contextlib.contextmanager
def module_stood_in(name: str, module):
    """``sys.modules[name]`` is ``module`` inside, what it was (or nothing) after.

    NOTE: only this key: ``mock.patch.dict(sys.modules)`` would also drop, on exit, every
    module imported inside (torch, by the GPT's step), and a second import of torch fails.
    """
    before = sys.modules.get(name)
    sys.modules[name] = module
    try:
        yield
    finally:
        if before is None:
            del sys.modules[name]
        else:
            sys.modules[name] = before


class StandIn(SimpleNamespace):
    """What :func:`stand_in` yields: ``cupy`` (the :class:`StandInCupy`), ``launches`` (the
    raw launches, ``(file, kernel name)``), ``calls`` (CuPy's, by function name)."""

    def clear(self) -> None:
        self.launches.clear()
        self.calls.clear()


@contextlib.contextmanager
def stand_in(hopper: bool = True, cupy=None, launch=None):
    """CuPy and the GPU stood in for (see the module docstring) until the block ends; the
    device is set back to the CPU after it. ``cupy``: a :class:`StandInCupy` of one's own
    (``launch_count.py``'s counts what it computes); ``launch``: called for each raw launch
    with ``kernels.launch``'s arguments, instead of recording it.

    NOTE: the package is imported here, not above: ``before_after.py`` stands in for the GPU
    under two versions of it, each imported in turn (this is any version's stand-in; the
    C files' switch is patched only where a version has them).
    """
    import importlib
    import importlib.util

    import minitorch_amp as mt
    from minitorch_amp.backend import device as _device
    from minitorch_amp.backend import gemm_sm90, kernels, tensor_maps

    cupy = cupy if cupy is not None else StandInCupy(hopper)
    launches: list = []

    def encode_now(array, box):  # what the map describes, in its first 56 bytes
        described = (array.data.ptr, *array.shape, array.strides[0], *box, array.itemsize)
        tensor_map = np.zeros(1, tensor_maps.TENSOR_MAP)
        tensor_map.view(np.uint64)[: len(described)] = described
        return tensor_map[0]

    def record(file, name, grid, block, args, shared_mem=0):
        launches.append((file, name))

    launch = launch or record
    launch.__module__, launch.__qualname__ = kernels.__name__, "launch"  # (host_parts' label)

    with contextlib.ExitStack() as stack:
        for owner, name, value in (
            (_device, "cupy", cupy),
            (kernels, "launch", launch),
            (gemm_sm90, "device_is_hopper", lambda: hopper),
            (gemm_sm90, "sm_count", lambda: SM_COUNT),
            (tensor_maps, "_encode_now", encode_now),
        ):
            stack.enter_context(mock.patch.object(owner, name, value))
        if importlib.util.find_spec("minitorch_amp.backend.host_c") is not None:
            host_c = importlib.import_module("minitorch_amp.backend.host_c")
            stack.enter_context(mock.patch.object(host_c, "load", lambda name: None))
        for name, module in stand_in_cupyx(cupy).items():
            stack.enter_context(module_stood_in(name, module))
        stack.enter_context(np.errstate(all="ignore"))  # the kernels compute nothing
        stack.callback(mt.set_device, "cpu")
        yield StandIn(cupy=cupy, launches=launches, calls=cupy.calls)
