"""Checks the engine's folds share (``tests/test_cast_fold.py``, ``tests/test_widen_fold.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from minitorch_amp import amp
from minitorch_amp.autograd.ops.cast import Cast


def assert_a_failed_pass_changes_no_gradient(net, x) -> None:
    """An O1 backward of ``net(x)`` whose first bias hook raises (leaf hooks run after every
    fold of the pass) leaves each ``.grad`` reading as it did after ``clear_grad()``. The
    parameters must have their ``.grad`` buffers already (one backward before)."""
    for p in net.parameters():
        p.clear_grad()
    before = [p.grad.numpy().copy() for p in net.parameters()]  # (what a cleared .grad reads)
    for p in net.parameters():
        p.clear_grad()  # (reading .grad filled the buffers: stale again)

    def fail(g):
        raise RuntimeError("a hook that fails")

    net[0].bias.register_hook(fail)
    with amp.auto_cast(level="O1"):
        loss = (net(x).astype("float32") ** 2).sum()
    with pytest.raises(RuntimeError, match="a hook that fails"):
        loss.backward()
    for p, b in zip(net.parameters(), before):
        np.testing.assert_array_equal(p.grad.numpy(), b)


def cast_backward_log(monkeypatch, entry) -> list:
    """A list that gets ``entry(ctx, grad)`` each time a ``Cast``'s backward runs."""
    seen = []
    backward = Cast.backward

    def logging(ctx, grad):
        seen.append(entry(ctx, grad))
        return backward(ctx, grad)

    monkeypatch.setattr(Cast, "backward", staticmethod(logging))
    return seen


def cast_counts_with_and_without(step, net, x) -> list:
    """Operator statistics' ``cast`` counts of ``step(net, x, fold=True)`` and of
    ``step(net, x, fold=False)``, after one step that makes the ``.grad`` buffers: a fold
    reports the cast it saves, so the two must be equal."""
    step(net, x)
    counts = []
    for fold in (True, False):
        with amp.debugging.collect_operator_stats() as stats:
            step(net, x, fold=fold)
        counts.append(stats.counts["cast"])
    return counts


def gpu_cast_launches(monkeypatch, step, net, x, dtype) -> dict:
    """On a GPU with raw kernels: ``{fold: gradients, (fold, "casts"): cast launches}`` of
    ``step(net, x, dtype=dtype, fold=fold)`` for both, after one step that makes the
    ``.grad`` buffers."""
    from minitorch_amp.backend import kernels

    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "1")
    launches, launch = [], kernels.launch
    monkeypatch.setattr(kernels, "launch", lambda *a, **k: launches.append(a[1]) or launch(*a, **k))
    step(net, x, dtype=dtype)
    runs = {}
    for fold in (True, False):
        launches.clear()
        runs[fold] = step(net, x, dtype=dtype, fold=fold)
        runs[fold, "casts"] = len([n for n in launches if n.startswith("cast")])
    return runs
