"""The Hopper GEMM on an H100 (compute capability 9.0): against the specification.

Skipped without CuPy and a device (the ``gpu`` marker), and on GPUs that are not Hopper
(the kernel is built for sm_90a only; ``gemm()`` keeps ``gemm_fp16.cu`` there, which
``test_gemm.py`` covers). The CPU half, with the emulator, is ``test_gemm_sm90.py``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from test_gemm import LAYOUTS, assert_within_bound, stored

from minitorch_amp.backend import device, gemm_sm90, kernels, tensor_maps
from minitorch_amp.backend.dtypes import float16, float32
from minitorch_amp.backend.gemm import gemm as run_gemm

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def hopper(monkeypatch):
    if device.cupy is None or not gemm_sm90.device_is_hopper():
        pytest.skip("the Hopper GEMM needs compute capability 9.0 (an H100 or H200)")
    monkeypatch.delenv(gemm_sm90.KERNEL_ENV, raising=False)
    return device.cupy


# Every stored row a multiple of 8 elements (TMA's 16-byte rule), tails everywhere.
SHAPES = [(136, 136, 72), (8, 8, 8), (1160, 8, 16), (520, 1032, 264), (128, 256, 448)]
EPILOGUES = [dict(), dict(bias=True, relu=True), dict(alpha=0.5, beta=2.0, bias=True)]


@pytest.mark.parametrize("ta, tb", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("out_dtype", [float16, float32])
def test_every_layout_shape_and_epilogue_meets_the_specification(hopper, ta, tb, shape, out_dtype):
    cp = hopper
    m, n, k = shape
    rng = np.random.default_rng(m + n + k)
    a, b = stored(rng, m, k, ta), stored(rng, k, n, tb)
    assert gemm_sm90.usable(cp.asarray(a), cp.asarray(b), k)
    for options in EPILOGUES:
        options = dict(options)
        if options.pop("bias", False):
            options["bias"] = rng.standard_normal(n).astype(out_dtype)
        if options.get("beta"):
            options["c"] = rng.standard_normal((m, n)).astype(out_dtype)
        gpu = {key: cp.asarray(v) if isinstance(v, np.ndarray) else v for key, v in options.items()}
        out = cp.asnumpy(run_gemm(cp.asarray(a), cp.asarray(b), ta, tb, out_dtype=out_dtype, **gpu))
        assert_within_bound(out, a, b, ta, tb, **options)
        before = {key: v.copy() if isinstance(v, np.ndarray) else v for key, v in options.items()}
        twin = run_gemm(a, b, ta, tb, out_dtype=out_dtype, **options)  # writes into c
        # With a bias the product is rounded to out_dtype before the add (a matmul, then an
        # add): a different float32 summation order can round it to the neighbouring value,
        # one spacing of the product away (seen on the H100: 0.0018 at a product near 2).
        slack = 0.0
        if "bias" in options:
            unbiased = {key: v for key, v in before.items() if key not in ("bias", "relu")}
            product = run_gemm(a, b, ta, tb, out_dtype=out_dtype, **unbiased)
            slack = np.spacing(np.abs(product)).astype(float32)
        error = np.abs(out.astype(float32) - twin.astype(float32))
        allowed = 1e-3 + 2e-3 * np.abs(twin.astype(float32)) + slack
        assert np.all(error <= allowed), f"worst excess {np.max(error - allowed):.3g}"


@pytest.mark.parametrize(
    "schedule, splits", list(itertools.product(gemm_sm90.SCHEDULES, [1, 3, 8]))
)
def test_every_schedule_and_split_meets_the_specification(hopper, schedule, splits):
    cp = hopper
    bn, pingpong = schedule
    rng = np.random.default_rng(bn + splits + pingpong)
    a, b = stored(rng, 264, 1040, False), stored(rng, 1040, 392, False)
    bias = rng.standard_normal(392).astype(float16)
    with gemm_sm90.forced_plan(bn, splits, pingpong):
        out = cp.asnumpy(run_gemm(cp.asarray(a), cp.asarray(b), bias=cp.asarray(bias), relu=True))
    assert_within_bound(out, a, b, bias=bias, relu=True)


@pytest.mark.parametrize("schedule", list(gemm_sm90.SCHEDULES))
def test_split_k_adds_its_splits_in_one_order_on_every_run_and_leaves_zero_counts(hopper, schedule):
    # the last split of each tile piece adds the partial sums in split order (one launch):
    # the same bits on every run, whichever CTA finishes last; the counts are 0 afterwards
    cp = hopper
    bn, pingpong = schedule
    rng = np.random.default_rng(21)
    a, b = stored(rng, 520, 4096, False), stored(rng, 4096, 392, False)
    with gemm_sm90.forced_plan(bn, 8, pingpong):
        runs = [cp.asnumpy(run_gemm(cp.asarray(a), cp.asarray(b))) for _ in range(5)]
    for other in runs[1:]:
        np.testing.assert_array_equal(other.view(np.uint16), runs[0].view(np.uint16))
    assert_within_bound(runs[0], a, b)
    assert not cp.asnumpy(gemm_sm90.split_counts(1)).any()


def test_operands_tma_cannot_address_fall_back_to_the_mma_sync_kernel(hopper):
    cp = hopper
    rng = np.random.default_rng(3)
    a, b = stored(rng, 33, 17, False), stored(rng, 17, 20, False)  # rows of 34 bytes
    assert not gemm_sm90.usable(cp.asarray(a), cp.asarray(b), 17)
    out = cp.asnumpy(run_gemm(cp.asarray(a), cp.asarray(b), out_dtype="float32"))
    assert_within_bound(out, a, b)
    shifted = cp.asarray(np.zeros(8 * 9 + 1, float16))[1:].reshape(8, 9)[:, :8]
    assert not tensor_maps.tma_addressable(shifted)  # start not 16-byte aligned


def test_forcing_the_ampere_kernel_gives_the_same_specification(hopper, monkeypatch):
    cp = hopper
    rng = np.random.default_rng(4)
    a, b = stored(rng, 136, 200, False), stored(rng, 200, 136, True)
    monkeypatch.setenv(gemm_sm90.KERNEL_ENV, "sm80")
    assert not gemm_sm90.usable(cp.asarray(a), cp.asarray(b), 200)
    old = cp.asnumpy(run_gemm(cp.asarray(a), cp.asarray(b), False, True, out_dtype="float32"))
    monkeypatch.setenv(gemm_sm90.KERNEL_ENV, "auto")
    new = cp.asnumpy(run_gemm(cp.asarray(a), cp.asarray(b), False, True, out_dtype="float32"))
    assert_within_bound(old, a, b, False, True)
    assert_within_bound(new, a, b, False, True)


def test_the_kernel_loads_without_spills_and_with_its_shared_memory(hopper):
    cp = hopper
    run_gemm(cp.ones((128, 128), float16), cp.ones((128, 128), float16))
    for bn, pingpong in gemm_sm90.SCHEDULES:
        name = gemm_sm90.kernel_name(False, False, float16, bn, pingpong)
        kernel = kernels.get_function(gemm_sm90.FILE, name, gemm_sm90.smem_bytes(bn))
        assert kernel.local_size_bytes == 0
        assert kernel.num_regs <= 168  # __launch_bounds__(384, 1): 65536 / 384
        assert kernel.max_dynamic_shared_size_bytes >= gemm_sm90.smem_bytes(bn)


def test_the_hopper_gemm_replays_inside_a_cuda_graph(hopper):
    """Tensor maps are kernel parameters: a captured launch replays on new data in place."""
    cp = hopper
    rng = np.random.default_rng(5)
    a, b = cp.asarray(stored(rng, 256, 512, False)), cp.asarray(stored(rng, 512, 256, False))
    out = cp.empty((256, 256), float32)
    run_gemm(a, b, c=out)  # compiled, tables built: nothing uploads during the capture
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        run_gemm(a, b, c=out)
        graph = stream.end_capture()
    a[...] = cp.asarray(stored(rng, 256, 512, False))
    graph.launch(stream)
    stream.synchronize()
    assert_within_bound(cp.asnumpy(out), cp.asnumpy(a), cp.asnumpy(b))


@pytest.mark.slow
def test_the_simple_net_gemms_on_the_hopper_kernel(hopper):
    """SimpleNet's three GEMMs at 4096/512 against float64, on the GPU."""
    cp = hopper
    rng = cp.random.default_rng(14)
    for (m, n, k), (ta, tb) in [
        ((512, 4096, 4096), (False, False)),
        ((512, 4096, 4096), (False, True)),
        ((4096, 4096, 512), (True, False)),
    ]:
        a = rng.standard_normal((k, m) if ta else (m, k), dtype=cp.float32).astype(float16)
        b = rng.standard_normal((n, k) if tb else (k, n), dtype=cp.float32).astype(float16)
        assert gemm_sm90.usable(a, b, k)
        a64 = (a.T if ta else a).astype(cp.float64)
        b64 = (b.T if tb else b).astype(cp.float64)
        value = a64 @ b64
        bound = (k + 4) * 2.0**-23 * (cp.abs(a64) @ cp.abs(b64)) * (1 + 2.0**-11)
        bound += 2.0**-11 * cp.abs(value) + 2.0**-25
        out = run_gemm(a, b, ta, tb)
        assert bool(cp.all(cp.abs(out.astype(cp.float64) - value) <= bound)), (m, n, k, ta, tb)
