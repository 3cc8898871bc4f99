"""``gemm.gemm`` keeps a GPU call's launch under its signature: the next call like it launches
exactly what a fresh call would, and a call that differs in anything checked is not taken for
it. Run on the CPU with CuPy and a Hopper (or an sm_80) GPU stood in for
(``benchmarks/gpu_stand_in.py``): the launches are recorded with their arguments."""

from __future__ import annotations

import numpy as np
import pytest
from kept_launches import assert_same_launch, fresh, gpu_stand_in, on_gpu, recording_stand_in

from minitorch_amp.backend import gemm, gemm_gpu, gemm_sm90
from minitorch_amp.backend.dtypes import bfloat16, float16, float32


@pytest.fixture(params=[True, False], ids=["hopper", "sm80"])
def gpu(request):
    with recording_stand_in(hopper=request.param) as stand:
        yield stand


def operands(m, k, n, dtype=float16, seed=0):
    rng = np.random.default_rng(seed)
    return on_gpu(rng.standard_normal((m, k)).astype(dtype)), on_gpu(
        rng.standard_normal((k, n)).astype(dtype)
    )


def test_a_call_made_again_is_kept_and_launches_what_it_launched_first(gpu):
    a, b = operands(64, 32, 48)
    bias = on_gpu(np.ones(48, float16))
    gemm.gemm(a, b, bias=bias, relu=True)
    assert len(gemm_gpu.KEPT) == 1
    checks = []
    original = gemm._check
    gemm._check = lambda *args: checks.append(args) or original(*args)
    try:
        out = gemm.gemm(a, b, bias=bias, relu=True)
    finally:
        gemm._check = original
    assert checks == []  # the kept call checks nothing again
    first, again = gpu.recorded
    assert_same_launch(first, again)
    assert isinstance(out, gpu_stand_in.StandInArray)
    assert (out.shape, out.dtype) == ((64, 48), float16) and again[3][2] is out  # (a, b, out)


def variants(a, b, bias, c32):
    """Calls that differ from ``gemm(a, b)`` in one thing each."""
    at, bt = on_gpu(np.asarray(a).T), on_gpu(np.asarray(b).T)
    square = on_gpu(np.asarray(b)[:, :32])  # (32, 32): its transpose has its shape
    shifted = on_gpu(np.zeros(a.size + 8, float16))[1 : a.size + 1].reshape(a.shape)
    shifted[...] = a
    return {
        "plain": lambda: gemm.gemm(a, b),
        "bias": lambda: gemm.gemm(a, b, bias=bias),
        "relu": lambda: gemm.gemm(a, b, relu=True),
        "alpha": lambda: gemm.gemm(a, b, alpha=0.5),
        "alpha 0": lambda: gemm.gemm(a, b, alpha=0.0),
        "alpha -0": lambda: gemm.gemm(a, b, alpha=-0.0),  # equal to 0.0, not the same bits
        "alpha, a 0-d array": lambda: gemm.gemm(a, b, alpha=np.array(0.25)),
        "float32 out": lambda: gemm.gemm(a, b, out_dtype=float32),
        "float16 product": lambda: gemm.gemm(a, b, out_dtype=float32, product_dtype=float16),
        "c": lambda: gemm.gemm(a, b, beta=1.0, c=c32),
        "a transposed": lambda: gemm.gemm(at, b, transpose_a=True),
        "b transposed": lambda: gemm.gemm(a, bt, transpose_b=True),
        "square": lambda: gemm.gemm(square, square),
        "square, a transposed": lambda: gemm.gemm(square, square, transpose_a=True),
        "square, b transposed": lambda: gemm.gemm(square, square, transpose_b=True),
        "another shape": lambda: gemm.gemm(a[:32], b),
        "misaligned a": lambda: gemm.gemm(shifted, b),
    }


def test_every_call_launches_what_a_fresh_call_launches(gpu):
    """Each variant, called after all the others were kept, launches the kernel and the
    arguments it launches with nothing kept: no call is taken for another."""
    a, b = operands(64, 32, 48)
    bias = on_gpu(np.ones(48, float16))
    c32 = on_gpu(np.zeros((64, 48), float32))
    calls = variants(a, b, bias, c32)
    for call in calls.values():
        call()
    kept = len(gemm_gpu.KEPT)
    assert kept == len(calls)
    for what, call in calls.items():
        gpu.recorded.clear()
        out = call()
        assert (out is c32) == (what == "c"), what  # c is written into and returned
        fresh(call)
        assert len(gpu.recorded) == 2, what
        assert_same_launch(*gpu.recorded)
    assert len(gemm_gpu.KEPT) == kept


def test_a_kept_signature_still_refuses_what_it_refused(gpu):
    a, b = operands(16, 16, 16)
    gemm.gemm(a, b)
    with pytest.raises(TypeError, match="different devices"):
        gemm.gemm(a, np.asarray(b).view(np.ndarray))
    with pytest.raises(TypeError, match="bias must be float16"):
        gemm.gemm(a, b, bias=on_gpu(np.ones(16, float32)))
    gemm.gemm(a, b, bias=on_gpu(np.ones(16, float16)))
    with pytest.raises(TypeError, match="different devices"):
        gemm.gemm(a, b, bias=np.ones(16, float16))


def test_the_bfloat16_and_float16_calls_of_one_shape_are_kept_apart(gpu):
    a, b = operands(64, 32, 48)
    a16, b16 = on_gpu(np.asarray(a).astype(bfloat16)), on_gpu(np.asarray(b).astype(bfloat16))
    gemm.gemm(a, b)
    gemm.gemm(a16, b16)
    gemm.gemm(a16, b16)
    names = [name for _, name, *_ in gpu.recorded]
    assert names[1] == names[2] != names[0] and "bf16" in (names[1] + gpu.recorded[1][0])


def test_the_kernel_setting_is_part_of_the_signature(gpu, monkeypatch):
    a, b = operands(64, 32, 48)
    gemm.gemm(a, b)
    monkeypatch.setenv(gemm_sm90.KERNEL_ENV, "sm80")
    gemm.gemm(a, b)
    files = [file for file, *_ in gpu.recorded]
    assert files == [gemm_sm90.FILE if gpu.hopper else gemm.FILE, gemm.FILE]


def test_a_forced_plan_keeps_nothing(gpu):
    a, b = operands(256, 64, 256)
    with gemm_sm90.forced_plan(128, 1):
        gemm.gemm(a, b)
    assert gemm_gpu.KEPT == {}
    gemm.gemm(a, b)
    assert len(gemm_gpu.KEPT) == 1


def batched(shape_a, shape_b, dtype=float16, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(on_gpu(rng.standard_normal(s).astype(dtype)) for s in (shape_a, shape_b))


def batched_variants():
    """Batched calls ``{name: (call, kept)}``: ``kept`` when one ``gemm_fp16.cu`` launch does
    the whole call (``None``: on the sm_80 stand-in only; the Hopper kernel takes the folded
    batch, and its tensor maps hold the 2-D shape it was given)."""
    heads = batched((2, 3, 16, 8), (2, 3, 8, 12))
    a_t = batched((2, 3, 8, 16), (2, 3, 8, 12))
    b_t = batched((2, 3, 16, 8), (2, 3, 12, 8))
    shared_b = batched((2, 3, 16, 8), (1, 1, 8, 12))
    folded = batched((2, 3, 16, 8), (8, 16))  # TMA-addressable rows: 16 and 32 bytes
    crossed = batched((2, 1, 16, 8), (1, 3, 8, 12))  # no one stride walks the entries
    both_t = batched((3, 8, 16), (3, 12, 8))
    bias = on_gpu(np.ones(12, float16))
    c32 = on_gpu(np.zeros((2, 3, 16, 12), float32))
    return {
        "heads": (lambda: gemm.gemm(*heads), True),
        "heads, a transposed": (lambda: gemm.gemm(*a_t, transpose_a=True), True),
        "heads, b transposed": (lambda: gemm.gemm(*b_t, transpose_b=True), True),
        "heads, bias and ReLU": (lambda: gemm.gemm(*heads, bias=bias, relu=True), True),
        "heads, c": (lambda: gemm.gemm(*heads, beta=1.0, c=c32), True),
        "one b for all": (lambda: gemm.gemm(*shared_b), True),
        "folded into M": (lambda: gemm.gemm(*folded), None),
        "a launch per entry": (lambda: gemm.gemm(*crossed), False),
        "both transposed": (lambda: gemm.gemm(*both_t, True, True), False),
    }


def address_or_value(x, out):
    """A launch argument as the kernel reads it: an array by its address (inside the call's
    output, by its offset there: each call allocates its own), a scalar by type and bytes."""
    if isinstance(x, np.ndarray) and x.ndim:
        offset = x.data.ptr - out.data.ptr
        return ("out", offset) if 0 <= offset < out.nbytes else x.data.ptr
    return type(x), np.asarray(x).tobytes()


def test_a_batch_done_by_one_launch_is_kept_and_launches_what_a_fresh_call_launches(gpu):
    """The kept launch is given the whole arrays where the first call gave entry 0's
    matrices: the same addresses, so the same launch. A call of several launches, or of
    one that reads a copy or a reshaped array's shape, is not kept."""
    for what, (call, keeps) in batched_variants().items():
        keeps = (not gpu.hopper) if keeps is None else keeps
        gemm_gpu.KEPT.clear()
        launches = []
        for _ in range(2):  # the first call, then the kept one (or a fresh one again)
            gpu.recorded.clear()
            out = call()
            launches.append(
                [(f, n, g, s, [address_or_value(x, out) for x in args])
                 for f, n, g, args, s in gpu.recorded]
            )  # fmt: skip
            assert len(gemm_gpu.KEPT) == int(keeps), what
        assert launches[0] == launches[1], what
        assert len(launches[0]) == 1 or not keeps, what


def test_the_kept_calls_are_bounded(gpu, monkeypatch):
    monkeypatch.setattr(gemm_gpu, "KEPT_CALLS", 4)
    for m in range(1, 10):
        gemm.gemm(*operands(m, 16, 16))
        assert len(gemm_gpu.KEPT) <= 4


@pytest.mark.gpu
def test_on_a_gpu_a_kept_call_gives_the_first_calls_bits():
    from minitorch_amp.backend import device

    cp = device.cupy
    rng = np.random.default_rng(3)
    a = cp.asarray(rng.standard_normal((256, 128)).astype(float16))
    b = cp.asarray(rng.standard_normal((128, 192)).astype(float16))
    bias = cp.asarray(rng.standard_normal(192).astype(float16))
    first = cp.asnumpy(gemm.gemm(a, b, bias=bias, relu=True))
    again = cp.asnumpy(gemm.gemm(a, b, bias=bias, relu=True))  # the kept launch
    plain = cp.asnumpy(gemm.gemm(a, b))  # another signature: no bias, no ReLU
    assert len(gemm_gpu.KEPT) == 2
    assert first.tobytes() == again.tobytes()
    twin = gemm.twin(cp.asnumpy(a), cp.asnumpy(b), bias=cp.asnumpy(bias), relu=True)
    np.testing.assert_allclose(
        first.astype(np.float32), twin.astype(np.float32), rtol=2e-2, atol=2e-2
    )
    assert (plain < 0).any() and not (first < 0).any()


@pytest.mark.gpu
def test_on_a_gpu_a_kept_batch_gives_the_first_calls_bits():
    from minitorch_amp.backend import device

    cp = device.cupy
    rng = np.random.default_rng(4)
    a = cp.asarray(rng.standard_normal((2, 3, 64, 32)).astype(float16))
    b = cp.asarray(rng.standard_normal((2, 3, 48, 32)).astype(float16))
    first = cp.asnumpy(gemm.gemm(a, b, transpose_b=True))  # attention's scores: one launch
    assert len(gemm_gpu.KEPT) == 1
    again = cp.asnumpy(gemm.gemm(a, b, transpose_b=True))  # the kept launch, whole arrays
    assert first.tobytes() == again.tobytes()
    twin = gemm.twin(cp.asnumpy(a), cp.asnumpy(b), transpose_b=True)
    np.testing.assert_allclose(
        first.astype(np.float32), twin.astype(np.float32), rtol=2e-2, atol=2e-2
    )
