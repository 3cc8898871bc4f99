"""backend.bias_grad and cuda/reduction.cu's bias_grad: a Linear layer's bias gradient, its
grad cast to the product's dtype and an optional ReLU mask, in one pass.

On NumPy arrays bias_grad is the old ops (column_sums, relu_backward, astype), bit for bit.
The kernel, fed by the real launcher on a CPU emulator (tests/bias_grad_emulator.cpp on
tests/cuda_emulator.h, with -ftz's flushes), equals a NumPy model of its order of additions
(:func:`kernel_order`) bit for bit for every instantiated dtype triple, with and without the
mask, over signed zeros, subnormals, inf, NaN and casts that overflow; the model is within
the header's bound of float64 sums; the grid never changes a bit. Deliberately wrong kernels
(no mask, no cast, another order) fail these checks. tests/test_bias_grad_gpu.py holds the
GPU to the same model.
"""

from __future__ import annotations

import math
import re
import shutil

import emulated_gpu
import numpy as np
import pytest
from emulated_gpu import HostArray
from test_amp_kernels import assert_same_bits
from test_primitive_kernels import specials

from minitorch_amp.autograd.ops import linalg
from minitorch_amp.backend import bias_grad as bias_grad_module
from minitorch_amp.backend import (
    device,
    global_norm,
    kernels,
    nvrtc,
    primitives,
    squared_error,
)
from minitorch_amp.backend.bias_grad import bias_grad
from minitorch_amp.backend.dtypes import bfloat16, float16, float32, float64
from minitorch_amp.backend.primitives import column_sums, relu_backward
from minitorch_amp.utils import kernel_check

NAMES = {float16: "float16", bfloat16: "bfloat16", float32: "float32", float64: "float64"}
TRIPLES = list(bias_grad_module._KERNELS)  # (G, B, P) as instantiated
ROWS = [0, 1, 7, 33, 300]
COLUMNS = [1, 31, 32, 33, 100]
U = 2.0**-24
TINY = 2.0**-126  # float32's smallest normal: below it -ftz flushes


def triple_id(triple) -> str:
    return "-".join(NAMES[d] for d in triple)


def grads(dtype, rows: int, n: int, seed: int = 0) -> np.ndarray:
    """Values of one binade or two with random signs (their sums round differently in every
    order), with ``dtype``'s special values (signed zeros, subnormals, the largest finite,
    inf, NaN) planted in every third column from the second on (the others keep finite
    sums, whose bits show the order)."""
    rng = np.random.default_rng(seed)
    g = rng.uniform(0.5, 2.0, (rows, n)) * rng.choice([-1.0, 1.0], (rows, n))
    columns = g[:, 1::3].reshape(-1)  # a copy
    planted = specials(dtype).astype(np.float64)
    spots = rng.choice(columns.size, min(columns.size // 2, 4 * planted.size), replace=False)
    columns[spots] = np.resize(planted, spots.size)
    g[:, 1::3] = columns.reshape(g[:, 1::3].shape)
    return g.astype(dtype)


def relu_outputs(dtype, rows: int, n: int, seed: int = 1) -> np.ndarray:
    """relu(x)-like values: about half of them off (+-0, negative), with specials planted."""
    return grads(dtype, rows, n, seed) * np.asarray(0.5, dtype)


def flush(v: np.ndarray) -> np.ndarray:
    """-ftz: a float32 subnormal becomes a zero of its sign."""
    return np.where(np.abs(v) < TINY, np.copysign(np.float32(0), v), v).astype(float32)


def kernel_order(g, y, b_dtype, p_dtype):
    """bias_grad as cuda/reduction.cu computes it: rows j, j + 8, ... of each column added in
    float32 in that order by row group j, then ((s0 + s4) + (s2 + s6)) + ((s1 + s5) +
    (s3 + s7)), every sum rounded once and flushed as -ftz flushes; returns (gb, gp)."""
    with np.errstate(invalid="ignore", over="ignore"):
        m = g if y is None else g * (y > 0)  # relu_backward's twin, in G
        wide = flush(m.astype(float32))
        groups = np.zeros((8, g.shape[1]), float32)
        for r in range(g.shape[0]):
            groups[r % 8] = flush(groups[r % 8] + wide[r])
        for s in (4, 2, 1):
            groups[:s] = flush(groups[:s] + groups[s : 2 * s])
        gb = groups[0].astype(b_dtype)
        gp = None if p_dtype is None else m.astype(p_dtype)
    return gb, gp


def product_for(triple, masked: bool):
    """The product_dtype that makes the launcher pick ``triple``: None when P is G and the
    kernel need not write gp."""
    g, _, p = triple
    return p if p != g or masked else None


# ---- NumPy: the twin is the old ops -----------------------------------------------------------
@pytest.mark.parametrize("dtype", [float16, bfloat16, float32, float64], ids=NAMES.get)
@pytest.mark.filterwarnings("ignore:overflow", "ignore:invalid")  # the old ops' inf and NaN
def test_on_numpy_the_bias_gradient_and_the_cast_are_the_old_ops_bit_for_bit(dtype):
    g = grads(dtype, 33, 31)
    for product in (None, float16, bfloat16, float32):
        gb, gp = bias_grad(g, dtype, product)
        assert_same_bits(gb, column_sums(g))
        if product is None or product == dtype:
            assert gp is None
        else:
            assert_same_bits(gp, g.astype(product))


@pytest.mark.filterwarnings("ignore:overflow", "ignore:invalid")
def test_on_numpy_the_mask_is_relu_backward_and_out_receives_the_sum():
    g, y = grads(float16, 33, 31), relu_outputs(float32, 33, 31)
    masked = relu_backward(y, g)
    out = np.full(31, 7.0, float16)
    gb, gp = bias_grad(g, float16, float16, relu_out=y, out=out)
    assert gb is out
    assert_same_bits(out, column_sums(masked))
    assert_same_bits(gp, masked)
    gb, _ = bias_grad(g, float32, None, relu_out=y)  # float32 sums, not rounded to float16
    assert_same_bits(gb, column_sums(masked.astype(float32)))


def test_linear_backward_takes_the_bias_gradient_and_the_cast_from_one_bias_grad_call(
    monkeypatch,
):
    calls = []

    def recording(*args, **kwargs):
        calls.append((args[1:], kwargs))
        return bias_grad(*args, **kwargs)

    monkeypatch.setattr(linalg, "bias_grad", recording)
    ctx = type("Ctx", (), {})()
    ctx.x, ctx.weight, ctx.has_bias = np.ones((5, 3), float16), np.ones((3, 4), float16), True
    ctx.needs_grad, ctx.grad_out = (True, True, True), None
    grad = grads(float32, 5, 4)[:, :]  # a float32 output: a float32 bias after the product
    gx, gw, gb = linalg.Linear.backward(ctx, grad)
    assert calls == [((float32, float16), {"relu_out": None, "out": None})]  # no ReLU mask
    assert gb.dtype == float32 and gx.dtype == gw.dtype == float16
    assert_same_bits(gb, column_sums(grad))


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(grad=np.ones(4, float32)), ValueError, "must be 2-D"),
        (dict(grad=np.ones((2, 4), np.int64)), TypeError, "must be a float array"),
        (dict(bias_dtype=float16), TypeError, "bias_dtype must be float32 for a float32"),
        (dict(product_dtype="int32"), TypeError, "product_dtype must be a float dtype"),
        (dict(relu_out=np.ones((2, 3), float32)), ValueError, r"relu_out must have shape \[2, 4\]"),
        (dict(out=np.ones(3, float32)), ValueError, r"out must have shape \[4\]"),
        (dict(out=np.ones(4, float16)), TypeError, "out must be float32"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_written(kwargs, error, message):
    args = dict(grad=np.ones((2, 4), float32), bias_dtype=float32, out=np.full(4, 9.0, float32))
    args.update(kwargs)
    out_before = args["out"].copy()
    with pytest.raises(error, match=message):
        bias_grad(**args)
    assert_same_bits(args["out"], out_before)


# ---- the kernel, on the emulator through the real launcher ----------------------------------
@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    return emulated_gpu.build("bias_grad_emulator.cpp", tmp_path_factory.mktemp("emulator"))


def install(emulator, monkeypatch) -> list:
    """Route bias_grad's launches to ``emulator``; return the list of (name, grid)."""
    launches = emulated_gpu.install(emulator, monkeypatch, "reduction.cu", block=256)
    device.cupy.empty = emulated_gpu.poisoned_empty
    return launches


def on_device(a):
    if a is None:
        return None
    out = np.empty(a.shape, a.dtype).view(HostArray)
    np.copyto(out, a)
    return out


def check_kernel(triple, masked, rows, n, launches, seed=0):
    """One launch on the emulator equals kernel_order bit for bit (gb and gp)."""
    g_dtype, b_dtype, _ = triple
    product = product_for(triple, masked)
    g = grads(g_dtype, rows, n, seed)
    y = relu_outputs(g_dtype, rows, n, seed + 1) if masked else None
    launches.clear()
    gb, gp = bias_grad(on_device(g), b_dtype, product, relu_out=on_device(y))
    want_gb, want_gp = kernel_order(g, y, b_dtype, product)
    where = f"{triple_id(triple)}, mask={masked}, [{rows}, {n}]"
    assert launches == [(bias_grad_module._KERNELS[triple], (-(-n // 32),))], where
    assert_same_bits(gb, want_gb, where)
    assert (gp is None) == (want_gp is None), where
    if gp is not None:
        assert_same_bits(gp, want_gp, where)


@pytest.mark.parametrize("masked", [False, True], ids=["no mask", "relu mask"])
@pytest.mark.parametrize("triple", TRIPLES, ids=triple_id)
def test_the_kernel_adds_in_its_stated_order_bit_for_bit(triple, masked, emulator, monkeypatch):
    launches = install(emulator, monkeypatch)
    for rows in ROWS:
        for n in COLUMNS:
            check_kernel(triple, masked, rows, n, launches, seed=rows * 1000 + n)


@pytest.mark.parametrize(
    "g, y, triple, want_gb, want_gp",
    [  # one column each
        ([np.inf, 1.0], [0.0, 1.0], (float32, float32, float16), np.nan, [np.nan, 1.0]),
        ([-np.inf, 1.0], [-0.0, 1.0], (float16, float16, float16), np.nan, [np.nan, 1.0]),
        ([np.nan, 2.0], [-1.0, 1.0], (bfloat16, float32, bfloat16), np.nan, [np.nan, 2.0]),
        ([np.inf, 2.0], [1.0, np.nan], (float32, float32, float16), np.inf, [np.inf, 0.0]),
        ([-2.0, 3.0], [0.0, 1e-40], (float32, float32, bfloat16), 3.0, [-0.0, 3.0]),
        ([70000.0, 1.0], [1.0, 1.0], (float32, float32, float16), 70001.0, [np.inf, 1.0]),
        ([6e4, 6e4], [1.0, 1.0], (float16, float16, float16), np.inf, [6e4, 6e4]),
        ([1e-40, 1e-40], [1.0, 1.0], (float32, float32, bfloat16), 0.0, [1e-40, 1e-40]),
    ],
    ids=[
        "inf where off is NaN",
        "-inf where off (y = -0) is NaN",
        "NaN where off",
        "NaN y is off; inf where on stays",
        "a subnormal y is on; -2 where off is -0",
        "the cast overflows to inf",
        "the float16 sum overflows to inf",
        "float32 subnormals add as 0 (-ftz) but cast exactly",
    ],
)
def test_edge_values(g, y, triple, want_gb, want_gp, emulator, monkeypatch):
    install(emulator, monkeypatch)
    g_dtype, b_dtype, p_dtype = triple
    g, y = np.array(g).astype(g_dtype)[:, None], np.array(y).astype(g_dtype)[:, None]
    gb, gp = bias_grad(on_device(g), b_dtype, p_dtype, relu_out=on_device(y))
    assert_same_bits(gb, np.array([want_gb]).astype(b_dtype))
    assert_same_bits(gp, np.array(want_gp).astype(p_dtype)[:, None])


def test_the_grid_never_changes_a_bit(emulator, monkeypatch):
    launches = install(emulator, monkeypatch)
    g = grads(float32, 300, 200, seed=5)
    results = []
    for max_blocks in (65535, 1, 2, 3):  # 7 column tiles: blocks stride over them
        monkeypatch.setattr(bias_grad_module, "_MAX_BLOCKS", max_blocks)
        bias_grad_module.KEPT.clear()  # (a constant changed: the kept launch had the old grid)
        gb, gp = bias_grad(on_device(g), float32, float16)
        results.append((np.asarray(gb).copy(), np.asarray(gp).copy()))
    assert [grid for _, grid in launches] == [(7,), (1,), (2,), (3,)]
    for gb, gp in results:
        assert_same_bits(gb, results[0][0])
        assert_same_bits(gp, results[0][1])
    assert_same_bits(results[0][0], kernel_order(g, None, float32, float16)[0])


def test_out_is_written_in_place_and_an_empty_grad_gives_zeros(emulator, monkeypatch):
    launches = install(emulator, monkeypatch)
    out = on_device(np.full(33, 5.0, float32))
    gb, gp = bias_grad(on_device(np.ones((0, 33), float16)), float32, out=out)
    assert gb is out and gp is None and launches[0][1] == (2,)
    assert_same_bits(out, np.zeros(33, float32))
    launches.clear()
    gb, _ = bias_grad(on_device(np.ones((4, 0), float16)), float16)
    assert gb.shape == (0,) and launches == []  # no columns: nothing to launch


@pytest.mark.parametrize(
    "case", ["strided", "raw kernels off", "float64", "a widening cast", "a strided mask"]
)
def test_the_twin_runs_where_the_kernel_does_not_apply(case, emulator, monkeypatch):
    """The old ops on the device arrays (CuPy's sums, astype, relu_backward), no launch."""
    launches = install(emulator, monkeypatch)
    g_dtype = float64 if case == "float64" else float16
    product = float32 if case == "a widening cast" else float16
    device_g, device_y = on_device(grads(g_dtype, 20, 10)), None
    if case == "strided":
        device_g = on_device(grads(g_dtype, 20, 20))[:, ::2]
    elif case == "a strided mask":
        device_y = on_device(relu_outputs(g_dtype, 20, 20))[:, ::2]
    elif case == "raw kernels off":
        monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "0")
    gb, gp = bias_grad(device_g, g_dtype, product, relu_out=device_y)
    with np.errstate(invalid="ignore", over="ignore"):
        m = device_g if device_y is None else relu_backward(device_y, device_g)
        assert_same_bits(gb, column_sums(m))
        if product == g_dtype and device_y is None:
            assert gp is None
        else:
            assert_same_bits(gp, m.astype(product))
    assert launches == []


def test_the_environment_reports_check_of_bias_grad_passes_on_the_emulator(emulator, monkeypatch):
    launches = install(emulator, monkeypatch)
    assert kernel_check._bias_grad_matches(on_device, lambda a: np.asarray(a).view(np.ndarray))
    names = [name for name, _ in launches]
    assert names == ["bias_grad<float, float, __half>", "bias_grad<float, float, float>"]


# ---- the order model against float64 -----------------------------------------------------------
@pytest.mark.parametrize("rows", [1, 33, 300, 5000])
def test_the_order_is_within_the_stated_error_bound_of_float64(rows):
    """|gb - sum| <= (ceil(rows / 8) + 3) * u * sum |g| (float32 sums, before the rounding
    to B), the bound the kernel's header states."""
    rng = np.random.default_rng(rows)
    g = rng.standard_normal((rows, 40)) * 2.0 ** rng.integers(-20, 20, (rows, 40))
    g = g.astype(float32)
    gb, _ = kernel_order(g, None, float32, None)
    bound = (-(-rows // 8) + 3) * U
    for c in range(g.shape[1]):
        column = g[:, c].astype(float64)
        exact = math.fsum(column)
        assert abs(float(gb[c]) - exact) <= bound * math.fsum(np.abs(column)), c


# ---- the kernel file, compiled as the loader compiles it --------------------------------------
def test_the_launcher_and_the_kernel_agree_on_block_and_tile_sizes_and_names():
    source = kernels.REGISTRY["reduction.cu"].source()
    assert f"constexpr int kThreads = {bias_grad_module._THREADS};" in source
    assert f"constexpr int kBiasColumns = {bias_grad_module._COLUMNS};" in source
    assert "kBiasGroups = kThreads / kBiasColumns" in source and 256 // 32 == 8
    assert set(bias_grad_module.REDUCTION.names) >= set(bias_grad_module._KERNELS.values())
    for g, b, p in TRIPLES:
        macro = "MINITORCH_BIAS_GRAD({}, {}, {})".format(
            *(bias_grad_module._CUDA_TYPE[d] for d in (g, b, p))
        )
        assert macro in source, macro


def test_reduction_cu_is_registered_once_with_every_launchers_kernels():
    entry = kernels.REGISTRY["reduction.cu"]
    assert entry.names[: len(primitives.REDUCTION.names)] == primitives.REDUCTION.names
    mse = (  # mse_loss's, both ways
        *squared_error._FORWARD.values(),
        *squared_error._MEAN.values(),
        *squared_error._BACKWARD.values(),
    )
    assert set(entry.names) == {
        *primitives.REDUCTION.names,
        *bias_grad_module._KERNELS.values(),
        *mse,
        *global_norm.NAMES,  # ClipGradByGlobalNorm's
    }
    assert kernels.register("reduction.cu", names=entry.names[-1:]) == entry  # idempotent
    with pytest.raises(ValueError, match="different options, targets or splits"):
        kernels.register("reduction.cu", names=("bias_grad_v2",), options=("-DX",))
    with pytest.raises(ValueError, match="different options, targets or splits"):
        kernels.register("reduction.cu", names=("bias_grad_v2",), split=True)
    assert kernels.REGISTRY["reduction.cu"] == entry


def test_the_kernels_compile_with_nvrtc_and_never_contract_a_sum_into_an_fma(nvrtc_available):
    """With fma contraction allowed (NVRTC's default), every sum is still an add.rn of its
    own, and nothing is atomic: the NumPy model of the order holds on the GPU too."""
    entry = kernels.REGISTRY["reduction.cu"]
    names = tuple(bias_grad_module._KERNELS.values())
    opts = (*entry.all_options(), "-ftz=true", "-fmad=true")
    result = nvrtc.compile_source(entry.source(), "reduction.cu", opts, names, "compute_80")
    assert set(result["lowered"]) == set(names)
    for name, lowered in result["lowered"].items():
        body = result["ptx"].split(f".entry {lowered}(")[1].split(".entry")[0]
        assert not re.search(r"\b(fma|atom|red)\.", body), name
        assert re.search(r"add\.rn(\.ftz)?\.f32", body), name


# ---- deliberately wrong kernels fail the checks above ------------------------------------------
def mutant(tmp_path, search: str, replace: str):
    """The emulator built from a copy of reduction.cu with ``search`` replaced once."""
    for name in ("bias_grad_emulator.cpp", "cuda_emulator.h"):
        shutil.copy(emulated_gpu.ROOT / "tests" / name, tmp_path / name)
    source = (kernels.cuda_dir() / "reduction.cu").read_text()
    assert source.count(search) == 1, "the mutant's text is not in reduction.cu once"
    (tmp_path / "reduction.cu").write_text(source.replace(search, replace))
    return emulated_gpu.build(str(tmp_path / "bias_grad_emulator.cpp"), tmp_path)


@pytest.mark.parametrize(
    "search, replace, triple, masked",
    [
        ("if (masked && !unit_on(y_i)) m = unit_off(m);", "", TRIPLES[1], True),
        (
            "if (gp != nullptr) gp[i] = to_type(m, static_cast<const P*>(nullptr));",
            "",
            TRIPLES[1],
            False,
        ),
        (  # the loaded rows added last first
            "for (int u = 0; u < kBiasUnroll; ++u) {\n"
            "                    const long long i = (r + u * kBiasGroups) * n + c;\n"
            "                    sum = add(",
            "for (int u = kBiasUnroll - 1; u >= 0; --u) {\n"
            "                    const long long i = (r + u * kBiasGroups) * n + c;\n"
            "                    sum = add(",
            TRIPLES[0],
            False,
        ),
        (  # the rows past the last whole group of kBiasUnroll left out
            "            for (; r < rows; r += kBiasGroups) {",
            "            for (; r < 0; r += kBiasGroups) {",
            TRIPLES[0],
            False,
        ),
    ],
    ids=[
        "the mask not applied",
        "the cast grad not written",
        "the rows added out of order",
        "the last rows left out",
    ],
)
def test_a_wrong_kernel_fails(search, replace, triple, masked, tmp_path, monkeypatch):
    launches = install(mutant(tmp_path, search, replace), monkeypatch)
    with pytest.raises(AssertionError):
        check_kernel(triple, masked, 300, 33, launches)
