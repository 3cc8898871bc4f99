"""backend/cross_entropy.py and cuda/cross_entropy.cu: softmax cross-entropy with integer
labels in two GPU launches forward (one for reduction 'none') and one backward.

The kernels run on a CPU emulator (tests/cross_entropy_emulator.cpp on tests/cuda_emulator.h,
with -ftz's flushes) fed by the real launcher and the op itself, so the launcher's grids and
arguments, the row loop, the shared-memory trees, the barriers and the label flag are
checked without a GPU: against the op's own NumPy expressions (the twin, which sums in
another order) within the bound cuda/cross_entropy.cu states, with ignored, out-of-range and
weighted labels, each reduction, one class, rows longer than a block, more rows than blocks,
16-bit logits and int32 labels. The GPU test at the end runs the op on a GPU.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import emulated_gpu
import ml_dtypes
import numpy as np
import pytest
from emulated_gpu import HostArray, on_device
from emulated_gpu import to_host as host
from test_amp_kernels import assert_same_bits

import minitorch_amp as mt
import minitorch_amp.nn.functional as F
from minitorch_amp.autograd.ops.loss import CrossEntropy
from minitorch_amp.backend import cross_entropy as module
from minitorch_amp.backend import sync
from minitorch_amp.backend.dtypes import float32

U = 2.0**-24  # float32's unit roundoff
# (rows, n): one element; fewer classes than threads; n past the 256 threads; more rows than
# the 4 blocks the launches below allow (they stride); a vocabulary of several blocks' width
SHAPES = [(1, 1), (5, 64), (3, 300), (9, 7), (6, 1000)]
REDUCTIONS = ("mean", "sum", "none")


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    return emulated_gpu.build("cross_entropy_emulator.cpp", tmp_path_factory.mktemp("emulator"))


@pytest.fixture
def launches(emulator, monkeypatch):
    """Route cross_entropy.cu's launches to the emulator; the list of ``(name, grid)``.

    The label flag is kept for the next host read, as a CuPy one is (a stand-in flag is a
    NumPy array, which ``sync.defer`` would otherwise report at once), in a registry of
    this test's own."""
    made = emulated_gpu.install(emulator, monkeypatch, module.FILE, block=module.THREADS)
    monkeypatch.setattr(module, "MAX_BLOCKS", 4)
    monkeypatch.setattr(sync, "_deferred", {})
    monkeypatch.setattr(sync, "_flags", {})
    real = sync.defer

    def defer(key, flag, report):
        if isinstance(flag, HostArray):
            sync._deferred[key] = (flag, report)
        else:
            real(key, flag, report)

    monkeypatch.setattr(sync, "defer", defer)
    return made


def case(rows, n, seed=0, ignore_index=-100, ignored=0.25):
    """Logits of spread 4 (a row's scale), labels in range with some ignored, a gradient."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, n)) * 4).astype(float32)
    label = rng.integers(0, n, rows).astype(np.int64)
    label[rng.random(rows) < ignored] = ignore_index
    return x, label


def run(to, x, label, weight=None, ignore_index=-100, reduction="mean", grad=None):
    """The op forward and backward on arrays moved by ``to``: (loss, dx, ctx)."""
    ctx = SimpleNamespace(needs_grad=(True, False, False))
    w = None if weight is None else to(weight)
    out = CrossEntropy.forward(ctx, to(x), to(label), w, ignore_index, reduction, -1)
    if grad is None:
        grad = np.ones(out.shape, out.dtype)
    dx, _, _ = CrossEntropy.backward(ctx, to(grad))
    return out, dx, ctx


def twin_rows(x, label, weight=None, ignore_index=-100):
    """The twin's per-row weight and log-sum-exp (float64 of its float32 values)."""
    x64 = x.astype(np.float64)
    lse = np.log(np.exp(x64 - x64.max(-1, keepdims=True)).sum(-1)) + x64.max(-1)
    valid = (label != ignore_index) & (label >= 0) & (label < x.shape[-1])
    w = valid.astype(np.float64)
    if weight is not None:
        w = weight.astype(np.float64)[np.where(valid, label, 0)] * valid
    return w, lse - x64.max(-1)


def loss_bound(n, loss, w, lse):
    """cuda/cross_entropy.cu's bound on each row's loss against the twin's."""
    return (16 + math.ceil(n / 256)) * U * (np.abs(loss) + w * (np.abs(lse) + 1))


def grad_bound(n, g, lse):
    """... and on each element of the gradient (g = grad * scale * w of its row)."""
    return (16 + math.ceil(n / 256) + np.abs(lse)) * U * np.abs(g) + 2.0**-126


@pytest.mark.parametrize("rows, n", SHAPES)
def test_each_rows_loss_and_gradient_agree_with_the_twin_within_the_bound(launches, rows, n):
    x, label = case(rows, n, seed=rows * n)
    weight = (np.random.default_rng(n).random(n) * 2).astype(float32)
    g = np.random.default_rng(1).standard_normal(rows).astype(float32)
    for w in (None, weight):
        launches.clear()
        got, got_dx, _ = run(on_device, x, label, w, reduction="none", grad=g)
        want, want_dx, _ = run(np.asarray, x, label, w, reduction="none", grad=g)
        row_w, lse = twin_rows(x, label, w)
        assert got.dtype == want.dtype == float32 and got_dx.dtype == float32
        assert np.all(np.abs(host(got) - want) <= loss_bound(n, want, row_w, lse))
        per_row = (g * row_w)[:, None]
        assert np.all(np.abs(host(got_dx) - want_dx) <= grad_bound(n, per_row, lse[:, None]))
        grid = (min(rows, 4),)
        names = [name for name, _ in launches]
        assert names == [
            "cross_entropy_forward<float, long long>",
            "cross_entropy_backward<float, long long>",
        ]
        assert [grid for _, grid in launches] == [grid, grid]


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("rows, n", [(9, 7), (600, 40)])  # 600: past the 256 threads' sums
def test_the_mean_and_the_sum_agree_with_the_twin(launches, reduction, rows, n):
    x, label = case(rows, n, seed=rows)
    weight = (np.random.default_rng(n).random(n) * 2).astype(float32)
    for w in (None, weight):
        launches.clear()
        got, got_dx, ctx = run(on_device, x, label, w, reduction=reduction, grad=np.float32(0.7))
        want, want_dx, _ = run(np.asarray, x, label, w, reduction=reduction, grad=np.float32(0.7))
        assert got.shape == want.shape == () and got.dtype == float32
        row_w, lse = twin_rows(x, label, w)
        losses = run(np.asarray, x, label, w, reduction="none")[0].astype(np.float64)
        # each row's bound, then the sums' own roundings: (ceil(rows / 256) + 8 + log2(rows))
        # u of the sum of |loss| (the kernel's order and NumPy's pairwise one), the division
        divide = row_w.sum() if reduction == "mean" else 1.0
        sums = (math.ceil(rows / 256) + 10 + math.log2(rows)) * U * np.abs(losses).sum()
        bound = (loss_bound(n, losses, row_w, lse).sum() + sums) / divide + 2 * U * abs(want)
        assert abs(float(host(got)) - float(want)) <= bound
        scale = 0.7 / divide
        assert np.all(np.abs(host(got_dx) - want_dx) <= grad_bound(n, scale * row_w, lse)[:, None])
        assert [name for name, _ in launches] == [
            "cross_entropy_forward<float, long long>",
            "cross_entropy_reduce<float>",
            "cross_entropy_backward<float, long long>",
        ]
        assert launches[1][1] == (1,)
        assert (ctx.rows.scale is None) == (reduction == "sum")


def test_on_integer_valued_logits_the_kernels_give_the_twins_bits(launches):
    """Where every sum is exact (one class: the row's exp is 1, its log 0), the kernels and
    the twin agree bit for bit, gradient included: the remaining steps are the same IEEE
    operations in the same order."""
    x = np.array([[3.0], [-2.0], [0.5], [7.0], [1.0]], float32)
    label = np.array([0, 0, -100, 0, 0])
    weight = np.array([1.5], float32)
    for reduction in REDUCTIONS:
        for w in (None, weight):
            grad = None if reduction != "none" else np.arange(5, dtype=float32)
            got = run(on_device, x, label, w, reduction=reduction, grad=grad)
            want = run(np.asarray, x, label, w, reduction=reduction, grad=grad)
            assert_same_bits(host(got[0]), want[0], f"{reduction} loss")
            assert_same_bits(host(got[1]), want[1], f"{reduction} gradient")


def test_ignored_labels_give_0_and_all_ignored_gives_0_not_nan(launches):
    x, _ = case(6, 10)
    label = np.full(6, 3)
    label[[1, 4]] = 7  # ignore_index=7 below: rows 1 and 4 are ignored
    loss, dx, _ = run(on_device, x, label, ignore_index=7, reduction="none")
    assert host(loss)[[1, 4]].tolist() == [0.0, 0.0]
    assert not host(dx)[[1, 4]].any() and host(dx)[[0, 2, 3, 5]].all()
    for reduction in ("mean", "sum"):
        loss, dx, _ = run(on_device, x, np.full(6, 7), ignore_index=7, reduction=reduction)
        assert float(host(loss)) == 0.0 and not host(dx).any()
        want, want_dx, _ = run(np.asarray, x, np.full(6, 7), ignore_index=7, reduction=reduction)
        assert_same_bits(host(loss), want)
        assert_same_bits(host(dx), want_dx)


def test_the_mean_divides_by_the_weights_of_the_labels_kept(launches):
    x = np.zeros((4, 3), float32)  # every row's loss is log(3) times its weight
    label = np.array([0, 1, 2, -100])
    weight = np.array([1.0, 2.0, 4.0], float32)
    loss, _, _ = run(on_device, x, label, weight)
    np.testing.assert_allclose(float(host(loss)), math.log(3), rtol=2 * 16 * U)
    loss, _, _ = run(on_device, x, label, weight, reduction="sum")
    np.testing.assert_allclose(float(host(loss)), 7 * math.log(3), rtol=2 * 16 * U)


def test_out_of_range_labels_raise_at_the_next_host_read_and_clear_the_flag(launches):
    """As ``sync.check`` reports them on the GPU: no host read in the step, the error at the
    next read, the bad rows computed as ignored ones meanwhile; the next read is clean."""
    x, _ = case(5, 4)
    label = np.array([0, 4, 1, -1, -100])  # 4 and -1 are out of [0, 4)
    loss, dx, _ = run(on_device, x, label, reduction="none")
    assert host(loss)[[1, 3, 4]].tolist() == [0.0, 0.0, 0.0] and not host(dx)[[1, 3]].any()
    with pytest.raises(ValueError) as info:
        sync.host_read("Tensor.item()")
    assert str(info.value) == (
        "cross_entropy: a label value is out of range; labels must be in [0, 4) or equal "
        "ignore_index=-100 (label of shape [5], input of shape [5, 4]); found on the GPU, "
        "in a step since the last host read"
    )
    sync.host_read("Tensor.item()")  # reported once: the flag was cleared
    run(on_device, x, np.array([0, 3, 1, 2, -100]))  # good labels: nothing to report
    sync.host_read("Tensor.item()")
    with pytest.raises(ValueError, match=r"a label value is out of range.*found on the GPU"):
        run(on_device, x, np.array([0, 3, 1, 2, 9]), reduction="sum")
        sync.host_read("Tensor.item()")


def test_bad_input_raises_before_anything_is_launched(launches):
    x = on_device(np.zeros((3, 4), float32))
    label = on_device(np.array([0, 1, 2]))
    ctx = SimpleNamespace()
    with pytest.raises(ValueError, match=r"weight of shape \[3\] must be \[4\]"):
        CrossEntropy.forward(ctx, x, label, on_device(np.ones(3, float32)))
    with pytest.raises(TypeError, match="label must hold integer class indices"):
        CrossEntropy.forward(ctx, x, on_device(np.zeros(3, float32)))
    with pytest.raises(ValueError, match=r"label must be \[3\]"):
        CrossEntropy.forward(ctx, x, on_device(np.zeros(4, np.int64)))
    with pytest.raises(ValueError, match="reduction must be one of"):
        CrossEntropy.forward(ctx, x, label, reduction="avg")
    assert launches == [] and sync._deferred == {}


def test_a_label_with_a_trailing_1_and_a_batch_of_sequences(launches):
    """[batch, seq, classes] logits with [batch, seq, 1] labels: rows are batch * seq, and
    'none' gives the label's shape, as the twin does."""
    x = (np.random.default_rng(3).standard_normal((2, 3, 5)) * 2).astype(float32)
    label = np.array([[[0], [4], [2]], [[1], [-100], [3]]])
    got, got_dx, _ = run(on_device, x, label, reduction="none")
    want, want_dx, _ = run(np.asarray, x, label, reduction="none")
    assert got.shape == want.shape == (2, 3, 1) and got_dx.shape == x.shape
    np.testing.assert_allclose(host(got), want, rtol=32 * U, atol=32 * U)
    np.testing.assert_allclose(host(got_dx), want_dx, rtol=0, atol=32 * U)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_16_bit_logits_are_widened_as_read_and_rounded_once_as_written(launches, dtype, reduction):
    """The bits of the float32 kernels on the widened logits: the loss (mean, sum) rounded
    once to the logits' dtype, the gradient too; float32 per-row losses for 'none' rounded
    by the op."""
    x, label = case(9, 70, seed=4)
    x16 = x.astype(dtype)
    weight = np.linspace(0.5, 2, 70).astype(float32)
    grad = np.float32(1.5) if reduction != "none" else np.linspace(-1, 1, 9).astype(float32)
    loss, dx, _ = run(on_device, x16, label, weight, reduction=reduction, grad=grad.astype(dtype))
    wide_loss, wide_dx, _ = run(
        on_device, x16.astype(float32), label, weight, reduction=reduction, grad=grad
    )
    assert loss.dtype == dx.dtype == dtype
    assert_same_bits(host(loss), host(wide_loss).astype(dtype))
    assert_same_bits(host(dx), host(wide_dx).astype(dtype))
    kernels = {name.split("<")[0]: name for name, _ in launches[: 1 + (reduction != "none")]}
    assert kernels["cross_entropy_forward"] == (
        f"cross_entropy_forward<{module._LOGITS[np.dtype(dtype)]}, long long>"
    )


def test_int32_labels_give_the_bits_of_int64_ones(launches):
    x, label = case(9, 33, seed=5)
    for reduction in REDUCTIONS:
        want = run(on_device, x, label, reduction=reduction)
        got = run(on_device, x, label.astype(np.int32), reduction=reduction)
        assert_same_bits(host(got[0]), host(want[0]))
        assert_same_bits(host(got[1]), host(want[1]))
    assert "cross_entropy_forward<float, int>" in {name for name, _ in launches}


def test_nan_inf_and_masked_logits_come_out_as_the_twin_makes_them(launches):
    nan, inf = np.nan, np.inf
    x = np.array(
        [
            [1.0, nan, 2.0],
            [1.0, inf, 2.0],
            [0.0, -inf, 1.0],  # a masked class, not the label
            [0.0, -inf, 1.0],  # the label on a masked class: an infinite loss
            [-inf, -inf, -inf],
            [100.0, 99.0, 98.0],  # exp(100) overflows float32: the maximum comes off first
        ],
        float32,
    )
    label = np.array([0, 2, 2, 1, 0, 1])
    with np.errstate(invalid="ignore", divide="ignore"):
        got, got_dx, _ = run(on_device, x, label, reduction="none")
        want, want_dx, _ = run(np.asarray, x, label, reduction="none")
    for a, b in ((host(got), want), (host(got_dx), want_dx)):
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
        np.testing.assert_array_equal(np.isinf(a), np.isinf(b))
        finite = np.isfinite(b)
        np.testing.assert_allclose(a[finite], b[finite], rtol=64 * U, atol=64 * U)


def test_which_inputs_take_the_kernels(launches, monkeypatch):
    x = on_device(np.ones((2, 3), float32))
    label = on_device(np.array([0, 1]))
    assert module.usable(x, label, None, -1, -100) and module.usable(x, label, None, 1, -100)
    assert module.usable(x, label, on_device(np.ones(3, np.float64)), -1, -100)
    assert module.usable(on_device(np.ones((2, 3), np.float16)), label, None, -1, -100)
    assert module.usable(x, on_device(np.array([0, 1], np.int32)), None, -1, -100)
    assert not module.usable(x, on_device(np.array([0, 1, 2])), None, 0, -100)  # axis 0
    assert not module.usable(on_device(np.ones((2, 3), np.float64)), label, None, -1, -100)
    assert not module.usable(x, on_device(np.array([0, 1], np.uint8)), None, -1, -100)
    assert not module.usable(x, on_device(np.array([0, 1], np.int16)), None, -1, -100)
    assert not module.usable(on_device(np.ones((3, 2), float32)).T, label, None, -1, -100)
    assert not module.usable(x, on_device(np.array([[0, 1]]))[0, ::-1], None, -1, -100)
    assert not module.usable(on_device(np.ones((0, 3), float32)), label[:0], None, -1, -100)
    assert not module.usable(x, label, None, -1, 2**63)  # an ignore_index outside int64
    assert not module.usable(x, label, np.ones(3, float32), -1, -100)  # a host weight
    assert not module.usable(np.ones((2, 3), float32), np.array([0, 1]), None, -1, -100)
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "0")
    assert not module.usable(x, label, None, -1, -100)


def test_the_environment_reports_check_passes_on_the_emulator(launches):
    from minitorch_amp.utils.kernel_check_ops import cross_entropy_matches

    assert cross_entropy_matches(on_device, host)
    names = {name for name, _ in launches}
    assert {"cross_entropy_reduce<float>", "cross_entropy_backward<__half, long long>"} <= names


@pytest.mark.gpu
def test_on_a_gpu_cross_entropy_takes_the_kernels_and_matches_the_cpu(monkeypatch):
    taken = []
    real = module.forward
    monkeypatch.setattr(module, "forward", lambda *a: taken.append(a[0].dtype) or real(*a))
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((4, 16, 65)) * 3).astype("float32")
    label = rng.integers(0, 65, (4, 16))
    label[0, :5] = -100
    weight = rng.random(65).astype("float32") + 0.5

    def run_on(place, dtype, reduction, w):
        t = mt.to_tensor(x.astype(dtype), place=place, stop_gradient=False)
        y = mt.to_tensor(label, place=place)
        wt = None if w is None else mt.to_tensor(w, place=place)
        out = F.cross_entropy(t, y, weight=wt, reduction=reduction)
        out.sum().backward()
        return out.numpy().astype(np.float64), t.grad.numpy().astype(np.float64)

    for dtype, tolerance in (("float32", 1e-5), ("float16", 2e-3)):
        for reduction in REDUCTIONS:
            for w in (None, weight):
                got = run_on("gpu:0", dtype, reduction, w)
                want = run_on("cpu", dtype, reduction, w)
                for a, b in zip(got, want):
                    np.testing.assert_allclose(a, b, rtol=tolerance, atol=tolerance)
    assert len(taken) == 12  # every GPU run took the kernels: float32 logits (AMP off)
