"""Assertions in FP8 units of least precision, beside :mod:`.assertions` (float16, bfloat16).

NumPy only (``ml_dtypes`` for the formats). Every function accepts what
:func:`~minitorch_amp.testing.assertions.as_numpy` accepts: Tensors, NumPy or CuPy arrays
(FP8 dtypes, or uint8 storage with ``dtype=`` naming the format), scalars, lists.

* :func:`fp8_ulp_distance`: how many FP8 values lie between two numbers (both rounded once
  to the format first), as :func:`~minitorch_amp.testing.assertions.ulp_distance` counts
  float16 ones;
* :func:`fp8_error_in_ulps`: ``|actual - expected|`` in units of the format's spacing at the
  exact ``expected`` (no rounding of ``expected``: 0.5 means a correctly rounded cast);
* :func:`assert_fp8_close`: that error at most ``max_ulps`` everywhere, with a message in
  FP8 ulps and bytes;
* :func:`assert_fp8_bit_equal`: identical bytes (NaN encodings and the sign of zero count).
"""

from __future__ import annotations

import numpy as np

from ..backend.fp8 import to_fp8
from .assertions import as_numpy
from .fp8 import FORMATS, Fp8Format, format_of

__all__ = ["assert_fp8_bit_equal", "assert_fp8_close", "fp8_error_in_ulps", "fp8_ulp_distance"]


def _format_and_values(x, dtype) -> tuple[Fp8Format, np.ndarray]:
    """The format (``dtype``, else ``x``'s own) and ``x`` as an array."""
    x = as_numpy(x)
    if dtype is None:
        if x.dtype == np.uint8:
            raise TypeError("uint8 storage does not say its FP8 format: pass dtype=")
        dtype = x.dtype
    fmt = format_of(dtype)
    if x.dtype == np.uint8:
        x = x.view(fmt.dtype)
    return fmt, x


def _to_format(x: np.ndarray, fmt: Fp8Format) -> np.ndarray:
    """``x`` rounded once to ``fmt`` (plain: overflow is NaN for E4M3, inf for E5M2)."""
    if x.dtype == fmt.dtype:
        return x
    return to_fp8(np.asarray(x, dtype=np.float64) if x.dtype.kind in "iub" else x, fmt.dtype)


def fp8_ulp_distance(a, b, dtype=None):
    """How many FP8 values lie between ``a`` and ``b`` (each rounded once to the format).

    ``+0.0`` and ``-0.0`` are the same point, the smallest subnormals of opposite signs are 2
    apart, E5M2's ``MAX`` is 1 from inf; a NaN (E4M3's overflow too) gives NaN.

    Args:
        a, b: values; they broadcast together.
        dtype: ``float8_e4m3fn`` or ``float8_e5m2``; default: ``a``'s dtype, else ``b``'s.

    Returns:
        A float64 array (a Python float for 0-d results).

    Example:
        >>> fp8_ulp_distance(1.0, 1.25, "float8_e4m3fn")  # E4M3's spacing at 1 is 2**-3
        2.0
        >>> fp8_ulp_distance([-(2.0**-16), 57344.0], [2.0**-16, np.inf], "float8_e5m2")
        array([2., 1.])
    """
    a_np, b_np = as_numpy(a), as_numpy(b)
    if dtype is None:
        found = [x.dtype for x in (a_np, b_np) if x.dtype in FORMATS]
        if not found:
            raise TypeError(
                "neither value is an FP8 array: pass dtype= (float8_e4m3fn or float8_e5m2)"
            )
        dtype = found[0]
    fmt, a_np = _format_and_values(a_np, dtype)
    _, b_np = _format_and_values(b_np, fmt.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        fa, fb = np.broadcast_arrays(_to_format(a_np, fmt), _to_format(b_np, fmt))

    def ordered(x):  # bytes -> integers in the values' order: -0 and +0 both 0
        bits = np.array(x, order="C").view(np.int8).astype(np.int64)
        return np.where(bits < 0, -128 - bits, bits)

    steps = np.abs(ordered(fa) - ordered(fb)).astype(np.float64)
    nan = np.isnan(fa.astype(np.float32)) | np.isnan(fb.astype(np.float32))
    out = np.where(nan, np.nan, steps)
    return float(out) if out.ndim == 0 else out


def fp8_error_in_ulps(actual, expected, dtype=None):
    """``|actual - expected|`` in units of the format's spacing at ``|expected|``.

    ``expected`` is the exact value (float64), not rounded: a correctly rounded cast is at
    most 0.5 off, a saturated one may be far more. Beyond ``MAX`` the spacing is ``MAX``'s.
    NaN against NaN and an infinity against the same infinity are 0; any other pairing with
    a NaN or an infinity is inf.

    Example:
        >>> import ml_dtypes
        >>> x = np.float32([1.06, 300.0]).astype(ml_dtypes.float8_e4m3fn)  # 1.0 and 288.0
        >>> fp8_error_in_ulps(x, [1.06, 300.0]).round(3).tolist()  # spacings 0.125 and 32
        [0.48, 0.375]
    """
    fmt, a = _format_and_values(actual, dtype)
    a64 = a.astype(np.float64)
    e64 = np.broadcast_to(as_numpy(expected).astype(np.float64), a64.shape)
    magnitude = np.minimum(np.abs(np.nan_to_num(e64, nan=0.0, posinf=fmt.MAX)), fmt.MAX)
    exponent = np.frexp(np.maximum(magnitude, fmt.SMALLEST_NORMAL))[1] - 1
    spacing = np.ldexp(1.0, exponent - fmt.mantissa_bits)
    with np.errstate(invalid="ignore", over="ignore"):
        error = np.abs(a64 - e64) / spacing
        same = (a64 == e64) | (np.isnan(a64) & np.isnan(e64))
    # NOTE: not np.nan_to_num(error, nan=np.inf): that also turns an inf error into 1.8e308
    return np.where(same, 0.0, np.where(np.isnan(error), np.inf, error))


def assert_fp8_close(actual, expected, dtype=None, max_ulps: float = 0.5):
    """Assert ``actual`` is within ``max_ulps`` FP8 spacings of the exact ``expected``.

    The default, 0.5, is what a correctly rounded cast guarantees (inside the range).

    Raises:
        AssertionError: naming how many elements are off, the worst (index, its byte, its
            value, the expected value, the error in ulps and the spacing there).

    Example:
        >>> import ml_dtypes
        >>> x = np.float32([1.0, 2.0]).astype(ml_dtypes.float8_e4m3fn)
        >>> assert_fp8_close(x, [1.05, 2.0])
        >>> assert_fp8_close(x, [1.2, 2.0])
        Traceback (most recent call last):
        ...
        AssertionError: not within 0.5 E4M3 ulps: 1 of 2 elements
          worst at index (0,): actual 1.0 (0x38), expected 1.2: 1.6 ulps (spacing 0.125)
    """
    fmt, a = _format_and_values(actual, dtype)
    errors = fp8_error_in_ulps(a, expected, fmt.dtype)
    bad = ~(errors <= max_ulps)
    if not bad.any():
        return
    worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(errors)), errors.shape))
    e = float(np.broadcast_to(as_numpy(expected), errors.shape)[worst])
    value = float(a[worst].astype(np.float64))
    byte = int(np.array(a[worst]).view(np.uint8))
    spacing = fmt.spacing(min(abs(e), fmt.MAX)) if np.isfinite(e) else float("nan")
    raise AssertionError(
        f"not within {max_ulps:g} {fmt.name} ulps: {int(bad.sum())} of {bad.size} elements\n"
        f"  worst at index {worst}: actual {value!r} (0x{byte:02X}), expected {e!r}: "
        f"{errors[worst]:.2g} ulps (spacing {spacing:g})"
    )


def assert_fp8_bit_equal(actual, expected, dtype=None):
    """Assert identical FP8 bytes: NaN encodings and the sign of zero count.

    Args:
        actual, expected: FP8 arrays, or uint8 storage when ``dtype`` names the format.
        dtype: the format of uint8 storage; an FP8 array of another format is refused.

    Raises:
        AssertionError: for a format or shape mismatch (two formats' bytes mean different
            values: E4M3's 0x38 is 1.0, E5M2's 0.5), or naming how many bytes differ and the
            first: its index, both values and both bytes.

    Example:
        >>> import ml_dtypes
        >>> nan = np.uint8([0x7F, 0xFF]).view(ml_dtypes.float8_e4m3fn)  # +NaN and -NaN
        >>> assert_fp8_bit_equal(nan, nan[::-1])
        Traceback (most recent call last):
        ...
        AssertionError: not bit-equal: 2 of 2 FP8 (E4M3) bytes differ
          first at index (0,): actual nan (0x7F), expected nan (0xFF)
    """
    actual, expected = as_numpy(actual), as_numpy(expected)
    if dtype is not None:  # uint8 storage is read as dtype=; an FP8 array has its own
        fmt = format_of(dtype)
        for name, x in (("actual", actual), ("expected", expected)):
            if x.dtype in FORMATS and x.dtype != fmt.dtype:
                raise AssertionError(
                    f"format mismatch: dtype= is {fmt.name}, {name} is {FORMATS[x.dtype].name}"
                )
    fmt, a = _format_and_values(actual, dtype)
    fmt_e, e = _format_and_values(expected, fmt.dtype if dtype is not None else None)
    if fmt_e is not fmt:
        raise AssertionError(f"format mismatch: actual is {fmt.name}, expected {fmt_e.name}")
    if a.shape != e.shape:
        raise AssertionError(f"shape mismatch: actual {list(a.shape)}, expected {list(e.shape)}")
    ab, eb = np.array(a, order="C").view(np.uint8), np.array(e, order="C").view(np.uint8)
    differ = ab != eb
    if not differ.any():
        return
    first = tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(differ)[0]), a.shape))
    raise AssertionError(
        f"not bit-equal: {int(differ.sum())} of {differ.size} FP8 ({fmt.name}) bytes differ\n"
        f"  first at index {first}: actual {float(a[first].astype(np.float64))!r} "
        f"(0x{int(ab[first]):02X}), expected {float(e[first].astype(np.float64))!r} "
        f"(0x{int(eb[first]):02X})"
    )
