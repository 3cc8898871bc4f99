"""The CPU error function (backend.special.erf) against Python's float64 ``math.erf``, in ULPs.

float32 (and float16 / bfloat16 through it) is computed in float32 by two polynomials; the
bound is 1 ULP of the result's dtype (PyTorch's CPU erf, SLEEF's, measures 0.55 ULP on the
same grid). float64 keeps Cody's approximation, accurate to a few float64 ULPs.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import minitorch_amp as mt
import minitorch_amp.nn.functional as F
from minitorch_amp.backend.special import erf

_math_erf = np.frompyfunc(math.erf, 1, 1)


def reference(x) -> np.ndarray:
    """Python's float64 erf (the C library's) of each value."""
    return _math_erf(np.asarray(x, dtype=np.float64)).astype(np.float64)


def ulps(got, exact, mantissa_bits: int, smallest_spacing: float) -> np.ndarray:
    """``|got - exact|`` in units of the spacing of ``got``'s dtype at ``exact``."""
    _, exponent = np.frexp(np.abs(exact))
    spacing = np.maximum(np.ldexp(1.0, exponent - mantissa_bits - 1), smallest_spacing)
    return np.abs(got.astype(np.float64) - exact) / spacing


def float32_grid() -> np.ndarray:
    """Both signs of: a dense uniform grid to 4.5, a geometric one from the smallest subnormal,
    and every float32 within 256 steps of the split (0.75) and of where erf becomes 1."""
    uniform = np.linspace(0.0, 4.5, 300_001, dtype=np.float32)
    tails = np.geomspace(2.0**-149, 4.5, 100_001).astype(np.float32)
    edges = [np.float32(0.75), np.float32(3.9192059), np.float32(4.0)]
    near = [np.arange(-256, 257, dtype=np.int32) + np.int32(e.view(np.int32)) for e in edges]
    x = np.unique(np.concatenate([uniform, tails, *(n.view(np.float32) for n in near)]))
    return np.concatenate([x, -x])


def test_float32_erf_is_within_one_ulp_of_float64():
    x = float32_grid()
    err = ulps(erf(x), reference(x), 23, 2.0**-149)
    worst = int(np.argmax(err))
    assert err[worst] <= 1.0, f"erf({x[worst]!r}) is {err[worst]:.3f} ULP off"
    assert err.mean() < 0.3  # most values are correctly rounded


@pytest.mark.parametrize(
    "dtype, mantissa_bits, smallest",
    [(np.float16, 10, 2.0**-24), (ml_dtypes.bfloat16, 7, 2.0**-133)],
    ids=["float16", "bfloat16"],
)
def test_every_16_bit_value_is_within_one_ulp(dtype, mantissa_bits, smallest):
    x = np.arange(2**16, dtype=np.uint16).view(dtype)
    x = x[np.isfinite(x.astype(np.float32))]
    got = erf(x)
    assert got.dtype == np.dtype(dtype)
    assert ulps(got, reference(x), mantissa_bits, smallest).max() <= 1.0


def test_16_and_32_bit_erf_never_runs_the_float64_approximation(monkeypatch):
    """float32 work is the point: Cody's float64 pass cost 41 ms on [16, 64, 512] (GELU)."""
    from minitorch_amp.backend import special

    def refuse(x):
        raise AssertionError("float32 input went through the float64 approximation")

    monkeypatch.setattr(special, "_erf_float64", refuse)
    for dtype in (np.float32, np.float16, ml_dtypes.bfloat16):
        assert erf(np.linspace(-5, 5, 101).astype(dtype)).dtype == np.dtype(dtype)


def test_float64_erf_stays_float64_accurate():
    x = np.concatenate([np.linspace(-6, 6, 20_001), np.geomspace(1e-300, 30, 2_001)])
    exact = reference(x)
    np.testing.assert_allclose(erf(x), exact, rtol=2e-15, atol=1e-300)


def test_special_values_signs_and_shapes():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 3.4e38, -1e-45], dtype=np.float32)
    got = erf(x)
    assert np.isnan(got[0]) and got[1:3].tolist() == [1.0, -1.0]
    assert np.signbit(got[4]) and not np.signbit(got[3]) and got[5] == 1.0
    assert got[6] == np.float32(-1e-45)  # erf(x) ~ 1.128 x rounds back to the subnormal
    strided = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)[:, ::2]
    assert erf(strided).shape == (4, 3)
    np.testing.assert_array_equal(erf(strided), erf(np.ascontiguousarray(strided)))
    assert erf(np.array(0.5, dtype=np.float32)).shape == ()


def test_float32_gelu_matches_float64_to_float32_precision():
    x = np.linspace(-8, 8, 100_001, dtype=np.float32)
    x64 = x.astype(np.float64)
    exact = 0.5 * x64 * (1.0 + reference(x64 / math.sqrt(2.0)))
    t = mt.to_tensor(x, stop_gradient=False)
    out = F.gelu(t)
    assert out.dtype == mt.float32
    # Where gelu ~ 0 (x << 0) the error is absolute: 1 + erf cancels, as in PyTorch.
    np.testing.assert_allclose(out.numpy(), exact, rtol=4e-7, atol=2e-7)
    out.sum().backward()
    density = np.exp(-0.5 * x64 * x64) / math.sqrt(2.0 * math.pi)
    slope = 0.5 * (1.0 + reference(x64 / math.sqrt(2.0))) + x64 * density
    assert t.grad.dtype == mt.float32
    np.testing.assert_allclose(t.grad.numpy(), slope, rtol=1e-6, atol=2e-7)
