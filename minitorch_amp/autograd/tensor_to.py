"""Reading the arguments of ``Tensor.to`` and ``Layer.to``: a device, a dtype, or both.

Paddle's ``Tensor.to`` has three forms, told apart by the type of the first argument, and
PyTorch's are the same three::

    x.to("float16")          x.to(mt.float16)        # a dtype (a name, a NumPy dtype or type)
    x.to("gpu:0")            x.to("cpu", "float32")  # a device, then optionally a dtype
    x.to(other)                                      # other's device and dtype

A string is a device when it reads ``cpu``, ``gpu``, ``gpu:N``, ``cuda`` or ``cuda:N``, a
dtype when it names one; anything else is refused, and so is an argument in a slot where it
cannot belong (``x.to("float16", "cpu")``), rather than guessed.
"""

from __future__ import annotations

from ..backend import device as _device
from ..backend import device_errors as _errors
from ..backend import dtypes as _dtypes

_KEYWORDS = ("device", "dtype", "blocking", "other", "non_blocking")
_FORMS = (
    "to(dtype, blocking=None), to(device, dtype=None, blocking=None) or "
    "to(other_tensor, blocking=None)"
)


def is_device(value) -> bool:
    """True for a Place or a device string (``'cpu'``, ``'gpu:1'``, ``'cuda'``)."""
    if isinstance(value, _device.Place):
        return True
    return isinstance(value, str) and _errors.DEVICE_STRING.match(value) is not None


def is_dtype(value) -> bool:
    """True for anything ``convert_dtype`` accepts (``'float16'``, ``np.float16``, ...)."""
    if value is None or isinstance(value, (_device.Place, bool, int, float)) or is_device(value):
        return False
    try:
        _dtypes.convert_dtype(value)
    except TypeError:
        return False
    return True


def tensor_to(tensor, args: tuple, kwargs: dict):
    """``Tensor.to``: ``tensor`` on the device and in the dtype the arguments name (recorded
    ops: a device copy, then a cast); ``tensor`` itself when nothing changes."""
    from . import ops
    from .dispatch import apply

    device, dtype = parse_to_args(args, kwargs)
    out = tensor
    if device is not None:
        place = _device.parse_device(device, "Tensor.to()")
        if place != tensor.place:
            out = apply(ops.CopyTo, out, place=place)
    if dtype is not None:
        dt = _dtypes.convert_dtype(dtype)
        if dt != out.dtype:
            out = out.astype(dt)
    return out


def _check_blocking(blocking, where: str):
    if blocking is not None and not isinstance(blocking, bool):
        raise TypeError(
            f"{where}: blocking must be True, False or None, got {blocking!r}; "
            f"the forms are {_FORMS}"
        )


def parse_to_args(args: tuple, kwargs: dict, where: str = "Tensor.to()"):
    """``(device, dtype)`` from the arguments of ``to`` (either may be None).

    Raises:
        TypeError: no argument, too many, an unknown keyword, a value given twice.
        DeviceError: a device or dtype that is unknown or in the other's slot (also a
            ValueError and a TypeError).
    """
    from .tensor import Tensor

    unknown = sorted(set(kwargs) - set(_KEYWORDS))
    if unknown:
        raise TypeError(f"{where} got an unexpected keyword argument {unknown[0]!r}; {_FORMS}")
    if not args and not kwargs:
        raise TypeError(f"{where} needs a device, a dtype or a tensor: {_FORMS}")
    if len(args) + len(kwargs) > 3:
        raise TypeError(f"{where} takes at most three arguments: {_FORMS}")
    if "non_blocking" in kwargs:  # PyTorch's spelling; copies here always complete
        if "blocking" in kwargs:
            raise TypeError(f"{where}: give blocking or non_blocking, not both")
        non_blocking = kwargs.pop("non_blocking")
        _check_blocking(non_blocking, where)
        kwargs["blocking"] = None if non_blocking is None else not non_blocking
    slots = {}
    if args:
        first = args[0]
        if isinstance(first, Tensor):
            names = ("other", "blocking")
        elif is_dtype(first):
            names = ("dtype", "blocking")
        elif first is None or is_device(first):  # (None: Paddle's to(None, dtype), no move)
            names = ("device", "dtype", "blocking")
        elif isinstance(first, str):
            raise _errors.unknown_device(first, _dtypes.SUPPORTED, where)  # or 'neither'
        else:
            raise _errors.DeviceError(
                f"{where}: the first argument must be a device, a dtype or a Tensor, got "
                f"{type(first).__name__} {first!r}; {_FORMS}"
            )
        if len(args) > len(names):
            raise TypeError(f"{where}: too many positional arguments for the form {_FORMS}")
        slots = dict(zip(names, args))
    for key, value in kwargs.items():
        if key in slots:
            raise TypeError(f"{where} got multiple values for argument {key!r}")
        slots[key] = value
    other = slots.get("other")
    if other is not None:
        if "device" in slots or "dtype" in slots:
            raise TypeError(f"{where}: give a tensor or a device/dtype, not both")
        if not isinstance(other, Tensor):
            raise TypeError(f"{where}: other must be a Tensor, got {type(other).__name__}")
        slots["device"], slots["dtype"] = other.place, other.dtype
    device, dtype = slots.get("device"), slots.get("dtype")
    if device is not None and not is_device(device):
        if isinstance(device, str):
            raise _errors.unknown_device(device, _dtypes.SUPPORTED, where)
        raise _errors.device_of_wrong_type(device, where)
    if dtype is not None and not is_dtype(dtype):
        raise _errors.unsupported_dtype(dtype, _dtypes.SUPPORTED, where)
    _check_blocking(slots.get("blocking"), where)
    return device, dtype
