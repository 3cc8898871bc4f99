"""backend.cast.cast_pair and cuda/cast.cu's pair kernels: two float32 arrays cast to float16
or bfloat16 in one launch, with the bits of two separate casts.

On NumPy arrays cast_pair is ``(astype, astype)``. The kernels run on a CPU emulator
(tests/cast_emulator.cpp on tests/cuda_emulator.h, under -ftz's flushes), fed by the real
launcher around NumPy arrays that pose as CuPy ones: the pair kernels equal ``cast`` of each
array bit for bit (ties, overflow to inf, NaN, subnormals; misaligned and transposed views;
any split of the grid), in one launch whose blocks each belong to one array; the plain cast
kernels equal their twin at several lengths and alignments (cast_body now takes its block
index and block count as parameters). The GPU test holds CuPy to the same.
"""

from __future__ import annotations

import emulated_gpu
import numpy as np
import pytest
from emulated_gpu import HostArray, on_device
from test_cast_kernel import DIRECTIONS, _sources, assert_same_bits, edge_floats

from minitorch_amp.backend import cast as cast_module
from minitorch_amp.backend import device, kernels
from minitorch_amp.backend.cast import cast, cast_pair

F16, F32, BF16 = np.dtype("float16"), np.dtype("float32"), np.dtype("bfloat16")
TARGETS = {"float16": F16, "bfloat16": BF16}
SENTINEL = 0x5A  # the bytes of a fresh output: an element the kernel never wrote keeps them


def values(n: int, seed: int) -> np.ndarray:
    """float32 values that stress both targets: float16's ties, overflow edge (65520),
    subnormals, inf and NaN, and bfloat16's exact ties and near-ties."""
    rng = np.random.default_rng(seed)
    pool = np.concatenate([edge_floats(rng, n), _sources("f32_to_bf16", n, seed)])
    return rng.choice(pool, n) if n else pool[:0]


def view(n: int, offset: int, seed: int) -> HostArray:
    """A length-``n`` view starting ``offset`` floats into a device allocation: x[offset:]."""
    base = np.empty(n + offset, F32).view(HostArray)
    base[offset:] = values(n, seed).view(HostArray)
    return base[offset:]


# ---- NumPy: the specification ----------------------------------------------------------------
@pytest.mark.parametrize("dtype", TARGETS.values(), ids=TARGETS.keys())
def test_on_numpy_cast_pair_is_astype_of_each(dtype):
    a, b = values(1000, 0), values(37, 1).reshape(37, 1)[::2]  # a strided one too
    with np.errstate(over="ignore"):
        want_a, want_b = a.astype(dtype), b.astype(dtype)
    got_a, got_b = cast_pair(a, b, dtype)
    assert_same_bits(got_a, want_a)
    assert_same_bits(got_b, want_b)
    assert got_b.flags.c_contiguous and got_b.shape == (19, 1)


def test_on_numpy_other_dtypes_are_cast_of_each():
    a, b = np.arange(5, dtype=F16), np.arange(3, dtype=np.float64)
    got_a, got_b = cast_pair(a, b, "float32")
    assert_same_bits(got_a, a.astype(F32))
    assert_same_bits(got_b, b.astype(F32))


# ---- the kernels, on the emulator through the real launcher ----------------------------------
@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    return emulated_gpu.build("cast_emulator.cpp", tmp_path_factory.mktemp("emulator"))


def sentinel_empty(shape, dtype) -> HostArray:
    """``cupy.empty`` on the emulator: every byte SENTINEL, so an unwritten element shows."""
    dtype = np.dtype(dtype)
    size = int(np.prod(shape, dtype=np.int64))
    raw = np.full(size * dtype.itemsize, SENTINEL, np.uint8)
    return raw.view(dtype).reshape(shape).view(HostArray)


@pytest.fixture
def on_emulator(emulator, monkeypatch):
    """Route cast.cu's launches to the emulator; return the list of (name, grid, args)."""
    emulated_gpu.install(emulator, monkeypatch, "cast.cu", 256)
    device.cupy.empty = sentinel_empty
    device.cupy.ascontiguousarray = lambda a: np.ascontiguousarray(a).view(HostArray)
    launches = []
    emulated = kernels.launch

    def launch(file, name, grid, block, args, shared_mem=0):
        launches.append((name, tuple(grid), args))
        emulated(file, name, grid, block, args, shared_mem)

    monkeypatch.setattr(kernels, "launch", launch)
    # Fewer blocks: the emulator pays per block (256 fibers) and the kernel grid-strides;
    # (7, 70000) and (70000, 7) then take the proportional split (1 block and 6, 6 and 1).
    monkeypatch.setattr(cast_module, "_MAX_BLOCKS", 7)
    return launches


SIZES = [(0, 5), (5, 0), (1, 1), (8, 3), (1000, 4097), (7, 70000), (70000, 7)]
OFFSETS = [(0, 0), (1, 3), (3, 0)]  # x[1:] and x[3:]: no 16-byte step aligns on both sides


@pytest.mark.parametrize("dtype", TARGETS.values(), ids=TARGETS.keys())
@pytest.mark.parametrize("sizes", SIZES, ids=str)
def test_cast_pair_equals_cast_of_each_bit_for_bit_in_one_launch(sizes, dtype, on_emulator):
    (n0, n1), launches = sizes, on_emulator
    for off0, off1 in OFFSETS:
        a, b = view(n0, off0, seed=n0), view(n1, off1, seed=n1 + 1)
        where = f"sizes={sizes} offsets={(off0, off1)}"
        del launches[:]
        got_a, got_b = cast_pair(a, b, dtype)
        assert len(launches) == 1, where
        name, grid, args = launches[0]
        if n0 and n1:  # the pair kernel, its grid split between the two
            assert name == cast_module._PAIR_KERNELS[dtype], where
            assert grid == (sum(cast_module._split_blocks(n0, n1)),), where
            assert 1 <= int(args[6]) < grid[0] <= 7, where
        else:  # one array is empty: the other's plain cast
            assert name == cast_module._KERNELS[(F32, dtype, False)], where
        for got, x in ((got_a, a), (got_b, b)):
            assert isinstance(got, HostArray) and got.flags.c_contiguous, where
            assert_same_bits(got, cast(np.asarray(x).view(np.ndarray), dtype), where)
    assert cast_pair(view(0, 0, 0), view(0, 1, 0), dtype)[1].shape == (0,)
    assert len(launches) == 1  # two empty arrays: nothing to launch


@pytest.mark.parametrize("dtype", TARGETS.values(), ids=TARGETS.keys())
def test_views_and_shapes_are_cast_like_cast_does(dtype, on_emulator):
    x = view(6 * 35, 3, seed=5).reshape(6, 35)
    w = view(35 * 9, 0, seed=6).reshape(35, 9).T  # a transposed weight: copied first
    scalar = view(1, 1, seed=7).reshape(())
    for a, b in ((x, w), (w, scalar), (scalar, x)):
        got_a, got_b = cast_pair(a, b, dtype)
        assert got_a.shape == a.shape and got_b.shape == b.shape
        assert_same_bits(got_a, cast(np.asarray(a).view(np.ndarray), dtype))
        assert_same_bits(got_b, cast(np.asarray(b).view(np.ndarray), dtype))
    assert [name for name, _, _ in on_emulator] == [cast_module._PAIR_KERNELS[dtype]] * 3


@pytest.mark.parametrize("dtype", TARGETS.values(), ids=TARGETS.keys())
@pytest.mark.parametrize("blocks0, grid", [(1, 2), (3, 4), (2, 9), (5, 6)])
def test_any_split_of_the_grid_casts_each_array_as_its_own_grid_would(
    blocks0, grid, dtype, on_emulator
):
    """Each part grid-strides over its array alone, its blocks counted from 0: sizes that
    take several strides, a misaligned first array, the sentinel outside the views."""
    n0, n1 = 5003, 3001
    a, b = view(n0, 1, seed=8), view(n1, 0, seed=9)
    base0, base1 = sentinel_empty((n0 + 16,), dtype), sentinel_empty((n1 + 16,), dtype)
    out0, out1 = base0[3 : 3 + n0], base1[8 : 8 + n1]
    args = (a, out0, np.int64(n0), b, out1, np.int64(n1), np.int32(blocks0))
    kernels.launch("cast.cu", cast_module._PAIR_KERNELS[dtype], (grid,), (256,), args)
    for out, base, x, lo in ((out0, base0, a, 3), (out1, base1, b, 8)):
        assert_same_bits(out, cast(np.asarray(x).view(np.ndarray), dtype))
        untouched = np.asarray(base).view(np.uint8)
        itemsize = dtype.itemsize
        assert (untouched[: lo * itemsize] == SENTINEL).all()
        assert (untouched[(lo + x.size) * itemsize :] == SENTINEL).all()


def test_the_split_gives_every_block_to_one_array_and_each_array_one_or_more():
    """At the real limit: each array's own grid while the two fit, then the limit split in
    proportion, never a part of 0 blocks for a non-empty array, never over the limit."""
    limit, per_block = cast_module._MAX_BLOCKS, 256 * 8
    sizes = [1, 2047, 2048, 2049, 10**6, 4095 * 2048, 4096 * 2048, 2**33, 2**40]
    for n0 in sizes:
        for n1 in sizes:
            blocks0, blocks1 = cast_module._split_blocks(n0, n1)
            own0, own1 = -(-n0 // per_block), -(-n1 // per_block)
            assert blocks0 >= 1 and blocks1 >= 1, (n0, n1)
            assert blocks0 + blocks1 == min(own0 + own1, limit), (n0, n1)
            if own0 + own1 > limit:  # in proportion, to within a block
                assert abs(blocks0 - limit * n0 / (n0 + n1)) <= 1, (n0, n1)


def test_without_raw_kernels_cast_pair_is_two_casts(on_emulator, monkeypatch):
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "0")
    a, b = view(100, 1, seed=10), view(50, 0, seed=11)
    got_a, got_b = cast_pair(a, b, "float16")
    assert on_emulator == []
    with np.errstate(over="ignore"):  # 65520 and above: inf, as the cast must give
        want_a, want_b = (np.asarray(x).view(np.ndarray).astype(F16) for x in (a, b))
    assert_same_bits(got_a, want_a)
    assert_same_bits(got_b, want_b)


class SecondGpuArray(HostArray):
    """A device array on GPU 1 (HostArray's are on GPU 0)."""

    @property
    def device(self):
        gpu = emulated_gpu.NoDevice()
        gpu.id = 1
        return gpu


def test_arrays_on_two_gpus_are_cast_each_on_its_own(on_emulator):
    a, b = view(100, 0, seed=14), view(30, 1, seed=15).view(SecondGpuArray)
    got_a, got_b = cast_pair(a, b, "bfloat16")
    assert [name for name, _, _ in on_emulator] == ["cast_f32_to_bf16"] * 2
    assert_same_bits(got_a, cast(np.asarray(a).view(np.ndarray), BF16))
    assert_same_bits(got_b, cast(np.asarray(b).view(np.ndarray), BF16))


@pytest.mark.parametrize(
    "other, dtype",
    [(np.arange(4, dtype=np.float64), "float16"), (np.arange(4, dtype=F32), "float64")],
    ids=["a float64 source", "a float64 target"],
)
def test_other_dtypes_take_the_plain_casts(other, dtype, on_emulator):
    a, b = view(9, 0, seed=12), other.view(HostArray)
    got_a, got_b = cast_pair(a, b, dtype)
    assert all(name != cast_module._PAIR_KERNELS.get(np.dtype(dtype)) for name, _, _ in on_emulator)
    assert_same_bits(got_a, cast(np.asarray(a).view(np.ndarray), dtype))
    assert_same_bits(got_b, cast(np.asarray(b).view(np.ndarray), dtype))


def test_a_host_array_beside_a_device_array_is_refused_before_anything_is_allocated(
    on_emulator, monkeypatch
):
    def no_allocation(*args):
        raise AssertionError("allocated before the arguments were checked")

    monkeypatch.setattr(device.cupy, "empty", no_allocation)
    for a, b in ((view(4, 0, 0), values(4, 0)), (values(4, 0), view(4, 0, 0))):
        with pytest.raises(TypeError, match=r"one device.*cupy\.asarray"):
            cast_pair(a, b, "float16")
    assert on_emulator == []


# ---- the plain kernels (cast_body's block parameters) ----------------------------------------
@pytest.mark.parametrize("check", [False, True], ids=["plain", "check"])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_the_plain_kernels_equal_the_twin_at_lengths_and_alignments(direction, check, on_emulator):
    src_dtype, dst_dtype = DIRECTIONS[direction]
    name = f"cast_{direction}" + ("_check" if check else "")
    for n, src_off, dst_off, grid in [
        (1, 0, 0, 1),
        (9, 1, 0, 1),
        (70, 0, 3, 1),
        (70, 4, 4, 1),
        (4097, 3, 3, 2),  # grid-strides: two blocks, three vector rounds and a tail
        (4097, 0, 0, 3),
    ]:
        host = _sources(direction, n + 8, seed=n)[src_off : src_off + n]
        src = np.empty(n + 8, src_dtype).view(HostArray)[src_off : src_off + n]
        src[...] = host.view(HostArray)
        base = sentinel_empty((n + 16,), dst_dtype)
        dst = base[dst_off : dst_off + n]
        found_inf = np.zeros(1, bool).view(HostArray)
        args = (src, dst, np.int64(n)) + ((found_inf,) if check else ())
        kernels.launch("cast.cu", name, (grid,), (256,), args)
        with np.errstate(over="ignore", invalid="ignore"):  # inf and NaN are the point
            expected = host.astype(dst_dtype)
        where = f"n={n} src_off={src_off} dst_off={dst_off} grid={grid}"
        assert_same_bits(dst, expected, where)
        untouched = np.asarray(base).view(np.uint8)
        lo, hi = dst_off * dst_dtype.itemsize, (dst_off + n) * dst_dtype.itemsize
        assert (untouched[:lo] == SENTINEL).all() and (untouched[hi:] == SENTINEL).all(), where
        if check:
            assert bool(found_inf[0]) == (not np.isfinite(expected).all()), where


def test_the_emulator_knows_every_registered_name(on_emulator):
    x = view(3, 0, seed=13)
    for name in cast_module.CAST.names:  # a 0-length launch: the name alone is checked
        flag = np.zeros(1, bool).view(HostArray)
        if name.startswith("cast_pair"):
            args = (x, x, np.int64(0), x, x, np.int64(0), np.int32(1))
            kernels.launch("cast.cu", name, (2,), (256,), args)
        else:
            args = (x, x, np.int64(0)) + ((flag,) if name.endswith("_check") else ())
            kernels.launch("cast.cu", name, (1,), (256,), args)
    assert len(on_emulator) == len(cast_module.CAST.names) == 10


# ---- the GPU ----------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", TARGETS.values(), ids=TARGETS.keys())
def test_on_the_gpu_cast_pair_equals_cast_bit_for_bit_in_one_launch(dtype, monkeypatch):
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "1")
    cp = device.cupy
    launched = []
    real_launch = kernels.launch

    def counting(file, name, *rest, **kwargs):
        launched.append(name)
        real_launch(file, name, *rest, **kwargs)

    monkeypatch.setattr(kernels, "launch", counting)
    # the last pair needs more than 4096 blocks: the grid is split in proportion
    for n0, n1 in [(1, 1), (8, 3), (1000, 4097), (7, 70000), (3_000_000, 9_000_000)]:
        host_a, host_b = values(n0 + 3, seed=n0), values(n1 + 1, seed=n1)
        for a, b in (
            (cp.asarray(host_a)[3:], cp.asarray(host_b)[1:]),
            (cp.asarray(host_a), cp.asarray(host_b)),
        ):
            del launched[:]
            got_a, got_b = cast_pair(a, b, dtype)
            assert launched == [cast_module._PAIR_KERNELS[dtype]], (n0, n1)
            for got, x, label in ((got_a, a, "a"), (got_b, b, "b")):
                where = f"{label}, sizes {(n0, n1)}"
                assert_same_bits(got, cast(x, dtype), where)  # the plain kernel
                assert_same_bits(got, cast(cp.asnumpy(x), dtype), where)  # the twin


# ---- cast(..., out=): a gradient cast straight into its buffer ---------------------------------
@pytest.mark.parametrize("direction", [(F32, F16), (F16, F32), (F32, BF16)], ids=str)
def test_cast_into_out_is_the_kernel_writing_there_in_one_launch(direction, on_emulator):
    source, target = direction
    x = on_device(np.random.default_rng(3).standard_normal((7, 300)).astype(source) * 300)
    want = cast_module.cast(x, target)
    out = sentinel_empty(x.shape, target)
    on_emulator.clear()
    assert cast_module.cast(x, target, out=out) is out
    assert [name for name, *_ in on_emulator] == [want_name(source, target)]
    assert on_emulator[0][2][1] is out  # the kernel's destination: no temporary, no copy
    assert_same_bits(out, want)


def want_name(source, target) -> str:
    short = {F32: "f32", F16: "f16", BF16: "bf16"}
    return f"cast_{short[source]}_to_{short[target]}"


@pytest.mark.parametrize("on_gpu", [False, True], ids=["numpy", "emulator"])
def test_an_out_that_does_not_fit_is_refused_before_anything_is_written(on_gpu, request):
    to = on_device if on_gpu else np.asarray
    launches = request.getfixturevalue("on_emulator") if on_gpu else []
    x = to(np.ones((4, 6), F32))
    bad = {
        "float16 array of x's shape": to(np.zeros((4, 6), F32)),  # (wrong dtype)
        "C-contiguous": to(np.zeros((6, 4), F16)).T,
        "of x's shape": to(np.zeros((4, 5), F16)),
    }
    for message, out in bad.items():
        before = np.array(out)
        with pytest.raises(ValueError, match=message):
            cast_module.cast(x, F16, out=out)
        np.testing.assert_array_equal(np.asarray(out), before)
    assert launches == []
    if on_gpu:  # a host out for a device x
        with pytest.raises(TypeError, match="of x's kind"):
            cast_module.cast(x, F16, out=np.zeros((4, 6), F16))


def test_on_numpy_cast_into_out_is_the_twin():
    x = np.array([[1 + 2**-11, 65520.0, 2.0**-25, np.nan]], F32)
    out = np.full(x.shape, 7, F16)
    assert cast_module.cast(x, F16, out=out) is out
    assert_same_bits(out, cast_module.cast(x, F16))
