"""A ReLU's backward folded into the Linear before it (``autograd/relu_fold.py``).

The engine leaves a ReLU's mask to the Linear layer that produced its input, whose bias
gradient kernel applies it (one launch less per pair on a GPU), only where nothing else can
see the masked gradient. These tests hold the fold to the unfused backward bit for bit, in
every AMP level, and check each case where it must not happen.
"""

from __future__ import annotations

import numpy as np
import pytest
from nan_checker import nan_inf_checker

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.autograd import relu_fold
from minitorch_amp.autograd.ops import linalg
from minitorch_amp.autograd.ops.activation import Relu


@pytest.fixture
def spy(monkeypatch):
    """Record, per bias_grad call, whether a ReLU mask came with it, and count ReLU backwards."""
    seen = {"masks": [], "relu_backwards": 0}
    bias_grad, relu_backward = linalg.bias_grad, Relu.backward

    def recording_bias_grad(*args, **kwargs):
        seen["masks"].append(kwargs.get("relu_out") is not None)
        return bias_grad(*args, **kwargs)

    def counting_relu_backward(ctx, grad):
        seen["relu_backwards"] += 1
        return relu_backward(ctx, grad)

    monkeypatch.setattr(linalg, "bias_grad", recording_bias_grad)
    monkeypatch.setattr(Relu, "backward", staticmethod(counting_relu_backward))
    return seen


def mlp(seed=0, bias_attr=None):
    mt.seed(seed)
    return nn.Sequential(
        nn.Linear(12, 16, bias_attr=bias_attr),
        nn.ReLU(),
        nn.Linear(16, 8),
        nn.ReLU(),
        nn.Linear(8, 3),
    )


def gradients(net, x, level=None, fold=True, monkeypatch=None):
    """The parameters' gradients after one backward of a squared-sum loss."""
    if not fold:
        monkeypatch.setattr(relu_fold, "defer", lambda node, grad, capture: None)
    for p in net.parameters():
        p.clear_grad()
    if level is None:
        loss = (net(x) ** 2).mean()
    else:
        with amp.auto_cast(level=level):
            out = net(x)
        loss = (out.astype("float32") ** 2).mean()
    loss.backward()
    if not fold:
        monkeypatch.undo()
    return [p.grad.numpy().copy() for p in net.parameters()]


@pytest.mark.parametrize("level", [None, "O1", "O2"])
@pytest.mark.parametrize("shape", [[7, 12], [2, 5, 12]], ids=["2-D", "3-D"])
def test_folded_gradients_are_the_unfused_ones_bit_for_bit(spy, monkeypatch, level, shape):
    net = mlp()
    if level == "O2":
        net = amp.decorate(net, level="O2")
    mt.seed(1)
    x = mt.randn(shape)
    folded = gradients(net, x, level)
    assert spy["masks"] == [False, True, True]  # both ReLUs left their mask to a Linear
    assert spy["relu_backwards"] == 0
    unfused = gradients(net, x, level, fold=False, monkeypatch=monkeypatch)
    assert spy["relu_backwards"] == 2
    for a, b in zip(folded, unfused):
        np.testing.assert_array_equal(a, b)


def test_an_inf_gradient_where_the_unit_is_off_is_nan_as_unfused(spy, monkeypatch):
    """The mask is relu_backward's multiply: the scaler still sees an overflow behind it."""
    net = mlp()
    x = mt.randn([4, 12])
    out = net[1](net[0](x))
    seed = np.ones(out.shape, dtype=np.float32)
    seed[out.numpy() <= 0] = np.inf
    out.backward(mt.to_tensor(seed))
    assert spy["masks"] == [True]
    assert np.isnan(net[0].bias.grad.numpy()).any()


def test_a_second_consumer_of_the_linear_result_gets_the_masked_sum(spy):
    mt.seed(2)
    linear = nn.Linear(6, 5)
    x = mt.randn([4, 6])
    z = linear(x)
    (mt.nn.functional.relu(z) * 3.0 + z).sum().backward()
    assert spy["masks"] == [False]  # the sum of both gradients is made first, unmasked
    z_np = (x.numpy() @ linear.weight.numpy() + linear.bias.numpy()).astype(np.float32)
    expected = (3.0 * (z_np > 0) + 1.0).sum(axis=0)
    np.testing.assert_allclose(linear.bias.grad.numpy(), expected, rtol=1e-6)


def test_a_hook_on_the_linear_result_sees_the_masked_gradient(spy):
    mt.seed(3)
    linear = nn.Linear(6, 5)
    z = linear(mt.randn([4, 6]))
    seen = []
    z.register_hook(lambda g: seen.append(g.numpy().copy()))
    mt.nn.functional.relu(z).sum().backward()
    np.testing.assert_array_equal(seen[0], (z.numpy() > 0).astype(np.float32))
    assert spy["masks"] == [False]


@pytest.mark.parametrize(
    "case", ["no bias", "frozen bias", "paddle.grad", "create_graph", "nan checker"]
)
def test_no_fold_where_the_masked_gradient_is_seen_or_the_bias_needs_none(spy, case):
    mt.seed(4)
    linear = nn.Linear(6, 5, bias_attr=False if case == "no bias" else None)
    if case == "frozen bias":
        linear.bias.stop_gradient = True
    x = mt.randn([4, 6])
    x.stop_gradient = False
    loss = (mt.nn.functional.relu(linear(x)) ** 2).sum()
    if case == "paddle.grad":
        (gx,) = mt.grad(loss, [x])
    elif case == "create_graph":
        loss.backward(create_graph=True)
        gx = x.grad
    elif case == "nan checker":
        with nan_inf_checker():
            loss.backward()
        gx = x.grad
    else:
        loss.backward()
        gx = x.grad
    assert True not in spy["masks"]
    # (create_graph runs the ReLU's recorded backward, not its array one)
    assert spy["relu_backwards"] == (0 if case == "create_graph" else 1)
    z = x.numpy() @ linear.weight.numpy() + (0 if case == "no bias" else linear.bias.numpy())
    expected = (2 * np.maximum(z, 0)) @ linear.weight.numpy().T
    np.testing.assert_allclose(gx.numpy(), expected, rtol=1e-5)


def test_a_retained_graph_folds_again_and_leaves_no_mask_behind(spy):
    net = mlp()
    x = mt.randn([3, 12])
    loss = (net(x) ** 2).mean()
    loss.backward(retain_graph=True)
    first = [p.grad.numpy().copy() for p in net.parameters()]
    loss.backward()
    for a, p in zip(first, net.parameters()):
        np.testing.assert_array_equal(p.grad.numpy(), 2 * a)
    assert spy["masks"] == [False, True, True] * 2


@pytest.mark.gpu
def test_on_a_gpu_the_mask_costs_no_launch(monkeypatch):
    """float16 Linear, ReLU, Linear: the backward launches no relu_backward kernel, and one
    bias_grad kernel per layer, the first with the mask; the gradients match the CPU's."""
    from minitorch_amp.backend import kernels
    from minitorch_amp.nn import functional as F

    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "1")
    launches, launch = [], kernels.launch
    monkeypatch.setattr(kernels, "launch", lambda *a, **k: launches.append(a[1]) or launch(*a, **k))
    rng = np.random.default_rng(5)
    shapes = ((64, 96), (96, 80), (80,), (80, 48), (48,), (64, 48))
    arrays = [(rng.standard_normal(s) * 0.5).astype(np.float16) for s in shapes]
    results = []
    for place in ("gpu:0", "cpu"):
        x, w1, b1, w2, b2, c = (mt.to_tensor(a, place=place, stop_gradient=False) for a in arrays)
        (F.linear(F.relu(F.linear(x, w1, b1)), w2, b2) * c).sum().backward()
        results.append([t.grad.numpy().astype(np.float32) for t in (x, w1, b1, w2, b2)])
        if place == "gpu:0":
            assert not [name for name in launches if name.startswith("relu_backward")]
            assert len([name for name in launches if name.startswith("bias_grad")]) == 2
    for gpu, cpu in zip(*results):
        np.testing.assert_allclose(gpu, cpu, rtol=2e-2, atol=2e-2)
