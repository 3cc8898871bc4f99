"""The CPU optimizer update runs once per stretch of equal settings, not once per parameter."""

from __future__ import annotations

import numpy as np

import minitorch_amp as mt
from minitorch_amp import nn, optimizer


def test_adamw_decaying_only_weights_updates_in_two_runs_with_every_parameters_own_result():
    layers = [nn.Linear(4, 4) for _ in range(3)]  # weight, bias, weight, bias, ...: alternating
    params = [p for layer in layers for p in layer.parameters()]
    decay = {p.name for p in params if p.ndim == 2}
    opt = optimizer.AdamW(
        learning_rate=0.1,
        parameters=params,
        weight_decay=0.5,
        apply_decay_param_fun=lambda name: name in decay,
    )
    before = [p.numpy().copy() for p in params]
    for i, p in enumerate(params):
        p.grad = mt.full(p.shape, 0.25 * (i + 1))
    opt.step()
    (bucket,) = [b for _, b in opt._state.plan.buckets]
    assert len(bucket.runs) == 2
    for p, old in zip(params, before):
        # Adam's first step moves each element by lr * sign(g) (up to epsilon); AdamW first
        # scales the decayed ones by 1 - lr * coeff
        scale = 1 - 0.1 * 0.5 if p.ndim == 2 else 1.0
        np.testing.assert_allclose(p.numpy(), old * scale - 0.1, rtol=1e-5, atol=1e-6)
