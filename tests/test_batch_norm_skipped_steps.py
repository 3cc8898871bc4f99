"""Batch norm's running statistics and the steps a GradScaler skips (as in Paddle and PyTorch).

In training mode a batch norm updates its running mean and variance in the *forward* pass,
before the scaler has seen a gradient. A step the scaler skips leaves the weights alone, but
not the statistics: one batch with an inf activation makes them inf or NaN, and, since each
update keeps ``momentum`` of the old value, they stay so. In evaluation mode the statistics
are only read. ``nn.utils.reestimate_batch_norm`` recomputes them from clean batches.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.nn.utils import reestimate_batch_norm


def setup():
    mt.seed(0)
    net = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1D(4), nn.ReLU(), nn.Linear(4, 1))
    opt = mt.optimizer.SGD(learning_rate=0.1, parameters=net.parameters())
    return net, opt, amp.GradScaler(init_loss_scaling=1024.0)


def train_step(net, opt, scaler, x) -> None:
    with amp.auto_cast():
        loss = net(x).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    opt.clear_grad()


def clean_batch(seed: int):
    return mt.to_tensor(np.random.default_rng(seed).normal(2.0, 3.0, [8, 4]).astype("float32"))


def bad_batch():
    x = clean_batch(99).numpy()
    x[3, :] = np.inf  # one sample overflows upstream (a float16 activation past 65504)
    return mt.to_tensor(x)


def weights(net) -> list:
    return [p.numpy().copy() for p in net.parameters()]


def statistics(net) -> list:
    return [net[1]._mean.numpy().copy(), net[1]._variance.numpy().copy()]


def test_an_inf_activation_in_training_mode_poisons_the_statistics_of_a_skipped_step():
    net, opt, scaler = setup()
    train_step(net, opt, scaler, clean_batch(0))
    before = weights(net)
    train_step(net, opt, scaler, bad_batch())
    assert scaler.get_loss_scaling() == 512.0  # the step was skipped ...
    for new, old in zip(weights(net), before):
        np.testing.assert_array_equal(new, old)  # ... and no weight moved
    assert not any(np.isfinite(s).all() for s in statistics(net))  # but the statistics did
    for seed in range(1, 21):
        train_step(net, opt, scaler, clean_batch(seed))
    assert not all(np.isfinite(s).all() for s in statistics(net))  # for good
    net.eval()
    assert not np.isfinite(net(clean_batch(0)).numpy()).all()  # evaluation is ruined


def test_in_evaluation_mode_the_statistics_are_only_read_so_an_inf_cannot_reach_them():
    net, opt, scaler = setup()
    train_step(net, opt, scaler, clean_batch(0))
    net[1].eval()  # the norm layers in eval (fine-tuning): the rest still trains
    before = statistics(net)
    train_step(net, opt, scaler, bad_batch())
    assert scaler.get_loss_scaling() == 512.0  # skipped
    for new, old in zip(statistics(net), before):
        np.testing.assert_array_equal(new, old)
    train_step(net, opt, scaler, clean_batch(1))
    assert all(np.isfinite(w).all() for w in weights(net))


# ---- re-estimating the statistics ------------------------------------------------------------
def test_reestimating_recomputes_the_statistics_as_the_mean_over_the_batches():
    net, opt, scaler = setup()
    train_step(net, opt, scaler, bad_batch())  # poisoned
    net.eval()
    batches = [clean_batch(seed) for seed in range(3)]
    assert reestimate_batch_norm(net, batches) == 3
    hidden = [net[0](x).numpy().astype("float64") for x in batches]
    np.testing.assert_allclose(
        net[1]._mean.numpy(), np.mean([h.mean(axis=0) for h in hidden], axis=0), rtol=1e-5
    )
    np.testing.assert_allclose(
        net[1]._variance.numpy(), np.mean([h.var(axis=0) for h in hidden], axis=0), rtol=1e-5
    )
    assert np.isfinite(net(clean_batch(5)).numpy()).all()


def test_reestimating_touches_nothing_else_and_restores_modes_and_momentum():
    net, opt, scaler = setup()
    train_step(net, opt, scaler, clean_batch(0))
    net.eval()
    before = weights(net)
    grads = [p.grad.numpy().copy() for p in net.parameters()]  # zeroed by clear_grad
    reestimate_batch_norm(net, [(clean_batch(1), "labels are ignored")])
    assert not net.training and not net[1].training and net[1]._momentum == 0.9
    for new, old in zip(weights(net), before):
        np.testing.assert_array_equal(new, old)
    for p, old in zip(net.parameters(), grads):
        np.testing.assert_array_equal(p.grad.numpy(), old)


def test_reestimating_refuses_no_batches_and_changes_nothing():
    net, _, _ = setup()
    before = statistics(net)
    with pytest.raises(ValueError, match="no batches"):
        reestimate_batch_norm(net, [])
    with pytest.raises(ValueError, match="no batch norm"):
        reestimate_batch_norm(nn.Linear(4, 4), [clean_batch(0)])
    for new, old in zip(statistics(net), before):
        np.testing.assert_array_equal(new, old)


def test_a_failing_batch_leaves_the_statistics_as_they_were():
    net, _, _ = setup()
    before = statistics(net)
    with pytest.raises(ValueError):
        reestimate_batch_norm(net, [clean_batch(0), mt.ones([8, 5])])  # wrong width
    for new, old in zip(statistics(net), before):
        np.testing.assert_array_equal(new, old)
    assert net.training and net[1]._momentum == 0.9
