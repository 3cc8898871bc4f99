"""CUDA graphs: record the GPU work a stretch of Python queues, then replay it with one launch.

A Python engine spends several microseconds of host time per kernel launch; on a fast GPU a
small training step is over before Python has queued it, so the GPU idles. Stream capture
(``cudaStreamBeginCapture``) records every kernel queued on a stream, with its arguments,
into a graph instead of running it; a replay launches the whole graph at once. What the
recorded kernels read and write are fixed device addresses, so three rules follow:

1. **No host work inside.** A host read cannot be recorded (it would read a value of the
   capture, not of the replay), nor can an upload of host data, and CuPy refuses cuBLAS
   calls while capturing. Each is an error during capture.
2. **Memory of its own.** Arrays allocated during capture come from a private pool
   (:class:`Capture` holds it, as PyTorch's graph pools do): a replay rewrites them, so no
   allocation made after the capture may ever be handed one of their blocks.
3. **Host values live on the device.** A value the host computes every step (the learning
   rate a scheduler sets) is a kernel argument frozen at capture. :class:`HostFed` keeps such
   a value in a device buffer instead: written when it changes in eager steps, and written
   again from its source before every replay.

``minitorch_amp.device.cuda.graphs`` is the public API (Paddle's ``CUDAGraph`` and PyTorch's
``graph`` context manager) on top of :class:`Capture`.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools

import numpy as np

from . import device as _device

__all__ = ["Capture", "GraphError", "HostFed", "active", "is_supported"]

CAPTURE_MODES = {"global": 0, "thread_local": 1, "relaxed": 2}  # cudaStreamCaptureMode


class GraphError(RuntimeError):
    """A CUDA graph cannot be captured or replayed here, or something inside it broke a rule."""


def is_supported() -> bool:
    """CuPy is running on an NVIDIA GPU (stream capture is CUDA's, not HIP's)."""
    cupy = _device.cupy
    return cupy is not None and not cupy.cuda.runtime.is_hip


_active: Capture | None = None


def active() -> Capture | None:
    """The capture in progress in this process, if any."""
    return _active


def refuse_in_capture(what: str, why: str) -> None:
    """Raise a :class:`GraphError` if a capture is in progress (``what`` cannot be recorded)."""
    if _active is not None:
        raise GraphError(f"{what} cannot be captured in a CUDA graph: {why}")


class Capture:
    """One graph: capture GPU work queued on the current device, then replay it.

    Args:
        device_id: the GPU to capture on.
        mode: ``'thread_local'``, ``'global'`` or ``'relaxed'`` (cudaStreamCaptureMode).
        pool: a private memory pool to share with another capture (default: a new one).
    """

    def __init__(self, device_id: int, mode: str = "thread_local", pool=None):
        if not is_supported():
            raise GraphError(
                "CUDA graphs need CuPy on an NVIDIA GPU, and this process computes with NumPy "
                "on the CPU; run the step eagerly (is_cuda_graph_supported() says so in advance)"
            )
        if mode not in CAPTURE_MODES:
            raise ValueError(f"capture mode must be one of {sorted(CAPTURE_MODES)}, got {mode!r}")
        cupy = _device.cupy
        self.device_id = device_id
        self.mode = mode
        self.pool = pool if pool is not None else cupy.cuda.MemoryPool()
        self.graph = None
        self.refreshers: dict[int, tuple] = {}  # id(HostFed) -> (HostFed, source)
        self.keep_alive: list = []  # device arrays the graph reads that others might free
        self.scratch: dict = {}  # key -> a device array made (and zeroed) inside this graph
        with cupy.cuda.Device(device_id):
            self.stream = cupy.cuda.Stream(non_blocking=True)
        self._exit = None

    def begin(self) -> None:
        """Start recording: until :meth:`end`, queued GPU work is recorded, not run."""
        global _active
        if _active is not None:
            raise GraphError("a CUDA graph capture is already in progress; end it first")
        if self.graph is not None:
            raise GraphError("this graph was captured already; reset() it to capture again")
        cupy = _device.cupy
        with contextlib.ExitStack() as stack:  # (closed again if anything below raises)
            stack.enter_context(cupy.cuda.Device(self.device_id))
            previous = cupy.cuda.get_current_stream()
            self.stream.wait_event(previous.record())  # the capture sees the eager results
            stack.enter_context(cupy.cuda.using_allocator(functools.partial(_malloc, self.pool)))
            stack.enter_context(self.stream)
            self.stream.begin_capture(CAPTURE_MODES[self.mode])
            self._exit = stack.pop_all()  # begun: end() or abort() closes them
        self.refreshers = {}
        self.keep_alive = []
        self.scratch = {}
        _active = self

    def end(self) -> None:
        """Stop recording and instantiate the graph."""
        global _active
        if _active is not self:
            raise GraphError("end() without a matching begin() on this graph")
        try:
            self.graph = self.stream.end_capture()
        finally:
            _active = None
            self._exit.close()
            self._exit = None

    def abort(self) -> None:
        """End a capture that failed halfway and drop what it recorded."""
        global _active
        if _active is self:
            with contextlib.suppress(Exception):
                self.stream.end_capture()
            _active = None
            self._exit.close()
            self._exit = None
        self.graph = None

    def replay(self) -> None:
        """Write the host-fed values from their sources, then launch the graph once."""
        if self.graph is None:
            raise GraphError("replay() before the graph was captured: call capture_end() first")
        cupy = _device.cupy
        with cupy.cuda.Device(self.device_id):
            for buffer, source in self.refreshers.values():
                buffer.write(source())
            self.graph.launch(cupy.cuda.get_current_stream())

    def reset(self) -> None:
        """Drop the graph; its pool's memory goes back when no tensor uses it any more."""
        self.graph = None
        self.refreshers = {}
        self.keep_alive = []
        self.scratch = {}


def _malloc(pool, size: int):
    """The private pool's allocation, in relaxed capture mode: growing the pool calls
    cudaMalloc, which the global and thread-local modes would refuse (Paddle does the same)."""
    with _relaxed_capture_mode():
        return pool.malloc(size)


@contextlib.contextmanager
def _relaxed_capture_mode():
    exchange = _driver_exchange()
    if exchange is None:
        yield
        return
    mode = ctypes.c_int(CAPTURE_MODES["relaxed"])
    exchange(ctypes.byref(mode))
    try:
        yield
    finally:
        exchange(ctypes.byref(mode))  # swaps the previous mode back


@functools.cache
def _driver_exchange():
    """``cuThreadExchangeStreamCaptureMode`` from the driver, or None where it is missing."""
    try:
        return ctypes.CDLL("libcuda.so.1").cuThreadExchangeStreamCaptureMode
    except (OSError, AttributeError):
        return None


class HostFed:
    """A one-element device array whose value the host computes (a learning rate).

    Kernels read the value from device memory, so a captured graph picks up a new value
    without being captured again. :meth:`follow` is called wherever the value is needed:
    in an eager step it writes the source's value when it changed (a fill kernel with the
    value as its argument: no upload, no synchronisation); during a capture it registers
    the source with the capture, which writes the value before every replay.

    Example:
        >>> import numpy as np
        >>> lr = HostFed(_device.CPU, np.float64)
        >>> lr.follow(lambda: 0.1)
        >>> lr.array
        array([0.1])
    """

    __slots__ = ("array", "value")

    def __init__(self, place, dtype):
        # NOTE: made during a capture, its zero-fill would be recorded and would overwrite
        # the value that every replay writes first.
        refuse_in_capture("a new host-fed device value", "run the step eagerly once first")
        xp = _device.xp_for(place)
        if place.kind == "gpu":
            with _device.cupy.cuda.Device(place.index):
                self.array = xp.zeros(1, dtype=dtype)
        else:
            self.array = xp.zeros(1, dtype=dtype)
        self.value = None

    def follow(self, source) -> None:
        """Make the buffer hold ``source()`` for the work queued next (see the class)."""
        if _active is not None:
            _active.refreshers[id(self)] = (self, source)
        else:
            self.write(source())

    def write(self, value) -> None:
        if value != self.value:
            if _device.get_array_module(self.array) is np:
                self.array.fill(value)
            else:
                with self.array.device:  # the fill runs on the buffer's GPU
                    self.array.fill(value)
            self.value = value
