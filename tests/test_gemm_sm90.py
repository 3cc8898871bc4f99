"""The Hopper GEMM (``cuda/gemm_sm90.cu``) on a CPU: its build, its shape rule, and its
logic run by ``tests/gemm_sm90_emulator.cpp``.

Read top to bottom:

1. the launcher and the kernel file agree (constants, registered names, the sm_90a target),
   and NVRTC, with the loader's options, builds PTX that really uses wgmma, TMA and mbarriers
   (``.ci/run`` also builds it with nvcc for sm_90a and rejects register spills);
2. the shape rule: every plan covers the problem with no empty split and no idle CTA;
3. the emulated kernel against the specification (``test_gemm.py``'s float64 bound and the
   NumPy twin) for every layout, both tile widths, tails in M, N and K, every epilogue,
   split-K, a persistent grid smaller than the work, and both extreme thread timings; and
   that the emulator can fail (a consumer that frees its stage too early is caught).

The GPU half is ``test_gemm_sm90_gpu.py``.
"""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest
from test_gemm import LAYOUTS, assert_within_bound, error_bound, exact, stored
from test_gemm_emulator import build_emulator as build_any_emulator

from minitorch_amp.backend import gemm, gemm_sm90, kernels, nvrtc, tensor_maps
from minitorch_amp.backend.dtypes import float16, float32
from minitorch_amp.backend.gemm import gemm as run_gemm

SOURCE = gemm_sm90.KERNELS.source()
EMULATOR = gemm_sm90.KERNELS.path.parents[1] / "tests" / "gemm_sm90_emulator.cpp"


# --- 1. the kernel file -------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, value",
    [
        ("BM", gemm_sm90.BM),
        ("BK", gemm_sm90.BK),
        ("WG_N", gemm_sm90.WG_N),
        ("SMEM_TILES", gemm_sm90.SMEM_TILES),
        ("EPILOGUE_BIAS", gemm.EPILOGUE_BIAS),
        ("EPILOGUE_RELU", gemm.EPILOGUE_RELU),
        ("EPILOGUE_PRODUCT_F16", gemm.EPILOGUE_PRODUCT_F16),
        ("EPILOGUE_PRODUCT_BF16", gemm.EPILOGUE_PRODUCT_BF16),
    ],
)
def test_launcher_constants_match_the_kernel_file(name, value):
    match = re.search(rf"constexpr int {name} = ([0-9* ]+);", SOURCE)
    assert match, f"{name} is not defined in {gemm_sm90.FILE}"
    assert eval(match.group(1)) == value  # a product of integer literals


def test_threads_and_shared_memory_fit_one_cta_per_sm():
    assert re.search(r"constexpr int THREADS = 128 \* \(1 \+ CONSUMERS\);", SOURCE)
    assert re.search(r"constexpr int CONSUMERS = 2;", SOURCE) and gemm_sm90.THREADS == 384
    for bn in gemm_sm90.TILE_WIDTHS:
        assert gemm_sm90.stages_for(bn) >= 4
        assert gemm_sm90.smem_bytes(bn) <= 227 * 1024  # the H100's opt-in maximum per block
    # setmaxnreg's budget: 128 producer threads and 256 consumer threads share 64K registers
    producer = int(re.search(r"PRODUCER_REGS = (\d+);", SOURCE).group(1))
    consumer = int(re.search(r"CONSUMER_REGS = (\d+);", SOURCE).group(1))
    assert producer % 8 == 0 and consumer % 8 == 0
    assert 128 * producer + 256 * consumer <= 65536


def test_registered_for_sm90a_with_every_layout_width_and_output():
    entry = kernels.REGISTRY[gemm_sm90.FILE]
    assert entry is gemm_sm90.KERNELS and entry.arch == "sm_90a"
    assert "-arch=sm_90a" in entry.loader_options()
    assert len(gemm_sm90.NAMES) == 3 * 2 * len(gemm_sm90.SCHEDULES)  # (split-K: no reduce)
    for name in gemm_sm90.NAMES:
        assert re.search(r"__global__ void[^;{]*\b" + name.split("<")[0] + r"\(", SOURCE)


def test_nvrtc_builds_wgmma_tma_and_mbarrier_ptx(nvrtc_available):
    # One kernel: test_kernel_sources.py compiles every registered name (about 95 s on the
    # 2-core CI machine, where this one takes 2 s), and each has the instructions below.
    entry = gemm_sm90.KERNELS
    name = gemm_sm90.kernel_name(False, False, np.float16, 128)
    result = nvrtc.compile_source(SOURCE, entry.file, entry.all_options(), [name], entry.arch)
    assert set(result["lowered"]) == {name}
    ptx = result["ptx"]
    for instruction in (
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16",
        "cp.async.bulk.tensor.2d",
        "mbarrier.try_wait.parity",
        "mbarrier.arrive.expect_tx",
        "setmaxnreg.inc",
        "setmaxnreg.dec",
        "wgmma.wait_group.sync.aligned 1",
    ):
        assert instruction in ptx, f"the PTX has no {instruction}"


def test_the_kernel_refuses_to_build_without_sm90a_features(nvrtc_available):
    entry = gemm_sm90.KERNELS
    with pytest.raises(RuntimeError, match="sm_90a"):
        nvrtc.compile_source(SOURCE, entry.file, entry.all_options(), entry.names, "compute_90")


# --- 2. the shape rule --------------------------------------------------------------------

SHAPES = [
    (512, 4096, 4096),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (4096, 4096, 512),
    (512, 1024, 4096),
    (128, 128, 65536),
    (1, 1, 1),
    (300, 7, 129),
    (64, 64, 1 << 20),
]


@pytest.mark.parametrize("m, n, k", SHAPES)
@pytest.mark.parametrize("sms", [132, 114, 1])
def test_every_plan_covers_the_problem_without_empty_splits(m, n, k, sms):
    p = gemm_sm90.plan(m, n, k, sms)
    assert p.bn in gemm_sm90.TILE_WIDTHS
    tiles = -(-m // gemm_sm90.BM) * -(-n // p.bn)
    k_blocks = -(-k // gemm_sm90.BK)
    per_split = -(-k_blocks // p.splits)
    assert 1 <= p.splits <= max(k_blocks, 1)
    assert (p.splits - 1) * per_split < k_blocks  # the last split has work
    assert 1 <= p.grid <= min(sms, tiles * p.splits)


def test_the_simplenet_layer_fills_the_h100_without_splitting():
    # 512 x 4096 x 4096 in 128 x 128 tiles is 128 CTAs for 132 SMs
    assert gemm_sm90.plan(512, 4096, 4096, 132) == gemm_sm90.Plan(128, 1, 128)
    assert gemm_sm90.plan(4096, 4096, 4096, 132).bn == 256
    assert gemm_sm90.plan(128, 128, 65536, 132).splits > 1


def test_the_rule_picks_each_schedule_where_the_h100_sweep_measured_it_fastest():
    """The shape rule's table (gemm_sm90.py says how it was measured)."""
    plan = gemm_sm90.plan
    assert plan(4096, 4096, 512, 132) == gemm_sm90.Plan(128, 1, 132, pingpong=True)
    assert plan(2048, 2048, 2048, 132).pingpong  # 256 tiles, 32 K blocks
    assert plan(4096, 4096, 2112, 132) == gemm_sm90.Plan(256, 1, 132)  # 33 K blocks: wide
    assert plan(2048, 2048, 2112, 132) == gemm_sm90.Plan(128, 1, 132)  # 128 wide tiles: narrow
    assert plan(8192, 8192, 8192, 132) == gemm_sm90.Plan(256, 1, 132, pingpong=False)
    assert plan(128, 128, 8192, 132) == gemm_sm90.Plan(128, 16, 16, pingpong=False)


def test_tensor_map_boxes_are_one_swizzle_row_wide():
    a = np.zeros((300, 136), float16)
    assert tensor_maps.map_spec(a, gemm_sm90.operand_box(k_major=True, rows=128)) == {
        "dims": (136, 300),
        "row_stride": 272,
        "box": (64, 128),
    }
    assert gemm_sm90.operand_box(k_major=False, rows=256) == (64, 64)


def test_a_bad_kernel_choice_is_refused(monkeypatch):
    monkeypatch.setenv(gemm_sm90.KERNEL_ENV, "fastest")
    with pytest.raises(ValueError, match="auto, sm80 or sm90"):
        gemm_sm90.requested()
    monkeypatch.setenv(gemm_sm90.KERNEL_ENV, " SM80 ")
    assert gemm_sm90.requested() == "sm80"


# --- 3. the emulated kernel ---------------------------------------------------------------


def build_emulator(directory, kernel_dir):
    return build_any_emulator(directory, kernel_dir, EMULATOR)


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    return build_emulator(tmp_path_factory.mktemp("sm90"), gemm_sm90.KERNELS.path.parent)


def emulate(
    binary, workdir, a, b, ta, tb, out_dtype, bn, splits=1, grid=None, mode="early", **epilogue
):
    """Run the kernel in the emulator with the launcher's tensor maps; return the result.

    ``bn`` is 128, 256, or ``"128p"``: 128-wide tiles on the ping-pong schedule."""
    m, k = (a.shape[1], a.shape[0]) if ta else a.shape
    n = b.shape[0] if tb else b.shape[1]
    bias, c = epilogue.get("bias"), epilogue.get("c")
    alpha, beta = epilogue.get("alpha", 1.0), epilogue.get("beta", 0.0)
    a.tofile(workdir / "a.bin")
    b.tofile(workdir / "b.bin")
    start = c if beta != 0 else np.full((m, n), np.nan, dtype=out_dtype)  # unwritten shows
    start.astype(out_dtype).tofile(workdir / "c.bin")
    bias_file = "-"
    if bias is not None:
        bias.astype(out_dtype).tofile(workdir / "bias.bin")
        bias_file = str(workdir / "bias.bin")
    stored_bias = None if bias is None else bias.astype(out_dtype)
    product = epilogue.get("product_dtype")  # the launcher's flags for this epilogue:
    flags = gemm._Epilogue(stored_bias, epilogue.get("relu", False), alpha, beta, product).flags()
    width = int(str(bn).rstrip("p"))
    units = -(-m // gemm_sm90.BM) * -(-n // width) * splits
    maps = []
    for x, k_major, rows in ((a, not ta, gemm_sm90.BM), (b, tb, width)):
        spec = tensor_maps.map_spec(x, gemm_sm90.operand_box(k_major, rows))
        maps += [*spec["dims"], spec["row_stride"], *spec["box"]]
    out_type = "f16" if out_dtype == float16 else "f32"
    numbers = [
        int(ta),
        int(tb),
        out_type,
        bn,
        m,
        n,
        k,
        repr(float(alpha)),
        repr(float(beta)),
        flags,
        splits,
        grid or units,
        mode,
        *maps,
    ]
    files = [workdir / "a.bin", workdir / "b.bin", workdir / "c.bin", bias_file]
    command = [str(binary), *map(str, numbers), *map(str, files), str(workdir / "out.bin")]
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    assert run.returncode == 0, f"emulator failed ({run.returncode}): {run.stderr}"
    assert run.stdout.startswith("ok ")
    return np.fromfile(workdir / "out.bin", dtype=out_dtype).reshape(m, n)


def check_against_specification(out, a, b, ta, tb, out_dtype, options):
    assert_within_bound(out, a, b, ta, tb, **options)
    twin = run_gemm(a, b, ta, tb, out_dtype=out_dtype, **options)
    np.testing.assert_allclose(out.astype(float32), twin.astype(float32), rtol=2e-3, atol=1e-3)


# (M, N, K, bn, splits, grid): what each case exercises. Every stored row is a multiple of
# 16 bytes (TMA's rule; other operands go to gemm_fp16.cu), so M, N and K are multiples of 8.
CASES = [
    (136, 136, 72, 128, 1, None),  # M, N and K tails (TMA zero fill), two tile rows
    (128, 256, 448, 128, 1, 1),  # 7 K blocks through a 6-stage ring, one CTA, two tiles
    (200, 296, 200, 256, 1, 2),  # the wide tile: two wgmma per k16; 2 CTAs loop over 4 tiles
    (104, 56, 704, 128, 3, 2),  # split-K: 11 K blocks in 3 ranges, reduced in order
    (8, 8, 8, 128, 1, None),
    (1160, 8, 16, 128, 1, 3),  # 10 tile rows: crosses a GROUP_M = 8 group, persistent
    (264, 136, 200, "128p", 1, 2),  # ping-pong: 6 tiles, 2 CTAs, consumers alternate, tails
    (128, 384, 520, "128p", 1, 1),  # ping-pong: one CTA, 3 tiles of 9 K blocks (ring wraps)
    (136, 128, 704, "128p", 3, 2),  # ping-pong with split-K: 6 units over 2 CTAs
]
EPILOGUES = [
    dict(),
    dict(bias=True, relu=True),
    dict(alpha=0.5, beta=2.0, bias=True),
    dict(bias=True, relu=True, product=True),  # a float32 bias on a float16 product (O1)
    dict(product=True),  # a float16 product widened (a cast's backward folded in)
]


@pytest.mark.slow
@pytest.mark.parametrize("ta, tb", LAYOUTS)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_emulated_kernel_matches_the_specification(emulator, tmp_path, ta, tb, case):
    m, n, k, bn, splits, grid = CASES[case]
    rng = np.random.default_rng(100 + case)
    a, b = stored(rng, m, k, ta), stored(rng, k, n, tb)
    for index, mode in enumerate(["early", "late"]):
        out_dtype = [float16, float32][(case + index) % 2]
        options = dict(EPILOGUES[(case + index) % len(EPILOGUES)])
        if options.pop("product", False):  # a float16 product in a float32 result (O1)
            options["product_dtype"], out_dtype = float16, float32
        if options.pop("bias", False):
            options["bias"] = rng.standard_normal(n).astype(out_dtype)
        if options.get("beta"):
            options["c"] = rng.standard_normal((m, n)).astype(out_dtype)
        workdir = tmp_path / mode
        workdir.mkdir()
        out = emulate(emulator, workdir, a, b, ta, tb, out_dtype, bn, splits, grid, mode, **options)
        check_against_specification(out, a, b, ta, tb, out_dtype, options)


@pytest.mark.slow
def test_emulated_layouts_and_widths_are_bit_identical(emulator, tmp_path):
    """Every layout and tile width feeds the same values to the same accumulators."""
    rng = np.random.default_rng(9)
    a, b = stored(rng, 136, 136, False), stored(rng, 136, 200, False)
    results = []
    for (ta, tb), bn in [(LAYOUTS[0], 128), (LAYOUTS[1], 256), (LAYOUTS[2], "128p")]:
        a_stored = np.ascontiguousarray(a.T) if ta else a
        b_stored = np.ascontiguousarray(b.T) if tb else b
        results.append(emulate(emulator, tmp_path, a_stored, b_stored, ta, tb, float32, bn))
    for other in results[1:]:
        np.testing.assert_array_equal(other, results[0])


@pytest.mark.slow
def test_emulator_catches_a_stage_freed_before_its_wgmma_finish(tmp_path):
    """The emulator can fail: a consumer that frees a stage as soon as it has issued its
    wgmma (not after wgmma.wait_group) lets the producer overwrite operands still being read."""
    wait = "wgmma_wait<1>();  // the previous"
    release = "if (previous >= 0 && lane128 == 0) mbar_arrive(empty + 8 * previous);"
    source = SOURCE.replace(wait, wait.replace("<1>", "<2>"))
    source = source.replace(
        release + "\n            previous = s;",
        "if (lane128 == 0) mbar_arrive(empty + 8 * s);\n            previous = -1;",
    )
    assert source.count("mbar_arrive(empty + 8 * s)") == 1
    (tmp_path / "gemm_sm90.cu").write_text(source)
    broken = build_emulator(tmp_path, tmp_path)
    rng = np.random.default_rng(10)
    a, b = stored(rng, 128, 896, False), stored(rng, 896, 128, False)
    out = emulate(broken, tmp_path, a, b, False, False, float32, 128, grid=1)
    value = exact(a, b)
    assert not np.all(np.abs(out - value) <= error_bound(a, b, False, False, float32, value))


@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("splits", [1, 2])
def test_emulated_float32_bias_is_added_to_the_product_stored_in_16_bits(
    emulator, tmp_path, splits, with_bias
):
    """O1's Linear in one launch (with split-K, in the last split's epilogue): the product
    1 + 2**-11 is stored in float16 as 1.0 (a tie, to even), then the float32 bias is added:
    1 + 2**-11 exactly, where a float32 product would give 1 + 2**-10; 1 + 2**-9 is stored
    as it is (bfloat16 would make it 1.0). Without a bias the float32 result is the stored
    product widened (a matmul, then a cast): 1.0 and 1 + 2**-9."""
    tie = 2.0**-11
    a = np.zeros((8, 128), dtype=float16)
    a[:, 0], a[:4, 1], a[4:, 1] = 1.0, tie, 2.0**-9
    b = np.zeros((128, 8), dtype=float16)
    b[:2] = 1.0
    added = tie if with_bias else 0.0
    options = dict(product_dtype=float16)
    if with_bias:
        options["bias"] = np.full(8, tie, dtype=float32)
    out = emulate(emulator, tmp_path, a, b, False, False, float32, 128, splits, **options)
    np.testing.assert_array_equal(out[:4], np.float32(1 + added))
    np.testing.assert_array_equal(out[4:], np.float32(1 + 2.0**-9 + added))
    np.testing.assert_array_equal(out, gemm.twin(a, b, out_dtype=float32, **options))
