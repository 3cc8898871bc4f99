"""An AMP cast's backward folded into the copy into the parameter's buffer
(``autograd/cast_fold.py``).

Under O1 a white-list op reads a 16-bit copy of each float32 weight; the engine hands that
copy's gradient straight to the weight's stale ``.grad`` buffer, whose copy widens it, and
skips the cast's backward. These tests hold the fold to the unfolded backward bit for bit,
in O1 and OD, float16 and bfloat16, with an overflow, and check each case where it must
not happen; operator statistics count the cast either way.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from fold_checks import (
    assert_a_failed_pass_changes_no_gradient,
    cast_backward_log,
    cast_counts_with_and_without,
    gpu_cast_launches,
)
from hypothesis import given
from hypothesis import strategies as st
from nan_checker import nan_inf_checker

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.autograd import cast_fold, engine, widen_fold


@pytest.fixture(autouse=True)
def without_widen_fold(monkeypatch):
    """The GEMMs' own fold (``widen_fold``, tests/test_widen_fold.py) off: it takes the
    weights' casts before this one would, writing the buffers from the GEMM."""
    monkeypatch.setattr(widen_fold, "wanted", lambda node, capture: ())


@pytest.fixture
def cast_backwards(monkeypatch):
    """The dtypes each run of the cast's backward widened from, in order."""
    return cast_backward_log(monkeypatch, lambda ctx, grad: str(grad.dtype))


def mlp(seed=0):
    mt.seed(seed)
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 8), nn.Linear(8, 3))


def step(net, x, level="O1", dtype="float16", scale=1.0, fold=True):
    """clear_grad, then one backward of a scaled squared-sum loss; the gradients."""
    with pytest.MonkeyPatch.context() as patch:
        if not fold:
            patch.setattr(cast_fold, "target", lambda node, grad: None)
        for p in net.parameters():
            p.clear_grad()
        with amp.auto_cast(level=level, dtype=dtype):
            out = net(x)
        ((out.astype("float32") ** 2).sum() * scale).backward()
    return [p.grad.numpy().copy() for p in net.parameters()]


@pytest.mark.parametrize("level", ["O1", "OD"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_folded_gradients_are_the_unfolded_ones_bit_for_bit(cast_backwards, level, dtype):
    net = mlp()
    x = mt.randn([5, 12])
    step(net, x, level, dtype)  # the first backward makes the buffers: no fold yet
    every = len(cast_backwards)  # the weights' three, the activations' two, the output's
    folded = step(net, x, level, dtype)
    assert len(cast_backwards) == 2 * every - 3  # none of the three weights' ran
    unfolded = step(net, x, level, dtype, fold=False)
    assert len(cast_backwards) == 3 * every - 3
    assert cast_backwards[-every:] == cast_backwards[:every]
    for a, b in zip(folded, unfolded):
        assert a.dtype == np.float32
        np.testing.assert_array_equal(a, b)


def test_an_overflowing_float16_gradient_is_inf_in_the_buffer_as_unfolded():
    net = mlp(1)
    x = mt.randn([5, 12])
    step(net, x)
    folded = step(net, x, scale=2.0**30)
    unfolded = step(net, x, scale=2.0**30, fold=False)
    assert any(np.isinf(g).any() for g in folded)  # the scaler has an overflow to find
    for a, b in zip(folded, unfolded):
        np.testing.assert_array_equal(a, b)


def _no_fold_case(case, net, x):
    """Run one backward of ``case`` (one where the fold must not happen); the gradients."""
    params = list(net.parameters())
    with amp.auto_cast(level="O1"):
        loss = (net(x).astype("float32") ** 2).sum()
    if case == "paddle.grad":
        return [g.numpy() for g in mt.grad(loss, params)]
    if case == "hook":
        seen = []
        params[0].register_hook(lambda g: seen.append(g.dtype) or g)
        loss.backward()
        assert seen == [mt.float32]  # the hook sees the widened gradient
    elif case == "create_graph":
        loss.backward(create_graph=True)
    elif case == "nan checker":
        with nan_inf_checker():
            loss.backward()
    elif case == "accumulation":  # into the gradients the first backward left
        loss.backward()
    return [p.grad.numpy().copy() for p in params]


@pytest.mark.parametrize(
    "case", ["hook", "accumulation", "paddle.grad", "create_graph", "nan checker"]
)
def test_no_fold_where_the_cast_gradient_is_seen_or_added(cast_backwards, case):
    net = mlp(2)
    x = mt.randn([4, 12])
    first = step(net, x)  # buffers made; for the accumulation case, the first gradients
    if case != "accumulation":
        for p in net.parameters():
            p.clear_grad()
    every = len(cast_backwards)  # the first backward: no buffers, so no fold
    got = _no_fold_case(case, net, x)
    if case != "create_graph":  # (create_graph runs the casts' recorded backward instead)
        # the hook is on the first weight only: the other two still fold
        assert len(cast_backwards) == 2 * every - (2 if case == "hook" else 0)
    expected = [2 * g for g in first] if case == "accumulation" else first
    for g, e in zip(got, expected):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, e, rtol=1e-6)


def test_operator_statistics_count_the_cast_with_or_without_the_fold():
    counts = cast_counts_with_and_without(step, mlp(3), mt.randn([4, 12]))
    assert counts[0] == counts[1]
    assert counts[0]["fp16"] == 5  # the gradients of three weights and two activations


def test_a_pass_that_fails_after_a_fold_leaves_every_gradient_as_it_was():
    net = mlp(4)
    x = mt.randn([4, 12])
    step(net, x)
    assert_a_failed_pass_changes_no_gradient(net, x)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_on_a_gpu_the_weight_gradients_cost_no_cast_launch(monkeypatch, dtype):
    """O1 on a GPU: the second backward launches no cast kernel for the three weights (CuPy's
    copy into the buffer widens), and the gradients are the unfolded ones bit for bit."""
    net = mlp(5)
    net.to("gpu:0")
    runs = gpu_cast_launches(monkeypatch, step, net, mt.randn([64, 12]).to("gpu:0"), dtype)
    assert runs[True, "casts"] == runs[False, "casts"] - 3
    for a, b in zip(runs[True], runs[False]):
        np.testing.assert_array_equal(a, b)


@given(
    widths=st.lists(st.integers(1, 9), min_size=2, max_size=4),
    rows=st.integers(1, 6),
    level=st.sampled_from(["O1", "OD"]),
    dtype=st.sampled_from(["float16", "bfloat16"]),
    log2_scale=st.integers(-8, 24),  # up to overflowing float16 gradients
    seed=st.integers(0, 2**16),
)
def test_any_mlp_folds_to_the_unfolded_gradients_bit_for_bit(
    widths, rows, level, dtype, log2_scale, seed
):
    mt.seed(seed)
    layers = []
    for n_in, n_out in itertools.pairwise(widths):
        layers += [nn.Linear(n_in, n_out), nn.ReLU()]
    net = nn.Sequential(*layers[:-1])
    x = mt.randn([rows, widths[0]])
    step(net, x, level, dtype)
    leaves, target = [], cast_fold.target
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cast_fold, "target", lambda *a: leaves.append(target(*a)) or leaves[-1])
        folded = step(net, x, level, dtype, scale=2.0**log2_scale)
    assert sum(leaf is not None for leaf in leaves) == len(widths) - 1  # every weight folded
    unfolded = step(net, x, level, dtype, scale=2.0**log2_scale, fold=False)
    for a, b in zip(folded, unfolded):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("source", ["float16", "bfloat16"])
def test_a_cast_from_16_bits_writes_its_gradient_into_the_parameters_buffer(source, monkeypatch):
    """The other direction (a 16-bit parameter read as float32: an O2 embedding table, a
    user's ``astype``) is no fold: the cast's backward narrows the gradient straight into
    the parameter's stale buffer (``ctx.grad_out``), which keeps its array; the bits are
    those of a cast into a new array, and the cast is still counted."""
    rng = np.random.default_rng(4)
    w = mt.to_tensor(rng.standard_normal((5, 3)).astype(source), stop_gradient=False)
    x = mt.to_tensor(rng.standard_normal((4, 5)).astype("float32") * 1000)

    def backward():
        (mt.matmul(x, w.astype("float32")) ** 2).sum().backward()

    backward()
    buffer = w.grad._data
    fresh = w.grad.numpy().copy()
    w.clear_grad()
    copies = []
    monkeypatch.setattr(engine, "copy_into", lambda out, x: copies.append(out))
    with amp.debugging.collect_operator_stats() as stats:
        backward()
    assert w.grad._data is buffer and copies == []  # written by the cast, not copied in
    counted = stats.counts["cast"]
    assert sum(counted.values()) == 2  # forward (from 16 bits) and backward (from float32)
    assert buffer.dtype == np.dtype(source)
    np.testing.assert_array_equal(w.grad.numpy().view(np.uint16), fresh.view(np.uint16))
