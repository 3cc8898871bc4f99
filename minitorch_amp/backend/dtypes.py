"""The dtypes minitorch_amp supports, and how names and Python values map onto them.

A dtype is a plain ``numpy.dtype``: ``minitorch_amp.float16 == numpy.dtype('float16')``, and it
compares equal to its name (``x.dtype == 'float32'``). CuPy uses the same dtype objects.
"""

from __future__ import annotations

import numpy as np

float16 = np.dtype("float16")
float32 = np.dtype("float32")
float64 = np.dtype("float64")
int32 = np.dtype("int32")
int64 = np.dtype("int64")
bool_ = np.dtype("bool")

SUPPORTED = (float16, float32, float64, int32, int64, bool_)
FLOATING = (float16, float32, float64)

_default_dtype = float32


def convert_dtype(dtype) -> np.dtype:
    """Normalise ``dtype`` (a name, a numpy dtype or type, ``float``/``int``/``bool``).

    Raises:
        TypeError: the dtype is not one of float16, float32, float64, int32, int64, bool.
    """
    if dtype is float:
        return _default_dtype
    if dtype is int:
        return int64
    if dtype is bool:
        return bool_
    if isinstance(dtype, str) and dtype.startswith("paddle."):
        dtype = dtype[len("paddle.") :]
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is None or dt not in SUPPORTED:
        names = ", ".join(str(d) for d in SUPPORTED)
        raise TypeError(f"unsupported dtype {dtype!r}; use one of: {names}")
    return dt


def is_floating(dtype) -> bool:
    """True for float16, float32 and float64."""
    return np.dtype(dtype) in FLOATING


def get_default_dtype() -> str:
    """The dtype that Python floats and the random/creation functions use (``'float32'``)."""
    return str(_default_dtype)


def set_default_dtype(dtype) -> None:
    """Set the default floating dtype; must be float16, float32 or float64."""
    global _default_dtype
    dt = convert_dtype(dtype)
    if dt not in FLOATING:
        raise TypeError(f"the default dtype must be floating (float16/32/64), got {dt}")
    _default_dtype = dt


def default_float() -> np.dtype:
    return _default_dtype


def accumulation_dtype(dtype) -> np.dtype:
    """The dtype reductions accumulate in: float32 for float16, else the dtype itself.

    NOTE: summing float16 in float16 loses everything past 2048 (the spacing there is 2),
    so every reduction over half data accumulates in float32 and rounds once at the end.
    """
    dt = np.dtype(dtype)
    return float32 if dt == float16 else dt
