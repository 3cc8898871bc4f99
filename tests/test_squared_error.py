"""backend.squared_error and cuda/reduction.cu's squared_error / mean_partials: mse_loss's
difference and the mean (or sum) of its squares, in one launch up to 64Ki elements, two past.

On NumPy arrays squared_error is MseLoss's former maths (``diff = a - b``, then ``(diff *
diff).mean()`` or ``.sum()``), bit for bit. The kernels, fed by the real launcher on a CPU
emulator (tests/squared_error_emulator.cpp on tests/cuda_emulator.h, with -ftz's flushes),
write the twin's difference (a float32 subnormal difference flushed, as CuPy's ``a - b``
flushed it) and a result equal to a NumPy model of their order (:func:`kernel_order`) bit
for bit, within the stated bound of the float64 mean, with the same bits on every grid.
MseLoss on the emulated GPU saves the twin's difference (its backward is the CPU's, bit for
bit) and returns a loss within the bound of the CPU's. Deliberately wrong kernels fail these
checks. tests/test_squared_error_gpu.py holds the GPU to the same model.
"""

from __future__ import annotations

import math
import re
import shutil
from types import SimpleNamespace

import emulated_gpu
import numpy as np
import pytest
from emulated_gpu import HostArray
from test_amp_kernels import assert_same_bits
from test_primitive_kernels import kernel_order as sum_squares_order

from minitorch_amp.autograd.ops.loss import MseLoss
from minitorch_amp.backend import device, kernels, nvrtc
from minitorch_amp.backend import squared_error as module
from minitorch_amp.backend.dtypes import float16, float32, float64
from minitorch_amp.backend.squared_error import squared_error
from minitorch_amp.utils import kernel_check

TILE = module._TILE
SIZES = [0, 1, 4095, 4096, 4097, 3 * 4096 + 5, 17 * 4096 + 3]  # the last: two launches
TINY = 2.0**-126  # float32's smallest normal: below it -ftz flushes
NAMES = {float32: "float32", float64: "float64"}


def pairs(dtype, n: int, seed: int = 0):
    """input and label of one binade or two (their sums round differently in every order),
    with every kind of value planted in the first 20 (float32: subnormals, which -ftz
    flushes; float64: none, the emulator would flush them): signed zeros, values whose
    square overflows or is below 2**-126, inf and NaN."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.5, 2.0, n) * rng.choice([-1.0, 1.0], n)
    b = rng.uniform(0.5, 2.0, n) * rng.choice([-1.0, 1.0], n)
    big = 1e20 if dtype == float32 else 1e160
    small = [1e-40, -3e-41, 2e-39] if dtype == float32 else [1e-300, -1e-290, 1e-200]
    special = [0.0, -0.0, *small, 1e-30, big, -big, np.inf, -np.inf, np.nan, 3.0]
    k = min(n, 20)
    a[:k] = np.resize(special, k)
    b[:k] = np.resize(special[::-1], k)
    return a.astype(dtype), b.astype(dtype)


def flush(v: np.ndarray) -> np.ndarray:
    """-ftz for float32: a subnormal becomes a zero of its sign (float64 is left alone)."""
    if v.dtype != float32:
        return v
    return np.where(np.abs(v) < TINY, np.copysign(np.float32(0), v), v).astype(float32)


def diff_order(a, b) -> np.ndarray:
    """The kernel's difference: a + (-b), operands and result flushed as -ftz flushes."""
    with np.errstate(invalid="ignore", over="ignore"):
        return flush(flush(a) + -flush(b))


def kernel_order(a, b, mean: bool):
    """(diff, result) as the kernels compute them: the difference, the sum of its squares in
    sum_squares's order (tests/test_primitive_kernels.py's model), and for the mean that sum
    divided by n in float64, rounded once to the dtype (NumPy's own mean's two steps)."""
    diff = diff_order(a, b)
    with np.errstate(invalid="ignore", over="ignore"):
        total = sum_squares_order(diff, diff.dtype)
        if not mean:
            return diff, total
        with np.errstate(divide="ignore"):
            quotient = np.float64(total) / np.float64(diff.size)  # 0 / 0 is nan
    return diff, np.asarray(quotient).astype(diff.dtype)


def error_bound(n: int, dtype) -> float:
    """The module's bound in units of the exact mean (or sum): (34 + ceil(n / 2**20)) u."""
    u = 2.0**-24 if dtype == float32 else 2.0**-53
    return (34 + -(-n // 2**20)) * u


# ---- NumPy: the twin is the op's former maths ------------------------------------------------
@pytest.mark.parametrize("dtype", [float32, float64], ids=NAMES.get)
@pytest.mark.filterwarnings("ignore:overflow", "ignore:invalid")
def test_on_numpy_the_difference_and_the_mean_and_sum_are_the_former_maths_bit_for_bit(dtype):
    cases = [pairs(dtype, n, seed=n) for n in (0, 1, 37, 5000)]
    cases += [(a[20:], b[20:]) for a, b in cases[2:]]  # finite: a nan would hide the order
    for a, b in cases:
        n = a.size
        diff, mean = squared_error(a, b, mean=True)
        assert_same_bits(diff, a - b)
        if n:
            assert_same_bits(mean, ((a - b) * (a - b)).mean())
        else:
            assert np.isnan(mean) and mean.dtype == dtype
        assert_same_bits(squared_error(a, b, mean=False)[1], ((a - b) * (a - b)).sum())


def test_arrays_of_different_shapes_or_dtypes_are_refused():
    with pytest.raises(ValueError, match="one shape and dtype; broadcast and cast them first"):
        squared_error(np.ones(3, float32), np.ones((1, 3), float32), mean=True)
    with pytest.raises(ValueError, match=r"input \[3\] float32 and label \[3\] float64"):
        squared_error(np.ones(3, float32), np.ones(3, float64), mean=True)


# ---- the kernels, on the emulator through the real launcher ----------------------------------
@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    return emulated_gpu.build("squared_error_emulator.cpp", tmp_path_factory.mktemp("emulator"))


def install(emulator, monkeypatch) -> list:
    """Route squared_error's launches to ``emulator``; return the list of (name, grid)."""
    launches = emulated_gpu.install(emulator, monkeypatch, "reduction.cu", block=256)
    device.cupy.empty = emulated_gpu.poisoned_empty
    device.cupy.nan = np.nan
    return launches


def on_device(a):
    out = np.empty(np.shape(a), np.asarray(a).dtype).view(HostArray)
    np.copyto(out, a)
    return out


def expected_launches(n: int, dtype, mean: bool) -> list:
    tiles = -(-n // TILE)
    forward = (f"squared_error<{module._CUDA_TYPE[dtype]}>", (1,))
    if tiles <= 16:
        return [forward]
    finish = "mean_partials" if mean else "sum_partials"
    return [(forward[0], (tiles,)), (f"{finish}<{module._CUDA_TYPE[dtype]}>", (1,))]


def check_kernels(a, b, mean: bool, launches):
    """One call on the emulator equals kernel_order bit for bit; returns (diff, result)."""
    launches.clear()
    diff, got = squared_error(on_device(a), on_device(b), mean)
    want_diff, want = kernel_order(a, b, mean)
    where = f"n={a.size}, mean={mean}"
    assert launches == expected_launches(a.size, a.dtype, mean), where
    assert got.shape == () and got.dtype == a.dtype, where
    assert_same_bits(diff, want_diff, where)
    assert_same_bits(got, want, where)
    return np.asarray(diff).view(np.ndarray), float(got)


@pytest.mark.parametrize("mean", [True, False], ids=["mean", "sum"])
@pytest.mark.parametrize("dtype", [float32, float64], ids=NAMES.get)
def test_the_kernels_write_the_difference_and_add_in_their_stated_order_bit_for_bit(
    dtype, mean, emulator, monkeypatch
):
    launches = install(emulator, monkeypatch)
    for n in SIZES:
        a, b = pairs(dtype, n, seed=n)
        diff, got = check_kernels(a, b, mean, launches)
        with np.errstate(invalid="ignore", over="ignore"):
            twin = a - b
        kept = np.abs(twin) >= TINY if dtype == float32 else np.ones(n, bool)
        kept |= ~np.isfinite(twin) | (twin == 0)
        assert_same_bits(diff[kept], twin[kept])  # the twin's, but for flushed subnormals
        if n > 20:  # finite: within the bound of the exact mean (sum) of the diff's squares
            a, b = a[20:], b[20:]
            diff, got = check_kernels(a, b, mean, launches)
            exact = math.fsum(float(d) ** 2 for d in diff) / (a.size if mean else 1)
            assert abs(got - exact) <= error_bound(a.size, dtype) * exact, n


@pytest.mark.parametrize(
    "a, b, dtype, mean, want",
    [
        ([], [], float32, True, np.nan),  # 0 / 0, as NumPy's mean of nothing
        ([], [], float64, False, 0.0),
        ([np.inf, 1.0], [np.inf, 0.0], float32, True, np.nan),  # inf - inf
        ([np.inf, 1.0], [0.0, 0.0], float64, True, np.inf),
        ([1e20, 0.0], [0.0, 0.0], float32, False, np.inf),  # the square overflows
        ([2.0**-63, 0, 0, 0], [0.0] * 4, float32, True, 2.0**-128),  # a subnormal mean, kept
        ([1.0, 0, 0], [0.0] * 3, float32, True, float(np.float32(1 / 3))),  # rounded once
        ([2.0**-70, 3.0], [0.0, 0.0], float32, False, 9.0),  # a square below 2**-126 is 0
    ],
    ids=[
        "empty mean is nan",
        "empty sum is 0",
        "inf - inf is nan",
        "inf",
        "overflow",
        "a subnormal mean is kept",
        "the division rounds once",
        "a flushed square",
    ],
)
@pytest.mark.filterwarnings("ignore:overflow", "ignore:invalid")  # the twin's inf and nan
def test_edge_values(a, b, dtype, mean, want, emulator, monkeypatch):
    install(emulator, monkeypatch)
    got = squared_error(on_device(np.array(a, dtype)), on_device(np.array(b, dtype)), mean)[1]
    assert got.dtype == dtype
    assert_same_bits(got, np.array(want, dtype))
    if not (np.isnan(want) or want == 9.0):  # (-ftz: the twin keeps the 2**-140 square)
        twin = squared_error(np.array(a, dtype), np.array(b, dtype), mean)[1]
        assert_same_bits(got, twin)


@pytest.mark.parametrize("dtype", [float32, float64], ids=NAMES.get)
def test_the_grid_never_changes_a_bit(dtype, emulator, monkeypatch):
    launches = install(emulator, monkeypatch)
    a, b = pairs(dtype, 20 * TILE + 77, seed=3)
    a, b = a[20:], b[20:]
    results = []
    for one_block_tiles, max_blocks in [(16, 1024), (0, 1), (0, 2), (0, 3), (0, 7), (10**9, 1)]:
        monkeypatch.setattr(module, "_ONE_BLOCK_TILES", one_block_tiles)
        monkeypatch.setattr(module, "_MAX_BLOCKS", max_blocks)
        diff, mean = squared_error(on_device(a), on_device(b), True)
        buffer = mean.base if mean.base is not None else mean
        while buffer.base is not None:
            buffer = buffer.base
        results.append((np.asarray(diff).copy(), np.asarray(buffer).view(np.ndarray).copy()))
    assert {(1,), (2,), (3,), (7,)} <= {grid for _, grid in launches}
    for diff, buffer in results:  # the partials show the order, the result the division
        assert_same_bits(diff, results[0][0])
        assert_same_bits(buffer, results[0][1])
    assert_same_bits(results[0][1][0], kernel_order(a, b, True)[1])


@pytest.mark.parametrize("case", ["strided", "raw kernels off", "float16"])
def test_the_twin_runs_where_the_kernels_do_not_apply(case, emulator, monkeypatch):
    launches = install(emulator, monkeypatch)
    a, b = pairs(float32, 1000, seed=1)
    dtype = float16 if case == "float16" else float32
    x, y = on_device(a[20:].astype(dtype)), on_device(b[20:].astype(dtype))
    if case == "strided":
        x, y = x[::2], y[::2]
    elif case == "raw kernels off":
        monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "0")
    diff, mean = squared_error(x, y, True)
    host_x, host_y = (np.asarray(v).view(np.ndarray) for v in (x, y))
    assert_same_bits(diff, host_x - host_y)
    assert_same_bits(mean, ((host_x - host_y) ** 2).mean())
    assert launches == []


# ---- MseLoss on the emulated GPU -----------------------------------------------------------
def run_mse(x, y, reduction):
    ctx = SimpleNamespace(needs_grad=(True, True))
    loss = MseLoss.forward(ctx, x, y, reduction)
    grad = np.ones(np.shape(loss), loss.dtype)
    gx, gy = MseLoss.backward(ctx, on_device(grad) if isinstance(x, HostArray) else grad)
    return ctx, loss, gx, gy


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("dtype", [float16, float32, float64], ids=str)
def test_mse_loss_on_the_gpu_saves_the_twins_difference_and_launches_once(
    dtype, reduction, emulator, monkeypatch
):
    launches = install(emulator, monkeypatch)
    a, b = pairs(float32, 20 + 7 * 1755, seed=2)  # 3 tiles of [1755, 7]: one launch
    x, y = a[20:].reshape(-1, 7).astype(dtype), b[20:].reshape(-1, 7).astype(dtype)
    cpu_ctx, cpu_loss, cpu_gx, cpu_gy = run_mse(x, y, reduction)
    ctx, loss, gx, gy = run_mse(on_device(x), on_device(y), reduction)
    acc = float64 if dtype == float64 else float32
    name = f"squared_error_backward<{module._CUDA_TYPE[acc]}>"
    backward = [] if dtype == float16 else [(name, (-(-x.size // 256),))]
    assert launches == [(f"squared_error<{module._CUDA_TYPE[acc]}>", (1,)), *backward]
    assert_same_bits(ctx.diff, cpu_ctx.diff)
    assert ctx.scale == cpu_ctx.scale and loss.dtype == cpu_loss.dtype == dtype
    assert_same_bits(gx, cpu_gx)  # the backward kernel: the twin's two roundings
    assert_same_bits(gy, cpu_gy)
    exact = math.fsum(float(d) ** 2 for d in cpu_ctx.diff.reshape(-1))
    exact /= x.size if reduction == "mean" else 1
    bound = error_bound(x.size, acc) + (2.0**-11 if dtype == float16 else 0.0)  # + the cast
    assert abs(float(loss) - float(cpu_loss)) <= 2 * bound * exact


@pytest.mark.parametrize("case", ["none", "broadcast label", "empty"])
def test_mse_loss_keeps_its_former_code_for_none_and_broadcast_labels(case, emulator, monkeypatch):
    launches = install(emulator, monkeypatch)
    x, y = np.arange(12, dtype=float32).reshape(3, 4), np.full((3, 4), 2.5, float32)
    reduction = "none" if case == "none" else "mean"
    if case == "broadcast label":
        y = y[:1]
    elif case == "empty":
        x, y = x[:0], y[:0]
    cpu_ctx, cpu_loss, cpu_gx, _ = run_mse(x, y, reduction)
    ctx, loss, gx, _ = run_mse(on_device(x), on_device(y), reduction)
    assert_same_bits(loss, cpu_loss)
    assert_same_bits(gx, cpu_gx)
    assert ctx.scale == cpu_ctx.scale
    want = {
        "none": [],  # the gradient is not 0-d: the expression
        "broadcast label": [("squared_error_backward<float>", (1,))],  # (the diff is full)
        "empty": [("squared_error<float>", (1,))],  # nan, as 0 / 0; nothing to scale back
    }[case]
    assert launches == want


def test_the_environment_reports_check_of_squared_error_passes_on_the_emulator(
    emulator, monkeypatch
):
    launches = install(emulator, monkeypatch)
    to_host = lambda a: np.asarray(a).view(np.ndarray)  # noqa: E731
    assert kernel_check._squared_error_matches(on_device, to_host)
    assert [name for name, _ in launches] == [
        "squared_error<float>",
        "mean_partials<float>",
        "squared_error<float>",
        "sum_partials<float>",
        "squared_error<float>",
        "squared_error<float>",
    ]


# ---- the kernel file, compiled as the loader compiles it --------------------------------------
def test_the_launcher_and_the_kernel_agree_on_sizes_and_names():
    source = kernels.REGISTRY["reduction.cu"].source()
    assert f"constexpr int kThreads = {module._THREADS};" in source
    assert "constexpr int kPerThread = 16;" in source and module._TILE == 256 * 16
    assert set(module.REDUCTION.names) >= {*module._FORWARD.values(), *module._MEAN.values()}
    for acc, name in module._CUDA_TYPE.items():
        assert f"template __global__ void squared_error<{name}>(" in source, acc
        assert f"template __global__ void mean_partials<{name}>(" in source, acc


def test_the_kernels_compile_with_nvrtc_and_never_contract_or_go_atomic(nvrtc_available):
    """With fma contraction allowed, every sum is an add.rn of its own and every square a
    mul.rn, nothing is atomic, and the mean's division is one IEEE double division."""
    entry = kernels.REGISTRY["reduction.cu"]
    names = (*module._FORWARD.values(), *module._MEAN.values())
    opts = (*entry.all_options(), "-ftz=true", "-fmad=true")
    result = nvrtc.compile_source(entry.source(), "reduction.cu", opts, names, "compute_80")
    assert set(result["lowered"]) == set(names)
    for name, lowered in result["lowered"].items():
        body = result["ptx"].split(f".entry {lowered}(")[1].split(".entry")[0]
        assert not re.search(r"\b(fma|atom|red)\.", body), name
        assert re.search(r"add\.rn(\.ftz)?\.f(32|64)", body), name
        assert "div.rn.f64" in body and not re.search(r"div(\.\w+)*\.f32", body), name


def test_the_backward_compiles_to_two_rounded_multiplications_per_element(nvrtc_available):
    """With fma contraction allowed, the backward still multiplies with mul.rn (the scale
    once, then each element), and nothing is atomic."""
    entry = kernels.REGISTRY["reduction.cu"]
    names = tuple(module._BACKWARD.values())
    opts = (*entry.all_options(), "-ftz=true", "-fmad=true")
    result = nvrtc.compile_source(entry.source(), "reduction.cu", opts, names, "compute_80")
    for name, lowered in result["lowered"].items():
        body = result["ptx"].split(f".entry {lowered}(")[1].split(".entry")[0]
        assert not re.search(r"\b(fma|atom|red)\.", body), name
        assert len(re.findall(r"mul\.rn(\.ftz)?\.f(32|64)", body)) >= 2, name


# ---- deliberately wrong kernels fail the checks above ------------------------------------------
def mutant(tmp_path, search: str, replace: str):
    """The emulator built from a copy of reduction.cu with ``search`` replaced once."""
    for name in ("squared_error_emulator.cpp", "cuda_emulator.h"):
        shutil.copy(emulated_gpu.ROOT / "tests" / name, tmp_path / name)
    source = (kernels.cuda_dir() / "reduction.cu").read_text()
    assert source.count(search) == 1, "the mutant's text is not in reduction.cu once"
    (tmp_path / "reduction.cu").write_text(source.replace(search, replace))
    return emulated_gpu.build(str(tmp_path / "squared_error_emulator.cpp"), tmp_path)


@pytest.mark.parametrize(
    "search, replace, n",
    [
        ("                diff[i] = d;\n", "", 100),
        ("const Acc d = add(input[i], -label[i]);", "const Acc d = add(label[i], -input[i]);", 9),
        ("if (mean != 0 && threadIdx.x == 0) *out = divide(*out, n);", "", 100),
        ("    if (threadIdx.x == 0) *out = divide(*out, n);\n}", "}", 17 * 4096),
        (
            "if (!(fabs(quotient) < 0x1p-126)) return static_cast<float>(quotient);",
            "return static_cast<float>(quotient);",
            4,
        ),
    ],
    ids=[
        "the difference not written",
        "label - input",
        "the one-block mean not divided",
        "mean_partials not dividing",
        "a subnormal mean flushed",
    ],
)
def test_a_wrong_kernel_fails(search, replace, n, tmp_path, monkeypatch):
    launches = install(mutant(tmp_path, search, replace), monkeypatch)
    a, b = (v[20:] for v in pairs(float32, n + 20, seed=7))  # finite: a nan hides a mean
    if n == 4:  # the subnormal mean: 2**-126 / 4
        a, b = np.float32([2.0**-63, 0, 0, 0]), np.zeros(4, float32)
    with pytest.raises(AssertionError):
        check_kernels(a, b, True, launches)


# ---- the backward: diff * (grad * scale) in one launch -----------------------------------------
def check_backward(diff, grad, scale, launches):
    """One backward on the emulator equals the twin's expression bit for bit (flushing a
    float32 product below 2**-126 to 0, as -ftz does); returns the result."""
    launches.clear()
    got = module.squared_error_backward(on_device(diff), on_device(grad), scale)
    want = module.squared_error_backward(diff, grad, scale)  # NumPy: the expression itself
    if diff.dtype == float32:
        want = np.where(np.abs(want) < 2.0**-126, np.copysign(np.float32(0), want), want)
    assert launches == [(f"squared_error_backward<{module._CUDA_TYPE[diff.dtype]}>", ANY_GRID)]
    assert got.shape == diff.shape and got.dtype == diff.dtype
    assert_same_bits(got, want, f"n={diff.size}")
    return got


class _AnyGrid:
    def __eq__(self, other):
        return isinstance(other, tuple) and len(other) == 1 and other[0] >= 1


ANY_GRID = _AnyGrid()


@pytest.mark.parametrize("dtype", [float32, float64], ids=NAMES.get)
@pytest.mark.parametrize("n", [1, 255, 256, 257, 3 * 256 + 5, 5000])
def test_the_backward_kernel_is_the_expression_bit_for_bit_on_any_grid(
    n, dtype, emulator, monkeypatch
):
    launches = install(emulator, monkeypatch)
    monkeypatch.setattr(module, "_BACKWARD_BLOCKS", 2)  # blocks stride over the elements
    rng = np.random.default_rng(n)
    diff = (rng.standard_normal(n) * rng.choice([1e-3, 1.0, 1e4], n)).astype(dtype)
    grad = np.asarray(rng.standard_normal(), dtype)  # 0-d, as a mean's gradient
    check_backward(diff.reshape(-1, 1) if n % 2 else diff, grad, 2.0 / n, launches)


def test_the_backward_kernel_rounds_the_scale_once_and_flushes_as_cupy_does(emulator, monkeypatch):
    launches = install(emulator, monkeypatch)
    # 2 / 3 is not a float32: the expression rounds it, then grad * scale, then each product
    diff = np.float32([1.0, 3.0, 2.0**-126, -(2.0**-20), np.inf, np.nan, 0.0])
    got = check_backward(diff, np.asarray(np.float32(1 + 2.0**-23)), 2.0 / 3, launches)
    assert got[2] == 0 and got[3] != 0  # 2**-126 * ~0.67 is below float32's normal range


@pytest.mark.parametrize("case", ["float16 grad", "full grad", "raw kernels off", "empty"])
def test_the_backward_expression_runs_where_the_kernel_does_not_apply(case, emulator, monkeypatch):
    launches = install(emulator, monkeypatch)
    diff, grad = np.float32([[1.5, -2.0], [0.25, 3.0]]), np.asarray(np.float32(0.75))
    if case == "float16 grad":
        grad = grad.astype(float16)
    elif case == "full grad":  # reduction='none'
        grad = np.full(diff.shape, 0.75, float32)
    elif case == "raw kernels off":
        monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "0")
    elif case == "empty":
        diff = diff[:0]
    got = module.squared_error_backward(on_device(diff), on_device(grad), 0.5)
    assert_same_bits(got, module.squared_error_backward(diff, grad, 0.5))
    assert launches == []


@pytest.mark.parametrize(
    "search, replace",
    [
        ("const Acc factor = multiply(*grad, scale);", "const Acc factor = *grad;"),
        (
            "for (long long i = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;",
            "for (long long i = threadIdx.x;",
        ),
    ],
    ids=["the scale not applied", "every block starting at element 0"],
)
def test_a_wrong_backward_kernel_fails(search, replace, tmp_path, monkeypatch):
    launches = install(mutant(tmp_path, search, replace), monkeypatch)
    monkeypatch.setattr(module, "_BACKWARD_BLOCKS", 2)
    diff = np.random.default_rng(1).standard_normal(1000).astype(float32)
    with pytest.raises(AssertionError):
        check_backward(diff, np.asarray(np.float32(0.5)), 2.0 / 1000, launches)
