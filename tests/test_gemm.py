"""The float16 GEMM: its specification (the NumPy twin), its launcher, and its kernel.

Read top to bottom:

1. what ``gemm`` computes: float32 products and sums, a float32 epilogue in a fixed order,
   one rounding; the error against float64 is bounded by a formula that grows with K;
2. how it refuses bad arguments (the same on both backends);
3. the kernel file: the registered names exist, the constants agree with the launcher, and
   NVRTC (as CuPy does) turns it into tensor-core PTX (``.ci/run`` compiles it with nvcc for
   sm_80 and sm_90 and rejects register spills);
4. on a GPU: the kernel against float64 for many odd shapes, layouts and epilogues.

``test_gemm_emulator.py`` runs the kernel's index arithmetic on the CPU.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from minitorch_amp.backend import device, gemm, kernels, nvrtc
from minitorch_amp.backend.dtypes import bfloat16, float16, float32
from minitorch_amp.backend.gemm import gemm as run_gemm

LAYOUTS = [(False, False), (False, True), (True, False)]  # NN (forward), NT (dgrad), TN (wgrad)


def stored(rng, rows, cols, transpose, scale=1.0):
    """A random float16 operand of logical shape (rows, cols), stored transposed if asked."""
    x = (rng.standard_normal((rows, cols)) * scale).astype(float16)
    return np.ascontiguousarray(x.T) if transpose else x


def exact(
    a, b, ta=False, tb=False, alpha=1.0, beta=0.0, c=None, bias=None, relu=False, product_dtype=None
):
    """The float64 value the GEMM approximates (alpha and beta as the float32 it receives;
    ``product_dtype``'s rounding is the error bound's business)."""
    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)
    a64 = a64.swapaxes(-1, -2) if ta else a64
    b64 = b64.swapaxes(-1, -2) if tb else b64
    v = float(np.float32(alpha)) * (a64 @ b64)
    if beta != 0:
        v = v + float(np.float32(beta)) * np.asarray(c, dtype=np.float64)
    if bias is not None:
        v = v + np.asarray(bias, dtype=np.float64)
    return np.maximum(v, 0) if relu else v


def error_bound(
    a, b, ta, tb, out_dtype, value, alpha=1.0, beta=0.0, c=None, bias=None, product_dtype=None
):
    """How far a correct result may be from ``value`` (the float64 one).

    K float32 additions, each off by at most one float32 ulp (a tensor core may truncate
    rather than round), and four float32 epilogue steps, all relative to the magnitudes
    summed; then half an ulp of ``out_dtype`` for the final rounding (and, with a bias or a
    ``product_dtype``, one of ``product_dtype``, by default ``out_dtype``, for the
    product's).
    """
    a64 = np.abs(np.asarray(a, dtype=np.float64))
    b64 = np.abs(np.asarray(b, dtype=np.float64))
    a64 = a64.swapaxes(-1, -2) if ta else a64
    b64 = b64.swapaxes(-1, -2) if tb else b64
    k = a64.shape[-1]
    scale = abs(float(np.float32(alpha))) * (a64 @ b64)
    if beta != 0:
        scale = scale + abs(float(np.float32(beta))) * np.abs(np.asarray(c, dtype=np.float64))
    if bias is not None:
        scale = scale + np.abs(np.asarray(bias, dtype=np.float64))
    accumulated = (k + 4) * 2.0**-23 * scale
    half_ulp, tiny = _half_ulp(out_dtype)
    bound = accumulated + half_ulp * (np.abs(value) + accumulated) + tiny
    if bias is not None or product_dtype is not None:  # the product rounded before the add
        half_ulp, tiny = _half_ulp(out_dtype if product_dtype is None else product_dtype)
        bound = bound + half_ulp * (scale + accumulated) + tiny
    return bound


def _half_ulp(dtype):
    """Half an ulp (relative) and half the smallest subnormal of a rounding to ``dtype``."""
    if dtype == float16:
        return 2.0**-11, 2.0**-25
    if dtype == bfloat16:
        return 2.0**-8, 2.0**-134
    return 2.0**-24, 2.0**-149


def assert_within_bound(result, a, b, ta=False, tb=False, **epilogue):
    value = exact(a, b, ta, tb, **epilogue)
    bound = error_bound(
        a,
        b,
        ta,
        tb,
        result.dtype,
        value,
        **{k: v for k, v in epilogue.items() if k != "relu"},
    )
    error = np.abs(np.asarray(result, dtype=np.float64) - value)
    worst = np.unravel_index(np.argmax(error - bound), error.shape) if error.size else None
    assert np.all(error <= bound), (
        f"error {error[worst]:.3g} > bound {bound[worst]:.3g} at {worst} (value {value[worst]})"
    )


# --- 1. the specification ---------------------------------------------------------------


def test_products_are_summed_in_float32_and_rounded_once():
    # 1 + 2**-11 + 2**-11 = 1 + 2**-10 in float32, which float16 holds exactly; summing in
    # float16 would round 1 + 2**-11 (a tie) down to 1.0 and give 1.0 again.
    a = np.array([[1.0, 2.0**-11, 2.0**-11]], dtype=float16)
    b = np.array([[1.0], [1.0], [1.0]], dtype=float16)
    out = run_gemm(a, b)
    assert out.dtype == float16
    assert out[0, 0] == np.float16(1 + 2.0**-10)


def test_the_bias_is_added_to_the_rounded_product_as_paddle_matmul_then_add():
    # The product 1 + 2**-11 is a float16 tie: stored, it is 1.0. Paddle's F.linear is a
    # matmul (which stores 1.0) then an add: 1.0 + 2**-11 is a tie again, so 1.0. Adding the
    # bias before the rounding would give 1 + 2**-10 instead.
    a = np.array([[1.0, 2.0**-11]], dtype=float16)
    b = np.array([[1.0], [1.0]], dtype=float16)
    bias = np.array([2.0**-11], dtype=float16)
    product = run_gemm(a, b)
    assert product[0, 0] == np.float16(1.0)
    assert run_gemm(a, b, bias=bias)[0, 0] == product[0, 0] + bias[0] == np.float16(1.0)


@pytest.mark.parametrize("dtype", [float16, bfloat16])
def test_a_float32_bias_is_added_to_the_product_stored_in_16_bits_as_paddle_o1(dtype):
    # O1's Linear: a 16-bit matmul stores 1 + tie as 1.0 (a tie, to even), then an add widens
    # it to the float32 bias: 1.0 + tie, exact in float32. Without product_dtype a float32
    # result keeps the product unrounded: 1 + 2 tie.
    tie = 2.0**-11 if dtype == float16 else 2.0**-8
    a = np.array([[1.0, tie]], dtype=dtype)
    b = np.array([[1.0], [1.0]], dtype=dtype)
    bias = np.array([tie], dtype=float32)
    out = run_gemm(a, b, bias=bias, out_dtype=float32, product_dtype=dtype)
    assert out.dtype == float32 and out[0, 0] == np.float32(1 + tie)
    assert run_gemm(a, b, bias=bias, out_dtype=float32)[0, 0] == np.float32(1 + 2 * tie)
    three_ops = run_gemm(a, b).astype(float32) + bias  # matmul, cast, add
    np.testing.assert_array_equal(out, three_ops)
    # relu still comes last, on the float32 sum
    negative = run_gemm(a, -b, bias=bias, relu=True, out_dtype=float32, product_dtype=dtype)
    assert negative[0, 0] == 0.0


@pytest.mark.parametrize("dtype", [float16, bfloat16])
def test_without_a_bias_product_dtype_widens_the_16_bit_product_as_a_matmul_then_a_cast(dtype):
    # An AMP cast's backward folded into the GEMM before it (autograd.widen_fold): the 16-bit
    # matmul stores 1 + tie as 1.0, the cast widens that exactly; a float32 result without
    # product_dtype keeps 1 + tie. beta's c is added before the rounding, as in the kernel.
    tie = 2.0**-11 if dtype == float16 else 2.0**-8
    a = np.array([[1.0, tie], [3.0, -1.0]], dtype=dtype)
    b = np.array([[1.0, 0.5], [1.0, 2.0]], dtype=dtype)
    out = run_gemm(a, b, out_dtype=float32, product_dtype=dtype)
    assert out.dtype == float32 and out[0, 0] == np.float32(1.0)
    assert run_gemm(a, b, out_dtype=float32)[0, 0] == np.float32(1 + tie)
    np.testing.assert_array_equal(out, run_gemm(a, b).astype(float32))  # matmul, cast
    np.testing.assert_array_equal(
        run_gemm(a, b, True, True, out_dtype=float32, product_dtype=dtype),
        run_gemm(a, b, True, True).astype(float32),
    )
    c = np.full((2, 2), tie, dtype=float32)
    summed = run_gemm(a, b, c=c.copy(), beta=1.0, product_dtype=dtype)
    np.testing.assert_array_equal(
        summed, (a.astype(float32) @ b.astype(float32) + c).astype(dtype).astype(float32)
    )
    negative = run_gemm(a, -b, relu=True, out_dtype=float32, product_dtype=dtype)
    np.testing.assert_array_equal(negative, np.maximum(run_gemm(a, -b).astype(float32), 0))


def test_product_dtype_is_checked_before_anything_runs():
    a = np.ones((2, 3), dtype=float16)
    b = np.ones((3, 2), dtype=float16)
    bias = np.zeros(2, dtype=float32)
    c = np.full((2, 2), 7.0, dtype=float32)
    with pytest.raises(TypeError, match="product_dtype must be out_dtype"):
        run_gemm(a, b, out_dtype=float32, product_dtype=bfloat16)
    with pytest.raises(TypeError, match="product_dtype must be out_dtype"):
        run_gemm(a, b, bias=bias, c=c, beta=1.0, product_dtype=bfloat16)
    np.testing.assert_array_equal(c, 7.0)  # untouched by the refused call
    same = run_gemm(a, b, bias=bias, out_dtype=float32, product_dtype=float32)  # the default
    np.testing.assert_array_equal(same, run_gemm(a, b, bias=bias, out_dtype=float32))


def test_epilogue_order_is_alpha_then_c_then_bias_then_relu():
    a = np.array([[1.0]], dtype=float16)
    b = np.array([[-1.0]], dtype=float16)
    c = np.array([[1.0]], dtype=float32)
    bias = np.array([5.0], dtype=float32)
    # 2 * (-1) + 3 * 1 + 5 = 6: alpha scales only the product, beta only c
    assert run_gemm(a, b, alpha=2.0, beta=3.0, c=c.copy(), bias=bias)[0, 0] == 6.0
    # relu comes last: -1 + 5 > 0 survives; -1 + 0.5 < 0 does not
    assert run_gemm(a, b, bias=np.array([5.0], float16), relu=True)[0, 0] == 4.0
    assert run_gemm(a, b, bias=np.array([0.5], float16), relu=True)[0, 0] == 0.0


def test_c_is_updated_in_place_and_not_read_when_beta_is_zero():
    a = np.ones((2, 3), dtype=float16)
    b = np.ones((3, 2), dtype=float16)
    c = np.full((2, 2), 10.0, dtype=float16)
    assert run_gemm(a, b, beta=1.0, c=c) is c
    np.testing.assert_array_equal(c, np.full((2, 2), 13.0, dtype=float16))
    c[...] = np.nan  # BLAS convention: beta == 0 means c is only written
    np.testing.assert_array_equal(run_gemm(a, b, c=c), np.full((2, 2), 3.0, dtype=float16))


def test_relu_keeps_nan_and_overflow_becomes_inf():
    a = np.array([[np.nan], [300.0], [-300.0]], dtype=float16)
    b = np.array([[300.0]], dtype=float16)
    out = run_gemm(a, b, relu=True)
    assert np.isnan(out[0, 0])  # a NaN must reach the loss scaler's check
    assert out[1, 0] == np.inf  # 90000 > 65504, the float16 maximum
    assert out[2, 0] == 0.0
    assert run_gemm(a, b, out_dtype="float32")[1, 0] == 90000.0


def test_float32_accumulation_beats_float16_accumulation():
    k = 4096
    a = np.ones((1, k), dtype=float16)
    b = np.ones((k, 1), dtype=float16)
    naive = np.float16(0)
    for _ in range(k):  # a float16 accumulator stops growing at 2048 (2048 + 1 rounds back)
        naive = np.float16(naive + np.float16(1))
    assert naive == 2048
    assert run_gemm(a, b)[0, 0] == 4096


@pytest.mark.parametrize("k", [1, 16, 300, 4096])
def test_error_against_float64_is_within_a_bound_that_grows_with_k(k):
    rng = np.random.default_rng(k)
    a, b = stored(rng, 8, k, False), stored(rng, k, 8, False)
    assert_within_bound(run_gemm(a, b, out_dtype="float32"), a, b)
    assert_within_bound(run_gemm(a, b), a, b)


def test_the_bound_rejects_float16_accumulation():
    """The bound is tight enough to catch a GEMM that accumulates in float16."""
    rng = np.random.default_rng(0)
    k = 2048
    a = np.abs(stored(rng, 4, k, False))
    b = np.abs(stored(rng, k, 4, False))
    acc = np.zeros((4, 4), dtype=float16)
    for i in range(k):
        acc = (acc + np.outer(a[:, i], b[i, :]).astype(float16)).astype(float16)
    value = exact(a, b)
    assert np.any(np.abs(acc - value) > error_bound(a, b, False, False, float16, value))


@pytest.mark.parametrize("ta, tb", [*LAYOUTS, (True, True)])
def test_transposed_operands_give_identical_results(ta, tb):
    rng = np.random.default_rng(1)
    a, b = stored(rng, 17, 33, False), stored(rng, 33, 9, False)
    a_stored = np.ascontiguousarray(a.T) if ta else a
    b_stored = np.ascontiguousarray(b.T) if tb else b
    expected = run_gemm(a, b)
    np.testing.assert_array_equal(run_gemm(a_stored, b_stored, ta, tb), expected)


@pytest.mark.parametrize("m, n, k", [(0, 5, 3), (4, 0, 3), (4, 5, 0), (1, 1, 1), (129, 7, 17)])
def test_any_shape_including_empty(m, n, k):
    rng = np.random.default_rng(2)
    a, b = stored(rng, m, k, False), stored(rng, k, n, False)
    bias = rng.standard_normal(n).astype(float16)
    out = run_gemm(a, b, bias=bias)
    assert out.shape == (m, n) and out.dtype == float16
    assert_within_bound(out, a, b, bias=bias)


def test_batches_broadcast_like_matmul():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3, 5, 4)).astype(float16)
    b = rng.standard_normal((3, 4, 6)).astype(float16)
    out = run_gemm(a, b)
    assert out.shape == (2, 3, 5, 6)
    for i, j in itertools.product(range(2), range(3)):
        np.testing.assert_array_equal(out[i, j], run_gemm(a[i, j], b[j]))


# --- 2. argument checks (the same on CPU and GPU) ---------------------------------------


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda a, b: run_gemm(a.astype(float32), b), TypeError, "float16 inputs"),
        (lambda a, b: run_gemm(a[0], b), ValueError, "at least 2 dimensions"),
        (lambda a, b: run_gemm(a, b.T), ValueError, "C-contiguous"),
        (lambda a, b: run_gemm(a, a), ValueError, "inner dimensions"),
        (lambda a, b: run_gemm(a, b, out_dtype="float64"), TypeError, "float16 or float32"),
        (lambda a, b: run_gemm(a, b, beta=1.0), ValueError, "pass c"),
        (lambda a, b: run_gemm(a, b, c=np.zeros((4, 5), float16)), ValueError, "shape"),
        (
            lambda a, b: run_gemm(a, b, c=np.zeros((4, 6), float32), out_dtype="float16"),
            TypeError,
            "c must be",
        ),
        (lambda a, b: run_gemm(a, b, bias=np.zeros(6, float32)), TypeError, "bias must be"),
        (lambda a, b: run_gemm(a, b, bias=np.zeros(5, float16)), ValueError, r"\(6,\)"),
        (
            lambda a, b: run_gemm(np.zeros((2, 4, 3), float16), np.zeros((3, 3, 6), float16)),
            ValueError,
            "broadcast",
        ),
    ],
)
def test_bad_arguments_are_refused_with_a_clear_message(call, error, message):
    a = np.zeros((4, 3), dtype=float16)
    b = np.zeros((3, 6), dtype=float16)
    with pytest.raises(error, match=message):
        call(a, b)


def test_out_dtype_defaults_to_c_then_float16():
    a, b = np.ones((2, 2), float16), np.ones((2, 2), float16)
    assert run_gemm(a, b).dtype == float16
    assert run_gemm(a, b, c=np.zeros((2, 2), float32)).dtype == float32


# --- 3. the kernel file -----------------------------------------------------------------

SOURCE = gemm.KERNELS.source()


def test_every_registered_name_is_instantiated_in_the_kernel_file():
    instantiated = {
        f"gemm_f16<{ta},{tb},{out}>"
        for ta, tb, out in re.findall(r"GEMM_INSTANTIATE\((\w+), (\w+), (\w+)\)\n", SOURCE)
    }
    assert set(gemm.NAMES) == instantiated
    assert len(gemm.NAMES) == 6
    assert kernels.REGISTRY["gemm_fp16.cu"] is gemm.KERNELS


def test_kernel_constants_agree_with_the_launcher():
    def constant(name):
        return int(re.search(rf"constexpr int {name} = (\d+);", SOURCE).group(1))

    assert constant("BM") == gemm.BLOCK_M and constant("BN") == gemm.BLOCK_N
    assert constant("BK") == gemm.BLOCK_K and constant("THREADS") == gemm.THREADS
    assert constant("EPILOGUE_BIAS") == gemm.EPILOGUE_BIAS
    assert constant("EPILOGUE_RELU") == gemm.EPILOGUE_RELU
    assert constant("EPILOGUE_PRODUCT_F16") == gemm.EPILOGUE_PRODUCT_F16
    assert constant("EPILOGUE_PRODUCT_BF16") == gemm.EPILOGUE_PRODUCT_BF16
    assert int(re.search(r"#define GEMM_STAGES (\d+)", SOURCE).group(1)) == gemm.STAGES
    assert f"-DGEMM_STAGES={gemm.STAGES}" in gemm.KERNELS.options


@pytest.mark.parametrize("arch", ["compute_80", "compute_90"])
def test_kernel_compiles_with_nvrtc_as_cupy_does(arch, nvrtc_available):
    # One kernel (each layout's has these instructions): test_kernel_sources.py compiles
    # every registered name.
    name = gemm.NAMES[0]
    result = nvrtc.compile_source(SOURCE, gemm.FILE, gemm.KERNELS.all_options(), [name], arch)
    assert set(result["lowered"]) == {name}
    for instruction in (
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
        "cp.async.cg.shared.global",
        "cp.async.wait_group",
    ):
        assert instruction in result["ptx"], instruction


# --- 4. the kernel on a GPU -------------------------------------------------------------

SIZES = [1, 7, 8, 15, 16, 17, 64, 127, 128, 129, 255, 300]
GPU_EPILOGUES = [
    dict(),
    dict(bias=True),
    dict(bias=True, relu=True),
    dict(relu=True, alpha=0.5),
    dict(alpha=2.0, beta=1.0, bias=True),
    dict(alpha=-1.5, beta=0.25),
    dict(bias=True, relu=True, product=True),  # O1's Linear: a float32 bias on a 16-bit product
]


def on_gpu(x):
    return None if x is None else device.cupy.asarray(x)


def gpu_case(rng, m, n, k, ta, tb, out_dtype, options):
    """Random operands (NumPy) and the epilogue keywords for one GPU comparison."""
    a, b = stored(rng, m, k, ta), stored(rng, k, n, tb)
    options = dict(options)
    if options.pop("product", False):
        options["product_dtype"] = a.dtype
    if options.pop("bias", False):
        options["bias"] = rng.standard_normal(n).astype(out_dtype)
    if options.get("beta"):
        options["c"] = rng.standard_normal((m, n)).astype(out_dtype)
    return a, b, options


def run_on_gpu(a, b, ta, tb, out_dtype, options):
    gpu = {k: (on_gpu(v) if isinstance(v, np.ndarray) else v) for k, v in options.items()}
    out = run_gemm(on_gpu(a), on_gpu(b), ta, tb, out_dtype=out_dtype, **gpu)
    return device.cupy.asnumpy(out)


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("out_dtype", [float16, float32], ids=["f16", "f32"])
@pytest.mark.parametrize("ta, tb", LAYOUTS, ids=["NN", "NT", "TN"])
def test_kernel_is_within_the_bound_for_odd_shapes(ta, tb, out_dtype):
    rng = np.random.default_rng(10)
    failures = []
    for i, (m, n, k) in enumerate(itertools.product(SIZES, SIZES, SIZES)):
        options = GPU_EPILOGUES[i % len(GPU_EPILOGUES)]
        a, b, options = gpu_case(rng, m, n, k, ta, tb, out_dtype, options)
        out = run_on_gpu(a, b, ta, tb, out_dtype, options)
        try:
            assert_within_bound(out, a, b, ta, tb, **options)
        except AssertionError as exc:
            failures.append(f"M={m} N={n} K={k} {sorted(options)}: {exc}")
    assert not failures, f"{len(failures)} shapes fail, e.g.\n" + "\n".join(failures[:10])


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k", [(300, 255, 129), (128, 128, 128), (17, 300, 64)])
def test_kernel_layouts_are_bit_identical_and_close_to_the_twin(m, n, k):
    rng = np.random.default_rng(11)
    a, b, options = gpu_case(rng, m, n, k, False, False, float16, dict(bias=True, relu=True))
    results = []
    for ta, tb in LAYOUTS:
        a_s = np.ascontiguousarray(a.T) if ta else a
        b_s = np.ascontiguousarray(b.T) if tb else b
        results.append(run_on_gpu(a_s, b_s, ta, tb, float16, options))
    for other in results[1:]:
        np.testing.assert_array_equal(other, results[0])
    twin = run_gemm(a, b, **options)  # differs only in float32 summation order
    np.testing.assert_allclose(
        results[0].astype(float32), twin.astype(float32), rtol=2e-3, atol=2e-3
    )


@pytest.mark.gpu
def test_kernel_handles_misaligned_views_and_transposing_both():
    cp = device.cupy
    rng = np.random.default_rng(12)
    a, b = stored(rng, 100, 64, False), stored(rng, 64, 72, False)
    expected = run_on_gpu(a, b, False, False, float32, {})
    # contiguous but 2 bytes off a 16-byte boundary: the element-wise load path
    a_off = cp.empty(a.size + 1, dtype=float16)[1:].reshape(a.shape)
    a_off[...] = cp.asarray(a)
    c_off = cp.empty(100 * 72 + 1, dtype=float32)[1:].reshape(100, 72)
    run_gemm(a_off, cp.asarray(b), c=c_off)
    np.testing.assert_array_equal(cp.asnumpy(c_off), expected)
    both = run_gemm(cp.asarray(a.T.copy()), cp.asarray(b.T.copy()), True, True, out_dtype="float32")
    np.testing.assert_array_equal(cp.asnumpy(both), expected)


@pytest.mark.gpu
def test_kernel_batches_fold_or_take_one_launch():
    cp = device.cupy
    rng = np.random.default_rng(13)
    a = rng.standard_normal((2, 3, 33, 40)).astype(float16)
    w = rng.standard_normal((40, 24)).astype(float16)
    bw = rng.standard_normal((3, 40, 24)).astype(float16)
    for b in (w, bw):  # 2-D b: one launch over 2*3*33 rows; batched b: one over 6 entries
        out = cp.asnumpy(run_gemm(cp.asarray(a), cp.asarray(b), out_dtype="float32"))
        assert out.shape == (2, 3, 33, 24)
        assert_within_bound(out, a, np.broadcast_to(b, (2, 3, 40, 24)))


@pytest.mark.gpu
def test_kernel_epilogue_edge_values_match_the_twin():
    cp = device.cupy
    a = np.array([[np.nan], [300.0], [-300.0], [1.0]], dtype=float16)
    b = np.array([[300.0]], dtype=float16)
    c = np.full((4, 1), np.nan, dtype=float16)  # beta == 0: never read
    out = cp.asnumpy(run_gemm(cp.asarray(a), cp.asarray(b), relu=True, c=cp.asarray(c)))
    np.testing.assert_array_equal(out, run_gemm(a, b, relu=True, c=c.copy()))


@pytest.mark.gpu
def test_kernel_opts_into_64_kib_of_shared_memory_and_does_not_spill():
    cp = device.cupy
    run_gemm(cp.ones((8, 8), float16), cp.ones((8, 8), float16))
    kernel = kernels.get_function(gemm.FILE, gemm.kernel_name(False, False, float16))
    assert kernel.max_dynamic_shared_size_bytes >= gemm.SHARED_MEM_BYTES
    assert kernel.local_size_bytes == 0  # no spills in the binary the driver loaded
    assert kernel.num_regs <= 128  # __launch_bounds__(256, 2): two blocks per SM


@pytest.mark.gpu
@pytest.mark.slow
def test_kernel_simple_net_layer_shape():
    """The SimpleNet GEMM, 512 x 4096 x 4096, against float64 on the GPU."""
    cp = device.cupy
    rng = cp.random.default_rng(14)
    a = rng.standard_normal((512, 4096), dtype=cp.float32).astype(float16)
    b = rng.standard_normal((4096, 4096), dtype=cp.float32).astype(float16)
    bias = rng.standard_normal(4096, dtype=cp.float32).astype(float16)
    a64, b64 = a.astype(cp.float64), b.astype(cp.float64)
    value = cp.maximum(a64 @ b64 + bias, 0)
    scale = cp.abs(a64) @ cp.abs(b64) + cp.abs(bias)  # the bound of error_bound(), on the GPU
    bound = (4096 + 4) * 2.0**-23 * scale * (1 + 2.0**-11) + 2.0**-11 * cp.abs(value) + 2.0**-25
    bound += 2.0**-11 * (1 + 2.0**-11) * scale + 2.0**-25  # the product rounded before the bias
    for ta, tb in LAYOUTS:
        a_s = cp.ascontiguousarray(a.T) if ta else a
        b_s = cp.ascontiguousarray(b.T) if tb else b
        out = run_gemm(a_s, b_s, ta, tb, bias=bias, relu=True)
        error = cp.abs(out.astype(cp.float64) - value)
        assert bool(cp.all(error <= bound)), (ta, tb, float(cp.max(error - bound)))


@pytest.mark.gpu
def test_a_linear_with_a_float32_bias_on_a_16_bit_product_is_one_gemm_launch(monkeypatch):
    """O1's Linear (float16 x and weight, float32 bias) runs the GEMM alone: no separate
    matmul, cast and add; its result is within the GEMM's bound."""
    from minitorch_amp.backend import primitives, products

    cp = device.cupy
    rng = np.random.default_rng(15)
    x, w = stored(rng, 300, 129, False), stored(rng, 129, 255, False)
    bias = rng.standard_normal(255).astype(float32)
    launches, launch = [], kernels.launch
    monkeypatch.setattr(kernels, "launch", lambda *a, **k: launches.append(a[1]) or launch(*a, **k))
    monkeypatch.setattr(products, "matmul", None)  # the three-op path would call it
    out = primitives.linear(cp.asarray(x), cp.asarray(w), cp.asarray(bias))
    assert out.dtype == float32 and launches and all(n.startswith("gemm") for n in launches)
    assert_within_bound(cp.asnumpy(out), x, w, bias=bias, product_dtype=float16)


# ---- one twin: the CPU backend's float16 matmul and linear ARE the kernel's twin -------------
@pytest.mark.parametrize("dtype", [float16, bfloat16])
def test_the_cpu_linear_with_a_float32_bias_rounds_like_matmul_cast_then_add(dtype):
    """AMP's O1 Linear: a 16-bit product (rounded once), widened exactly, plus the float32
    bias in float32; one call of the twin with product_dtype, as one launch on the GPU."""
    from minitorch_amp.backend import primitives

    rng = np.random.default_rng(3)
    x = rng.standard_normal((33, 40)).astype(dtype)
    w = (rng.standard_normal((40, 17)) * 0.3).astype(dtype)
    b = rng.standard_normal(17).astype(float32)
    out = primitives.linear(x, w, b)
    assert out.dtype == float32
    np.testing.assert_array_equal(out, primitives.matmul(x, w).astype(float32) + b)
    np.testing.assert_array_equal(
        out, gemm.twin(x, w, bias=b, out_dtype=float32, product_dtype=dtype)
    )


@pytest.mark.parametrize("seed", range(5))
def test_the_cpu_linear_rounds_like_the_kernel_and_like_matmul_then_add(seed):
    """The product is rounded to float16, then the float16 bias is added (one more rounding):
    what Paddle's F.linear, a matmul op and then an add op, computes."""
    from minitorch_amp.backend import primitives

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((33, 40)).astype(np.float16)
    w = (rng.standard_normal((40, 17)) * 0.3).astype(np.float16)
    b = rng.standard_normal(17).astype(np.float16)
    product = (x.astype(np.float32) @ w.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(primitives.linear(x, w, b), product + b)
    np.testing.assert_array_equal(primitives.linear(x, w, b), gemm.twin(x, w, bias=b))
    np.testing.assert_array_equal(primitives.matmul(x, w), gemm.gemm(x, w))
    np.testing.assert_array_equal(primitives.matmul(w, x, True, True), gemm.twin(w, x, True, True))
