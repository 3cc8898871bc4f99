"""``scaler.scale(loss).backward()`` without the seed of ones (``autograd.seeds.from_ones``).

The scaled loss's backward multiplies the seed, ones, by the scale: the scale itself. The
engine starts the pass below the scaled loss with the scale (``ScaleLoss.ones_backward``),
making neither the ones nor the product: two launches fewer a step on a GPU. These tests
hold it to the full pass bit for bit and check the cases where it must not happen.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.amp.scaled_loss import ScaleLoss
from minitorch_amp.autograd import seeds


def full_pass(monkeypatch):
    """The engine without the shortcut: the seed of ones, then ScaleLoss's backward."""
    monkeypatch.setattr(seeds, "from_ones", lambda root: None)


def scaled_step(net, x, level="O1", loss_dtype="float32", scale=2.0**10, shape=()):
    for p in net.parameters():
        p.clear_grad()
    scaler = amp.GradScaler(init_loss_scaling=scale)
    with amp.auto_cast(level=level):
        out = net(x)
    loss = (out.astype(loss_dtype) ** 2).mean()  # (outside the region: in loss_dtype)
    assert loss.dtype == np.dtype(loss_dtype)
    if shape:
        loss = loss.reshape(shape)
    scaler.scale(loss).backward()
    return [p.grad.numpy().copy() for p in net.parameters()]


def scaled_loss(net, x, scale=8.0):
    """``GradScaler(scale).scale(loss)`` of an O1 forward pass: the root of a backward."""
    with amp.auto_cast():
        loss = (net(x).astype("float32") ** 2).mean()
    return amp.GradScaler(init_loss_scaling=scale).scale(loss)


def net_and_input(seed=0):
    mt.seed(seed)
    return nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3)), mt.randn([4, 6])


@pytest.mark.parametrize("level", ["O1", "O2"])
@pytest.mark.parametrize("loss_dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape", [(), (1,)], ids=["0-D", "[1]"])
def test_the_gradients_are_the_full_passs_bit_for_bit(monkeypatch, level, loss_dtype, shape):
    net, x = net_and_input(1)
    if level == "O2":
        net = amp.decorate(net, level="O2")
    calls = []
    ones_backward = ScaleLoss.ones_backward
    monkeypatch.setattr(
        ScaleLoss, "ones_backward", staticmethod(lambda ctx: calls.append(1) or ones_backward(ctx))
    )
    short = scaled_step(net, x, level, loss_dtype, shape=shape)
    assert calls == [1]
    full_pass(monkeypatch)
    full = scaled_step(net, x, level, loss_dtype, shape=shape)
    for a, b in zip(short, full):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


def test_a_loss_of_several_elements_takes_the_full_pass(monkeypatch):
    net, x = net_and_input(2)
    seen = []
    monkeypatch.setattr(seeds, "initial_grad", lambda root, g: seen.append(1) or root._data * 0 + 1)
    scaled_step(net, x, shape=None)  # (0-D: the shortcut; no ones made)
    assert seen == []
    for p in net.parameters():
        p.clear_grad()
    scaler = amp.GradScaler(init_loss_scaling=4.0)
    with amp.auto_cast():
        out = net(x)
    scaler.scale((out.astype("float32") ** 2).mean(axis=1)).backward()  # [4]: ones needed
    assert seen == [1]


def test_the_graph_is_freed_once_and_a_retained_one_runs_again():
    net, x = net_and_input(3)
    scaled = scaled_loss(net, x)
    scaled.backward(retain_graph=True)
    once = [p.grad.numpy().copy() for p in net.parameters()]
    scaled.backward()
    for p, g in zip(net.parameters(), once):
        np.testing.assert_array_equal(p.grad.numpy(), 2 * g)
    with pytest.raises(RuntimeError, match="already freed"):
        scaled.backward()


@pytest.mark.parametrize("loss_dtype", ["float16", "bfloat16", "float32"])
def test_the_loss_receives_the_scale_in_its_own_dtype(loss_dtype):
    """As the full pass's cast of ``ones * scale`` gives it (a float16 loss is scaled in
    float32)."""
    net, x = net_and_input(6)
    scaler = amp.GradScaler(init_loss_scaling=2.0**12)
    with amp.auto_cast():
        out = net(x)
    loss = (out.astype(loss_dtype) ** 2).mean()
    seen = []
    loss.register_hook(lambda g: seen.append((str(g.dtype), float(g.numpy()))))
    scaler.scale(loss).backward()
    assert seen == [(loss_dtype, 2.0**12)]


def test_a_hook_on_the_scaled_loss_sees_the_ones():
    net, x = net_and_input(4)
    scaled = scaled_loss(net, x)
    seen = []
    scaled.register_hook(lambda g: seen.append(g.numpy().copy()))
    scaled.backward()
    assert len(seen) == 1 and seen[0] == 1.0


def test_a_failed_pass_frees_nothing_and_can_be_retried():
    net, x = net_and_input(5)
    scaled = scaled_loss(net, x)
    failing = [True]

    def hook(g):
        if failing[0]:
            raise RuntimeError("a hook that fails")

    net[0].bias.register_hook(hook)
    with pytest.raises(RuntimeError, match="a hook that fails"):
        scaled.backward()
    assert not scaled._node.freed
    failing[0] = False
    scaled.backward()
    assert scaled._node.freed
    assert all(p.grad is not None for p in net.parameters())


def test_a_hook_that_writes_into_the_loss_gradient_cannot_change_the_scale():
    """The loss's hook is handed a copy: a retained graph's next pass starts from the same
    scale (a hook returning a new gradient is the documented way to change it)."""
    net, x = net_and_input(7)
    with amp.auto_cast():
        loss = (net(x).astype("float32") ** 2).mean()
    loss.register_hook(lambda g: g._data.__imul__(3.0) and None)  # in place, returns None
    scaled = amp.GradScaler(init_loss_scaling=8.0).scale(loss)
    grads = []
    for _ in range(2):
        for p in net.parameters():
            p.clear_grad()
        scaled.backward(retain_graph=True)
        grads.append([p.grad.numpy().copy() for p in net.parameters()])
    for a, b in zip(*grads):
        np.testing.assert_array_equal(a, b)
