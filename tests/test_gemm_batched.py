"""The GEMM launcher's batches (``backend/gemm.py``): one launch for every entry of a
stacked product, the kernel's ``blockIdx.y`` picking the entry.

Attention multiplies a ``[seq, head_dim]`` matrix per batch row and head; the launcher used
to launch the kernel once per entry (64 launches for each of a GPT step's 24 attention
products, each paying the launch's host time). Here ``kernels.launch`` is replaced by a NumPy
model of one launch (each entry ``blockIdx.y = z`` reads its operands ``stride_*`` elements
after entry 0's and computes the twin's product), so the launcher's strides, grid and chunks
are checked on the CPU; ``tests/test_gemm_emulator.py`` runs the kernel's own batch offsets
in the emulator.
"""

from __future__ import annotations

import numpy as np
import pytest

from minitorch_amp.backend import gemm, gemm_gpu, gemm_sm90, kernels
from minitorch_amp.backend.dtypes import float16, float32


class LaunchModel:
    """``kernels.launch`` for gemm_fp16.cu, computed with the twin: records each launch."""

    def __init__(self):
        self.launches = []

    def __call__(self, file, name, grid, block, args, shared_mem=0):
        # gemm_f16 / gemm_bf16(A, B, C, bias, int M, N, K, lda, ldb, ldc, float alpha, beta,
        # int flags, long long stride_a, stride_b, stride_c): RawKernel passes each scalar
        # as its NumPy type, so a Python int or a wrong width would misread every argument
        scalars = [type(x) for x in args[4:]]
        assert scalars == [np.int32] * 6 + [np.float32] * 2 + [np.int32] + [np.int64] * 3
        a, b, out, bias, m, n, k, lda, ldb, ldc, alpha, beta, flags, sa, sb, sc = args
        assert file == gemm.FILE and block == (gemm.THREADS, 1, 1)
        self.launches.append((grid, (int(sa), int(sb), int(sc))))
        ta, tb = (t == "true" for t in name.split("<")[1].split(",")[:2])
        entries = grid[1]
        # each entry's matrices are laid out as entry 0's: 2-D, C-contiguous, these sizes
        assert (m, n, k) == (*out.shape, a.shape[0] if ta else a.shape[1])
        assert (lda, ldb, ldc) == (a.shape[1], b.shape[1], out.shape[1])
        assert (alpha, beta) == (1, 0)  # (the cases below take no other epilogue)

        def entry(x, stride, z):  # blockIdx.y = z: the matrix stride elements on, per entry
            view = np.lib.stride_tricks.as_strided(
                x, (entries, *x.shape), (int(stride) * x.itemsize, *x.strides)
            )
            return view[z]

        with_bias = int(flags) & 1
        for z in range(entries):
            entry(out, sc, z)[...] = gemm.twin(
                entry(a, sa, z),
                entry(b, sb, z),
                ta,
                tb,
                bias=bias if with_bias else None,
                out_dtype=out.dtype,
            )


@pytest.fixture
def launches(monkeypatch):
    model = LaunchModel()
    monkeypatch.setattr(kernels, "launch", model)
    hopper = []  # the Hopper kernel is not batched: a batch never goes there
    monkeypatch.setattr(gemm_sm90, "usable", lambda a, b, k: True)
    prepare = lambda *problem: lambda *arrays: hopper.append(arrays)  # noqa: E731
    monkeypatch.setattr(gemm_sm90, "prepare", prepare)
    model.hopper = hopper
    return model


def run(a, b, ta=False, tb=False, bias=None, out_dtype=float16):
    """``gemm``'s GPU path on NumPy arrays (its launches go to the model)."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    m = a.shape[-1] if ta else a.shape[-2]
    n = b.shape[-2] if tb else b.shape[-1]
    out = np.full((*batch, m, n), np.nan, dtype=out_dtype)
    epilogue = gemm._Epilogue(bias, False, np.float32(1), np.float32(0), out_dtype)
    gemm_gpu._on_gpu(a, b, ta, tb, epilogue, out, batch)
    return out


def halves(rng, *shape):
    return rng.standard_normal(shape).astype(float16)


@pytest.mark.parametrize("ta, tb", [(False, False), (False, True), (True, False)])
def test_attention_scores_of_every_head_are_one_launch(launches, ta, tb):
    rng = np.random.default_rng(0)
    a = halves(rng, 2, 3, *((8, 5) if ta else (5, 8)))
    b = halves(rng, 2, 3, *((7, 8) if tb else (8, 7)))
    out = run(a, b, ta, tb)
    assert launches.launches == [((1, 6, 1), (40, 56, 35))]  # 6 entries, 1 tile each
    assert launches.hopper == []
    np.testing.assert_array_equal(out, gemm.twin(a, b, ta, tb))


def test_a_matrix_shared_by_every_entry_has_stride_0(launches):
    rng = np.random.default_rng(1)
    a, w = halves(rng, 4, 9, 6), halves(rng, 1, 9, 3)  # a^T @ w per entry: no folding
    bias = halves(rng, 3)
    out = run(a, w, ta=True, bias=bias)
    assert launches.launches == [((1, 4, 1), (54, 0, 18))]
    np.testing.assert_array_equal(out, gemm.twin(a, w, True, bias=bias))


def test_a_batch_broadcast_inside_launches_per_entry(launches, monkeypatch):
    """(2, 1) against (1, 3): no one stride walks the entries of either operand."""
    monkeypatch.setattr(gemm_sm90, "usable", lambda a, b, k: False)  # (an Ampere GPU)
    rng = np.random.default_rng(2)
    a, b = halves(rng, 2, 1, 4, 5), halves(rng, 1, 3, 5, 6)
    out = run(a, b, out_dtype=float32)
    assert [grid for grid, _ in launches.launches] == [(1, 1, 1)] * 6
    np.testing.assert_array_equal(out, gemm.twin(a, b, out_dtype=float32))


@pytest.mark.parametrize("shared_b", [False, True])
def test_more_entries_than_a_grid_holds_take_more_launches(launches, monkeypatch, shared_b):
    """Chunks of MAX_BATCHES entries; a shared b (stride 0) is the same matrix in each."""
    monkeypatch.setattr(gemm_gpu, "MAX_BATCHES", 4)
    rng = np.random.default_rng(3)
    a, b = halves(rng, 10, 4, 3), halves(rng, *((4, 2) if shared_b else (10, 4, 2)))
    out = run(a, b, ta=True)
    assert [grid[1] for grid, _ in launches.launches] == [4, 4, 2]
    np.testing.assert_array_equal(out, gemm.twin(a, b, True))


def test_big_entries_on_hopper_take_a_launch_each_of_the_hopper_kernel(launches, monkeypatch):
    """From HOPPER_ENTRY_FROM multiply-adds an entry, the faster kernel wins its launch back."""
    rng = np.random.default_rng(6)
    a, b = halves(rng, 3, 4, 5), halves(rng, 3, 5, 6)
    monkeypatch.setattr(gemm_gpu, "HOPPER_ENTRY_FROM", 4 * 5 * 6 + 1)
    run(a, b)
    assert len(launches.hopper) == 0 and len(launches.launches) == 1
    monkeypatch.setattr(gemm_gpu, "HOPPER_ENTRY_FROM", 4 * 5 * 6)
    run(a, b)
    assert len(launches.hopper) == 3 and len(launches.launches) == 1


def test_a_single_matrix_still_goes_to_the_hopper_kernel(launches):
    rng = np.random.default_rng(4)
    run(halves(rng, 16, 16), halves(rng, 16, 16))
    assert len(launches.hopper) == 1 and launches.launches == []


@pytest.mark.gpu
def test_on_a_gpu_attention_scores_are_one_launch_with_each_entrys_bits(monkeypatch):
    """q @ k^T for 16 x 4 heads of [64, 32]: one launch, and each entry's bits those of a
    launch on that entry alone (the same mma.sync kernel: ``MINITORCH_AMP_GEMM_KERNEL``)."""
    from minitorch_amp.backend import device

    cp = device.cupy
    monkeypatch.setenv(gemm_sm90.KERNEL_ENV, "sm80")
    rng = np.random.default_rng(5)
    q, k = (cp.asarray(halves(rng, 16, 4, 64, 32)) for _ in "qk")
    grids, launch = [], kernels.launch

    def counted(file, name, grid, *args, **kwargs):
        grids.append(grid)
        return launch(file, name, grid, *args, **kwargs)

    monkeypatch.setattr(kernels, "launch", counted)
    scores = gemm.gemm(q, k, False, True)
    assert grids == [(1, 64, 1)]
    for i, j in np.ndindex(16, 4):
        alone = gemm.gemm(q[i, j], k[i, j], False, True)
        np.testing.assert_array_equal(cp.asnumpy(scores[i, j]), cp.asnumpy(alone))


def test_a_shape_launched_again_finds_its_launch_recipe(launches):
    """Grid, name and scalar arguments are worked out once per shape and kept."""
    gemm_gpu._mma_sync_recipe.cache_clear()
    rng = np.random.default_rng(3)
    a, b = halves(rng, 2, 4, 5, 6), halves(rng, 2, 4, 6, 7)
    first = run(a, b)
    again = run(a, b)
    run(halves(rng, 2, 4, 6, 5), b, ta=True)  # another layout: its own recipe
    info = gemm_gpu._mma_sync_recipe.cache_info()
    assert (info.misses, info.hits) == (2, 1)
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(first, gemm.twin(a, b))
