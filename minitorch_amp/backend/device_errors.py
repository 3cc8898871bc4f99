"""One error type, and one message style, for every device or dtype argument that is wrong.

Wherever a device or a dtype is given (``Tensor.to``, ``Layer.to``, ``set_device``, a
``place=`` or ``dtype=`` argument, ``MINITORCH_AMP_DEVICE``), a mistake raises
:class:`DeviceError`, whose message says three things: what was given, what is accepted, and
what to do. A dtype given where a device belongs (``Layer.to('float16', 'cpu')``), or the
other way round, is named as such.

:class:`DeviceError` subclasses the three types these mistakes raised before, so code that
catches any of them keeps working: ``ValueError`` (an unknown device string; Paddle's type for
it), ``TypeError`` (an unsupported dtype, a device of the wrong type) and ``RuntimeError``
(a GPU asked for on a machine without one). NumPy's ``AxisError(ValueError, IndexError)``
does the same.

Example:
    >>> import minitorch_amp as mt
    >>> try:
    ...     mt.to_tensor([1.0], place="tpu")
    ... except ValueError as exc:
    ...     print(type(exc).__name__, exc)  # doctest: +ELLIPSIS
    DeviceError unknown device 'tpu'; use 'cpu', 'gpu', 'gpu:N', 'cuda' or 'cuda:N' (N = ...
"""

from __future__ import annotations

import difflib
import numbers
import re

import numpy as np

DEVICE_FORMS = "'cpu', 'gpu', 'gpu:N', 'cuda' or 'cuda:N' (N = device number), or a Place"
DEVICE_STRING = re.compile(r"^\s*(cpu|gpu|cuda)(:\d+)?\s*$", re.IGNORECASE)
# What a dtype name looks like, known or not: 'float8', 'torch.half', 'uint16', ...
_DTYPE_LIKE = re.compile(
    r"^\s*(paddle\.|torch\.|np\.|numpy\.)?(b?float|u?int|bool|half|double|long|complex)",
    re.IGNORECASE,
)


class DeviceError(ValueError, TypeError, RuntimeError):
    """A device or dtype that cannot be used: unknown, of the wrong type, given in the other's
    place, or a GPU this machine does not have. Also a ValueError, TypeError and RuntimeError
    (see the module docstring)."""


def dtype_names(supported) -> str:
    """``'float16, bfloat16, ...'``: the registry's dtypes (``backend.dtypes.SUPPORTED``,
    which every caller passes in, so a dtype added there is listed here)."""
    return ", ".join(str(d) for d in supported)


def _prefix(where: str) -> str:
    return f"{where}: " if where else ""


def _did_you_mean(text: str, supported) -> str:
    names = [str(d) for d in supported]
    key = text.strip().lower().removeprefix("paddle.").removeprefix("torch.")
    close = [n for n in names if n.startswith(key) and n != key]
    close += [n for n in difflib.get_close_matches(key, names, n=2) if n not in close]
    return f" (did you mean {' or '.join(close[:2])}?)" if close else ""


def is_dtype_name(value, supported) -> bool:
    """True when the string ``value`` names a dtype of ``supported`` (``'paddle.int64'``)."""
    try:
        return np.dtype(value.strip().removeprefix("paddle.")) in supported
    except TypeError:
        return False


def unknown_device(device, supported, where: str = "") -> DeviceError:
    """The error for a device string that names no device (or names a dtype)."""
    if isinstance(device, str) and is_dtype_name(device, supported):
        return DeviceError(
            f"{_prefix(where)}{device!r} is a dtype, not a device; pass it as dtype={device!r} "
            f"(a device is {DEVICE_FORMS})"
        )
    if isinstance(device, str) and _DTYPE_LIKE.match(device):
        return neither(device, supported, where)
    return DeviceError(
        f"{_prefix(where)}unknown device {device!r}; use {DEVICE_FORMS}; "
        "minitorch_amp.device.get_available_device() lists this machine's"
    )


def neither(value: str, supported, where: str = "") -> DeviceError:
    """The error for a string that is no device and no dtype, where either could go."""
    return DeviceError(
        f"{_prefix(where)}{value!r} is neither a device ({DEVICE_FORMS}) nor a dtype "
        f"minitorch_amp knows ({dtype_names(supported)}){_did_you_mean(value, supported)}"
    )


def device_of_wrong_type(device, where: str = "") -> DeviceError:
    """The error for a device argument that is neither a string nor a Place."""
    return DeviceError(
        f"{_prefix(where)}unknown device {device!r}: a device must be a string like 'cpu' or "
        f"'gpu:0', or a Place, got {type(device).__name__}; use {DEVICE_FORMS}"
    )


def unsupported_dtype(dtype, supported, where: str = "") -> DeviceError:
    """The error for a dtype argument that names no dtype of the registry (or a device)."""
    if isinstance(dtype, str) and DEVICE_STRING.match(dtype):
        return DeviceError(
            f"{_prefix(where)}{dtype!r} is a device, not a dtype; pass it as the device "
            f"(device={dtype!r}, place={dtype!r}); use one of: {dtype_names(supported)}"
        )
    if isinstance(dtype, numbers.Integral) and not isinstance(dtype, bool):
        return DeviceError(
            f"{_prefix(where)}unsupported dtype {dtype!r}: a number is not a dtype; use one "
            f"of: {dtype_names(supported)}"
        )
    hint = _did_you_mean(dtype, supported) if isinstance(dtype, str) else ""
    return DeviceError(
        f"{_prefix(where)}unsupported dtype {dtype!r}; use one of: {dtype_names(supported)}{hint}"
    )


def spread_shape(function: str, head: tuple, dims: tuple, tail: tuple, bad) -> DeviceError:
    """The error for PyTorch's spread-out shape, ``randn(32, 16)``, where Paddle takes one
    list and the second number lands in the dtype slot.

    Args:
        function: the function's name, e.g. ``'randn'``.
        head: the arguments before the shape (``randint``'s ``low, high``).
        dims: the numbers given where the shape and the slots after it were.
        tail: arguments that belong after the shape (``full``'s fill value).
        bad: the number that landed in the dtype slot.
    """
    given = ", ".join(repr(v) for v in (*head, *dims, *tail))
    fixed = ", ".join([*(repr(v) for v in head), repr(list(dims)), *(repr(v) for v in tail)])
    return DeviceError(
        f"{function}({given}): {bad!r} landed where the dtype goes; Paddle takes the shape "
        f"as one list, where PyTorch spreads it over the arguments: use {function}({fixed})"
    )
