"""An AMP cast's backward folded into the GEMM that computes its gradient
(``autograd/widen_fold.py``).

``auto_cast`` casts a Linear's (or matmul's) float32 input to 16 bits; the engine asks the
op's backward GEMM for that input's gradient widened to float32 (rounded to 16 bits in the
epilogue, stored in float32) and skips the cast's backward. These tests hold the fold to
the unfolded backward bit for bit, in O1 and O2, float16 and bfloat16, with overflows,
check each case where it must not happen, and count the launches it saves on a GPU.
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
import minitorch_amp.nn.functional as F
from minitorch_amp import amp, nn
from minitorch_amp.autograd import widen_fold


@pytest.fixture
def cast_backwards(monkeypatch):
    """The source dtypes of the casts whose backward ran, in order."""
    return cast_backward_log(monkeypatch, lambda ctx, grad: str(ctx.source))


def unfolded():
    """A context in which the engine never folds a cast into a GEMM."""
    patch = pytest.MonkeyPatch()
    patch.setattr(widen_fold, "wanted", lambda node, capture: ())
    return patch


def mlp(seed=0):
    mt.seed(seed)
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 8), nn.Linear(8, 3))


def step(net, x, level="O1", dtype="float16", scale=1.0, fold=True):
    """One backward of a scaled squared-sum loss from cleared gradients: the gradients of
    the parameters and of ``x``."""
    patch = None if fold else unfolded()
    try:
        for t in [*net.parameters(), x]:
            t.clear_grad()
        with amp.auto_cast(level=level, dtype=dtype):
            out = net(x)
        ((out.astype("float32") ** 2).sum() * scale).backward()
    finally:
        if patch is not None:
            patch.undo()
    return [t.grad.numpy().copy() for t in [*net.parameters(), x] if t.grad is not None]


def assert_folds_as_unfolded(layer, forward, dtype="float16"):
    """``layer``'s gradients from an O1 ``forward()`` and a squared-sum loss, folded and
    unfolded, bit for bit (after a first pass that makes the ``.grad`` buffers)."""
    runs = []
    for fold in (True, True, False):
        patch = None if fold else unfolded()
        for p in layer.parameters():
            p.clear_grad()
        with amp.auto_cast(level="O1", dtype=dtype):
            out = forward()
        (out.astype("float32") ** 2).sum().backward()
        runs.append([p.grad.numpy().copy() for p in layer.parameters()])
        if patch is not None:
            patch.undo()
    assert_same_bits(runs[1], runs[2])


def assert_same_bits(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [[5, 12], [2, 3, 12]], ids=["2-D", "3-D"])
def test_o1_folded_gradients_are_the_unfolded_ones_bit_for_bit(cast_backwards, dtype, shape):
    net = mlp(1)
    x = mt.randn(shape)
    x.stop_gradient = False  # the first Linear's input cast folds too
    step(net, x, dtype=dtype)  # the weights' .grad buffers (cast_fold needs them)
    cast_backwards.clear()
    folded = step(net, x, dtype=dtype)
    # the three inputs' casts (x, the ReLU's output, the second Linear's output) are done
    # by the GEMMs, the three weights' by the copies into their buffers (cast_fold)
    assert cast_backwards == ["float32"]  # only the loss's astype("float32") runs its own
    cast_backwards.clear()
    plain = step(net, x, dtype=dtype, fold=False)
    # the loss's and the two activations' (x's own goes into its buffer: cast_fold)
    assert cast_backwards.count("float32") == 3
    assert_same_bits(folded, plain)
    assert folded[-1].dtype == np.float32


def test_o2_folds_the_cast_of_a_float32_layer_norm_output(cast_backwards):
    """At O2 a LayerNorm's float32 output (a transformer's residual stream) is cast for the
    Linear after it: that cast's backward is the GEMM's."""
    mt.seed(2)
    net = nn.Sequential(nn.LayerNorm(12), nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3))
    net = amp.decorate(net, level="O2")
    x = mt.randn([6, 12])
    step(net, x, level="O2")
    cast_backwards.clear()
    folded = step(net, x, level="O2")
    folds = cast_backwards.count("float32")
    cast_backwards.clear()
    plain = step(net, x, level="O2", fold=False)
    assert cast_backwards.count("float32") == folds + 1
    assert_same_bits(folded, plain)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize(
    "shapes, transpose_x, folds",
    [
        (([4, 6], [6, 5]), False, True),
        (([6, 4], [6, 5]), True, True),
        (([3, 4, 6], [6, 5]), False, True),
        (([3, 4, 6], [3, 6, 5]), False, True),
        (([1, 4, 6], [3, 6, 5]), False, False),  # x's batch was broadcast: summed in 16 bits
    ],
)
def test_a_matmul_folds_where_its_input_gradient_needs_no_sum(
    cast_backwards, dtype, shapes, transpose_x, folds
):
    mt.seed(3)
    a, b = (mt.randn(s) for s in shapes)
    a.stop_gradient = b.stop_gradient = False
    runs = []
    for fold in (True, True, False):  # (the first makes the leaves' .grad buffers)
        patch = None if fold else unfolded()
        cast_backwards.clear()
        a.clear_grad(), b.clear_grad()
        with amp.auto_cast(level="O1", dtype=dtype):
            out = mt.matmul(a * 1.0, b, transpose_x=transpose_x)  # (an activation: no leaf)
        (out.astype("float32") ** 2).sum().backward()
        runs.append(([a.grad.numpy().copy(), b.grad.numpy().copy()], len(cast_backwards)))
        if patch is not None:
            patch.undo()
    (folded, folded_casts), (plain, plain_casts) = runs[1:]
    assert folded_casts == plain_casts - (1 if folds else 0)
    assert_same_bits(folded, plain)


def test_an_overflowing_16_bit_gradient_is_inf_in_float32_as_unfolded():
    net = mlp(4)
    x = mt.randn([4, 12])
    x.stop_gradient = False
    step(net, x)
    folded = step(net, x, scale=2.0**20)
    plain = step(net, x, scale=2.0**20, fold=False)
    assert not np.isfinite(folded[-1]).all()  # past float16's 65504: inf (and NaN after)
    assert_same_bits(folded, plain)


def test_a_second_consumer_of_the_cast_gets_the_sum_in_16_bits():
    """Two ops read one cast: their 16-bit gradients are added in float16, then widened, as
    unfolded (the folded one is rounded back first: exact)."""
    mt.seed(5)
    x = mt.randn([4, 6])
    x.stop_gradient = False
    w = mt.randn([6, 6]).astype("float16")
    results = []
    for fold in (True, False):
        patch = None if fold else unfolded()
        x.clear_grad()
        h = x.astype("float16")  # one recorded cast, two readers
        out = F.linear(h, w) + h * 3.0
        (out.astype("float32") ** 2).sum().backward()
        results.append(x.grad.numpy().copy())
        if patch is not None:
            patch.undo()
    assert_same_bits(results[:1], results[1:])


def test_a_weight_gradient_is_written_widened_into_its_buffer_by_the_gemm(cast_backwards):
    """O1: the weight-gradient GEMM writes into the parameter's stale float32 ``.grad``
    buffer itself (no cast, no copy), with the unfolded bits."""
    net = mlp(11)
    x = mt.randn([4, 12])
    step(net, x)
    buffers = [p.grad._data for p in net.parameters()]
    folded = step(net, x)
    assert [p.grad._data for p in net.parameters()] == buffers  # the same arrays, written
    plain = step(net, x, fold=False)
    assert_same_bits(folded, plain)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_weight_read_twice_gets_both_gradients_summed_as_unfolded(dtype):
    """One cached cast of a weight feeds two Linears (``auto_cast`` counts two readers):
    neither writes into the buffer; their gradients are summed in 16 bits, then cast into
    it, as unfolded."""
    mt.seed(12)
    layer = nn.Linear(6, 6)
    x = mt.randn([5, 6])
    assert_folds_as_unfolded(layer, lambda: layer(mt.nn.functional.relu(layer(x))), dtype)


def test_a_tied_weight_read_directly_too_gets_both_gradients_as_unfolded():
    """A Linear head whose weight also feeds an embedding (through a transpose): the head's
    GEMM writes its gradient into the buffer and it reaches the weight at once, so the
    embedding's, arriving later in the pass, is added to it, not written over it."""
    mt.seed(15)
    head = nn.Linear(4, 7)  # weight [4, 7]: also the table of 7 tokens, width 4
    ids = mt.to_tensor(np.array([[1, 2, 3], [4, 5, 6]]))
    assert_folds_as_unfolded(head, lambda: head(F.embedding(ids, head.weight.transpose([1, 0]))))


def test_a_pass_that_fails_after_a_fold_leaves_every_gradient_as_it_was():
    net = mlp(13)
    x = mt.randn([4, 12])
    step(net, x)
    assert_a_failed_pass_changes_no_gradient(net, x)


def test_a_hook_on_the_cast_sees_its_16_bit_gradient_and_stops_the_fold(cast_backwards):
    mt.seed(6)
    x = mt.randn([4, 6])
    x.stop_gradient = False
    w = mt.randn([6, 3]).astype("float16")
    h = x.astype("float16")
    seen = []
    h.register_hook(lambda g: seen.append(g.dtype))
    (F.linear(h, w).astype("float32") ** 2).sum().backward()
    assert [str(d) for d in seen] == ["float16"]
    assert cast_backwards == ["float16", "float32"]  # the loss's, and the hooked cast's own


def _run_case(case, net, x):
    with amp.auto_cast(level="O1"):
        out = net(x)
    loss = (out.astype("float32") ** 2).sum()
    if case == "paddle.grad":
        return [g.numpy() for g in mt.grad(loss, [x, *net.parameters()])]
    if case == "create_graph":
        loss.backward(create_graph=True)
    else:
        with nan_inf_checker():
            loss.backward()
    return [t.grad.numpy().copy() for t in [x, *net.parameters()]]


@pytest.mark.parametrize("case", ["paddle.grad", "create_graph", "nan checker"])
def test_no_fold_where_the_gradients_are_seen(cast_backwards, case):
    net = mlp(7)
    x = mt.randn([4, 12])
    x.stop_gradient = False
    want = step(net, x, fold=False)
    for t in [x, *net.parameters()]:
        t.clear_grad()
    cast_backwards.clear()
    got = _run_case(case, net, x)
    if case != "create_graph":  # (create_graph runs the casts' recorded backward instead)
        assert cast_backwards.count("float32") >= 4  # the loss's and the three inputs'
    for g, w in zip(got, [want[-1], *want[:-1]]):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_a_retained_graph_folds_again_and_leaves_no_request_behind(cast_backwards):
    net = mlp(8)
    x = mt.randn([4, 12])
    x.stop_gradient = False
    with amp.auto_cast(level="O1"):
        out = net(x)
    loss = (out.astype("float32") ** 2).sum()
    nodes, node = [], out._node
    while node is not None:  # the Linears and casts, down to x's
        nodes.append(node)
        node = next((t._node for t in node.inputs if t is not None and t._node), None)
    loss.backward(retain_graph=True)
    once = x.grad.numpy().copy()
    loss.backward()
    # each time only the loss's: the three inputs' and three weights' casts fold (14
    # unfolded)
    assert cast_backwards.count("float32") == 2
    np.testing.assert_array_equal(x.grad.numpy(), 2 * once)
    assert sum(node.op.name == "linear" for node in nodes) == 3
    assert not any(getattr(node.ctx, "widen_grad", False) for node in nodes)  # none left asking


def test_operator_statistics_count_the_cast_with_or_without_the_fold():
    x = mt.randn([4, 12])
    x.stop_gradient = False
    counts = cast_counts_with_and_without(step, mlp(9), x)
    assert counts[0] == counts[1]


@given(
    widths=st.lists(st.integers(1, 9), min_size=2, max_size=4),
    rows=st.integers(1, 6),
    dtype=st.sampled_from(["float16", "bfloat16"]),
    log2_scale=st.integers(-8, 24),  # up to overflowing float16 gradients
    seed=st.integers(0, 2**16),
)
def test_any_mlp_folds_to_the_unfolded_gradients_bit_for_bit(widths, rows, dtype, log2_scale, seed):
    mt.seed(seed)
    layers = []
    for i, (n_in, n_out) in enumerate(itertools.pairwise(widths)):
        layers += [nn.ReLU()] if i % 2 else []
        layers.append(nn.Linear(n_in, n_out))
    net = nn.Sequential(*layers)
    x = mt.randn([rows, widths[0]])
    x.stop_gradient = False
    with np.errstate(over="ignore", invalid="ignore"):
        folded = step(net, x, dtype=dtype, scale=2.0**log2_scale)
        plain = step(net, x, dtype=dtype, scale=2.0**log2_scale, fold=False)
    assert_same_bits(folded, plain)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_on_a_gpu_each_fold_is_one_cast_launch_less(monkeypatch, dtype):
    """O1 on a GPU: the two hidden activations' casts launch no backward kernel (their
    GEMMs widen; unfolded, x's and the weights' go into their buffers by copies, which the
    GEMMs now make unnecessary for the weights), and the gradients are the unfolded ones
    bit for bit."""
    net = mlp(10)
    net.to("gpu:0")
    x = mt.randn([64, 12]).to("gpu:0")
    x.stop_gradient = False
    runs = gpu_cast_launches(monkeypatch, step, net, x, dtype)
    assert runs[True, "casts"] == runs[False, "casts"] - 2
    assert_same_bits(runs[True], runs[False])
