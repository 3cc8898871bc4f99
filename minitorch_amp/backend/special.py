"""Special functions NumPy lacks: the error function ``erf`` and the normal CDF, for GELU.

CuPy has ``cupyx.scipy.special.erf``; NumPy has none, so the CPU evaluates its own, in the
precision of the input:

* **float64**: W. J. Cody's rational approximations (Math. Comp. 23, 1969, his CALERF
  routine), accurate to a few units in the last place of float64, which the
  finite-difference gradient checks need.
* **float32** (and float16 / bfloat16, computed in float32, then rounded to their dtype): two
  polynomials, one per part of the domain, each run only on its own elements. Within
  1 ULP of the exact value: at most 0.89 ULP over every float32 in [0.25, 4.25] and blocks
  covering a sixteenth of those below, 97% correctly rounded (``tests/test_erf.py`` holds
  the bound); about ten times faster than widening to float64.

The float32 split, with ``a = |x|``:

==================  =====================================  =================================
``a < 0.75``        ``x + x * P(x^2)``, ``P`` of degree 5   float32; ``x`` is exact, so the
                    (``erf(x)/x - 1``, between -0.052 and   rounding of the small correction
                    0.128)                                  ``x * P`` barely counts
``0.75 <= a``       ``1 - exp(Q(a))``, ``Q`` of degree 9    float64 on these elements only:
                    (``log erfc(a)``), ``a`` clipped to 4   float32's ``exp`` (2.3 ULP in
                    (``erf(4)`` rounds to 1 in float32)     NumPy) would cost a whole ULP
==================  =====================================  =================================

The coefficients are minimax fits (Lawson's iteratively reweighted least squares, the
error weighted by the float32 spacing of the result), made for this module.
"""

from __future__ import annotations

import numpy as np

from . import host_c
from .blocks import BLOCK, blocks
from .device import get_array_module
from .dtypes import bfloat16, float16, float32, float64

_SQRT_HALF = 0.7071067811865476  # 1 / sqrt(2)

# ---- float64: Cody ---------------------------------------------------------------------------
# erf on |x| <= 0.46875, erfc on (0.46875, 4] and on (4, inf). Relative error below 1e-16.
_ERF_A = (
    3.16112374387056560e00,
    1.13864154151050156e02,
    3.77485237685302021e02,
    3.20937758913846947e03,
    1.85777706184603153e-1,
)
_ERF_B = (
    2.36012909523441209e01,
    2.44024637934444173e02,
    1.28261652607737228e03,
    2.84423683343917062e03,
)
_ERFC_C = (
    5.64188496988670089e-1,
    8.88314979438837594e00,
    6.61191906371416295e01,
    2.98635138197400131e02,
    8.81952221241769090e02,
    1.71204761263407058e03,
    2.05107837782607147e03,
    1.23033935479799725e03,
    2.15311535474403846e-8,
)
_ERFC_D = (
    1.57449261107098347e01,
    1.17693950891312499e02,
    5.37181101862009858e02,
    1.62138957456669019e03,
    3.29079923573345963e03,
    4.36261909014324716e03,
    3.43936767414372164e03,
    1.23033935480374942e03,
)
_ERFC_P = (
    3.05326634961232344e-1,
    3.60344899949804439e-1,
    1.25781726111229246e-1,
    1.60837851487422766e-2,
    6.58749161529837803e-4,
    1.63153871373020978e-2,
)
_ERFC_Q = (
    2.56852019228982242e00,
    1.87295284992346047e00,
    5.27905102951428412e-1,
    6.05183413124413191e-2,
    2.33520497626869185e-3,
)


def _rational(t, num, den):
    """``(num[-1]*t^n + num[0]*t^(n-1) + ...) / (t^n + den[0]*t^(n-1) + ...)`` (Horner)."""
    top, bottom = num[-1] * t, t
    for a, b in zip(num[:-2], den[:-1]):
        top = (top + a) * t
        bottom = (bottom + b) * t
    return (top + num[-2]) / (bottom + den[-1])


def _erf_float64(x):
    """Cody's erf of a float64 array (every branch evaluated, then selected)."""
    # NOTE: clipping keeps inf out of the erfc branch (inf - inf would be nan); erfc(30) == 0.
    y = np.minimum(np.abs(x), 30.0)
    with np.errstate(all="ignore"):  # every branch is evaluated everywhere, then selected
        near_zero = x * _rational(y * y, _ERF_A, _ERF_B)
        rest = np.where(y <= 4.0, _rational(y, _ERFC_C, _ERFC_D), 0.0)
        z = 1.0 / (y * y)
        tail = (0.5641895835477562869 - z * _rational(z, _ERFC_P, _ERFC_Q)) / y
        rest = np.where(y <= 4.0, rest, tail)
        # exp(-y^2) split as exp(-r^2) * exp(-(y-r)(y+r)) with r = y rounded down to 1/16,
        # so the square is exact and the tail keeps its relative accuracy.
        r = np.trunc(y * 16.0) / 16.0
        erfc = np.exp(-r * r) * np.exp(-(y - r) * (y + r)) * rest
        return np.where(y <= 0.46875, near_zero, np.sign(x) * (1.0 - erfc))


# ---- float32: two polynomials ------------------------------------------------------------------
_SPLIT_SQUARED = np.float32(0.75 * 0.75)  # |x| < 0.75 <=> x*x < 0.5625 (both exact in float32)
_ERF_ONE_AT = 4.0  # erfc(4) = 1.5e-8 < 2**-25: erf rounds to 1 in float32 from here on
# P(s) ~ erf(x)/x - 1 with s = x^2 on |x| < 0.75, float32 coefficients, constant term first.
_SMALL = np.array(
    [
        1.2837917e-01,
        -3.761262e-01,
        1.1283377e-01,
        -2.6834624e-02,
        5.114346e-03,
        -6.7495136e-04,
    ],
    dtype=np.float32,
)
# Q(a) ~ log(erfc(a)) on 0.75 <= a <= 4, float64 coefficients, constant term first.
_TAIL = (
    4.222679205726599e-05,
    -1.1287082649051103,
    -0.6354874536476081,
    -0.10503447966486662,
    0.02202304946647276,
    -0.0022450088314784717,
    -0.0003461734622895666,
    0.00017758001070105126,
    -2.879606785453529e-05,
    1.8102137830670642e-06,
)


def _erf_float32(x):
    """erf of a float32 array in float32, within 1 ULP: see the module docstring."""
    flat = x.reshape(-1)
    with np.errstate(over="ignore", invalid="ignore"):  # |x| > 1.8e19 and inf: the tail's
        s = flat * flat
        tail = np.flatnonzero(s >= _SPLIT_SQUARED)  # NaN stays here and comes out NaN
        np.minimum(s, _SPLIT_SQUARED, out=s)
        y = s * _SMALL[-1]
        for c in _SMALL[-2:0:-1]:
            y += c
            y *= s
        y += _SMALL[0]
        y *= flat
        y += flat
    if tail.size:
        xt = flat[tail].astype(np.float64)
        a = np.abs(xt)
        np.minimum(a, _ERF_ONE_AT, out=a)
        q = a * _TAIL[-1]
        for c in _TAIL[-2:0:-1]:
            q += c
            q *= a
        q += _TAIL[0]
        erf_tail = np.subtract(1.0, np.exp(q, out=q), out=q)
        np.copysign(erf_tail, xt, out=erf_tail)
        y[tail] = erf_tail.astype(np.float32)  # the one rounding (a float32 scatter is faster)
    return y.reshape(x.shape)


# ---- float32: the normal CDF, for GELU ---------------------------------------------------------
_CDF_SPLIT_SQUARED = np.float32(1.5 * 1.5)  # |x| < 1.5 <=> x*x < 2.25 (both exact in float32)
_CDF_CLIP = np.float32(14.5)  # exp(-x^2 / 2) underflows float32 past here: Phi(-x) rounds to 0
_CDF_T = np.float32(0.3)  # the tail's variable is t = 1 / (1 + 0.3 |x|)
# R(s) ~ (Phi(x) - 1/2) / x with s = x^2 on |x| < 1.5, constant term first (relative 2.7e-9).
_CDF_BODY = np.array(
    [
        0.3989422917366028,
        -0.06649033725261688,
        0.00997324101626873,
        -0.0011864883126690984,
        0.00011435629130573943,
        -8.718280696484726e-06,
        4.1155442431772826e-07,
    ],
    dtype=np.float32,
)
# G(t) ~ Phi(-|x|) * exp(x^2 / 2) on 1.5 <= |x| <= 14.5, t's powers 1 to 8 (relative 1.9e-8).
_CDF_TAIL = np.array(
    [
        0.11966469883918762,
        0.120084747672081,
        0.10512788593769073,
        0.106838658452034,
        -0.0013447642559185624,
        0.13325338065624237,
        -0.10225464403629303,
        0.01847664639353752,
    ],
    dtype=np.float32,
)


def _normal_cdf_float32(x, times_x: bool = False):
    """The standard normal CDF of a float32 array, in float32 only (see :func:`normal_cdf`);
    with ``times_x``, ``(Phi(x), x * Phi(x))``: exact GELU's product made in the same blocks,
    while each block of ``Phi`` is still in cache (no pass over the whole arrays after).

    With a C compiler, ``csrc/gelu.c`` makes each block's passes in one loop, bit for bit
    (``host_c.load('gelu')``: ``tests/test_host_gelu.py``)."""
    fused = host_c.load("gelu")
    flat = x.reshape(-1) if fused is None else np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    scratch = np.empty(min(flat.size, BLOCK), dtype=float32)
    if fused is not None:
        product = np.empty_like(flat) if times_x else np.empty_like(scratch)
        g = np.empty_like(scratch)
    else:
        product = np.empty_like(flat) if times_x else None
    for block in blocks(flat.size):
        if fused is not None:
            size = flat[block].size
            p = product[block] if times_x else product[:size]
            _normal_cdf_block_fused(fused, flat[block], out[block], p, scratch[:size], g[:size])
            continue
        _normal_cdf_block(flat[block], out[block], scratch[: out[block].size])
        if times_x:
            np.multiply(flat[block], out[block], out=product[block])
    if times_x:
        return out.reshape(x.shape), product.reshape(x.shape)
    return out.reshape(x.shape)


def gelu_float32(x):
    """``(Phi(x), x * Phi(x))`` for a NumPy float32 ``x``: exact GELU's CDF (its backward
    needs it) and its output, in one pass of cache-sized blocks."""
    return _normal_cdf_float32(np.asarray(x), times_x=True)


def _normal_cdf_block(x, y, s) -> None:
    """Phi of the 1-D float32 block ``x`` into ``y``; ``s`` is scratch of the same size."""
    with np.errstate(over="ignore", invalid="ignore"):  # the body's garbage on tail elements
        np.multiply(x, x, out=s)
        # NOTE: a transformer's activations seldom reach the tail (none in the example GPT's
        # first steps): one maximum says so, where a comparison and a scan of the whole
        # block took 15% of the forward. A NaN makes the maximum NaN and takes the scan.
        top = s.max() if s.size else _CDF_SPLIT_SQUARED
        np.multiply(s, _CDF_BODY[-1], out=y)
        for c in _CDF_BODY[-2:0:-1]:
            y += c
            y *= s
        y += _CDF_BODY[0]
        y *= x
        y += np.float32(0.5)
    if not top < _CDF_SPLIT_SQUARED:  # a tail element, or a NaN
        _normal_cdf_tail(x, y, np.flatnonzero(s >= _CDF_SPLIT_SQUARED))  # NaN: not in the tail


def _normal_cdf_block_fused(fused, x, y, product, e, g) -> None:
    """:func:`_normal_cdf_block` and ``product = x * y`` by ``csrc/gelu.c``: its ``forward``
    makes the body (and the tail's operations up to exp), NumPy the tail's exp, and its
    ``tail_finish`` the rest; ``e`` and ``g`` are scratch of ``x``'s size."""
    args = (_CDF_BODY, _CDF_SPLIT_SQUARED, _CDF_TAIL, _CDF_CLIP, _CDF_T)
    if fused.forward(x, *args, y, product, e, g):  # a tail element
        with np.errstate(under="ignore"):  # Phi(-|x|) underflows past 9.4, as it should
            np.exp(e, out=e)
        fused.tail_finish(x, _CDF_SPLIT_SQUARED, g, e, y, product)


def _normal_cdf_tail(x, y, tail) -> None:
    """Phi of ``x[tail]`` (``|x| >= 1.5``) into ``y[tail]``: ``G(t) * exp(-x^2 / 2)``."""
    if tail.size:
        with np.errstate(under="ignore"):  # Phi(-|x|) underflows, as it should, past 9.4
            xt = x[tail]
            a = np.minimum(np.abs(xt), _CDF_CLIP)
            density = np.multiply(a, a)
            density *= np.float32(-0.5)
            np.exp(density, out=density)  # exp(-x^2 / 2)
            t = a * _CDF_T
            t += np.float32(1.0)
            np.divide(np.float32(1.0), t, out=t)
            g = t * _CDF_TAIL[-1]
            for c in _CDF_TAIL[-2::-1]:
                g += c
                g *= t
            g *= density  # Phi(-|x|), to its own relative precision
            y[tail] = np.where(xt > 0, np.float32(1.0) - g, g)  # no 1/2 - (1/2 - g) cancellation


def normal_cdf(x):
    """The standard normal CDF ``Phi(x) = (1 + erf(x / sqrt(2))) / 2``, in ``x``'s dtype.

    GELU's ``x * Phi(x)`` needs it on every activation, so float32 (and float16/bfloat16,
    computed in float32) is evaluated in float32 alone, in two parts split at ``|x| = 1.5``:
    ``1/2 + x * R(x^2)`` with ``R`` of degree 6, and beyond, ``G(t) * exp(-x^2 / 2)`` with
    ``t = 1 / (1 + 0.3 |x|)`` and ``G`` of degree 8 (``Phi(-|x|)``; ``1 - `` that for
    ``x > 0``). Both are least-squares fits of relative error made for this module. It is
    about half the work of ``erf`` plus the two passes that turn ``erf`` into ``Phi``, and
    its error is that of PyTorch's CPU GELU or smaller (``tests/test_erf.py`` holds the
    bounds per range). float64 goes through Cody's ``erf``; CuPy through ``cupyx``'s.

    Example:
        >>> import numpy as np
        >>> print(normal_cdf(np.array([-np.inf, -2.0, 0.0, 1.0, 9.0], dtype=np.float32)))
        [0.         0.02275013 0.5        0.8413448  1.        ]
    """
    xp = get_array_module(x)
    dtype = x.dtype if getattr(x, "dtype", None) is not None else float64
    if xp is np and dtype == float32:
        return _normal_cdf_float32(np.asarray(x))
    if xp is np and dtype in (float16, bfloat16):
        return _normal_cdf_float32(np.asarray(x, dtype=float32)).astype(dtype)
    cdf = erf(x * dtype.type(_SQRT_HALF))
    cdf += 1.0
    cdf *= 0.5
    return cdf


def erf(x):
    """The error function ``erf(x) = 2/sqrt(pi) * integral_0^x exp(-t^2) dt``, in ``x``'s dtype.

    float64 is accurate to a few float64 ULPs; float32, float16 and bfloat16 are computed in
    float32 within 1 ULP of the exact value and rounded once to ``x``'s dtype. CuPy arrays
    go to ``cupyx.scipy.special.erf``.

    Example:
        >>> import numpy as np
        >>> print(erf(np.array([-np.inf, -0.5, 0.0, 1.0, 5.0], dtype=np.float32)))
        [-1.        -0.5204999  0.         0.8427008  1.       ]
    """
    xp = get_array_module(x)
    if xp is not np:
        import cupyx.scipy.special

        return cupyx.scipy.special.erf(x).astype(x.dtype, copy=False)
    dtype = x.dtype if getattr(x, "dtype", None) is not None else float64
    if dtype == float32:
        return _erf_float32(np.asarray(x))
    if dtype in (float16, bfloat16):
        return _erf_float32(np.asarray(x, dtype=float32)).astype(dtype)
    return _erf_float64(np.asarray(x, dtype=float64)).astype(dtype, copy=False)
