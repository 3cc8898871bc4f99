"""The float32 <-> float16 cast: its NumPy twin against independent oracles, and the raw
kernel (``cuda/cast.cu``) against the twin, bit for bit, at every length and alignment.

The oracle for float32 -> float16 is Python's own ``struct`` ``'e'`` format, which rounds a
double half-to-even (a float32 widens to a double exactly); for float16 -> float32 it is the
formula ``(-1)^s * 2^(e-15) * 1.m`` evaluated in float64 over all 65536 bit patterns.
"""

from __future__ import annotations

import math
import re
import struct

import numpy as np
import pytest

from minitorch_amp.backend import cast as cast_module
from minitorch_amp.backend import device, kernels, nvrtc
from minitorch_amp.backend.cast import cast

F16, F32 = np.dtype("float16"), np.dtype("float32")
BF16 = np.dtype("bfloat16")  # ml_dtypes' (registered by importing minitorch_amp)
_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def bits(a) -> np.ndarray:
    a = np.ascontiguousarray(device.asnumpy(a)).reshape(-1)
    return a.view(_UINT[a.itemsize])


def assert_same_bits(got, expected, where: str = "") -> None:
    """Equal bit patterns everywhere except NaN, where only NaN-ness must agree."""
    got, expected = device.asnumpy(got), device.asnumpy(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape, where
    nan = np.isnan(expected.reshape(-1))
    np.testing.assert_array_equal(np.isnan(got.reshape(-1)), nan, err_msg=where)
    np.testing.assert_array_equal(bits(got)[~nan], bits(expected)[~nan], err_msg=where)


def oracle_half_bits(x: float) -> int | None:
    """Round-half-even float16 bits of ``x`` (None for NaN), from Python's struct module."""
    if math.isnan(x):
        return None
    try:
        return struct.unpack("<H", struct.pack("<e", x))[0]
    except OverflowError:  # finite, but rounds past 65504
        return 0xFC00 if x < 0 else 0x7C00


def edge_floats(rng, n: int) -> np.ndarray:
    """float32 values that stress a float16 cast: ties, the overflow edge, subnormals, NaN."""
    lower = rng.integers(0, 0x7BFF, n, dtype=np.uint16)  # finite halves below 65504
    halves = lower.view(F16).astype(F32)
    ties = (halves + (lower + 1).view(F16).astype(F32)) / 2  # exactly halfway to the next
    special = np.array(
        [0.0, -0.0, 65504, 65519.996, 65520, -65520, 7e4, 1e30, np.inf, -np.inf, np.nan]
        + [2.0**-24, 2.0**-25, 3 * 2.0**-25, 1023 * 2.0**-24, 2.0**-14, 1e-40, -1e-40],
        dtype=F32,
    )
    wide = (rng.standard_normal(n) * 2.0 ** rng.integers(-30, 20, n)).astype(F32)
    pool = np.concatenate([halves, ties, wide, special, -ties])
    return rng.choice(pool, n)


# ---- the twin (CPU): float32 -> float16 -------------------------------------------------------
def test_twin_rounds_like_an_independent_half_even_oracle():
    values = edge_floats(np.random.default_rng(0), 20_000)
    got = bits(cast(values, "float16"))
    for x, b in zip(values.tolist(), got.tolist()):
        expected = oracle_half_bits(x)
        if expected is None:
            assert (b & 0x7C00) == 0x7C00 and (b & 0x03FF) != 0, hex(b)  # a NaN
        else:
            assert b == expected, (x, hex(b), hex(expected))


@pytest.mark.parametrize(
    "x, expected",
    [
        (1 + 2**-11, 1.0),  # halfway between 1 and 1 + 2^-10: to the even 1
        (1 + 3 * 2**-11, 1 + 2**-9),  # halfway between odd and even: up to the even
        (1 + 2**-11 + 2**-20, 1 + 2**-10),  # just above halfway: up
        (2049.0, 2048.0),  # spacing 2 at 2048: the tie goes to 2048
        (2051.0, 2052.0),
        (-2051.0, -2052.0),
    ],
)
def test_halfway_cases_round_to_the_even_neighbour(x, expected):
    assert cast(np.array([x], F32), "float16")[0] == np.float16(expected)


@pytest.mark.parametrize(
    "x, expected",
    [
        (65504.0, 65504.0),
        (float(np.nextafter(np.float32(65520), np.float32(0))), 65504.0),
        (65520.0, np.inf),  # 65504 + half an ulp (16) rounds up, to inf
        (-65520.0, -np.inf),
        (1e30, np.inf),
        (np.inf, np.inf),
        (-np.inf, -np.inf),
    ],
)
def test_overflow_starts_at_exactly_65520(x, expected):
    found_inf = np.zeros(1, dtype=bool)
    out = cast(np.array([x], F32), "float16", found_inf)
    assert out[0] == expected
    assert found_inf[0] == bool(np.isinf(expected))


@pytest.mark.parametrize(
    "x, half_bits",
    [
        (2.0**-24, 0x0001),  # the smallest subnormal, exact
        (1023 * 2.0**-24, 0x03FF),  # the largest subnormal, exact
        (2.0**-14, 0x0400),  # the smallest normal
        (2.0**-25, 0x0000),  # halfway to 2^-24: to the even 0
        (float(np.nextafter(np.float32(2.0**-25), np.float32(1))), 0x0001),
        (3 * 2.0**-25, 0x0002),  # halfway between 1 and 2 units: to 2
        (-(2.0**-24), 0x8001),
        (-1e-40, 0x8000),  # a float32 subnormal: -0, sign kept, not flushed oddly
    ],
)
def test_subnormals_are_exact_and_round_to_even(x, half_bits):
    assert bits(cast(np.array([x], F32), "float16"))[0] == half_bits


def test_nan_stays_nan_and_raises_the_flag():
    found_inf = np.zeros(1, dtype=bool)
    out = cast(np.array([1.0, np.nan], F32), "float16", found_inf)
    assert out[0] == 1 and np.isnan(out[1]) and found_inf[0]


# ---- the twin (CPU): float16 -> float32 and the flag -------------------------------------
def test_every_half_widens_exactly():
    every = np.arange(2**16, dtype=np.uint32)
    sign = np.where(every >> 15, -1.0, 1.0)
    exponent, mantissa = (every >> 10) & 0x1F, (every & 0x3FF).astype(np.float64)
    value = np.where(
        exponent == 0,
        sign * mantissa * 2.0**-24,  # subnormal
        sign * (1 + mantissa / 1024) * 2.0 ** (exponent.astype(np.float64) - 15),
    )
    value = np.where(exponent == 31, np.where(mantissa == 0, sign * np.inf, np.nan), value)
    out = cast(every.astype(np.uint16).view(F16), "float32")
    assert out.dtype == F32
    assert_same_bits(out, value.astype(F32))  # float64 -> float32 is exact for all of these
    np.testing.assert_array_equal(
        bits(cast(out, "float16"))[~np.isnan(value)], every[~np.isnan(value)]
    )


def test_the_flag_is_ored_never_cleared_and_judges_the_output():
    found_inf = np.zeros(1, dtype=bool)
    cast(np.array([65504.0, -65504.0], F32), "float16", found_inf)
    assert not found_inf[0]  # the largest half is finite
    cast(np.array([np.inf], F16), "float32", found_inf)
    assert found_inf[0]
    cast(np.array([1.0], F32), "float16", found_inf)
    assert found_inf[0]  # never cleared
    empty = np.zeros(1, dtype=bool)
    cast(np.zeros(0, F32), "float16", empty)
    assert not empty[0]


def test_a_bad_flag_is_refused():
    with pytest.raises(ValueError, match="found_inf"):
        cast(np.ones(2, F32), "float16", np.zeros(1, dtype=np.int32))
    with pytest.raises(ValueError, match="found_inf"):
        cast(np.ones(2, F32), "float16", np.zeros(2, dtype=bool))


def test_other_dtype_pairs_are_astype_and_the_result_is_a_new_c_contiguous_array():
    x = np.arange(12, dtype=F32).reshape(3, 4).T
    out = cast(x, "float64")
    assert out.dtype == np.float64 and out.flags.c_contiguous
    np.testing.assert_array_equal(out, x)
    same = cast(x, "float32")
    assert same is not x and not np.shares_memory(same, x) and same.flags.c_contiguous


# ---- the kernel source (CPU: no GPU needed) ----------------------------------------------
SOURCE = kernels.REGISTRY["cast.cu"].source()


def test_every_registered_name_is_a_kernel_in_cast_cu():
    entry = kernels.REGISTRY["cast.cu"]
    assert entry is cast_module.CAST
    kernel_names = {*cast_module._KERNELS.values(), *cast_module._PAIR_KERNELS.values()}
    assert set(entry.names) == kernel_names
    for name in entry.names:
        assert re.search(rf'extern "C" __global__ void {name}\(', SOURCE), name


def test_the_launcher_and_the_kernel_agree_on_the_vector_width():
    assert f"constexpr int kVec = {cast_module._PER_THREAD};" in SOURCE


@pytest.mark.parametrize("arch", ["compute_80", "compute_90"])
def test_cast_cu_compiles_with_nvrtc_and_uses_16_byte_accesses(arch, nvrtc_available):
    entry = kernels.REGISTRY["cast.cu"]
    ptx = nvrtc.compile_source(entry.source(), "cast.cu", entry.all_options(), entry.names, arch)
    pairs = {"cast_pair_f32_to_f16": "cvt.rn.f16.f32", "cast_pair_f32_to_bf16": "cvt.rn.bf16.f32"}
    assert set(pairs) < set(entry.names)  # one launch for two arrays (cast_pair)
    for name in entry.names:
        body = ptx["ptx"].split(f".entry {name}(")[1].split(".entry")[0]
        assert "ld.global.nc.v4" in body and "st.global.v4" in body, name
        if name in pairs:  # both arrays' vector paths: two vector loops, 8 conversions each
            assert body.count(pairs[name]) >= 16 and body.count("st.global.v4") >= 2, name
    assert ptx["ptx"].count("cvt.rn.f16.f32") >= 8  # round to nearest even, spelled out
    assert ptx["ptx"].count("cvt.rn.bf16.f32") >= 8  # Ampere and later: one instruction


# ---- the kernel == the twin (GPU) ---------------------------------------------------------
def _sources(direction: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if direction == "f32_to_f16":
        return edge_floats(rng, n)
    if direction == "f32_to_bf16":  # any float32, and as many exact ties and near-ties
        words = rng.integers(0, 2**32, n, dtype=np.uint32)
        low = rng.choice(np.array([0x8000, 0x7FFF, 0x8001], np.uint32), n)
        tie = rng.random(n) < 0.5
        return np.where(tie, (words & 0xFFFF0000) | low, words).astype(np.uint32).view(F32)
    narrow = BF16 if direction == "bf16_to_f32" else F16
    return rng.integers(0, 2**16, n, dtype=np.uint16).view(narrow)  # every pattern, NaN too


DIRECTIONS = {
    "f32_to_f16": (F32, F16),
    "f16_to_f32": (F16, F32),
    "f32_to_bf16": (F32, BF16),
    "bf16_to_f32": (BF16, F32),
}
LENGTHS = [*range(71), 255, 256, 257, 4097, 1_000_003]


@pytest.fixture
def raw_kernels(monkeypatch):
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "1")
    return device.cupy


@pytest.mark.gpu
@pytest.mark.parametrize("check", [False, True])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_kernel_matches_the_twin_at_every_length_and_alignment(raw_kernels, direction, check):
    cp = raw_kernels
    dst_dtype = DIRECTIONS[direction][1]
    name = f"cast_{direction}" + ("_check" if check else "")
    sentinel = 0x5A  # fills the destination's allocation: nothing outside the view may change
    for n in LENGTHS:
        host = _sources(direction, n + 8, seed=n)
        for src_off in range(8):
            for dst_off in range(8):
                if n > 4097 and (src_off, dst_off) not in ((0, 0), (1, 0), (0, 3), (4, 4)):
                    continue  # the big length: a few alignments suffice
                src = cp.asarray(host)[src_off : src_off + n]
                dst_base = cp.full((n + 16) * dst_dtype.itemsize, sentinel, dtype=cp.uint8)
                dst_base = dst_base.view(dst_dtype)
                dst = dst_base[dst_off : dst_off + n]
                found_inf = cp.zeros(1, dtype=bool)
                args = (src, dst, np.int64(n)) + ((found_inf,) if check else ())
                if n:
                    blocks = min(-(-n // 2048), 4096)
                    kernels.launch("cast.cu", name, (blocks,), (256,), args)
                with np.errstate(over="ignore"):
                    expected = host[src_off : src_off + n].astype(dst_dtype)
                where = f"n={n} src_off={src_off} dst_off={dst_off}"
                assert_same_bits(dst, expected, where)
                untouched = cp.asnumpy(dst_base.view(cp.uint8))
                lo, hi = dst_off * dst_dtype.itemsize, (dst_off + n) * dst_dtype.itemsize
                assert (untouched[:lo] == sentinel).all(), where
                assert (untouched[hi:] == sentinel).all(), where
                if check:
                    assert bool(found_inf[0]) == (not np.isfinite(expected).all()), where


@pytest.mark.gpu
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_cast_on_cupy_equals_the_twin_for_views_0d_and_empty(raw_kernels, direction):
    cp = raw_kernels
    src_dtype, dst_dtype = DIRECTIONS[direction]
    host = _sources(direction, 6 * 35, seed=7).reshape(6, 35)
    views = {  # taken on the device, so the kernel sees offsets and strides
        "contiguous": lambda a: a,
        "offset": lambda a: a.reshape(-1)[3:],
        "transposed": lambda a: a.T,
        "strided": lambda a: a[:, ::3],
        "0-d": lambda a: a[0, 0, ...],
        "empty": lambda a: a[:0],
    }
    for label, view in views.items():
        flag_gpu, flag_cpu = cp.zeros(1, dtype=bool), np.zeros(1, dtype=bool)
        got = cast(view(cp.asarray(host)), dst_dtype, flag_gpu)
        expected = cast(view(host), dst_dtype, flag_cpu)
        assert isinstance(got, cp.ndarray) and got.flags.c_contiguous, label
        assert_same_bits(got, expected, label)
        assert bool(flag_gpu[0]) == bool(flag_cpu[0]), label
    done = cp.ones(1, dtype=bool)
    cast(cp.ones(3, src_dtype), dst_dtype, done)
    assert bool(done[0])  # set flags stay set


@pytest.mark.gpu
def test_the_kernel_and_cupys_astype_agree(raw_kernels, monkeypatch):
    cp = raw_kernels
    x = cp.asarray(edge_floats(np.random.default_rng(3), 100_001))
    with_kernel = cast(x, "float16")
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "0")
    assert_same_bits(with_kernel, cast(x, "float16"))


@pytest.mark.gpu
def test_a_host_flag_with_a_device_array_is_refused(raw_kernels):
    with pytest.raises(TypeError, match="found_inf"):
        cast(raw_kernels.ones(3, F32), "float16", np.zeros(1, dtype=bool))
