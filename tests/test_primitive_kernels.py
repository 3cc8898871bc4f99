"""cuda/elementwise.cu (relu_backward) and cuda/reduction.cu (sum_squares) against their
specifications, on a CPU emulator and on the GPU.

relu_backward is held to its NumPy twin, ``grad * (y > 0)``, bit for bit for every pair of
float dtypes, over every kind of value meeting every other: signed zeros, subnormals (which
CuPy's -ftz would flush in a float comparison or multiply), inf and NaN gradients where the
unit is off (NaN, not 0: a multiply, not a select). sum_squares is held to a NumPy model of
the order in which the kernels add (:func:`kernel_order`), bit for bit, to float64 within the
error bound its header states, and to the same bits whatever grid it runs on. Deliberately
wrong kernels (a select, a float comparison, the textbook grid-stride reduction, a lost
partial sum) are built from mutated copies of the files and fail these checks.

The emulator (tests/primitives_emulator.cpp on tests/cuda_emulator.h) runs the files
unchanged, fed by the real launchers in ``backend/primitives.py``, with float32 subnormals
flushed as -ftz flushes them on the GPU. It runs blocks one after another, so "the same bits
on two runs" cannot fail there; tests/test_primitive_kernels_gpu.py checks it where blocks
race, and holds the kernels on the GPU to the same specifications.
"""

from __future__ import annotations

import math
import re
import shutil

import emulated_gpu
import ml_dtypes
import numpy as np
import pytest
from emulated_gpu import HostArray
from test_amp_kernels import assert_same_bits

from minitorch_amp.backend import device, kernels, nvrtc, primitives
from minitorch_amp.backend.dtypes import bfloat16, float16, float32, float64
from minitorch_amp.backend.primitives import relu_backward, sum_squares

FLOATS = [float16, bfloat16, float32, float64]
NAMES = {float16: "float16", bfloat16: "bfloat16", float32: "float32", float64: "float64"}
ELEMENTWISE = kernels.REGISTRY["elementwise.cu"].source()
REDUCTION = kernels.REGISTRY["reduction.cu"].source()
TILE = primitives._TILE


def specials(dtype) -> np.ndarray:
    """Every kind of value of ``dtype``: signed zeros, the smallest and largest subnormal, the
    smallest normal, +-1, the largest finite, +-inf and NaN."""
    info = ml_dtypes.finfo(dtype)
    tiny, sub = float(info.tiny), float(info.smallest_subnormal)
    values = [0.0, -0.0, sub, -sub, tiny - sub, tiny, -tiny, 1.0, -1.0, float(info.max)]
    values += [-float(info.max), np.inf, -np.inf, np.nan]
    return np.array(values, dtype=np.float64).astype(dtype)


def relu_inputs(y_dtype, g_dtype, n_random: int = 1000, seed: int = 0):
    """Every special y meets every special gradient, then random values (n not a multiple
    of the block)."""
    sy, sg = specials(y_dtype), specials(g_dtype)
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.repeat(sy, sg.size), rng.standard_normal(n_random).astype(y_dtype)])
    g = np.concatenate([np.tile(sg, sy.size), rng.standard_normal(n_random).astype(g_dtype)])
    return y, g


def relu_twin(y, g):
    with np.errstate(invalid="ignore"):  # inf * 0 is NaN, on purpose
        return relu_backward(y, g)


def kernel_order(x, acc) -> np.ndarray:
    """sum_squares as cuda/reduction.cu computes it: every square and sum rounded once in
    ``acc``, in the kernels' order, with -ftz's flushes (a 0-d array of dtype ``acc``)."""
    acc = np.dtype(acc)
    flat = np.asarray(x).reshape(-1)
    wide = flat.astype(acc)
    if flat.dtype in (bfloat16, float32):  # a float32 subnormal input reads as 0
        wide[np.abs(flat.astype(float32)) < 2.0**-126] = 0
    square = wide * wide
    if acc == float32:  # a float32 square below 2**-126 is flushed to 0
        square[square < 2.0**-126] = 0
    tiles = -(-square.size // TILE)
    padded = np.zeros(tiles * TILE, acc)
    padded[: square.size] = square
    lanes = padded.reshape(tiles, 16, 256)  # [tile, k, thread]: element tile*4096 + k*256 + t
    per_thread = np.zeros((tiles, 256), acc)
    for k in range(16):
        per_thread = per_thread + lanes[:, k, :]
    partials = _tree(per_thread)
    rows = np.zeros((max(1, -(-tiles // 256)), 256), acc).reshape(-1)
    rows[:tiles] = partials
    finish = np.zeros(256, acc)
    for row in rows.reshape(-1, 256):  # thread t adds partials t, t + 256, ... in order
        finish = finish + row
    return _tree(finish[None, :])[0]


def _tree(lanes: np.ndarray) -> np.ndarray:
    """Each row's 256 values summed as the block does: lane[t] += lane[t + s], s = 128 .. 1."""
    lanes = lanes.copy()
    s = 128
    while s:
        lanes[:, :s] = lanes[:, :s] + lanes[:, s : 2 * s]
        s //= 2
    return lanes[:, 0]


def error_bound(n: int, x_dtype, acc) -> float:
    """The header's bound in units of the exact sum: (33 + ceil(P / 256)) roundings of u,
    plus 2 when float64 inputs are first rounded to float32."""
    u = 2.0**-24 if np.dtype(acc) == float32 else 2.0**-53
    tiles = -(-n // TILE)
    depth = 33 + -(-tiles // 256) + (2 if (x_dtype, acc) == (float64, float32) else 0)
    return depth * u


def norm_inputs(dtype, n: int, seed: int = 0) -> np.ndarray:
    """Values over many binades (float16: within its range; float64: above 2**-500)."""
    rng = np.random.default_rng(seed)
    low, high = (-10, 8) if dtype == float16 else (-30, 30)
    return (rng.standard_normal(n) * 2.0 ** rng.integers(low, high, n)).astype(dtype)


def alike_inputs(dtype, n: int, seed: int = 0) -> np.ndarray:
    """Values of one binade or two, whose sums round differently in every order (values
    spread over many binades are dominated by their largest, in any order)."""
    return np.random.default_rng(seed).uniform(0.5, 2.0, n).astype(dtype)


# ---- the kernel files and their launchers (CPU) --------------------------------------------
def test_the_launchers_and_the_kernels_agree_on_block_and_tile_sizes():
    assert f"constexpr int kBlock = {primitives._RELU_BLOCK};" in ELEMENTWISE
    assert f"constexpr int kThreads = {primitives._REDUCE_THREADS};" in REDUCTION
    assert "constexpr int kPerThread = 16;" in REDUCTION and TILE == 256 * 16
    assert "kTile = kThreads * kPerThread" in REDUCTION
    assert primitives.ELEMENTWISE.names == tuple(primitives._RELU_BACKWARD.values())
    assert len(set(primitives._RELU_BACKWARD.values())) == 16
    assert len(primitives.REDUCTION.names) == 8 + 2


def _ptx_bodies(file: str, options=()) -> dict:
    entry = kernels.REGISTRY[file]
    opts = (*entry.all_options(), "-ftz=true", *options)
    result = nvrtc.compile_source(entry.source(), file, opts, entry.names, "compute_80")
    bodies = {}
    for name, lowered in result["lowered"].items():
        bodies[name] = result["ptx"].split(f".entry {lowered}(")[1].split(".entry")[0]
    return bodies


def test_relu_backward_never_compares_in_float_under_ftz(nvrtc_available):
    """Under -ftz=true a float32 comparison reads a subnormal as 0: y > 0 must be decided on
    the bits (and the 'on' branch must not multiply a float32 gradient)."""
    relu = {k: v for k, v in _ptx_bodies("elementwise.cu").items() if "relu_backward" in k}
    assert len(relu) == 16  # (the file's GELU kernels compute in float, as they should)
    for name, body in relu.items():
        assert not re.search(r"setp\.\w+(\.ftz)?\.f(16|32|64)\b", body), name
        assert "ld.global" in body and "st.global" in body, name
        # the only float32 multiply is the off branch's g * 0: a zero or a NaN either way
        for multiply in re.findall(r"mul(?:\.rn)?(?:\.ftz)?\.f32[^;]*;", body):
            assert multiply.endswith(", 0f00000000;"), (name, multiply)


def test_sum_squares_never_contracts_a_square_into_an_fma(nvrtc_available):
    """With fma contraction allowed (NVRTC's default), the PTX still rounds each square and
    each sum on its own: the NumPy model of the order holds on the GPU too."""
    for name, body in _ptx_bodies("reduction.cu", ("-fmad=true",)).items():
        assert "fma." not in body, name
        if name.startswith(("scale_tensors", "squared_error_backward")):  # products: no sum
            assert re.search(r"mul\.rn(\.ftz)?\.f(32|64)", body), name
        else:
            assert re.search(r"add\.rn(\.ftz)?\.f(32|64)", body), name


# ---- on the emulator -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    return emulated_gpu.build("primitives_emulator.cpp", tmp_path_factory.mktemp("emulator"))


def install(emulator, monkeypatch, file: str, allocations: list | None = None) -> list:
    """Route primitives' launches of ``file`` to ``emulator``; return the launches list."""
    block = primitives._RELU_BLOCK if file == "elementwise.cu" else primitives._REDUCE_THREADS
    launches = emulated_gpu.install(emulator, monkeypatch, file, block=block)
    fake = device.cupy

    def empty(shape, dtype):
        if allocations is not None:
            allocations.append((shape, np.dtype(dtype)))
        return np.empty(shape, dtype).view(HostArray)

    fake.empty = empty
    fake.empty_like = lambda a: empty(a.shape, a.dtype)
    return launches


def on_device(a: np.ndarray) -> HostArray:
    out = np.empty(a.shape, a.dtype).view(HostArray)
    np.copyto(out, a)
    return out


def check_relu_backward(y_dtype, g_dtype, launches) -> None:
    """The launcher and kernel of relu_backward equal the twin, bit for bit (NaN: NaN)."""
    y, g = relu_inputs(y_dtype, g_dtype)
    want = relu_twin(y, g)
    launches.clear()
    got = relu_backward(on_device(y), on_device(g))
    name = f"relu_backward<{primitives._CUDA_TYPE[y_dtype]}, {primitives._CUDA_TYPE[g_dtype]}>"
    assert [n for n, _ in launches] == [name]
    assert got.dtype == g_dtype and got.shape == g.shape
    assert_same_bits(got, want, name)


@pytest.mark.parametrize("g_dtype", FLOATS, ids=NAMES.get)
@pytest.mark.parametrize("y_dtype", FLOATS, ids=NAMES.get)
def test_relu_backward_equals_the_twin_bit_for_bit(y_dtype, g_dtype, emulator, monkeypatch):
    launches = install(emulator, monkeypatch, "elementwise.cu")
    check_relu_backward(y_dtype, g_dtype, launches)
    blocks = -(-(14 * 14 + 1000) // primitives._RELU_BLOCK)
    assert launches[0][1] == (blocks,)


def test_an_inf_or_nan_gradient_where_the_unit_is_off_stays_nan(emulator, monkeypatch):
    install(emulator, monkeypatch, "elementwise.cu")
    y = on_device(np.array([0.0, -0.0, -1.0, np.nan, 1.0, 0.0, 0.0], float16))
    g = on_device(np.array([np.inf, -np.inf, np.nan, 1.0, np.inf, -2.0, 2.0], float16))
    out = np.asarray(relu_backward(y, g)).view(np.ndarray)
    assert np.isnan(out[:3]).all() and out[3] == 0 and out[4] == np.inf
    assert np.signbit(out[5]) and not np.signbit(out[6])  # -2 * 0 is -0


def test_relu_backward_strides_when_the_grid_is_capped(emulator, monkeypatch):
    launches = install(emulator, monkeypatch, "elementwise.cu")
    monkeypatch.setattr(primitives, "_RELU_MAX_BLOCKS", 2)  # each thread takes 3 elements
    y, g = relu_inputs(float32, float16, n_random=3 * 2 * 256 - 196 - 5)
    got = relu_backward(on_device(y), on_device(g))
    assert launches == [("relu_backward<float, __half>", (2,))]
    assert_same_bits(got, relu_twin(y, g))


@pytest.mark.parametrize(
    "case",
    ["strided", "broadcast", "raw kernels off", "empty", "integer"],
)
def test_relu_backward_takes_cupys_own_ops_or_nothing_where_the_kernel_does_not_apply(
    case, emulator, monkeypatch
):
    launches = install(emulator, monkeypatch, "elementwise.cu")
    y, g = relu_inputs(float32, float32, n_random=10)
    y, g = on_device(y), on_device(g)
    if case == "strided":
        y, g = y[::2], g[::2]
    elif case == "broadcast":
        y = y[:1]
    elif case == "raw kernels off":
        monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "0")
    elif case == "empty":
        y, g = y[:0], g[:0]
    else:
        y = on_device(np.arange(-3, g.size - 3).astype(np.int32))
    want = relu_twin(np.asarray(y).view(np.ndarray), np.asarray(g).view(np.ndarray))
    assert_same_bits(relu_twin(y, g), want)
    assert launches == []


def check_sum_squares(x, acc, launches) -> np.ndarray:
    """One call on the emulator equals kernel_order bit for bit; returns the result."""
    got = sum_squares(on_device(x), acc)
    assert got.shape == () and got.dtype == acc
    assert_same_bits(got, kernel_order(x, acc), f"n={x.size}, launches {launches}")
    return np.asarray(got).view(np.ndarray)


SIZES = [0, 1, 255, 257, TILE, TILE + 1, 16 * TILE, 16 * TILE + 1, 40 * TILE + 123]


@pytest.mark.parametrize("acc", [float32, float64], ids=NAMES.get)
@pytest.mark.parametrize("x_dtype", FLOATS, ids=NAMES.get)
def test_sum_squares_adds_in_its_stated_order_bit_for_bit(x_dtype, acc, emulator, monkeypatch):
    launches = install(emulator, monkeypatch, "reduction.cu")
    for n in SIZES:
        launches.clear()
        x = norm_inputs(x_dtype, n, seed=n)
        got = check_sum_squares(x, acc, launches)
        tiles = -(-n // TILE)
        name = f"sum_squares<{primitives._CUDA_TYPE[x_dtype]}, {primitives._CUDA_TYPE[acc]}>"
        if tiles <= 16:  # one block does both steps
            assert launches == [(name, (1,))]
        else:
            assert launches == [
                (name, (tiles,)),
                (f"sum_partials<{primitives._CUDA_TYPE[acc]}>", (1,)),
            ]
        exact = math.fsum(float(v) ** 2 for v in x.astype(float64))
        assert abs(float(got) - exact) <= error_bound(n, x_dtype, acc) * exact, n


def whole_buffer(result):
    """The array ``result`` is the first element of: the result, then the partials."""
    while result.base is not None:
        result = result.base
    return result


def check_same_bits_on_every_grid(x, acc, monkeypatch, launches) -> None:
    """The grid changes which block sums a tile, never what it sums: the partials and the
    result have the same bits on every grid, and on two runs of each. (A sum of squares in
    float32 is often so well conditioned that a grid-dependent order still rounds to the same
    result: the partials show the order.)"""
    buffers = []
    for one_block_tiles, max_blocks in [(16, 1024), (0, 1), (0, 2), (0, 3), (0, 7), (10**9, 1)]:
        monkeypatch.setattr(primitives, "_ONE_BLOCK_TILES", one_block_tiles)
        monkeypatch.setattr(primitives, "_MAX_BLOCKS", max_blocks)
        for _ in range(2):
            result = sum_squares(on_device(x), acc)
            buffers.append(np.asarray(whole_buffer(result)).view(np.ndarray).copy())
    grids = {grid for _, grid in launches}
    assert {(1,), (2,), (3,), (7,)} <= grids
    for buffer in buffers:
        assert_same_bits(buffer, buffers[0], f"grids {sorted(grids)}")


@pytest.mark.parametrize(
    "x_dtype, acc", [(float16, float32), (float32, float32), (float64, float64)]
)
def test_sum_squares_has_the_same_bits_on_every_grid(x_dtype, acc, emulator, monkeypatch):
    launches = install(emulator, monkeypatch, "reduction.cu")
    x = alike_inputs(x_dtype, 20 * TILE + 77, seed=3)
    check_same_bits_on_every_grid(x, acc, monkeypatch, launches)


def test_sum_squares_allocates_one_array_per_call_and_nothing_else(emulator, monkeypatch):
    allocations = []
    install(emulator, monkeypatch, "reduction.cu", allocations)
    for n, tiles in [(0, 0), (5, 1), (17 * TILE, 17)]:
        allocations.clear()
        sum_squares(on_device(np.ones(n, float16)), float32)
        assert allocations == [(1 + tiles, float32)]  # the result, then the partials


@pytest.mark.parametrize(
    "x, acc, want",
    [
        ([], float32, 0.0),
        ([np.inf, 1.0], float32, np.inf),
        ([np.nan, 1.0], float64, np.nan),
        ([-np.inf], float64, np.inf),
        ([1e30, 1e30], float32, np.inf),  # float32 squares overflow, as np.dot's do
        ([2.0**-70, 3.0], float32, 9.0),  # a float32 square below 2**-126 counts as 0
    ],
)
def test_sum_squares_edge_values(x, acc, want, emulator, monkeypatch):
    install(emulator, monkeypatch, "reduction.cu")
    got = float(sum_squares(on_device(np.array(x, np.float32)), acc))
    assert got == want or (np.isnan(want) and np.isnan(got))


@pytest.mark.parametrize("case", ["strided", "raw kernels off"])
def test_sum_squares_takes_cupys_own_ops_where_the_kernel_does_not_apply(
    case, emulator, monkeypatch
):
    launches = install(emulator, monkeypatch, "reduction.cu")
    x = on_device(norm_inputs(float16, 1000))
    if case == "strided":
        x = x[::3]
    else:
        monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "0")
    got = sum_squares(x, float32)
    want = (np.asarray(x).view(np.ndarray).astype(float32) ** 2).sum()
    assert launches == [] and float(got) == float(want)


def test_sum_squares_refuses_an_accumulator_that_is_not_float32_or_float64(emulator, monkeypatch):
    install(emulator, monkeypatch, "reduction.cu")
    with pytest.raises(TypeError, match="float32 or float64, not float16"):
        sum_squares(on_device(np.ones(3, float16)), float16)


# ---- deliberately wrong kernels fail the checks above --------------------------------------
def mutant(tmp_path, file: str, search: str, replace: str):
    """The emulator built from a copy of ``file`` with ``search`` replaced once."""
    for name in ("primitives_emulator.cpp", "cuda_emulator.h"):
        shutil.copy(emulated_gpu.ROOT / "tests" / name, tmp_path / name)
    for name in ("elementwise.cu", "reduction.cu"):
        shutil.copy(kernels.cuda_dir() / name, tmp_path / name)
    source = (tmp_path / file).read_text()
    assert source.count(search) == 1, f"the mutant's text is not in {file} once"
    (tmp_path / file).write_text(source.replace(search, replace))
    # a quoted #include is looked up next to the including file first: the mutated copy
    return emulated_gpu.build(str(tmp_path / "primitives_emulator.cpp"), tmp_path)


@pytest.mark.parametrize(
    "search, replace, y_dtype",
    [
        ("positive(y[i]) ? g[i] : times_zero(g[i])", "positive(y[i]) ? g[i] : G()", float16),
        ("return bits != 0u && bits <= 0x7f800000u;", "return y > 0.0f;", float32),
    ],
    ids=["a select, not a multiply", "a float comparison, flushed under -ftz"],
)
def test_a_wrong_relu_backward_fails(search, replace, y_dtype, tmp_path, monkeypatch):
    launches = install(
        mutant(tmp_path, "elementwise.cu", search, replace), monkeypatch, "elementwise.cu"
    )
    with pytest.raises(AssertionError):
        check_relu_backward(y_dtype, float32, launches)


TILE_LOOP = """\
    for (long long tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        const Acc sum = tile_squares<T, Acc>(x, n, tile, lane);
        if (threadIdx.x == 0) partials[tile] = sum;
    }
"""
TEXTBOOK_LOOP = """\
    const long long stride = static_cast<long long>(gridDim.x) * kThreads;
    Acc sum = 0;
    for (long long i = blockIdx.x * static_cast<long long>(kThreads) + threadIdx.x; i < n;
         i += stride) {
        sum = add(sum, square(widen<Acc>(x[i])));
    }
    sum = block_sum(sum, lane);
    for (long long tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        if (threadIdx.x == 0) partials[tile] = (tile == blockIdx.x) ? sum : Acc(0);
    }
"""


def test_a_textbook_grid_stride_reduction_fails_the_every_grid_check(tmp_path, monkeypatch):
    """The usual reduction (each block strides over the elements, one partial per block) is
    as accurate as the tiles (the bound holds), but which elements meet in a sum follows the
    grid, and so do the bits of the sums."""
    emulator = mutant(tmp_path, "reduction.cu", TILE_LOOP, TEXTBOOK_LOOP)
    launches = install(emulator, monkeypatch, "reduction.cu")
    x = alike_inputs(float32, 20 * TILE + 77, seed=3)
    exact = math.fsum(float(v) ** 2 for v in x.astype(float64))
    got = float(sum_squares(on_device(x), float32))
    assert abs(got - exact) <= error_bound(x.size, float32, float32) * exact
    with pytest.raises(AssertionError):
        check_same_bits_on_every_grid(x, float32, monkeypatch, launches)


def test_a_lost_partial_fails_the_order_check(tmp_path, monkeypatch):
    search = "for (long long p = threadIdx.x; p < n_partials; p += kThreads)"
    replace = search.replace("p < n_partials", "p < n_partials - 1")
    launches = install(
        mutant(tmp_path, "reduction.cu", search, replace), monkeypatch, "reduction.cu"
    )
    with pytest.raises(AssertionError):
        check_sum_squares(norm_inputs(float16, 3 * TILE), float32, launches)
