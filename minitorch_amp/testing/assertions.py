"""Assertions for numerical tests: closeness with per-dtype tolerances, ULP distance, bit equality.

NumPy only. Every function accepts minitorch_amp Tensors, NumPy arrays, CuPy arrays (copied to
the host), NumPy scalars, Python numbers and nested lists.

Default tolerances of :func:`assert_close`, by the dtype being checked
(``|actual - expected| <= atol + rtol * |expected|``, elementwise):

=========  ==========  ==========  ==============================================
dtype      rtol        atol        why
=========  ==========  ==========  ==============================================
float16    1e-3        1e-5        about 2 ulps (eps is 2**-10 = 9.8e-4)
bfloat16   8e-3        1e-5        about 2 ulps (eps is 2**-7 = 7.8e-3)
float32    1e-5        1e-8        about 80 ulps (eps is 2**-23 = 1.2e-7)
float64    1e-12       1e-15       about 4500 ulps (eps is 2**-52 = 2.2e-16)
others     0           0           integers and bools: exact unless rtol/atol given
=========  ==========  ==========  ==============================================
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..backend.cast import to_bfloat16

__all__ = ["DEFAULT_TOLERANCES", "as_numpy", "assert_bit_equal", "assert_close", "ulp_distance"]

DEFAULT_TOLERANCES: dict[np.dtype, tuple[float, float]] = {
    np.dtype("float16"): (1e-3, 1e-5),
    np.dtype(ml_dtypes.bfloat16): (8e-3, 1e-5),
    np.dtype("float32"): (1e-5, 1e-8),
    np.dtype("float64"): (1e-12, 1e-15),
}
"""``dtype -> (rtol, atol)`` used by :func:`assert_close` when no tolerance is given."""

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}  # float itemsize -> its bits
_INT = {2: np.int16, 4: np.int32, 8: np.int64}
_BF16 = np.dtype(ml_dtypes.bfloat16)


def _is_float(dtype) -> bool:
    """float16/32/64, or bfloat16 (an ``ml_dtypes`` dtype: its kind is 'V', not 'f')."""
    return dtype.kind == "f" or dtype == _BF16


def _precision(dtype) -> int:
    """Significand bits: fewer means less precise (bfloat16 8 < float16 11 < float32 24)."""
    return 8 if dtype == _BF16 else np.finfo(dtype).nmant + 1


def as_numpy(x) -> np.ndarray:
    """``x`` as a NumPy array: Tensors and CuPy arrays are copied to the host.

    Example:
        >>> import minitorch_amp as mt
        >>> as_numpy(mt.to_tensor([1.0, 2.0]))
        array([1., 2.], dtype=float32)
    """
    if isinstance(x, np.ndarray):
        return x
    if callable(getattr(x, "numpy", None)) and not isinstance(x, np.generic):
        return np.asarray(x.numpy())  # a minitorch_amp Tensor (or a torch tensor)
    if hasattr(x, "__cuda_array_interface__") and callable(getattr(x, "get", None)):
        return x.get()  # a CuPy array, copied to the host
    return np.asarray(x)


def _index(flat: int, shape: tuple) -> tuple:
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def assert_close(
    actual, expected, dtype=None, rtol: float | None = None, atol: float | None = None
):
    """Assert ``|actual - expected| <= atol + rtol * |expected|`` elementwise.

    The difference is computed in float64; between two integer (or bool) arrays exactly, in
    integers (no rounding past 2**53), as PyTorch's ``torch.testing.assert_close`` does with
    the tolerances it is given. NaN matches NaN, an infinity matches only the same infinity,
    and ``expected`` may broadcast to ``actual``'s shape (e.g. a scalar).

    Args:
        actual: the value under test (Tensor, NumPy/CuPy array, scalar or list).
        expected: the reference value, same kinds.
        dtype: whose default tolerances to use (table in the module docstring). Default:
            the least precise floating dtype of the two arrays (Python numbers and lists
            do not count), so a float16 result checked against a float64 reference gets
            float16 tolerances. With no floating array at all, the comparison is exact
            unless ``rtol`` or ``atol`` is given.
        rtol: relative tolerance (overrides the default).
        atol: absolute tolerance (overrides the default).

    Raises:
        AssertionError: naming how many elements differ, the worst one (by how far it is
            outside the tolerance) with its index, and the largest absolute and relative
            errors.

    Example:
        >>> import numpy as np
        >>> assert_close(np.float16(1.0005), 1.0)  # within float16's tolerance
        >>> assert_close(np.float32([1.0, 2.0, 3.0]), [1.0, 2.001, 3.0])
        Traceback (most recent call last):
        ...
        AssertionError: not close: 1 of 3 elements differ
          float32 tolerances: rtol=1e-05, atol=1e-08
          worst at index (1,): actual 2.0, expected 2.001 (|diff| 0.001 > allowed 2.002e-05)
          max abs error: 0.001 at index (1,)
          max rel error: 0.00049975 at index (1,)
    """
    a_raw, e_raw = actual, expected
    a, e = as_numpy(actual), as_numpy(expected)
    if dtype is None:
        dtype = _least_precise_float(a_raw, a, e_raw, e)
    default = DEFAULT_TOLERANCES.get(np.dtype(dtype), (0.0, 0.0)) if dtype else (0.0, 0.0)
    rtol = default[0] if rtol is None else float(rtol)
    atol = default[1] if atol is None else float(atol)
    try:
        e = np.broadcast_to(e, a.shape)
    except ValueError:
        raise AssertionError(
            f"shape mismatch: actual has shape {list(a.shape)}, expected {list(e.shape)} "
            "(expected must have actual's shape or broadcast to it)"
        ) from None
    if a.dtype.kind in "iub" and e.dtype.kind in "iub":
        ok, diff, allowed, rel = _integer_errors(a, e, rtol, atol)
        shown = a, e  # exact, also past 2**53 where float64 cannot tell integers apart
    else:
        # NOTE: a signalling NaN (bfloat16 draws them) warns "invalid value" when widened
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            a64, e64 = a.astype(np.float64), e.astype(np.float64)
            diff = np.abs(a64 - e64)
            allowed = atol + rtol * np.abs(e64)
            finite = np.isfinite(a64) & np.isfinite(e64)  # inf - inf is no error, inf vs -inf is
            ok = (a64 == e64) | (np.isnan(a64) & np.isnan(e64)) | (finite & (diff <= allowed))
            rel = np.where(e64 != 0, diff / np.abs(e64), np.inf)
        shown = a64, e64
    if ok.all():
        return
    if dtype:
        where = f"{dtype} tolerances"
    else:
        where = "given tolerances" if rtol or atol else "exact comparison"
    lines = [
        f"not close: {int((~ok).sum())} of {ok.size} elements differ",
        f"  {where}: rtol={rtol:g}, atol={atol:g}",
    ]
    with np.errstate(invalid="ignore", over="ignore"):
        gap = np.asarray(diff, dtype=np.float64) - allowed  # (an integer diff, rounded)
        excess = np.where(ok, -np.inf, np.nan_to_num(gap, nan=np.inf, posinf=np.inf))
    worst = _index(int(np.argmax(excess)), a.shape)
    lines.append(
        f"  worst at index {worst}: actual {shown[0][worst].item()!r}, "
        f"expected {shown[1][worst].item()!r} "
        f"(|diff| {_shown(diff[worst])} > allowed {allowed[worst]:.5g})"
    )
    for name, err in (("abs", diff), ("rel", rel)):
        with np.errstate(invalid="ignore"):
            err64 = np.asarray(err, dtype=np.float64)
            bad = np.where(ok, -np.inf, np.nan_to_num(err64, nan=np.inf, posinf=np.inf))
        at = _index(int(np.argmax(bad)), a.shape)
        lines.append(f"  max {name} error: {_shown(err[at])} at index {at}")
    raise AssertionError("\n".join(lines))


def _integer_errors(a: np.ndarray, e: np.ndarray, rtol: float, atol: float):
    """``(ok, |a - e|, allowed, relative error)`` of two integer (or bool) arrays, exactly:
    in Python integers, which neither overflow (int64 minus uint64) nor round (float64 holds
    53 bits); a Python int compares with a float exactly."""
    a_int, e_int = a.astype(object), e.astype(object)
    diff = np.abs(a_int - e_int)
    allowed = atol + rtol * np.abs(e.astype(np.float64))
    ok = (diff <= allowed).astype(bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = diff.astype(np.float64) / np.abs(e.astype(np.float64))  # x / 0: inf
    return ok, diff, allowed, rel


def _shown(x) -> str:
    """An error for a message: an integer exactly, a float to 5 digits."""
    return str(x) if isinstance(x, (int, np.integer)) else f"{x:.5g}"


def _least_precise_float(*pairs):
    """The floating dtype with the fewest bits among the arrays (Python values skipped)."""
    raw, arrays = pairs[0::2], pairs[1::2]
    found = [
        arr.dtype
        for r, arr in zip(raw, arrays)
        if _is_float(arr.dtype) and not isinstance(r, (int, float, list, tuple))
    ]
    return min(found, key=_precision) if found else None


def ulp_distance(a, b, dtype=None):
    """How many representable ``dtype`` values lie between ``a`` and ``b``, elementwise.

    ``ulp_distance(x, nextafter(x)) == 1``; +0.0 and -0.0 are the same point (distance 0),
    the smallest subnormals of opposite signs are 2 apart, and the largest finite value is
    1 from infinity. A NaN in either input gives NaN (there is no "next" NaN).

    How: the bits of a float, read as a signed integer, are ordered like the floats for
    non-negative values and reversed for negative ones; ``INT_MIN - bits`` maps the negative
    half onto the negative integers in the right order (-0.0 lands on 0), after which the
    distance is a plain integer difference.

    Args:
        a, b: values of any kind :func:`assert_close` takes; they broadcast together.
        dtype: float16, bfloat16, float32 or float64. ``a`` and ``b`` are converted to it first
            (round to nearest even). Default: the dtype of ``a`` (of ``b`` if ``a`` is not
            floating).

    Returns:
        A float64 array (a Python float for 0-d results): whole numbers, exact for float16
        and float32 and for float64 distances below 2**53; NaN where an input is NaN.

    Example:
        >>> import numpy as np
        >>> ulp_distance(np.float16(1.0), np.float16(1.0009765625))  # 1 + eps: the next one
        1.0
        >>> a = [-(2.0**-24), 0.0, 65504.0, np.nan]
        >>> ulp_distance(a, [2.0**-24, -0.0, np.inf, 1.0], "float16")
        array([ 2.,  0.,  1., nan])
        >>> ulp_distance(1.0, 1.0 + 2**-6, "bfloat16")  # bfloat16's spacing at 1 is 2**-7
        2.0
    """
    a, b = as_numpy(a), as_numpy(b)
    if dtype is None:
        dtype = a.dtype if _is_float(a.dtype) else b.dtype
    dtype = np.dtype(dtype)
    if not _is_float(dtype) or dtype.itemsize not in _INT:
        raise TypeError(f"ulp_distance needs float16, bfloat16, float32 or float64, got {dtype}")
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype == _BF16:  # rounded once, also from float64 (ml_dtypes would round twice)
            a, b = np.broadcast_arrays(to_bfloat16(a), to_bfloat16(b))
        else:
            a, b = np.broadcast_arrays(a.astype(dtype), b.astype(dtype))
    signed = _INT[dtype.itemsize]
    smallest = np.iinfo(signed).min

    def ordered(x):  # float bits -> an integer with the floats' order (int64, no overflow)
        bits = np.array(x, order="C").view(signed).astype(np.int64)
        return np.where(bits < 0, np.int64(smallest) - bits, bits)

    oa, ob = ordered(a), ordered(b)
    # |oa - ob| can exceed int64 for float64: subtract the larger from the smaller in uint64.
    lo, hi = np.minimum(oa, ob).view(np.uint64), np.maximum(oa, ob).view(np.uint64)
    with np.errstate(over="ignore"):  # the wrap-around is the point: hi - lo < 2**64
        steps = (hi - lo).astype(np.float64)
    with np.errstate(invalid="ignore"):  # a signalling NaN (bfloat16) warns "invalid value"
        nan = np.isnan(a) | np.isnan(b)
    out = np.where(nan, np.nan, steps)
    return float(out) if out.ndim == 0 else out


def assert_bit_equal(actual, expected):
    """Assert identical dtype, shape and bytes: NaN payloads and the sign of zero count.

    Use it where rounding is specified exactly (casts, power-of-two scaling, a skipped
    optimizer step that must leave the parameters untouched). ``==`` would accept
    ``-0.0 == 0.0`` and reject ``nan == nan``; this does the opposite of both.

    Raises:
        AssertionError: for a dtype or shape mismatch, or naming how many elements differ
            and the first one: its index, both values and both bit patterns in hex.
        TypeError: the dtype is not a float, int or bool type (complex, strings, ...).

    Example:
        >>> import numpy as np
        >>> assert_bit_equal(np.float16([1.0, np.nan]), np.float16([1.0, np.nan]))
        >>> assert_bit_equal(np.float16([1.0, -0.0]), np.float16([1.0, 0.0]))
        Traceback (most recent call last):
        ...
        AssertionError: not bit-equal: 1 of 2 elements differ
          first at index (1,): actual -0.0 (0x8000), expected 0.0 (0x0000)
    """
    a, e = as_numpy(actual), as_numpy(expected)
    if a.dtype != e.dtype:
        raise AssertionError(f"dtype mismatch: actual is {a.dtype}, expected {e.dtype}")
    if a.shape != e.shape:
        raise AssertionError(
            f"shape mismatch: actual has shape {list(a.shape)}, expected {list(e.shape)}"
        )
    if a.dtype.itemsize not in _UINT or (a.dtype.kind not in "fiub" and a.dtype != _BF16):
        raise TypeError(f"assert_bit_equal supports float, int and bool arrays, not {a.dtype}")
    uint = _UINT[a.dtype.itemsize]
    ab = np.array(a, order="C").view(uint)
    eb = np.array(e, order="C").view(uint)
    differ = ab != eb
    if not differ.any():
        return
    first = _index(int(np.flatnonzero(differ)[0]), a.shape)
    width = 2 * a.dtype.itemsize
    raise AssertionError(
        f"not bit-equal: {int(differ.sum())} of {differ.size} elements differ\n"
        f"  first at index {first}: actual {a[first].item()!r} (0x{int(ab[first]):0{width}X}), "
        f"expected {e[first].item()!r} (0x{int(eb[first]):0{width}X})"
    )
