"""The dtypes minitorch_amp supports, and how names and Python values map onto them.

A dtype is a plain ``numpy.dtype``: ``minitorch_amp.float16 == numpy.dtype('float16')``, and it
compares equal to its name (``x.dtype == 'float32'``). CuPy uses the same dtype objects.

bfloat16 is ``ml_dtypes.bfloat16``, the NumPy extension dtype JAX and others use: NumPy has no
bfloat16, and ``ml_dtypes`` gives it real arrays (``Tensor.numpy()`` of a bfloat16 tensor is
one), ufuncs computed in float32 and rounded to nearest even, and ``astype`` both ways. Two
things differ from the built-in floats, so ask this module rather than NumPy:

* its ``dtype.kind`` is ``'V'`` (NumPy's code for user dtypes), not ``'f'``: use
  :func:`is_floating`;
* NumPy cannot promote it with float16 or the integers: use :func:`result_type`.

The two FP8 formats, ``float8_e4m3fn`` (max 448, no inf) and ``float8_e5m2`` (max 57344,
with inf), are ``ml_dtypes``' too, and storage formats here: tensors of them are cast,
printed, saved and loaded, and :mod:`~minitorch_amp.backend.fp8` multiplies them, but the
ops compute in the 16- and 32-bit floats. Their ``kind`` is ``'V'`` as well: use
:func:`is_fp8`.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .device_errors import DeviceError, unsupported_dtype

float16 = np.dtype("float16")
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float32 = np.dtype("float32")
float64 = np.dtype("float64")
int32 = np.dtype("int32")
int64 = np.dtype("int64")
bool_ = np.dtype("bool")
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)  # 4 exponent bits, 3 mantissa; no inf
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)  # 5 exponent bits, 2 mantissa; inf

FP8 = (float8_e4m3fn, float8_e5m2)
FP8_MAX = {float8_e4m3fn: 448.0, float8_e5m2: 57344.0}  # the largest finite values
SUPPORTED = (float16, bfloat16, float32, float64, int32, int64, bool_, *FP8)
_SUPPORTED_CLASSES = frozenset(d.__class__ for d in SUPPORTED)  # each dtype's own class
_CANONICAL = {d: d for d in SUPPORTED}
FLOATING = (float16, bfloat16, float32, float64)
LOW_PRECISION = (float16, bfloat16)  # the 16-bit floats AMP computes in

_default_dtype = float32


def convert_dtype(dtype) -> np.dtype:
    """Normalise ``dtype`` (a name, a numpy dtype or type, ``float``/``int``/``bool``).

    Raises:
        TypeError: the dtype is not one of float16, bfloat16, float32, float64, int32, int64,
            bool, float8_e4m3fn, float8_e5m2.
    """
    if dtype.__class__ in _SUPPORTED_CLASSES:  # an np.dtype: most calls, a dict lookup
        found = _CANONICAL.get(dtype)  # (None for another byte order: refused below)
        if found is not None:
            return found
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
        raise unsupported_dtype(dtype, SUPPORTED)  # a DeviceError, also a TypeError
    return dt


def is_floating(dtype) -> bool:
    """True for float16, bfloat16, float32 and float64 (bfloat16's ``kind`` is not ``'f'``).

    NOTE: not for the FP8 storage dtypes, although ``ml_dtypes`` gives float8_e5m2 the
    kind ``'f'`` (and float8_e4m3fn ``'V'``).
    """
    dt = np.dtype(dtype)
    return (dt.kind == "f" and dt not in FP8) or dt == bfloat16


def is_fp8(dtype) -> bool:
    """True for float8_e4m3fn and float8_e5m2."""
    return np.dtype(dtype) in FP8


def is_low_precision(dtype) -> bool:
    """True for the 16-bit floats, float16 and bfloat16."""
    return np.dtype(dtype) in LOW_PRECISION


def result_type(*dtypes) -> np.dtype:
    """NumPy's ``result_type``, extended to bfloat16 the way Paddle and PyTorch promote it.

    bfloat16 with float16 is float32 (neither holds the other: float16 has the precision,
    bfloat16 the range); bfloat16 with an integer or bool is bfloat16; with float32 or
    float64, the wider one.

    Example:
        >>> str(result_type("bfloat16", "float16")), str(result_type("bfloat16", "int64"))
        ('float32', 'bfloat16')
    """
    dts = [np.dtype(d) for d in dtypes]
    if any(d in FP8 for d in dts):
        return _fp8_result_type(dts)
    return _result_type(dts)


def _result_type(dts: list) -> np.dtype:
    if bfloat16 not in dts:
        return np.result_type(*dts)
    floats = {d for d in dts if is_floating(d) and d != bfloat16}
    if not floats:
        return bfloat16
    return np.result_type(float32, *floats)


def _fp8_result_type(dts: list) -> np.dtype:
    """An FP8 dtype with wider floats: the widest of those (each holds both FP8 formats
    exactly); the two FP8 formats together: float16 (it holds both); with integers or bool
    alone: the FP8 dtype, as bfloat16 does."""
    wider = [d for d in dts if is_floating(d)]
    if wider:
        return _result_type(wider)
    fp8 = {d for d in dts if d in FP8}
    return fp8.pop() if len(fp8) == 1 else float16


def get_default_dtype() -> str:
    """The dtype that Python floats and the random/creation functions use (``'float32'``)."""
    return str(_default_dtype)


def set_default_dtype(dtype) -> None:
    """Set the default floating dtype; must be float16, bfloat16, float32 or float64."""
    global _default_dtype
    dt = convert_dtype(dtype)
    if dt not in FLOATING:
        raise DeviceError(
            f"the default dtype must be floating (float16/32/64, bfloat16), got {dt}; "
            "e.g. set_default_dtype('float32')"
        )
    _default_dtype = dt


def default_float() -> np.dtype:
    return _default_dtype


def accumulation_dtype(dtype) -> np.dtype:
    """The dtype reductions accumulate in: float32 for float16 and bfloat16, else the dtype.

    NOTE: summing float16 in float16 loses everything past 2048 (the spacing there is 2),
    so every reduction over half data accumulates in float32 and rounds once at the end.
    bfloat16 is worse (past 256 the spacing is 2), so it accumulates in float32 too.
    """
    dt = np.dtype(dtype)
    return float32 if dt in LOW_PRECISION else dt
