"""Which array library runs the maths (NumPy or CuPy), and on which device.

The choice is made once, at import:

* ``MINITORCH_AMP_DEVICE=cpu`` forces NumPy; ``=gpu`` (or ``cuda``, ``gpu:N``, ``cuda:N``:
  the strings ``.to()`` takes) forces CuPy and fails loudly without it.
* Otherwise CuPy is used when it imports, a CUDA device answers, and the two CUDA libraries
  every run needs load: NVRTC (CuPy compiles every kernel with it, ours and its own) and
  cuBLAS. Else NumPy, and :data:`cpu_reason` says why.

Nothing is printed at import. The choice is logged on the ``minitorch_amp`` logger: at INFO
when CuPy is simply not installed (silent unless you ask, e.g.
``logging.basicConfig(level=logging.INFO)``), at WARNING when CuPy is installed but cannot run
(Python prints warnings of a logger nobody configured to stderr). ``python -m minitorch_amp``
reports the choice and its reason.

After that, :func:`set_device` switches the default device for new tensors (Paddle's
``paddle.set_device``). :func:`get_array_module` is the only numpy/cupy switch in the code base:
everything else asks it for ``xp``.
"""

from __future__ import annotations

import importlib
import logging
import os

import numpy as np

# NOTE: kernels imports this module back. backend/__init__.py imports this module first, so
# this line runs kernels' module code while this one is half-run, which kernels (and the
# graphs and sync modules it imports) only bind; kernels is complete before the probe below.
from . import dtypes, kernels
from .device_errors import DEVICE_STRING, DeviceError, device_of_wrong_type, unknown_device
from .place import CPU, CPUPlace, CUDAPlace, Place, _named_place  # noqa: F401 (re-exported)

_ENV = "MINITORCH_AMP_DEVICE"
logger = logging.getLogger("minitorch_amp")

# Compiled once at start-up: it needs NVRTC and CUDA's float16 header, as every kernel does.
PROBE = kernels.register("probe.cu", names=("minitorch_amp_probe",))
_CTK_HINT = (
    "install CUDA's libraries with CuPy's 'ctk' extra (`pip install \"cupy-cuda12x[ctk]\"`, "
    "which the 'cuda12' and 'cuda13' extras of minitorch_amp do) or a CUDA toolkit"
)


def _probe_cupy():
    """Return ``(cupy_module, None)`` when a GPU is usable, else ``(None, reason)``.

    Usable means: CuPy imports, a device answers, a kernel compiles with NVRTC and loads, and
    cuBLAS gives a handle. A driver-only machine with CuPy but without CUDA's libraries fails
    here, at start-up, instead of at the first kernel compile.
    """
    try:
        cupy = importlib.import_module("cupy")
    except ImportError as exc:  # not installed, or a broken install
        return None, f"CuPy is not installed ({exc}); install the 'cuda12' or 'cuda13' extra"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # driver missing, no device, wrong CUDA version
        return None, f"CuPy is installed but no GPU was found ({exc}); check the NVIDIA driver"
    if count < 1:
        return None, "CuPy is installed but no GPU was found; check the NVIDIA driver"
    try:
        _load_probe_kernel(cupy)
    except Exception as exc:  # libnvrtc missing or too old, headers missing
        return None, (
            f"CuPy found {count} GPU(s) but cannot compile a kernel with NVRTC "
            f"({type(exc).__name__}: {_first_line(exc)}); {_CTK_HINT}"
        )
    try:
        cupy.cuda.device.get_cublas_handle()
    except Exception as exc:  # libcublas missing
        return None, (
            f"CuPy found {count} GPU(s) but cannot load cuBLAS "
            f"({type(exc).__name__}: {_first_line(exc)}); {_CTK_HINT}"
        )
    return cupy, None


def _load_probe_kernel(candidate) -> None:
    """Compile ``cuda/probe.cu`` and load it on the current device through the loader
    (``kernels.get_function``, what every launch uses), with ``candidate`` as CuPy.

    NOTE: the loader compiles with this module's :data:`cupy`, which is chosen only after
    the probe passed, so ``candidate`` stands in for it meanwhile, and the choice made so far
    comes back whatever happens.
    """
    global cupy
    chosen, cupy = cupy, candidate
    try:
        kernels.get_function(PROBE.file, PROBE.names[0])
    finally:
        cupy = chosen


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no message"


def _choose_backend():
    """``(cupy or None, 'cpu' | 'gpu' | 'gpu:N')``: the backend and the first default device.

    ``MINITORCH_AMP_DEVICE`` takes the device strings ``.to()`` takes: ``cpu``, ``gpu``,
    ``cuda``, ``gpu:N``, ``cuda:N`` (N chooses the default GPU).
    """
    raw = os.environ.get(_ENV, "")
    forced = raw.strip().lower().replace("cuda", "gpu")
    if forced and not DEVICE_STRING.match(forced):
        raise DeviceError(
            f"{_ENV}={raw!r} is not understood; use 'cpu' or 'gpu' ('cuda', 'gpu:N' and "
            f"'cuda:N' work too), or unset it to choose the GPU when one is usable"
        )
    if forced.startswith("cpu"):
        if forced != "cpu":
            raise DeviceError(f"{_ENV}={raw!r}: the CPU has no device number; use 'cpu'")
        return None, "cpu"
    cupy, reason = _probe_cupy()
    if forced and cupy is None:
        raise DeviceError(
            f"{_ENV}={raw} but {reason}. Install CuPy from the repository root with "
            '`python -m pip install -e ".[cuda12]"` (or ".[cuda13]") on a machine with an NVIDIA '
            f"GPU, or set {_ENV}=cpu."
        )
    if forced.startswith("gpu:"):
        count = cupy.cuda.runtime.getDeviceCount()
        if int(forced[4:]) >= count:
            raise DeviceError(
                f"{_ENV}={raw!r}: this machine has {count} GPU(s); use 'gpu:0' to "
                f"'gpu:{count - 1}', or 'gpu' for the first"
            )
        return cupy, forced
    if cupy is None:
        global cpu_reason
        cpu_reason = reason
        installed = not reason.startswith("CuPy is not installed")
        logger.log(
            logging.WARNING if installed else logging.INFO,
            "minitorch_amp: running on the CPU with NumPy (%s).%s",
            reason,
            f" Set {_ENV}=cpu to choose the CPU without this message." if installed else "",
        )
        return None, "cpu"
    return cupy, "gpu"


cupy = None  # no GPU until the probe below passes (it stands its candidate in meanwhile)

cpu_reason: str | None = None
"""Why the CPU was chosen at import (None when on a GPU, or when ``MINITORCH_AMP_DEVICE=cpu``)."""

cupy, _initial_kind = _choose_backend()


def is_compiled_with_cuda() -> bool:
    """True when CuPy imported and a GPU answered at import time (Paddle's name)."""
    return cupy is not None


def device_count() -> int:
    """Number of usable CUDA devices (0 on a CPU-only machine)."""
    return 0 if cupy is None else int(cupy.cuda.runtime.getDeviceCount())


def synchronize(place: Place) -> None:
    """Wait for all queued GPU work on ``place`` (a no-op on the CPU)."""
    if place.kind == "gpu":
        cupy.cuda.Device(place.index).synchronize()


def parse_device(device, where: str = "") -> Place:
    """Turn ``'cpu'``, ``'gpu'``, ``'gpu:1'``, ``'cuda:0'`` or a :class:`Place` into a Place.

    Args:
        device: the device.
        where: the call to name in an error message, e.g. ``'Tensor.to()'``.

    Raises:
        DeviceError: an unknown device string (a dtype name is called one), a device of
            the wrong type, or a GPU this machine cannot provide. It is also a ValueError,
            TypeError and RuntimeError (``backend/device_errors.py``).
    """
    if isinstance(device, Place):
        place = device
    elif isinstance(device, str):
        place = _named_place(device)
        if place is None:
            raise unknown_device(device, dtypes.SUPPORTED, where)
    else:
        raise device_of_wrong_type(device, where)
    if place.kind == "gpu":
        prefix = f"{where}: " if where else ""
        if cupy is None:
            _, reason = _probe_cupy()
            raise DeviceError(f"{prefix}cannot use {device!r}: {reason}; or run on the CPU: 'cpu'")
        count = cupy.cuda.runtime.getDeviceCount()
        if place.index >= count:
            raise DeviceError(
                f"{prefix}cannot use {device!r}: this machine has {count} GPU(s); use "
                f"'gpu:0' to 'gpu:{count - 1}', or 'cpu'"
            )
    return place


_current = CPU if _initial_kind == "cpu" else parse_device(_initial_kind)
if _current.index:  # MINITORCH_AMP_DEVICE=gpu:N with N > 0
    cupy.cuda.Device(_current.index).use()


def set_device(device) -> Place:
    """Make ``device`` the default for new tensors; returns its Place (Paddle's ``set_device``)."""
    global _current
    place = parse_device(device)
    _current = place
    if place.kind == "gpu":
        cupy.cuda.Device(place.index).use()
    return place


def get_device() -> str:
    """The default device as a string: ``'cpu'`` or ``'gpu:0'``."""
    return str(_current)


def current_place() -> Place:
    return _current


def xp_for(place: Place):
    """The array module that holds tensors on ``place``."""
    return np if place.kind == "cpu" else cupy


def get_array_module(*arrays):
    """``cupy`` if any argument is a CuPy array, else ``numpy``: the one numpy/cupy switch."""
    if cupy is not None:
        for a in arrays:
            if isinstance(a, cupy.ndarray):
                return cupy
    return np


def place_of(array) -> Place:
    """The Place of a NumPy or CuPy array."""
    if cupy is not None and isinstance(array, cupy.ndarray):
        return Place("gpu", array.device.id)
    return CPU


def to_place(array, place: Place):
    """Copy ``array`` to ``place`` (no copy when it is already there)."""
    if place.kind == "cpu":
        if cupy is not None and isinstance(array, cupy.ndarray):
            return cupy.asnumpy(array)
        return array
    with cupy.cuda.Device(place.index):
        if isinstance(array, cupy.ndarray) and array.device.id == place.index:
            return array
        if array.dtype.char == "E" and array.dtype.kind == "V":  # ml_dtypes.bfloat16
            reason = bfloat16_unsupported(place)
            if reason is not None:
                raise DeviceError(f"cannot put a bfloat16 array on {place}: {reason}")
        return cupy.asarray(array)


def asnumpy(array) -> np.ndarray:
    """A NumPy copy (or the array itself when it already is one)."""
    if cupy is not None and isinstance(array, cupy.ndarray):
        return cupy.asnumpy(array)
    return np.asarray(array)


def is_array(value) -> bool:
    """True for a NumPy or CuPy ndarray."""
    return isinstance(value, np.ndarray) or (cupy is not None and isinstance(value, cupy.ndarray))


def bfloat16_unsupported(place: Place) -> str | None:
    """Why ``place`` cannot hold and compute bfloat16 tensors, or None when it can.

    The CPU always can: NumPy with ``ml_dtypes`` emulates it (float32 arithmetic, rounded to
    nearest even bfloat16 after each op, as a GPU kernel does). A GPU needs:

    * compute capability 8.0 or newer (Ampere): bfloat16 arithmetic and tensor cores;
    * CuPy 14 or newer, whose arrays take ``ml_dtypes.bfloat16`` as their dtype (CuPy 13
      has no bfloat16 dtype at all). minitorch_amp's own kernels (casts, unscale, the fused
      optimizers, the GEMM) use ``__nv_bfloat16`` on those arrays' bytes.
    """
    if place.kind == "cpu":
        return None
    version = str(getattr(cupy, "__version__", "0"))
    if int(version.split(".")[0] or 0) < 14:
        return (
            f"CuPy {version} has no bfloat16 dtype (CuPy 14 added it through "
            "ml_dtypes); upgrade CuPy, or keep bfloat16 tensors on the CPU"
        )
    capability = int(cupy.cuda.Device(place.index).compute_capability)
    if capability < 80:
        return (
            f"GPU {place.index} has compute capability {capability // 10}.{capability % 10}; "
            "bfloat16 needs 8.0 or newer (Ampere); use float16 with a GradScaler"
        )
    return None
