"""The Hopper FP8 GEMM (``cuda/gemm_fp8_sm90.cu``) on a CPU: its build, its twin, its plan,
and its logic run by ``tests/fp8_gemm_emulator.cpp``.

Read top to bottom:

1. the launcher and the kernel file agree (registered names, the sm_90a target), and NVRTC,
   with the loader's options, builds PTX with the FP8 wgmma for every format pair (``.ci/run``
   also builds it with nvcc for sm_90a, where ptxas checks the instructions, and rejects
   register spills);
2. the twin is the specification: the exact product, the inverse scales, one rounding;
3. the emulated kernel against the twin, bit for bit where the float32 sums are exact
   (small integers), for every format pair and output type, both tile widths, tails in M, N
   and K, a persistent grid smaller than the work, and both extreme thread timings.

The GPU half, with ``torch._scaled_mm``, is ``test_fp8_gpu.py``.
"""

from __future__ import annotations

import subprocess

import ml_dtypes
import numpy as np
import pytest
from test_gemm_emulator import build_emulator

from minitorch_amp.backend import fp8_gemm as fp8_gemm_module
from minitorch_amp.backend import gemm_sm90, kernels, nvrtc, tensor_maps
from minitorch_amp.backend.fp8_gemm import fp8_gemm, twin_gemm
from minitorch_amp.backend.fp8_kernels import E4M3, E5M2, FORMATS

EMULATOR = fp8_gemm_module.GEMM_KERNELS.path.parents[1] / "tests" / "fp8_gemm_emulator.cpp"
PAIRS = [(E4M3, E4M3), (E4M3, E5M2), (E5M2, E4M3)]
OUTS = [np.dtype("float32"), np.dtype("float16"), np.dtype(ml_dtypes.bfloat16)]

# --- 1. the kernel file -------------------------------------------------------------------


def test_registered_for_sm90a_with_every_format_pair_output_and_width():
    entry = kernels.REGISTRY[fp8_gemm_module.GEMM_FILE]
    assert entry is fp8_gemm_module.GEMM_KERNELS and entry.arch == "sm_90a"
    assert len(entry.names) == len(PAIRS) * len(OUTS) * len(fp8_gemm_module.TILE_WIDTHS)
    assert "gemm_fp8_sm90<__nv_bfloat16,0,1,256>" in entry.names


def test_nvrtc_builds_the_fp8_wgmma_for_every_format_pair(nvrtc_available):
    # (test_kernel_sources.py compiles every registered name; three suffice for the PTX)
    entry = fp8_gemm_module.GEMM_KERNELS
    names = [fp8_gemm_module.gemm_kernel_name("float32", a, b, 128) for a, b in PAIRS]
    result = nvrtc.compile_source(
        entry.source(), entry.file, entry.all_options(), names, arch=entry.arch
    )
    for types in ("e4m3.e4m3", "e4m3.e5m2", "e5m2.e4m3"):
        assert f"wgmma.mma_async.sync.aligned.m64n128k32.f32.{types}" in result["ptx"]
    for instruction in ("cp.async.bulk.tensor.2d", "mbarrier.try_wait.parity", "setmaxnreg"):
        assert instruction in result["ptx"], f"the PTX has no {instruction}"


@pytest.mark.parametrize("m, n", [(4096, 4096), (8192, 8192), (128, 128), (1, 1), (300, 7000)])
@pytest.mark.parametrize("sms", [132, 1])
def test_the_plan_never_leaves_a_cta_without_a_tile(m, n, sms):
    bn, grid = fp8_gemm_module.gemm_plan(m, n, sms)
    tiles = -(-m // gemm_sm90.BM) * -(-n // bn)
    assert bn in fp8_gemm_module.TILE_WIDTHS and 1 <= grid <= min(tiles, sms)


# --- 2. the twin --------------------------------------------------------------------------


def small_integers(rng, shape, code):
    """FP8 values that are integers in [-8, 8]: every sum of their products is exact in
    float32, in any order, so the kernel and the twin must agree bit for bit."""
    return rng.integers(-8, 9, shape).astype(np.float32).astype(FORMATS[code])


def test_the_twin_multiplies_the_exact_product_by_the_product_of_the_inverse_scales():
    rng = np.random.default_rng(0)
    a, b = small_integers(rng, (5, 48), E4M3), small_integers(rng, (48, 3), E5M2)
    sa, sb = np.array([0.5], np.float32), np.array([3.0], np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64) * 1.5
    np.testing.assert_array_equal(twin_gemm(a, b, sa, sb, np.float32), exact)
    np.testing.assert_array_equal(fp8_gemm(a, b, sa, sb, np.float32), exact)  # NumPy: the twin
    storage = twin_gemm(a.view(np.uint8), b.view(np.uint8), sa, sb, np.float32, E4M3, E5M2)
    np.testing.assert_array_equal(storage, exact)


@pytest.mark.parametrize(
    "a, b, kwargs, error",
    [
        (np.zeros((2, 16), np.uint8), np.zeros((16, 2), np.uint8), {}, "format code"),
        (np.zeros((2, 16), FORMATS[E5M2]), np.zeros((16, 2), FORMATS[E5M2]), {}, "E5M2 x E5M2"),
        (np.zeros((2, 16), FORMATS[E4M3]), np.zeros((8, 2), FORMATS[E4M3]), {}, "do not match"),
        (np.zeros((2, 16), FORMATS[E4M3]), np.zeros((16, 2), FORMATS[E4M3]), {"out": "int32"}, ""),
        (np.zeros((2, 16), FORMATS[E4M3]), np.zeros((16, 2), np.uint8), {"b_code": 1}, ""),
    ],
)
def test_bad_operands_are_refused_with_what_to_pass(a, b, kwargs, error):
    out = kwargs.pop("out", np.float32)
    scale = np.ones(1, np.float32)
    if not error:  # the last two are fine: a uint8 operand with its code, an int32 output
        if out == "int32":
            with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
                fp8_gemm(a, b, scale, scale, out)
        else:
            assert fp8_gemm(a, b, scale, scale, out, **kwargs).shape == (2, 2)
        return
    with pytest.raises((TypeError, ValueError), match=error):
        fp8_gemm(a, b, scale, scale, out)


# --- 3. the emulated kernel ---------------------------------------------------------------


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    directory = tmp_path_factory.mktemp("fp8_gemm")
    return build_emulator(directory, fp8_gemm_module.GEMM_KERNELS.path.parent, EMULATOR)


def emulate(
    binary, workdir, a, b_t, codes, scales, out_dtype, bn, grid=None, mode="early", bias=None
):  # fmt: skip
    """Run the kernel in the emulator with the launcher's tensor maps (and ``bias``, an
    ``out_dtype`` [N] array, or none); return the result."""
    m, k = a.shape
    n = b_t.shape[0]
    a8, b8 = np.ascontiguousarray(a.view(np.uint8)), np.ascontiguousarray(b_t.view(np.uint8))
    a8.tofile(workdir / "a.bin")
    b8.tofile(workdir / "b.bin")
    np.array(scales, np.float32).tofile(workdir / "scales.bin")
    maps = []
    for x, rows in ((a8, gemm_sm90.BM), (b8, bn)):
        spec = tensor_maps.map_spec(x.view(np.float16), gemm_sm90.operand_box(True, rows))
        maps += [*spec["dims"], spec["row_stride"], *spec["box"]]
    out_type = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}[np.dtype(out_dtype).name]
    units = -(-m // gemm_sm90.BM) * -(-n // bn)
    numbers = [out_type, *codes, bn, m, n, k, grid or units, mode, *maps]
    files = [workdir / "a.bin", workdir / "b.bin", workdir / "scales.bin", workdir / "out.bin"]
    if bias is not None:
        np.ascontiguousarray(bias, dtype=out_dtype).tofile(workdir / "bias.bin")
    files.append(workdir / "bias.bin" if bias is not None else "-")
    command = [str(binary), *map(str, numbers), *map(str, files)]
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    assert run.returncode == 0, f"emulator failed ({run.returncode}): {run.stderr}"
    assert run.stdout.startswith("ok ")
    return np.fromfile(workdir / "out.bin", dtype=out_dtype).reshape(m, n)


# (M, N, K, bn, grid, mode): what each case exercises. K is a multiple of 16 (TMA's rule).
CASES = [
    (136, 136, 272, 128, None, "early"),  # M, N tails; K = 2 blocks of 128 and a 16 tail
    (128, 256, 768, 128, 1, "late"),  # one CTA, 2 tiles x 6 K blocks through a 6-stage ring
    (200, 296, 384, 256, 2, "early"),  # the wide tile: two wgmma per k32; 2 CTAs, 4 tiles
    (8, 24, 16, 256, None, "late"),  # smaller than one box in every direction
]


@pytest.mark.parametrize("with_bias", [False, True], ids=["plain", "bias"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_emulated_kernel_equals_the_twin_where_the_sums_are_exact(
    emulator, tmp_path, case, with_bias
):
    m, n, k, bn, grid, mode = CASES[case]
    codes, out_dtype = PAIRS[case % len(PAIRS)], OUTS[case % len(OUTS)]
    rng = np.random.default_rng(200 + case)
    a, b_t = small_integers(rng, (m, k), codes[0]), small_integers(rng, (n, k), codes[1])
    bias = None
    if with_bias:  # fractions the 16-bit sums must round: the product is rounded first
        bias = (rng.standard_normal(n) * 3).astype(np.float32).astype(out_dtype)
    scales = (0.5, 0.375)
    out = emulate(emulator, tmp_path, a, b_t, codes, scales, out_dtype, bn, grid, mode, bias)
    sa, sb = (np.array([s], np.float32) for s in scales)
    expected = twin_gemm(a, b_t.T, sa, sb, out_dtype, bias=bias)
    np.testing.assert_array_equal(out.view(np.uint8), expected.view(np.uint8))
    if with_bias:  # the twin's add (NumPy's, ml_dtypes') is the kernel's float32 epilogue
        plain = twin_gemm(a, b_t.T, sa, sb, out_dtype).astype(np.float32)
        wide = (plain + bias.astype(np.float32)).astype(out_dtype)
        np.testing.assert_array_equal(expected.view(np.uint8), wide.view(np.uint8))


def test_emulated_kernel_meets_the_twin_on_random_values_and_edges(emulator, tmp_path):
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((130, 160)) * 40).astype(np.float32)
    a[0, :4] = [448.0, -448.0, 2.0**-9, -(2.0**-9)]  # the extremes of E4M3
    a = a.clip(-448, 448).astype(FORMATS[E4M3])
    b_t = (rng.standard_normal((136, 160)) * 2.0**-8).astype(FORMATS[E5M2])  # subnormals too
    out = emulate(emulator, tmp_path, a, b_t, (E4M3, E5M2), (2.0, 0.25), np.float32, 128)
    sa, sb = np.array([2.0], np.float32), np.array([0.25], np.float32)
    twin = twin_gemm(a, b_t.T, sa, sb, np.float32)
    exact = a.astype(np.float64) @ b_t.T.astype(np.float64) * 0.5
    bound = np.abs(a.astype(np.float64)) @ np.abs(b_t.T.astype(np.float64)) * 0.5 * 160 * 2.0**-24
    assert np.all(np.abs(out - exact) <= bound + 1e-30)
    assert np.all(np.abs(twin - exact) <= bound + 1e-30)


# --- 4. the launcher's CuPy path, with NumPy posing as CuPy ----------------------------------


@pytest.fixture
def fake_gpu(monkeypatch):
    """NumPy arrays as CuPy ones (tests/emulated_gpu.py), a Hopper with 132 SMs, and a
    kernels.launch that records instead of launching."""
    import emulated_gpu

    launches = []
    emulated_gpu.install(None, monkeypatch, "fp8_cast.cu", block=256)
    fake = fp8_gemm_module._device.cupy
    fake.empty = lambda shape, dtype: np.zeros(shape, dtype).view(emulated_gpu.HostArray)
    fake.ascontiguousarray = lambda a: np.ascontiguousarray(a).view(emulated_gpu.HostArray)
    fake.matmul = np.matmul
    fake.cuda.runtime = type("runtime", (), {"getDevice": staticmethod(lambda: 0)})
    monkeypatch.setattr(gemm_sm90, "device_is_hopper", lambda: True)
    monkeypatch.setattr(gemm_sm90, "sm_count", lambda: 132)
    monkeypatch.setattr(gemm_sm90, "operand_map", lambda x, k_major, rows: (x.shape, rows))
    monkeypatch.setattr(kernels, "launch", lambda *call: launches.append(call))
    monkeypatch.delenv(gemm_sm90.KERNEL_ENV, raising=False)
    return emulated_gpu.HostArray, launches


def test_the_launcher_feeds_the_kernel_k_major_words_and_device_scales(fake_gpu):
    host, launches = fake_gpu
    a = np.zeros((300, 4096), np.uint8).view(host)
    w = np.zeros((1000, 4096), np.uint8).view(host)  # b = w.T: already K-major, no copy
    scale = np.ones(1, np.float32).view(host)
    out = fp8_gemm(a, w.T, scale, scale, ml_dtypes.bfloat16, E4M3, E5M2)
    assert out.shape == (300, 1000) and out.dtype == ml_dtypes.bfloat16
    ((file, name, grid, block, args, shared),) = launches
    assert (file, name) == (fp8_gemm_module.GEMM_FILE, "gemm_fp8_sm90<__nv_bfloat16,0,1,128>")
    assert grid == (3 * 8, 1, 1) and block == (gemm_sm90.THREADS, 1, 1)
    assert shared == gemm_sm90.smem_bytes(128)
    map_a, map_b, c, bias, sa, sb, m, n, k, ldc = args
    assert map_a == ((300, 2048), gemm_sm90.BM) and map_b == ((1000, 2048), 128)  # words
    assert c is out and sa is scale and sb is scale  # the scales stay on the device
    assert type(bias) is np.int64 and bias == 0  # no bias: a null pointer
    assert [type(v) for v in (m, n, k, ldc)] == [np.int32] * 4
    assert (m, n, k, ldc) == (300, 1000, 4096, 1000)


def test_the_launcher_falls_back_to_the_twin_arithmetic_where_tma_cannot_go(fake_gpu):
    host, launches = fake_gpu
    rng = np.random.default_rng(4)
    a, b = small_integers(rng, (5, 23), E4M3), small_integers(rng, (23, 3), E4M3)  # K odd
    scale = np.array([0.5], np.float32)
    out = fp8_gemm(a.view(np.uint8).view(host), b.view(np.uint8).view(host),
                   scale.view(host), scale.view(host), np.float32, E4M3, E4M3)  # fmt: skip
    assert launches == []
    np.testing.assert_array_equal(np.asarray(out), twin_gemm(a, b, scale, scale, np.float32))


def test_the_launcher_hands_a_bias_to_the_epilogue_and_the_fallback_adds_it(fake_gpu):
    host, launches = fake_gpu
    a = np.zeros((300, 4096), np.uint8).view(host)
    w = np.zeros((1000, 4096), np.uint8).view(host)
    scale = np.ones(1, np.float32).view(host)
    bias = np.arange(1000, dtype=np.float32).astype(ml_dtypes.bfloat16).view(host)
    fp8_gemm(a, w.T, scale, scale, ml_dtypes.bfloat16, E4M3, E5M2, bias=bias)
    ((_, _, _, _, args, _),) = launches
    assert np.shares_memory(args[3], bias)  # read on the device where it is (no copy)
    rng = np.random.default_rng(8)
    a, b = small_integers(rng, (5, 23), E4M3), small_integers(rng, (23, 3), E4M3)  # K odd
    small = np.array([0.5, -1.25, 3.0], np.float32)
    out = fp8_gemm(a.view(np.uint8).view(host), b.view(np.uint8).view(host), scale, scale,
                   np.float32, E4M3, E4M3, bias=small.view(host))  # fmt: skip
    assert len(launches) == 1  # the twin's arithmetic on CuPy, and the bias added to it
    expected = twin_gemm(a, b, np.ones(1, np.float32), np.ones(1, np.float32), np.float32) + small
    np.testing.assert_array_equal(np.asarray(out), expected)


@pytest.mark.parametrize(
    "bias, error",
    [
        (np.zeros(2, np.float16), ValueError),  # not the result's dtype
        (np.zeros(3, np.float32), ValueError),  # not [N]
        (np.zeros((1, 2), np.float32), ValueError),  # not 1-D
        ([0.0, 0.0], TypeError),  # not an array
    ],
    ids=["dtype", "length", "2-D", "list"],
)
def test_a_wrong_bias_is_refused_before_anything_is_written(bias, error):
    a = np.zeros((2, 16), FORMATS[E4M3])
    scale = np.ones(1, np.float32)
    out = np.full((2, 2), 5.0, np.float32)
    with pytest.raises(error, match="bias"):
        fp8_gemm(a, a.T.copy(), scale, scale, np.float32, out=out, bias=bias)
    assert (out == 5.0).all()
