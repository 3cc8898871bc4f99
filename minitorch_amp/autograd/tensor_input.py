"""What ``Tensor(data)`` and ``to_tensor(data)`` make of their input: the array and its dtype.

Python floats become the default float dtype (float32) and Python ints int64, as in Paddle;
arrays, NumPy scalars (``np.float64(1.5)`` is float64, ``np.int32(1)`` int32: Paddle's "np.number:
keep dtype") and Tensors keep their dtype. A (nested) list of Tensors is stacked and keeps the
Tensors' dtype, bfloat16 and FP8 included. bfloat16 and FP8 are rounded once, from the
input's own precision (see ``backend.cast``).
"""

from __future__ import annotations

import numpy as np

from ..backend import device as _device
from ..backend import dtypes as _dtypes
from ..backend.cast import to_bfloat16
from ..backend.fp8 import to_fp8

_INT64_MAX = np.iinfo(np.int64).max


def as_array(data, dtype, place):
    """Make an array of ``data`` on ``place`` (``data`` is not a Tensor; ``dtype`` may be
    None: inferred as the module docstring says).

    Raises:
        OverflowError: a Python int past int64's range for an integer dtype.
    """
    if dtype is not None:
        dtype = _dtypes.convert_dtype(dtype)
    if _device.is_array(data) or isinstance(data, np.generic):
        array = np.asarray(data) if isinstance(data, np.generic) else data
        dtype = _dtypes.convert_dtype(array.dtype) if dtype is None else dtype
    elif isinstance(data, (list, tuple)) and _first_leaf_is_tensor(data):
        array = _stack_tensors(data)
        dtype = _dtypes.convert_dtype(array.dtype) if dtype is None else dtype
    else:
        array = np.asarray(data)
        if dtype is None:
            dtype = _inferred_dtype(array.dtype)
        if array.dtype == np.uint64 and dtype.kind in "iu" and array.size:
            _refuse_past_int64(array, dtype)
    array = _device.to_place(array, place)
    if dtype == _dtypes.bfloat16 and array.dtype != dtype:
        return to_bfloat16(array)  # rounded once, also from float64 (see backend.cast)
    if dtype in _dtypes.FP8 and array.dtype != dtype:
        return to_fp8(array, dtype)  # rounded once; past the range NaN (E4M3) or inf (E5M2)
    with np.errstate(over="ignore"):  # past float16's range is inf, as in Paddle, no warning
        return array.astype(dtype, copy=False)


def _inferred_dtype(found: np.dtype) -> np.dtype:
    if found.kind == "f":
        return _dtypes.default_float()
    if found.kind in "iu":
        return _dtypes.int64
    return _dtypes.convert_dtype(found)


def _refuse_past_int64(array: np.ndarray, dtype: np.dtype) -> None:
    """NumPy holds Python ints in [2**63, 2**64) as uint64; as int64 they would wrap."""
    top = int(array.max())
    if top > min(_INT64_MAX, np.iinfo(dtype).max):
        raise OverflowError(
            f"to_tensor: the integer {top} is past {dtype}'s range "
            f"[{np.iinfo(dtype).min}, {np.iinfo(dtype).max}]; pass dtype='float64' to keep it "
            "approximately, or use smaller values"
        )


def _first_leaf_is_tensor(data) -> bool:
    """True when the first element at the bottom of a nested list is a Tensor (checked on
    one path only: to_tensor of a long list of numbers stays one ``np.asarray``)."""
    from .tensor import Tensor

    while isinstance(data, (list, tuple)) and data:
        data = data[0]
    return isinstance(data, Tensor)


def _stack_tensors(data) -> np.ndarray:
    """A nested list of Tensors (or numbers) as one host array of the Tensors' dtype.

    NOTE: ``np.asarray`` of such a list goes through each Tensor's ``__array__``, which works
    for float32 but not for bfloat16/FP8 (NumPy asks for a number) and turns float64 into
    the default dtype; stacking the Tensors' own arrays keeps every dtype.
    """
    from .tensor import Tensor

    if isinstance(data, Tensor):
        return data._to_host("to_tensor of a list of Tensors")
    if isinstance(data, (list, tuple)):
        return np.stack([_stack_tensors(item) for item in data]) if data else np.asarray(data)
    return np.asarray(data)
