"""PyTorch's spellings of the AMP region and the queries Paddle and PyTorch share.

``autocast(device_type, dtype=None, enabled=True, cache_enabled=None)`` is PyTorch's
``torch.autocast`` / ``torch.amp.autocast`` and ``cuda_autocast(enabled=True,
dtype=float16, cache_enabled=True)`` its ``torch.cuda.amp.autocast``. Both are
:class:`~minitorch_amp.amp.auto_cast` at level O1 (PyTorch's autocast is O1: listed ops in
low precision, the rest follow their inputs), so they nest with it, restore on exit and
decorate functions the same way.

NOTE: one AMP region covers every op here, whatever device it runs on; ``device_type`` is
checked (``'cuda'``, ``'gpu'`` or ``'cpu'``) and otherwise does not matter. PyTorch's CPU
autocast defaults to bfloat16; here ``dtype=None`` means float16 on every device, because
the CPU backend is the GPU's float16 arithmetic, emulated (see docs/porting.md).
"""

from __future__ import annotations

import re
import warnings

import numpy as np

from ..backend import device_errors as _errors
from ..backend.device import Place
from ..backend.dtypes import SUPPORTED, float16
from .auto_cast import amp_state, auto_cast

_DEVICE = re.compile(r"(cpu|gpu|cuda)(:\d+)?")
_DEVICE_TYPES = ("cuda", "gpu", "cpu")


def check_device(device, what: str) -> None:
    """Raise a ``DeviceError`` (a ValueError, as Paddle raises for ``'xxx'`` and for ``111``)
    unless ``device`` names a device kind minitorch_amp knows: a
    :class:`~minitorch_amp.Place`, or ``'cpu'``, ``'gpu'``, ``'gpu:N'``, ``'cuda'``,
    ``'cuda:N'``. Whether this machine has that device is not checked."""
    if isinstance(device, Place):
        return
    if not isinstance(device, str):
        raise _errors.device_of_wrong_type(device, what)
    if not _DEVICE.fullmatch(device.strip().lower()):
        raise _errors.unknown_device(device, SUPPORTED, what)


def _amp_dtype(dtype, device_type: str, enabled: bool) -> tuple[str, bool]:
    """``(dtype name, enabled)`` of the region PyTorch's ``dtype`` asks for (None: float16).

    As PyTorch: a disabled region takes any floating dtype (``autocast('cpu',
    dtype=torch.float32, enabled=False)``), and an enabled CPU region whose dtype is not
    float16 or bfloat16 warns and runs without autocast. A float32 CUDA region (PyTorch runs
    its listed ops in float32 then) is not offered: there is no such region here.
    """
    if dtype is None:
        return "float16", enabled
    name = dtype if isinstance(dtype, str) else getattr(dtype, "name", None)
    if isinstance(dtype, np.dtype):
        name = dtype.name
    if name in ("float16", "bfloat16"):
        return name, enabled
    if name in ("float32", "float64") and not enabled:
        return "float16", False
    if name in ("float32", "float64") and device_type == "cpu":
        warnings.warn(  # PyTorch's words
            "In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
            "CPU Autocast only supports dtypes of torch.bfloat16, torch.float16 currently.",
            UserWarning,
            stacklevel=3,  # the autocast(...) call
        )
        return "float16", False
    raise ValueError(
        f"autocast: dtype must be float16 or bfloat16 (the low-precision dtype the region "
        f"casts to), or a floating dtype with enabled=False, got {dtype!r}"
    )


def _check_flag(name: str, value) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"autocast: {name} must be True or False, got {value!r}")


class autocast(auto_cast):  # noqa: N801 - PyTorch's name; a context and a decorator
    """PyTorch's ``torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``.

    An ``auto_cast(level='O1')`` region: white ops (matmul, linear) in ``dtype``, black ops
    (softmax, losses, reductions) in float32, the rest following their inputs.

    Args:
        device_type: ``'cuda'``, ``'gpu'`` or ``'cpu'`` (checked; the region covers every op).
        dtype: ``float16`` (the default, also for ``'cpu'``) or ``bfloat16``; with
            ``enabled=False`` any floating dtype (``float32``) is accepted, and on ``'cpu'``
            an enabled float32 region warns and runs without AMP (both as PyTorch).
        enabled: False turns AMP off inside, also inside an enabled region.
        cache_enabled: False casts each float32 parameter anew at every use instead of once
            per region (None or True: cached).

    Raises:
        ValueError: an unknown device_type, a dtype that is no floating dtype, or an enabled
            float32 region on ``'cuda'``/``'gpu'``.
        TypeError: ``enabled`` or ``cache_enabled`` that is not a bool, e.g. a device string
            passed in the ``enabled`` slot.

    Example:
        >>> import minitorch_amp as mt
        >>> with mt.amp.autocast("cuda"):
        ...     y = mt.matmul(mt.ones([2, 2]), mt.ones([2, 2]))
        >>> y.dtype
        dtype('float16')
    """

    def __init__(self, device_type: str, dtype=None, enabled: bool = True, cache_enabled=None):
        if not isinstance(device_type, str) or device_type.lower() not in _DEVICE_TYPES:
            raise _errors.DeviceError(
                f"autocast: device_type must be 'cuda', 'gpu' or 'cpu', got {device_type!r}; "
                "use one of those (one region covers every device here)"
            )
        _check_flag("enabled", enabled)
        if cache_enabled is not None:
            _check_flag("cache_enabled", cache_enabled)
        self.device_type = device_type.lower()
        name, enabled = _amp_dtype(dtype, self.device_type, enabled)
        super().__init__(enable=enabled, level="O1", dtype=name)
        self._cache_casts = cache_enabled is not False


class cuda_autocast(autocast):  # noqa: N801
    """PyTorch's ``torch.cuda.amp.autocast(enabled=True, dtype=float16, cache_enabled=True)``:
    :class:`autocast` for ``'cuda'``. Its first argument is ``enabled``: a device string
    there is a TypeError, not a truthy flag."""

    def __init__(self, enabled: bool = True, dtype=float16, cache_enabled: bool = True):
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


def is_autocast_enabled(device_type=None) -> bool:
    """True inside an enabled AMP region (``auto_cast`` at OD/O1/O2, or ``autocast``).

    ``device_type`` (Paddle's device string, PyTorch's ``'cuda'``/``'cpu'``, or a Place) is
    checked and does not change the answer: one region covers every device.

    Example:
        >>> import minitorch_amp as mt
        >>> with mt.amp.auto_cast():
        ...     mt.is_autocast_enabled()
        True
        >>> mt.is_autocast_enabled()
        False
    """
    if device_type is not None:
        check_device(device_type, "is_autocast_enabled")
    return amp_state() is not None


def get_autocast_dtype(device_type=None) -> np.dtype:
    """The low-precision dtype of the enabled AMP region in force, else float16 (the default
    dtype of ``auto_cast`` and of PyTorch's CUDA autocast). Compares equal to the string
    too: ``get_autocast_dtype() == 'float16'`` (Paddle's test) and ``== mt.float16``.

    Example:
        >>> import minitorch_amp as mt
        >>> mt.amp.get_autocast_dtype()
        dtype('float16')
    """
    if device_type is not None:
        check_device(device_type, "get_autocast_dtype")
    state = amp_state()
    return float16 if state is None else state.dtype


def get_autocast_gpu_dtype() -> np.dtype:
    """:func:`get_autocast_dtype` for the GPU (PyTorch's and Paddle's name)."""
    return get_autocast_dtype()


def get_autocast_cpu_dtype(device_type=None) -> np.dtype:
    """:func:`get_autocast_dtype`: the same region and dtype for the CPU (Paddle's rule; PyTorch
    keeps a separate CPU setting whose default is bfloat16)."""
    return get_autocast_dtype(device_type)
