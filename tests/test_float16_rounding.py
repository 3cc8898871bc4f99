"""The NumPy paths of ``backend.host_float16``: NumPy's float16 conversions, bit for bit.

NumPy converts one element at a time, and a result in float16's subnormal range takes about
100 ns an element (unscaled gradients live there); without a C compiler the backend computes
the same bits on whole arrays. The oracle is NumPy's own ``astype``. (The compiled C path:
``tests/test_host_float16.py``.)
"""

from __future__ import annotations

import numpy as np
import pytest

from minitorch_amp.backend import host_c, host_float16
from minitorch_amp.backend.cast import convert, copy_into
from minitorch_amp.backend.host_float16 import float16_from_float32, float32_from_float16


@pytest.fixture
def numpy_paths(monkeypatch):
    """The conversions as they run without a C compiler."""
    monkeypatch.setitem(host_c._loaded, "float16", (None, "NumPy (this test)"))


def numpy_bits(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(np.float16).view(np.uint16)


def compiled_c():
    """The compiled ``csrc/float16.c`` (skips where this machine has no C compiler)."""
    module = host_float16.compiled()
    if module is None:
        pytest.skip(host_c.status("float16"))
    return module


def c_from_float32(x: np.ndarray) -> np.ndarray:
    out = np.empty(x.shape, np.float16)
    compiled_c().from_float32(np.ascontiguousarray(x), out)
    return out


def c_to_float32(x: np.ndarray, out=None) -> np.ndarray:
    out = np.empty(x.shape, np.float32) if out is None else out
    compiled_c().to_float32(np.ascontiguousarray(x), out)
    return out


@pytest.fixture(params=["NumPy integer passes", "compiled C"])
def rounding(request):
    """Each float32 -> float16 implementation of the backend."""
    return float16_from_float32 if request.param.startswith("NumPy") else c_from_float32


@pytest.fixture(params=["NumPy table", "compiled C"])
def widening(request):
    """Each float16 -> float32 implementation of the backend."""
    return float32_from_float16 if request.param.startswith("NumPy") else c_to_float32


def assert_same_as_numpy(x: np.ndarray, rounding) -> None:
    got = rounding(x)
    assert got.dtype == np.float16 and got.shape == x.shape
    want = numpy_bits(x)
    bad = np.flatnonzero(got.view(np.uint16) != want)
    assert bad.size == 0, (x.reshape(-1)[bad[:5]], want.reshape(-1)[bad[:5]])


def test_every_float16_rounding_boundary_and_its_neighbours(rounding):
    """For every float16 value: the float32 halfway to the next one (a tie), one float32
    step either side of it, and the value itself, with both signs."""
    h = np.arange(0x7C00, dtype=np.uint32).astype(np.uint16).view(np.float16)
    lo, hi = h[:-1].astype(np.float32), h[1:].astype(np.float32)
    mid = ((lo.astype(np.float64) + hi.astype(np.float64)) / 2).astype(np.float32)
    bits = mid.view(np.uint32)
    points = np.concatenate([lo, mid, (bits - 1).view(np.float32), (bits + 1).view(np.float32)])
    points = np.concatenate([points, [65504, 65519.996, 65520, 65536, 2.0**-24, 2.0**-25]])
    assert_same_as_numpy(np.concatenate([points, -points]).astype(np.float32), rounding)


def test_a_sweep_of_every_kind_of_float32_bit_pattern(rounding):
    """4.3 million patterns spread over all 2**32: NaNs with every payload top, infs,
    float32 subnormals, underflow to zero, overflow."""
    patterns = np.arange(0, 2**32, 997, dtype=np.uint64).astype(np.uint32)
    assert_same_as_numpy(patterns.view(np.float32), rounding)


def test_specials_and_shapes(rounding):
    specials = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 3.4e38], np.float32
    )
    nan_payloads = np.array([0x7F800001, 0x7FC00000, 0xFF802000, 0x7FFFFFFF], np.uint32)
    assert_same_as_numpy(np.concatenate([specials, nan_payloads.view(np.float32)]), rounding)
    assert_same_as_numpy(np.array(2.0**-20, np.float32), rounding)  # 0-d stays 0-d
    x = np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32) * 1e-5
    assert_same_as_numpy(x.T, rounding)  # a strided view
    assert_same_as_numpy(np.zeros((0, 3), np.float32), rounding)


def test_a_million_random_float32_bit_patterns(rounding):
    bits = np.random.default_rng(3).integers(0, 2**32, 10**6, dtype=np.uint64)
    assert_same_as_numpy(bits.astype(np.uint32).view(np.float32), rounding)


@pytest.mark.parametrize("source, target", [("float32", "float16"), ("float16", "float32"),
    ("float32", "bfloat16"), ("float64", "float16"), ("float32", "float32")])  # fmt: skip
@pytest.mark.parametrize("paths", ["as found", "NumPy"])
def test_convert_is_astype(source, target, paths, request):
    if paths == "NumPy":
        request.getfixturevalue("numpy_paths")
    x = np.random.default_rng(1).standard_normal((50, 7)).astype(np.float32) * 1e-6
    x = x.astype(source).T  # subnormal float16s, a strided view
    out = convert(x, target)
    with np.errstate(over="ignore"):
        want = x.astype(target)
    assert out.dtype == want.dtype and out.shape == want.shape and out.flags.c_contiguous
    np.testing.assert_array_equal(out.view(f"u{out.itemsize}"), want.view(f"u{want.itemsize}"))
    assert out is not x and not np.shares_memory(out, x)


def test_every_float16_widens_as_numpy_widens_it_nan_payloads_included(widening):
    every = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    want = every.astype(np.float32).view(np.uint32)
    np.testing.assert_array_equal(widening(every).view(np.uint32), want)
    out = np.empty((2**8, 2**8), np.float32)
    assert widening(every.reshape(2**8, 2**8), out=out) is out
    np.testing.assert_array_equal(out.reshape(-1).view(np.uint32), want)
    zero_d = widening(np.array(1.5, np.float16))
    assert isinstance(zero_d, np.ndarray) and zero_d.shape == () and zero_d == 1.5  # 0-d stays


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("paths", ["as found", "NumPy"])
def test_copy_into_writes_what_copyto_writes_every_float16_included(layout, paths, request):
    if paths == "NumPy":
        request.getfixturevalue("numpy_paths")
    every = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    x = every.reshape(2**8, 2**8)
    x = x if layout == "contiguous" else x.T
    out, want = np.empty(x.shape, np.float32), np.empty(x.shape, np.float32)
    np.copyto(want, x)
    assert copy_into(out, x) is None
    np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize(
    "x, out",
    [
        (np.arange(6.0).reshape(2, 3), np.empty((2, 3), np.float32)),  # float64 into float32
        (np.arange(6, dtype=np.float16).reshape(2, 3), np.empty((2, 3), np.float64)),
        (np.arange(6, dtype=np.float16).reshape(2, 3), np.empty((3, 2), np.float32).T),
        (np.arange(3, dtype=np.float16), np.empty((2, 3), np.float32)),  # broadcast
    ],
    ids=["float64", "into float64", "into a transposed buffer", "broadcast"],
)
def test_copy_into_is_copyto_for_every_other_pair(x, out):
    want = np.empty_like(out)
    np.copyto(want, x, casting="unsafe")
    copy_into(out, x)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize(
    "source, target, scale, whole_array",
    [
        ("float16", "float32", 1.0, True),  # the table: as fast for normal values
        ("float16", "float32", 1e-6, True),
        ("float32", "float16", 1.0, False),  # no value is slow in NumPy
        ("float32", "float16", 1e-6, True),  # every value is
        ("float32", "float16", "3%", True),  # 3% of them already cost more than the integers
    ],
)
def test_without_c_convert_takes_the_whole_array_path_where_it_is_faster(
    source, target, scale, whole_array, monkeypatch, numpy_paths
):
    """Both paths give the same bits (tested above); size and a sample decide the faster one."""
    calls = []
    for name in ("float16_from_float32", "float32_from_float16"):
        real = getattr(host_float16, name)
        monkeypatch.setattr(
            host_float16, name, lambda x, *a, real=real, **k: calls.append(1) or real(x, *a, **k)
        )
    rng = np.random.default_rng(2)
    x = rng.standard_normal(20000)
    if scale == "3%":
        x[rng.random(x.size) < 0.03] *= 1e-6  # these round to float16 subnormals
    else:
        x *= scale
    x = x.astype(source)
    out = convert(x, target)
    assert len(calls) == whole_array
    with np.errstate(over="ignore"):
        want = x.astype(target)
    np.testing.assert_array_equal(out.view(f"u{out.itemsize}"), want.view(f"u{want.itemsize}"))
    small = x[: host_float16._WHOLE_ARRAY_FROM - 1]
    convert(small, target)  # too small to pay: NumPy's own conversion
    assert len(calls) == whole_array
