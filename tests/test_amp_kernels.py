"""The loss-scaling kernels (``cuda/amp.cu``) against their NumPy twins
(``backend/loss_scaling.py``), bit for bit.

On the CPU: the kernel file names what the launcher registers, compiles with NVRTC the way
the loader compiles it (and, under CuPy's -ftz=true, keeps float32 subnormals out of the
one-thread kernels' float arithmetic), and the chunk table covers every element once. On the
GPU: the multi-tensor unscale equals the twin over many tensors of awkward sizes with
inf/NaN at random places, in one launch; the one-thread update (with its floor counter)
equals the twin over random sequences, subnormal scales included; the one-thread inverse of
the scale equals the twin for every kind of float32.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from minitorch_amp.backend import device, kernels, loss_scaling, nvrtc
from minitorch_amp.backend.loss_scaling import (
    chunk_table,
    inverse_scale,
    unscale_and_check,
)
from minitorch_amp.backend.scale_update import update_loss_scaling

SOURCE = kernels.REGISTRY["amp.cu"].source()
_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def assert_same_bits(got, expected, where: str = "") -> None:
    """Equal bit patterns everywhere except NaN, where only NaN-ness must agree."""
    got = np.ascontiguousarray(device.asnumpy(got)).reshape(-1)
    expected = np.ascontiguousarray(device.asnumpy(expected)).reshape(-1)
    assert got.dtype == expected.dtype and got.shape == expected.shape, where
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=where)
    uint = _UINT[expected.itemsize]
    np.testing.assert_array_equal(got.view(uint)[~nan], expected.view(uint)[~nan], err_msg=where)


# ---- the kernel source and the chunk table (CPU) -------------------------------------------
def test_every_registered_name_is_a_kernel_in_amp_cu():
    entry = kernels.REGISTRY["amp.cu"]
    assert entry is loss_scaling.AMP
    for name in entry.names:
        match = re.fullmatch(r"unscale_and_check<(\w+)>", name)
        if match:  # a template: defined once, and instantiated explicitly for nvcc
            assert re.search(
                r"__global__ void __launch_bounds__\(kThreads\)\s+unscale_and_check\(", SOURCE
            )
            assert f"template __global__ void unscale_and_check<{match[1]}>(" in SOURCE
        else:
            assert re.search(rf'extern "C" __global__ void {name}\(', SOURCE), name
    assert set(loss_scaling._UNSCALE_KERNELS.values()) < set(entry.names)


def test_the_launcher_and_the_kernel_agree_on_chunk_and_block_size():
    assert f"constexpr long long kChunk = {loss_scaling._CHUNK};" in SOURCE
    assert f"constexpr int kThreads = {loss_scaling._UNSCALE_THREADS};" in SOURCE


@pytest.mark.parametrize("arch", ["compute_80", "compute_90"])
def test_amp_cu_compiles_with_nvrtc_and_unscales_with_16_byte_global_accesses(
    arch, nvrtc_available
):
    entry = kernels.REGISTRY["amp.cu"]
    result = nvrtc.compile_source(entry.source(), "amp.cu", entry.all_options(), entry.names, arch)
    assert set(result["lowered"]) == set(entry.names)
    for name in loss_scaling._UNSCALE_KERNELS.values():
        lowered = result["lowered"][name]
        body = result["ptx"].split(f".entry {lowered}(")[1].split(".entry")[0]
        # the grad pointers come from the table: without __isGlobal they would be generic
        assert re.search(r"ld\.global\.v[24]\.", body), name
        assert re.search(r"st\.global\.v[24]\.", body), name
        assert "bar.red.or" in body, name  # one flag store per block


# float32 instructions that leave a value's bits alone, or only test for NaN, under -ftz
_BITS_ONLY = re.compile(r"(ld|st)(\.\w+)*\.f32|selp\.f32|mov\.f32|cvt\.|setp\.(nan|num)\.")


@pytest.mark.parametrize(
    "name", ["inverse_scale", "inverse_scale_and_clear", "update_loss_scaling"]
)
def test_the_one_thread_kernels_do_no_float32_arithmetic_under_ftz(name, nvrtc_available):
    """CuPy adds -ftz=true, which flushes subnormal inputs and results of every float32
    multiply, max/min and ordered comparison: these kernels multiply and compare in double
    (the emulator checks that subnormals reach the double exactly, and come back as bits)."""
    entry = kernels.REGISTRY["amp.cu"]
    options = (*entry.all_options(), "-ftz=true")
    result = nvrtc.compile_source(entry.source(), "amp.cu", options, entry.names, "compute_80")
    body = result["ptx"].split(f".entry {result['lowered'][name]}(")[1].split(".entry")[0]
    instructions = [line.strip() for line in body.splitlines() if re.search(r"\.f32\b", line)]
    code = [i for i in instructions if not i.startswith((".param", ".reg"))]
    assert code and "mul.f64" in body, name  # it does compute, in double
    assert [i for i in code if not _BITS_ONLY.match(i)] == [], name


@pytest.mark.parametrize("chunk", [1, 4, 7, 65536])
def test_the_chunk_table_covers_every_element_exactly_once(chunk):
    rng = np.random.default_rng(chunk)
    sizes = [0, 1, chunk - 1, chunk, chunk + 1, 3 * chunk + 2, *rng.integers(0, 5 * chunk, 20)]
    sizes = [int(s) for s in sizes if s >= 0]
    pointers = [4096 * (i + 1) for i in range(len(sizes))]
    table = chunk_table(pointers, sizes, chunk)
    n_tensors = len(sizes)
    n_chunks = (table.size - 2 * n_tensors) // 2
    assert table.dtype == np.int64
    assert (
        table[:n_tensors].tolist() == pointers
        and table[n_tensors : 2 * n_tensors].tolist() == sizes
    )
    assert n_chunks == sum(-(-s // chunk) for s in sizes)
    covered = [np.zeros(s, dtype=np.int64) for s in sizes]
    tensor_of, begin_of = (
        table[2 * n_tensors : 2 * n_tensors + n_chunks],
        table[2 * n_tensors + n_chunks :],
    )
    for t, begin in zip(tensor_of.tolist(), begin_of.tolist()):  # what block c does
        assert begin % chunk == 0
        covered[t][begin : min(begin + chunk, sizes[t])] += 1
    for t, hits in enumerate(covered):
        assert (hits == 1).all(), (t, sizes[t])


# ---- the multi-tensor unscale == the twin (GPU) --------------------------------------------
SIZES = [0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1000, 0, 4097, 65535, 65536, 65537]
SIZES += [3 * 65536 + 5, 123_457]
INV_SCALES = [2.0**-16, 1 / 3, 1.0, 2.0, 2.0**-30]
UNSCALE_DTYPES = ["float16", "float32", "float64", "bfloat16"]  # bfloat16: CuPy >= 14


def _grads(rng, dtype, sizes, with_bad: bool) -> list[np.ndarray]:
    """Scaled gradients over a range of magnitudes; with_bad puts inf/NaN at random places
    (always into the third tensor, so the flag is raised; sometimes into others)."""
    top = 12 if dtype == "float16" else 30  # float16 grads stay below 65504 before unscaling
    grads = []
    for i, n in enumerate(sizes):
        g = rng.standard_normal(n) * 2.0 ** rng.integers(-24, top, n)
        if i == 3:
            g[1] = 40000.0  # a finite float16 that unscaling by 2 pushes past 65504
        if with_bad and n and (i == 2 or rng.random() < 0.3):
            at = rng.integers(0, n, rng.integers(1, 4))
            g[at] = rng.choice([np.inf, -np.inf, np.nan], at.size)
        grads.append(g.astype(dtype))
    return grads


@pytest.fixture
def cp(monkeypatch):
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "1")
    return device.cupy


@pytest.fixture
def launches(monkeypatch):
    """Every kernels.launch call, by kernel name (the test still launches for real)."""
    seen, launch = [], kernels.launch

    def spy(file, name, *args, **kwargs):
        seen.append(name)
        return launch(file, name, *args, **kwargs)

    monkeypatch.setattr(kernels, "launch", spy)
    return seen


@pytest.mark.gpu
@pytest.mark.parametrize("inv", INV_SCALES)
@pytest.mark.parametrize("with_bad", [False, True])
@pytest.mark.parametrize("dtype", UNSCALE_DTYPES)
def test_multi_tensor_unscale_equals_the_twin_in_one_launch(cp, launches, dtype, with_bad, inv):
    seed = [UNSCALE_DTYPES.index(dtype), int(with_bad), INV_SCALES.index(inv)]
    host = _grads(np.random.default_rng(seed), dtype, SIZES, with_bad)
    inv_scale = np.array([inv], dtype="float32")
    for start in (False, True):  # a set flag is never cleared
        found_cpu, found_gpu = np.array([start]), cp.asarray(np.array([start]))
        expected = [g.copy() for g in host]
        unscale_and_check(expected, inv_scale, found_cpu)
        got = [cp.asarray(g) for g in host]
        launches.clear()
        unscale_and_check(got, cp.asarray(inv_scale), found_gpu)
        assert launches == [loss_scaling._UNSCALE_KERNELS[np.dtype(dtype)]]
        for i, (a, b) in enumerate(zip(got, expected)):
            assert_same_bits(a, b, f"tensor {i} of size {SIZES[i]}")
        assert bool(found_gpu[0]) == bool(found_cpu[0])
        if not start:  # the data exercise both verdicts
            assert bool(found_cpu[0]) == (with_bad or (dtype == "float16" and inv == 2.0))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "float32", "bfloat16"])
def test_views_misaligned_strided_and_0d_are_unscaled_in_place(cp, launches, dtype):
    host_base = _grads(np.random.default_rng(5), dtype, [280_000], with_bad=False)[0]
    host_base[[10, 70_001, 140_007, 200_002]] = [np.inf, np.nan, -np.inf, np.nan]
    inv_scale = np.array([1 / 3], dtype="float32")
    views = [  # disjoint, so the order in which they are unscaled does not matter
        lambda b: b[1:70_000],  # C-contiguous, one element past an aligned start: scalar path
        lambda b: b[70_001, ...],  # 0-d
        lambda b: b[70_008:140_000],  # C-contiguous and 16-byte aligned: vector path
        lambda b: b[140_000:].reshape(-1, 7)[:, ::2],  # strided: the twin's loop on CuPy
    ]
    base_cpu, base_gpu = host_base.copy(), cp.asarray(host_base)
    found_cpu, found_gpu = np.zeros(1, dtype=bool), cp.zeros(1, dtype=bool)
    unscale_and_check([v(base_cpu) for v in views], inv_scale, found_cpu)
    unscale_and_check([v(base_gpu) for v in views], cp.asarray(inv_scale), found_gpu)
    assert launches == [loss_scaling._UNSCALE_KERNELS[np.dtype(dtype)]]
    assert_same_bits(base_gpu, base_cpu)  # written through, and only inside the views
    assert bool(found_gpu[0]) and bool(found_cpu[0])


@pytest.mark.gpu
def test_unscaling_overflows_after_narrowing_on_the_device(cp):
    g = cp.asarray(np.array([40000.0, 1.0, 65504.0], dtype="float16"))
    found_inf = cp.zeros(1, dtype=bool)
    unscale_and_check([g], cp.asarray(np.array([2.0], "float32")), found_inf)
    assert bool(found_inf[0]) and np.isinf(float(g[0])) and float(g[1]) == 2.0


@pytest.mark.gpu
def test_an_empty_bucket_and_empty_grads_launch_nothing(cp, launches):
    found_inf = cp.zeros(1, dtype=bool)
    inv = cp.asarray(np.array([0.5], "float32"))
    unscale_and_check([], inv, found_inf)
    unscale_and_check([cp.zeros(0, "float16"), cp.zeros((3, 0), "float16")], inv, found_inf)
    assert launches == [] and not bool(found_inf[0])


# ---- the one-thread kernels: what the GPU and the emulator run alike ----------------------
# (tests/test_amp_kernel_emulator.py runs the same cases on the CPU emulator, under -ftz.)
def inverse_scale_cases() -> np.ndarray:
    """float32 scales whose inverses a flushed, truncated or mis-signed kernel gets wrong:
    +-0, +-inf, NaN, every power of two, subnormal scales (finite inverses up to 2**-128,
    inf below), scales in [2**126, 2**128) (subnormal inverses), and random bit patterns."""
    rng = np.random.default_rng(7)
    special = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001]
    special += [1, 2, 3, 0x001FFFFF, 0x00200000, 0x00200001, 0x007FFFFF, 0x00800000]
    special += [0x7E800000, 0x7E800001, 0x7F000000, 0x7F7FFFFF, 0x3F800000, 0x40400000]
    powers = np.ldexp(np.float32(1), np.arange(-149, 128)).view(np.uint32)
    subnormal = rng.integers(1, 0x00800000, 200)
    subnormal_inverse = rng.integers(0x7E800000, 0x7F800000, 400)
    anything = rng.integers(0, 2**32, 400)
    positive = np.concatenate([special, powers, subnormal, subnormal_inverse, anything])
    bits = np.concatenate([positive, positive[6:] | 0x80000000]).astype(np.uint32)
    return bits.view(np.float32)


# name -> (start scale, rule, probability of an overflow per step); 200 random steps each
UPDATE_WALKS = {
    "normal range, floor 1": (
        2.0**4,
        dict(incr_every_n_steps=2, decr_every_n_nan_or_inf=1, incr_ratio=2.0, decr_ratio=0.5,
             min_loss_scaling=1.0),
        0.6,
    ),
    "down through the subnormals to 2**-149": (
        2.0**-120,
        dict(incr_every_n_steps=1, decr_every_n_nan_or_inf=1, incr_ratio=1.5, decr_ratio=0.5,
             min_loss_scaling=2.0**-149),
        0.85,
    ),
    "subnormal ties (k * 2**-149 times 0.5 and 1.5)": (
        5 * 2.0**-149,
        dict(incr_every_n_steps=1, decr_every_n_nan_or_inf=1, incr_ratio=1.5, decr_ratio=0.5,
             min_loss_scaling=2.0**-149),
        0.5,
    ),
    "a subnormal floor and ceiling": (
        2e-40,
        dict(incr_every_n_steps=2, decr_every_n_nan_or_inf=2, incr_ratio=3.0, decr_ratio=1 / 3,
             min_loss_scaling=1e-40, max_loss_scaling=4e-40),
        0.6,
    ),
    "growth refused at inf, a ceiling above float32": (
        2.0**125,
        dict(incr_every_n_steps=1, decr_every_n_nan_or_inf=1, incr_ratio=3.0, decr_ratio=0.9,
             min_loss_scaling=2.0**120, max_loss_scaling=1e39),
        0.2,
    ),
    "a scale that starts below its floor holds on overflow": (
        2.0**-7,
        dict(incr_every_n_steps=3, decr_every_n_nan_or_inf=1, incr_ratio=2.0, decr_ratio=0.5,
             min_loss_scaling=1.0),
        0.5,
    ),
}  # fmt: skip


def update_walk(to_device, name: str) -> int:
    """Walk ``name`` through the twin and the kernel, same bits after every step; return the
    longest run the floor counter saw. The counters live as GradScaler keeps them: views of
    one int32 [3]."""
    start, rule, p_bad = UPDATE_WALKS[name]
    rng = np.random.default_rng(list(UPDATE_WALKS).index(name))
    longest = [0]
    update_both(to_device, rng.random(200) < p_bad, start, rule, seen=longest)
    return max(longest)


def update_both(to_device, overflows, start: float, rule: dict, counters=(0, 0, 0), seen=None):
    """The twin and the kernel through one sequence of found_inf flags (see update_walk);
    the twin's final ``[scale, good, bad, at_floor]``. ``seen`` collects at_floor."""
    twin = [np.float32([start]), *(np.array([c], np.int32) for c in counters)]
    on_device = to_device(np.array(counters, np.int32))
    kernel = [to_device(twin[0]), on_device[0:1], on_device[1:2], on_device[2:3]]
    for step, overflow in enumerate(overflows):
        found = np.array([overflow])
        update_loss_scaling(found, *twin, **rule)
        update_loss_scaling(to_device(found), *kernel, **rule)
        for what, a, b in zip(("scale", "good", "bad", "at_floor"), kernel, twin):
            assert_same_bits(a, b, f"{what} after step {step}, found_inf={overflow}")
        if seen is not None:
            seen.append(int(twin[3][0]))
    return twin


# ---- the one-thread update == the twin (GPU) -----------------------------------------------
CONFIGS = [
    dict(incr_every_n_steps=1, decr_every_n_nan_or_inf=1, incr_ratio=2.0, decr_ratio=0.5),
    dict(incr_every_n_steps=2, decr_every_n_nan_or_inf=2, incr_ratio=3.0, decr_ratio=1 / 3),
    dict(incr_every_n_steps=3, decr_every_n_nan_or_inf=1, incr_ratio=1.5, decr_ratio=0.25),
    dict(incr_every_n_steps=1000, decr_every_n_nan_or_inf=3, incr_ratio=2.0, decr_ratio=0.9),
    dict(incr_every_n_steps=2**40, decr_every_n_nan_or_inf=1, incr_ratio=2.0, decr_ratio=0.5),
]
BOUNDS = [
    dict(min_loss_scaling=1.0, max_loss_scaling=float("inf")),
    dict(min_loss_scaling=2.0**-10, max_loss_scaling=2.0**24),
    dict(min_loss_scaling=1e-3, max_loss_scaling=1e39),  # above float32's range: inf
    dict(min_loss_scaling=0.7, max_loss_scaling=3.3),
]
STARTS = [1.0, 2.0**16, 2.0**126, 2.0**-8, 3.0]


@pytest.mark.gpu
@pytest.mark.parametrize("start", STARTS)
@pytest.mark.parametrize("bounds", BOUNDS)
@pytest.mark.parametrize("config", CONFIGS)
def test_one_thread_update_equals_the_twin_over_random_sequences(
    cp, launches, config, bounds, start
):
    """The scale, both step counters and the floor counter, after every step."""
    rng = np.random.default_rng([CONFIGS.index(config), BOUNDS.index(bounds), STARTS.index(start)])
    p_bad = rng.choice([0.05, 0.3, 0.7])
    update_both(cp.asarray, rng.random(300) < p_bad, start, {**config, **bounds})
    assert launches == ["update_loss_scaling"] * 300


@pytest.mark.gpu
@pytest.mark.parametrize("walk", UPDATE_WALKS)
def test_one_thread_update_keeps_subnormal_scales_and_floors_like_the_twin(cp, launches, walk):
    """Under CuPy's -ftz=true: subnormal products, ties, floors and the floor counter."""
    update_walk(cp.asarray, walk)
    assert launches == ["update_loss_scaling"] * 200


@pytest.mark.gpu
@pytest.mark.parametrize("overflow", [True, False])
def test_the_counters_wrap_like_numpy_int32_on_the_device(cp, overflow):
    rule = dict(incr_every_n_steps=2**40, decr_every_n_nan_or_inf=2**40, incr_ratio=2.0,
                decr_ratio=0.5, min_loss_scaling=1.0)  # fmt: skip
    update_both(cp.asarray, [overflow], 1.0, rule, counters=(2**31 - 1,) * 3)


@pytest.mark.gpu
def test_the_inverse_scale_kernel_rounds_like_the_twin(cp, launches):
    scales = inverse_scale_cases()
    for s in scales:
        cpu, gpu = np.zeros(1, "float32"), cp.zeros(1, "float32")
        inverse_scale(np.array([s]), cpu)
        inverse_scale(cp.asarray(np.array([s])), gpu)
        assert_same_bits(gpu, cpu, f"1/{s!r} (bits {np.float32(s).view(np.uint32):#010x})")
    assert launches == ["inverse_scale"] * scales.size


@pytest.mark.gpu
def test_a_grad_scalers_scale_is_one_launch_with_the_twins_product(cp, launches):
    """GradScaler.scale of a 0-d float32 loss on the GPU: scale_loss, once; the product of
    CuPy's own multiply and the twin's, and a backward by the scale as it was."""
    import minitorch_amp as mt

    scaler = mt.amp.GradScaler(init_loss_scaling=1024.0)
    w = mt.to_tensor(np.float32([0.1, 0.2, 0.3]), place="gpu:0", stop_gradient=False)
    loss = (w * w).sum()
    launches.clear()
    scaled = scaler.scale(loss)
    assert launches == ["scale_loss"]
    want = np.float32(loss.numpy()) * np.float32(1024.0)
    assert_same_bits(scaled._data, np.asarray(want), "loss * scale")
    assert_same_bits(scaled._data, loss._data * cp.float32(1024.0), "CuPy's multiply")
    scaler._scale._data[...] = 2.0  # the scale changed in place before backward
    scaled.backward()
    np.testing.assert_array_equal(w.grad.numpy(), 2 * np.float32([0.1, 0.2, 0.3]) * 1024)
