"""The GEMM kernel's index arithmetic, run on the CPU by ``tests/gemm_emulator.cpp``.

The emulator compiles ``cuda/gemm_fp16.cu`` with g++, its PTX wrappers replaced by C++ models
of the instructions, and runs every block's 256 threads as fibers (see the emulator's header
and ``docs/kernels.md``). These tests hold its results to the specification in
``test_gemm.py``, under both extreme timings of ``cp.async``, for every load path and tail.
"""

from __future__ import annotations

import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

import needs
import numpy as np
import pytest
from test_gemm import LAYOUTS, SOURCE, assert_within_bound, error_bound, exact, stored

from minitorch_amp.backend import gemm
from minitorch_amp.backend.dtypes import bfloat16, float16, float32
from minitorch_amp.backend.gemm import gemm as run_gemm
from minitorch_amp.testing import ulp_distance

EMULATOR = gemm.KERNELS.path.parents[1] / "tests" / "gemm_emulator.cpp"


def build_emulator(directory, kernel_dir, source=EMULATOR):
    """Compile the emulator ``source`` against the kernel files in ``kernel_dir``."""
    compiler = needs.program("g++", "the kernel emulators are built with it")
    include = needs.cuda_headers()
    binary = directory / source.stem
    command = [compiler, "-std=c++17", "-O2", "-ffp-contract=off", "-w", f"-I{include}"]
    command += [f"-I{kernel_dir}", str(source), "-o", str(binary)]
    subprocess.run(command, check=True, capture_output=True, text=True)
    return binary


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    return build_emulator(tmp_path_factory.mktemp("emulator"), gemm.KERNELS.path.parent)


def emulate(
    binary,
    workdir,
    a,
    b,
    ta,
    tb,
    out_dtype,
    pad=(0, 0, 0),
    misalign=False,
    mode="early",
    **epilogue,
):
    """Run the kernel in the emulator; return (result, number of ldmatrix bank conflicts).

    ``epilogue`` holds gemm's keywords: bias, relu, alpha, beta, c.

    ``pad`` adds NaN columns after every row of a, b and c (leading dimension > width), so
    a kernel that reads past the end of a row, or writes there, is caught; ``"to8"`` pads
    each to a multiple of 8 elements, which keeps the 16-byte copy path.
    """
    m, k = (a.shape[1], a.shape[0]) if ta else a.shape
    n = b.shape[0] if tb else b.shape[1]
    out_dtype = np.dtype(out_dtype)
    bias, c = epilogue.get("bias"), epilogue.get("c")
    alpha, beta = epilogue.get("alpha", 1.0), epilogue.get("beta", 0.0)

    def write(name, x, extra, fill):
        rows, cols = x.shape
        full = np.full((rows, cols + extra), fill, dtype=x.dtype)
        full[:, :cols] = x
        full.reshape(-1)[: max((rows - 1) * (cols + extra) + cols, 0)].tofile(workdir / name)
        return cols + extra

    if pad == "to8":
        pad = (-a.shape[1] % 8, -b.shape[1] % 8, -n % 8)
    lda = write("a.bin", a, pad[0], np.nan)
    ldb = write("b.bin", b, pad[1], np.nan)
    sentinel = 12288.0 if out_dtype == bfloat16 else 12345.0  # (exact in the output dtype)
    start = c if beta != 0 else np.full((m, n), np.nan, dtype=out_dtype)  # unwritten shows
    ldc = write("c.bin", start.astype(out_dtype), pad[2], sentinel)
    bias_file = "-"
    if bias is not None:
        bias.astype(out_dtype).tofile(workdir / "bias.bin")
        bias_file = str(workdir / "bias.bin")
    stored_bias = None if bias is None else bias.astype(out_dtype)
    product = epilogue.get("product_dtype")  # the launcher's flags for this epilogue:
    flags = gemm._Epilogue(stored_bias, epilogue.get("relu", False), alpha, beta, product).flags()
    out_type = "f16" if out_dtype == float16 else "f32"
    if a.dtype == bfloat16:  # the gemm_bf16 kernel: bfloat16 inputs, bfloat16 or float32 out
        out_type = "bf16" if out_dtype == bfloat16 else "bf16f32"
    numbers = [int(ta), int(tb), out_type, m, n, k, lda, ldb, ldc, repr(float(alpha))]
    numbers += [repr(float(beta)), flags, int(misalign), mode]
    files = [workdir / "a.bin", workdir / "b.bin", workdir / "c.bin", bias_file]
    command = [str(binary), *map(str, numbers), *map(str, files), str(workdir / "out.bin")]
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    assert run.returncode == 0, f"emulator failed ({run.returncode}): {run.stderr}"
    flat = np.fromfile(workdir / "out.bin", dtype=out_dtype)
    full = np.full(m * ldc, sentinel, dtype=out_dtype)
    full[: flat.size] = flat
    full = full.reshape(m, ldc)
    assert np.all(full[:, n:] == sentinel), "the kernel wrote into c's row padding"
    conflicts = int(re.search(r"conflicts=(\d+)", run.stdout).group(1))
    return full[:, :n], conflicts


# (M, N, K, pad, misalign): which load path and which tails each case exercises.
# pad "to8" rounds every leading dimension up to a multiple of 8 (NaN in the gap).
EMULATOR_SHAPES = [
    (136, 136, 72, (0, 0, 0), False),  # 16-byte cp.async in every layout; M, N and K tails
    (130, 129, 100, "to8", False),  # ragged rows: cp.async copies 2..14 bytes, zero-fills
    (64, 136, 200, (0, 0, 0), False),  # 7 K tiles: the 4-stage ring wraps around
    (17, 7, 15, (0, 0, 0), False),  # odd leading dimensions: element-wise loads
    (40, 24, 32, (0, 0, 0), True),  # misaligned pointers: element-wise loads, single stores
    (1, 1, 1, (0, 0, 0), False),
    (16, 8, 0, (0, 0, 0), False),  # K = 0: only the epilogue
    (1153, 8, 16, (0, 0, 0), False),  # 10 tile rows: crosses a GROUP_M = 8 block group
]
EMULATOR_EPILOGUES = [
    dict(),
    dict(bias=True, relu=True),
    dict(alpha=0.5, beta=2.0, bias=True),
    dict(bias=True, relu=True, product=True),
    dict(product=True),  # a float16 product widened: a cast's backward folded in
]


@pytest.mark.slow
@pytest.mark.parametrize("ta, tb", LAYOUTS)
@pytest.mark.parametrize("case", range(len(EMULATOR_SHAPES)))
def test_emulated_kernel_matches_the_specification(emulator, tmp_path, ta, tb, case):
    m, n, k, pad, misalign = EMULATOR_SHAPES[case]
    rng = np.random.default_rng(case)
    a, b = stored(rng, m, k, ta), stored(rng, k, n, tb)

    runs = []  # (mode, out_dtype, epilogue); random draws happen here, before the threads
    for index, mode in enumerate(["early", "late"]):
        out_dtype = [float16, float32][(case + index) % 2]
        options = dict(EMULATOR_EPILOGUES[(case + index) % len(EMULATOR_EPILOGUES)])
        if options.pop("product", False):  # a float16 product in a float32 result (O1)
            options["product_dtype"], out_dtype = float16, float32
        if options.pop("bias", False):
            options["bias"] = rng.standard_normal(n).astype(out_dtype)
        if options.get("beta"):
            options["c"] = rng.standard_normal((m, n)).astype(out_dtype)
        runs.append((mode, out_dtype, options))

    def check(mode, out_dtype, options):  # the two timings run side by side, own folders
        workdir = tmp_path / mode
        workdir.mkdir()
        out, conflicts = emulate(
            emulator, workdir, a, b, ta, tb, out_dtype, pad, misalign, mode, **options
        )
        assert conflicts == 0, "ldmatrix bank conflicts: the swizzle is broken"
        assert_within_bound(out, a, b, ta, tb, **options)
        twin = run_gemm(a, b, ta, tb, out_dtype=out_dtype, **options)
        np.testing.assert_allclose(out.astype(float32), twin.astype(float32), rtol=2e-3, atol=1e-3)

    with ThreadPoolExecutor(2) as pool:
        for done in [pool.submit(check, *run) for run in runs]:
            done.result()


@pytest.mark.slow
def test_emulated_layouts_are_bit_identical(emulator, tmp_path):
    """NN, NT and TN load the same values into the same fragments: same bits out."""
    rng = np.random.default_rng(7)
    a, b = stored(rng, 130, 72, False), stored(rng, 72, 136, False)
    results = []
    for ta, tb in LAYOUTS:
        a_stored = np.ascontiguousarray(a.T) if ta else a
        b_stored = np.ascontiguousarray(b.T) if tb else b
        results.append(emulate(emulator, tmp_path, a_stored, b_stored, ta, tb, float32)[0])
    for other in results[1:]:
        np.testing.assert_array_equal(other, results[0])


@pytest.mark.slow
def test_emulator_catches_a_missing_barrier(tmp_path):
    """The emulator can fail: without the main loop's __syncthreads a stage is overwritten
    while other warps still read it, and the result is wrong."""
    kernel = SOURCE.replace("        __syncthreads();              // ... and everyone's", "//")
    assert kernel != SOURCE
    (tmp_path / "gemm_fp16.cu").write_text(kernel)
    broken = build_emulator(tmp_path, tmp_path)
    rng = np.random.default_rng(8)
    a, b = stored(rng, 130, 200, False), stored(rng, 200, 136, False)
    out, _ = emulate(broken, tmp_path, a, b, False, False, float32)
    value = exact(a, b)
    assert not np.all(np.abs(out - value) <= error_bound(a, b, False, False, float32, value))


def emulate_batched(binary, workdir, a, b, ta, tb, out_dtype, bias=None):
    """Run ``entries`` products in one emulated launch (``blockIdx.y`` = the entry).

    ``a`` is ``[entries, ...]`` as stored; ``b`` too, or 2-D: one matrix for every entry
    (stride 0). Returns ``[entries, M, N]``.
    """
    entries = a.shape[0]
    m, k = (a.shape[2], a.shape[1]) if ta else a.shape[1:]
    n = b.shape[-2] if tb else b.shape[-1]
    out_dtype = np.dtype(out_dtype)
    a.tofile(workdir / "a.bin")
    b.tofile(workdir / "b.bin")
    np.full((entries, m, n), np.nan, dtype=out_dtype).tofile(workdir / "c.bin")
    bias_file = "-"
    if bias is not None:
        bias.astype(out_dtype).tofile(workdir / "bias.bin")
        bias_file = str(workdir / "bias.bin")
    stored_bias = None if bias is None else bias.astype(out_dtype)
    flags = gemm._Epilogue(stored_bias, False, 1.0, 0.0).flags()
    out_type = "f16" if out_dtype == float16 else "f32"
    numbers = [int(ta), int(tb), out_type, m, n, k, a.shape[2], b.shape[-1], n, "1.0", "0.0"]
    numbers += [flags, 0, "early"]
    files = [workdir / "a.bin", workdir / "b.bin", workdir / "c.bin", bias_file]
    strides = [a.shape[1] * a.shape[2], b.shape[-2] * b.shape[-1] if b.ndim == 3 else 0, m * n]
    command = [str(binary), *map(str, numbers), *map(str, files), str(workdir / "out.bin")]
    command += [str(entries), *map(str, strides)]
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    assert run.returncode == 0, f"emulator failed ({run.returncode}): {run.stderr}"
    return np.fromfile(workdir / "out.bin", dtype=out_dtype).reshape(entries, m, n)


@pytest.mark.slow
@pytest.mark.parametrize("ta, tb", LAYOUTS)
@pytest.mark.parametrize("shared_b", [False, True])
def test_emulated_batches_are_each_entrys_own_product(emulator, tmp_path, ta, tb, shared_b):
    """One launch over three entries (gridDim.y = 3) writes, in each entry's place, the very
    bits a launch on that entry alone writes (M, N and K tails in every entry); a 2-D b
    (stride 0) serves every entry."""
    rng = np.random.default_rng(11)
    a = np.stack([stored(rng, 70, 36, ta) for _ in range(3)])
    b = stored(rng, 36, 40, tb) if shared_b else np.stack([stored(rng, 36, 40, tb) for _ in "abc"])
    bias = rng.standard_normal(40).astype(float16)
    batched = emulate_batched(emulator, tmp_path, a, b, ta, tb, float16, bias=bias)
    for entry in range(3):
        own = b if shared_b else b[entry]
        alone, _ = emulate(emulator, tmp_path, a[entry], own, ta, tb, float16, bias=bias)
        np.testing.assert_array_equal(batched[entry], alone)
        assert_within_bound(batched[entry], a[entry], own, ta, tb, bias=bias)


def test_emulated_bias_is_added_to_the_rounded_product(emulator, tmp_path):
    """The kernel's own epilogue, not only its twin, adds the bias to the product as stored:
    Paddle's matmul-then-add. The product 1 + 2**-11 is stored as 1.0 (a tie), and
    1.0 + 2**-11 rounds to 1.0 again; adding the bias first would give 1 + 2**-10."""
    a = np.array([[1.0, 2.0**-11]], dtype=float16)
    b = np.array([[1.0], [1.0]], dtype=float16)
    bias = np.array([2.0**-11], dtype=float16)
    out, _ = emulate(emulator, tmp_path, a, b, False, False, float16, bias=bias)
    assert out[0, 0] == np.float16(1.0)
    np.testing.assert_array_equal(out, gemm.twin(a, b, bias=bias))
    # float32 output: rounding to float32 changes nothing, the sum is exact
    out32, _ = emulate(emulator, tmp_path, a, b, False, False, float32, bias=bias.astype(float32))
    assert out32[0, 0] == np.float32(1 + 2.0**-10)


def test_emulated_bf16_bias_is_added_to_the_rounded_product(emulator, tmp_path):
    """The same in bfloat16 (8 significant bits): 1 + 2**-8 is a tie stored as 1.0, and
    1.0 + 2**-8 rounds to 1.0 again; adding the bias first would give 1 + 2**-7."""
    a = np.array([[1.0, 2.0**-8]], dtype=bfloat16)
    b = np.array([[1.0], [1.0]], dtype=bfloat16)
    bias = np.array([2.0**-8], dtype=bfloat16)
    out, _ = emulate(emulator, tmp_path, a, b, False, False, bfloat16, bias=bias)
    assert out[0, 0] == bfloat16.type(1.0)
    np.testing.assert_array_equal(out, gemm.twin(a, b, bias=bias, out_dtype=bfloat16))


# ---- gemm_bf16: the same body with the bfloat16 mma ------------------------------------------
BF16_SHAPES = [
    (136, 136, 72, (0, 0, 0), False),  # 16-byte copies, M, N and K tails
    (17, 7, 15, (0, 0, 0), False),  # element-wise loads
    (40, 24, 32, (0, 0, 0), True),  # misaligned pointers
]


@pytest.mark.slow
@pytest.mark.parametrize("ta, tb", LAYOUTS)
@pytest.mark.parametrize("case", range(len(BF16_SHAPES)))
def test_emulated_bf16_kernel_matches_the_twin(emulator, tmp_path, ta, tb, case):
    m, n, k, pad, misalign = BF16_SHAPES[case]
    rng = np.random.default_rng(100 + case)
    a = stored(rng, m, k, ta).astype(bfloat16)
    b = stored(rng, k, n, tb).astype(bfloat16)
    for out_dtype, options in ((bfloat16, {"relu": True}), (float32, {"alpha": 0.5})):
        options = dict(options, bias=rng.standard_normal(n).astype(out_dtype))
        workdir = tmp_path / str(out_dtype)
        workdir.mkdir()
        out, conflicts = emulate(
            emulator, workdir, a, b, ta, tb, out_dtype, pad, misalign, "late", **options
        )
        assert conflicts == 0
        twin = gemm.twin(a, b, ta, tb, out_dtype=out_dtype, **options)
        if out_dtype == bfloat16:  # float32 sums in another order: at most one rounding apart
            assert (ulp_distance(out, twin, "bfloat16") <= 1).all()
        else:
            np.testing.assert_allclose(out, twin, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("dtype", [float16, bfloat16])
def test_emulated_float32_bias_is_added_to_the_product_stored_in_16_bits(
    emulator, tmp_path, dtype, with_bias
):
    """O1's Linear in one launch: the product 1 + tie is stored in 16 bits as 1.0 (a tie, to
    even) and the float32 bias is added to that, exactly: 1 + tie, where a float32 product
    would give 1 + 2 tie. Without a bias, the stored product widened: 1.0 (a matmul, then a
    cast to float32)."""
    tie = 2.0**-11 if dtype == float16 else 2.0**-8
    a = np.array([[1.0, tie]], dtype=dtype)
    b = np.array([[1.0], [1.0]], dtype=dtype)
    options = dict(product_dtype=dtype)
    if with_bias:
        options["bias"] = np.array([tie], dtype=float32)
    out, _ = emulate(emulator, tmp_path, a, b, False, False, float32, **options)
    assert out[0, 0] == np.float32(1 + tie if with_bias else 1.0)
    twin = gemm.twin(a, b, out_dtype=float32, **options)
    np.testing.assert_array_equal(out, twin)
