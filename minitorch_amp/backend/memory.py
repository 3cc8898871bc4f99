"""Device memory accounting: live bytes, peak bytes and free bytes of each device.

* **GPU** (CuPy): live bytes are what CuPy's memory pool hands out, free bytes are the CUDA
  runtime's free memory plus what the pool holds unused, capped by the pool's limit
  (``set_memory_limit`` sets it), so a limit makes out-of-memory paths reproducible on a big
  GPU. The peak is sampled whenever a tensor takes an array.
* **CPU** (NumPy): the same numbers over *tensor storage*: every array a Tensor holds is
  counted once (views count their owner), from the moment a tensor takes it until the last
  reference to it dies. A budget (``set_memory_limit``; unlimited by default) turns the CPU
  into a device with a fixed amount of memory: taking an array past the budget raises
  :class:`OutOfMemoryError`, so memory-checking code runs and is tested without a GPU.
  Arrays that no tensor holds (NumPy temporaries inside an op, host copies) are host memory
  and not counted. Neither are arrays under 1 KiB (``MIN_TRACKED_BYTES``): watching each one
  die costs more than a tiny op itself, so, like an allocator's small-object pool, they are
  below the accounting's granularity.
"""

from __future__ import annotations

import functools
import os
import weakref

import numpy as np

from . import device as _device


class OutOfMemoryError(RuntimeError):
    """A device has not enough free memory for an allocation."""


# Every exception that means "the device is full": ours and CuPy's.
OOM_ERRORS: tuple = (OutOfMemoryError,)
if _device.cupy is not None:
    OOM_ERRORS += (_device.cupy.cuda.memory.OutOfMemoryError,)


MIN_TRACKED_BYTES = 1024


class _Ledger:
    """The CPU device's accounting: one entry per owner array a tensor holds."""

    def __init__(self):
        self.live: dict[int, tuple] = {}  # id(owner) -> (weakref to owner, nbytes)
        self.allocated = 0
        self.peak = 0
        self.limit: int | None = None


_cpu = _Ledger()
_gpu_peak: dict[int, int] = {}
_gpu_reserved_peak: dict[int, int] = {}


def _owner(array):
    """The array that owns ``array``'s memory (``array`` itself unless it is a view)."""
    base = array.base
    while isinstance(base, np.ndarray):
        array, base = base, base.base
    return array


def _release(key: int, ref) -> None:
    entry = _cpu.live.get(key)
    if entry is not None and entry[0] is ref:  # not a newer array that reused the id
        del _cpu.live[key]
        _cpu.allocated -= entry[1]


def track(array, enforce: bool = True) -> None:
    """Count ``array``'s storage as device memory from now until it is freed.

    Called whenever a Tensor takes an array. Counting the same storage twice is a no-op.

    Raises:
        OutOfMemoryError: on the CPU, the array would take the live bytes past the budget
            (never with ``enforce=False``, which restoring code uses for memory it held before).
    """
    cupy = _device.cupy
    if cupy is not None and isinstance(array, cupy.ndarray):  # (asked first: a stand-in's
        _sample_gpu_peak(array.device.id)  # CuPy arrays, benchmarks/gpu_stand_in.py, are
        return  # NumPy arrays too)
    if not isinstance(array, np.ndarray):
        return
    owner = array if array.base is None else _owner(array)
    nbytes = owner.nbytes
    if nbytes < MIN_TRACKED_BYTES:
        return
    key = id(owner)
    entry = _cpu.live.get(key)
    if entry is not None and entry[0]() is owner:
        return
    if enforce and _cpu.limit is not None and _cpu.allocated + nbytes > _cpu.limit:
        raise OutOfMemoryError(
            f"out of memory on cpu: {nbytes} bytes requested, "
            f"{max(_cpu.limit - _cpu.allocated, 0)} available "
            f"(budget {_cpu.limit} bytes, {_cpu.allocated} in use). Free tensors, use a "
            "smaller batch, or raise the budget with minitorch_amp.device.set_memory_limit()."
        )
    _cpu.live[key] = (weakref.ref(owner, functools.partial(_release, key)), nbytes)
    _cpu.allocated += nbytes
    if _cpu.allocated > _cpu.peak:
        _cpu.peak = _cpu.allocated


def device_place(device):
    """The Place a memory function's ``device`` names: None (the current device), a device
    string, a Place, or an int N (GPU N, as Paddle's ``paddle.device.cuda`` functions and
    PyTorch's ``torch.cuda`` ones take it)."""
    if device is None:
        return _device.current_place()
    if isinstance(device, (int, np.integer)) and not isinstance(device, (bool, np.bool_)):
        if device < 0:
            raise _device.DeviceError(
                f"device {device!r}: an int names a GPU by its number, 0 or more; use 'cpu' "
                "for the host"
            )
        return _device.parse_device(f"gpu:{int(device)}")
    return _device.parse_device(device)


def _pool():
    return _device.cupy.get_default_memory_pool()


def _sample_gpu_peak(index: int) -> None:
    """Fold device ``index``'s pool usage into its peak. Every tensor that takes a CuPy
    array samples it, so on the current device (the usual case) no device is switched to:
    CuPy's ``Device`` context calls the runtime to set the device on the way out."""
    cupy = _device.cupy
    if cupy.cuda.runtime.getDevice() == index:
        used = _pool().used_bytes()
    else:
        with cupy.cuda.Device(index):
            used = _pool().used_bytes()
    if used > _gpu_peak.get(index, 0):
        _gpu_peak[index] = used


def memory_allocated(device=None) -> int:
    """Bytes of device memory in use by tensors (GPU: by CuPy's pool)."""
    place = device_place(device)
    if place.kind == "cpu":
        return _cpu.allocated
    with _device.cupy.cuda.Device(place.index):
        return int(_pool().used_bytes())


def max_memory_allocated(device=None) -> int:
    """The peak of :func:`memory_allocated` since start or the last reset."""
    place = device_place(device)
    if place.kind == "cpu":
        return _cpu.peak
    _sample_gpu_peak(place.index)
    return _gpu_peak[place.index]


def memory_reserved(device=None) -> int:
    """Bytes the allocator holds on ``device``: in use by tensors or cached for reuse (Paddle's
    ``paddle.device.cuda.memory_reserved``). GPU: CuPy's pool total; CPU: NumPy keeps no
    cache, so it is :func:`memory_allocated`."""
    place = device_place(device)
    if place.kind == "cpu":
        return _cpu.allocated
    with _device.cupy.cuda.Device(place.index):
        return int(_pool().total_bytes())


def max_memory_reserved(device=None) -> int:
    """The peak of :func:`memory_reserved` since start (CPU: :func:`max_memory_allocated`).

    NOTE: on a GPU the pool only grows until its cache is freed, so the peak is sampled when
    it is read and before :func:`empty_cache` frees; CuPy also frees the cache itself to
    retry an allocation that ran out of memory, which can hide a peak from before then.
    """
    place = device_place(device)
    if place.kind == "cpu":
        return _cpu.peak
    reserved = memory_reserved(place)
    peak = _gpu_reserved_peak[place.index] = max(_gpu_reserved_peak.get(place.index, 0), reserved)
    return peak


def empty_cache() -> None:
    """Give the memory the allocator caches on the current GPU back to the driver (Paddle's
    ``paddle.device.cuda.empty_cache``; tensors keep theirs). The CPU caches nothing: a no-op."""
    place = _device.current_place()
    if place.kind == "gpu":
        max_memory_reserved(place)  # the peak, before the cache goes
        with _device.cupy.cuda.Device(place.index):
            _pool().free_all_blocks()


def reset_max_memory_allocated(device=None) -> None:
    """Start measuring the peak again from what is allocated now."""
    place = device_place(device)
    if place.kind == "cpu":
        _cpu.peak = _cpu.allocated
    else:
        _gpu_peak[place.index] = memory_allocated(place)


def memory_available(device=None) -> int:
    """Bytes a new allocation on ``device`` can still take.

    CPU: the budget minus what is in use, or the machine's available memory without a budget.
    GPU: free memory of the CUDA runtime plus what CuPy's pool holds unused, capped by the
    pool's limit.
    """
    place = device_place(device)
    if place.kind == "cpu":
        if _cpu.limit is not None:
            return max(_cpu.limit - _cpu.allocated, 0)
        return _host_available()
    cupy = _device.cupy
    with cupy.cuda.Device(place.index):
        pool = _pool()
        free = int(cupy.cuda.runtime.memGetInfo()[0]) + int(pool.free_bytes())
        limit = int(pool.get_limit())
        if limit:
            free = min(free, limit - int(pool.used_bytes()))
    return max(free, 0)


def _host_available() -> int:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not POSIX: no way to ask, so no limit
        return 2**63 - 1


def set_memory_limit(nbytes: int | None, device=None) -> None:
    """Give ``device`` a memory budget of ``nbytes`` (None: unlimited).

    CPU: allocations past the budget raise :class:`OutOfMemoryError`. GPU: sets CuPy's
    memory-pool limit.

    Raises:
        ValueError: ``nbytes`` is negative or not an integer (a bool is not a number of bytes);
            on the CPU, below what tensors already hold (nothing changes then).
    """
    is_bool = isinstance(nbytes, (bool, np.bool_))
    if nbytes is not None and (is_bool or not isinstance(nbytes, (int, np.integer)) or nbytes < 0):
        kind = "a bool" if is_bool else type(nbytes).__name__
        raise ValueError(
            "the memory limit must be a non-negative int number of bytes or None (unlimited), "
            f"got {nbytes!r} ({kind}); for example set_memory_limit(2 * 1024**3) for 2 GiB"
        )
    place = device_place(device)
    if place.kind == "cpu":
        if nbytes is not None and nbytes < _cpu.allocated:
            raise ValueError(
                f"a budget of {nbytes} bytes is below the {_cpu.allocated} bytes tensors "
                "already hold on the cpu; free tensors first or choose a larger budget"
            )
        _cpu.limit = None if nbytes is None else int(nbytes)
    else:
        with _device.cupy.cuda.Device(place.index):
            _pool().set_limit(size=0 if nbytes is None else int(nbytes))


def get_memory_limit(device=None) -> int | None:
    """The budget set by :func:`set_memory_limit`, or None when unlimited."""
    place = device_place(device)
    if place.kind == "cpu":
        return _cpu.limit
    with _device.cupy.cuda.Device(place.index):
        limit = int(_pool().get_limit())
    return limit or None
