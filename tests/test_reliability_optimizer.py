"""An optimizer step is all or nothing: a failure before its first write changes nothing.

Everything a step can fail at (clipping's new arrays, the fp32 masters and moments it
creates, out of memory included) happens in a prepare phase before any parameter is written;
if it fails, what that phase created is removed again, and a retry gives exactly the step
that would have run (``OptimizerState._build`` in ``minitorch_amp/optimizer/state.py``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.backend import memory
from minitorch_amp.device import OutOfMemoryError

pytestmark = pytest.mark.usefixtures("garbage_collected")

OPTIMIZERS = {
    "SGD": lambda ps: mt.optimizer.SGD(0.05, parameters=ps, grad_clip=nn.ClipGradByGlobalNorm(1.0)),
    "Momentum": lambda ps: mt.optimizer.Momentum(0.05, 0.9, parameters=ps, weight_decay=0.01),
    "Adam": lambda ps: mt.optimizer.Adam(0.05, parameters=ps, grad_clip=nn.ClipGradByNorm(1.0)),
    "AdamW": lambda ps: mt.optimizer.AdamW(0.05, parameters=ps),
}


@pytest.fixture(autouse=True)
def _no_memory_limit():
    yield
    mt.device.set_memory_limit(None)


def o2_setup(name: str):
    """An O2 model (two 64x64 layers: each fp32 master is 16 KiB), its optimizer, a scaler,
    and gradients from one scaled backward, unscaled.

    (``scaler.step`` is ``unscale_`` then the optimizer's step. The unscale is done here,
    first: a step that fails leaves the gradients unscaled and the scaler knowing it, so the
    retry does not unscale them again; the optimizer's step is what must change nothing.)"""
    mt.seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64))
    opt = OPTIMIZERS[name](model.parameters())
    model, opt = amp.decorate(models=model, optimizers=opt, level="O2")
    scaler = amp.GradScaler(init_loss_scaling=256.0)
    x = mt.to_tensor(np.random.default_rng(1).standard_normal((8, 64)).astype("float32"))
    with amp.auto_cast(level="O2"):
        loss = model(x).astype("float32").mean()
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    return model, opt, scaler


def snapshot(model, opt) -> dict:
    """Every value a step may change, keyed by the parameter's position (names differ between
    two models built in one process), with keys that say which state exists."""
    state = {}
    for i, p in enumerate(model.parameters()):
        state[f"param {i}"] = p.numpy().copy()
        state[f"grad {i}"] = p.grad.numpy().copy()
        if p.name in opt._master_weights:
            state[f"master {i}"] = opt._master_weights[p.name].numpy().copy()
        if id(p) in opt._accumulators:
            state[f"state of {i}"] = np.array(sorted(opt._accumulators[id(p)]))
            for n, a in opt._accumulators[id(p)].items():
                state[f"acc {i} {n}"] = np.array(a, copy=True)
    # nothing is kept for a parameter that is not the model's
    assert len(opt._master_weights) == sum(k.startswith("master") for k in state)
    assert len(opt._accumulators) == sum(k.startswith("state of") for k in state)
    return state


def assert_same(have: dict, want: dict) -> None:
    assert sorted(have) == sorted(want)
    for key in want:
        np.testing.assert_array_equal(have[key], want[key], err_msg=key)


def test_running_out_of_memory_at_the_second_master_updates_nothing():
    """The defect: with room for one fp32 master, the step updated layer 0, then failed."""
    model, opt, scaler = o2_setup("SGD")
    before = snapshot(model, opt)
    mt.device.set_memory_limit(mt.device.memory_allocated() + 64 * 64 * 4 + 1024)
    with pytest.raises(OutOfMemoryError) as info:
        scaler.step(opt)
    assert "no parameter, master weight or accumulator was changed" in str(info.value.__notes__)
    assert_same(snapshot(model, opt), before)
    mt.device.set_memory_limit(None)
    scaler.step(opt)  # the retry is the step that would have run
    scaler.update()
    reference, ref_opt, ref_scaler = o2_setup("SGD")
    ref_scaler.step(ref_opt)
    assert_same(snapshot(model, opt), snapshot(reference, ref_opt))


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(sorted(OPTIMIZERS)),
    fail_at=st.integers(1, 12),
    where=st.sampled_from(["memory", "state"]),
)
def test_a_failure_anywhere_before_the_first_write_leaves_all_state_bit_identical(
    name, fail_at, where
):
    """A failure injected at the ``fail_at``-th allocation the accounting sees (masters,
    clipped gradients), or at the ``fail_at``-th creation of a parameter's moments, then a
    retry without it."""
    model, opt, scaler = o2_setup(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        before = snapshot(model, opt)
        calls = [0]
        target = (memory, "track") if where == "memory" else (opt, "_create_accumulators")
        real = getattr(*target)

        def failing(*args, **kwargs):
            calls[0] += 1
            if calls[0] == fail_at:
                raise OutOfMemoryError("injected")
            return real(*args, **kwargs)

        setattr(*target, failing)
        try:
            try:
                scaler.step(opt)
                failed = False
            except OutOfMemoryError:
                failed = True
        finally:
            setattr(*target, real)
        if failed:
            assert_same(snapshot(model, opt), before)
            scaler.step(opt)
        reference, ref_opt, ref_scaler = o2_setup(name)
        ref_scaler.step(ref_opt)
        assert_same(snapshot(model, opt), snapshot(reference, ref_opt))


class _Raising:
    """A user regularizer that fails (any error in user code), or returns a wrong shape."""

    def __init__(self, wrong_shape=False):
        self.wrong_shape = wrong_shape

    def __call__(self, p, g):
        if self.wrong_shape:
            return g[:1]
        raise FloatingPointError("the user's regularizer failed")


@pytest.mark.parametrize("size", [2, 70_000], ids=["flat", "in place"])
@pytest.mark.parametrize("wrong_shape", [False, True], ids=["raises", "wrong shape"])
def test_a_failing_regularizer_leaves_the_step_undone(size, wrong_shape):
    """A regularizer that is not fused runs before the step's first write: one that fails
    on the second parameter's bucket leaves the first one as it was, and a retry is one
    step (before, the first was updated, then the retry updated it again)."""
    from minitorch_amp.nn.parameter import Parameter

    a, b = (Parameter(np.ones(size, "float32")) for _ in range(2))
    b.regularizer = _Raising(wrong_shape)
    opt = mt.optimizer.Momentum(learning_rate=0.1, momentum=0.9, parameters=[a, b])
    a.grad = np.ones(size, "float32")
    b.grad = np.ones(size, "float32")
    error = ValueError if wrong_shape else FloatingPointError
    with pytest.raises(error, match="shape" if wrong_shape else "the user's regularizer"):
        opt.step()
    assert (a.numpy() == 1).all() and (b.numpy() == 1).all()
    b.regularizer = None
    opt.step()
    np.testing.assert_allclose(a.numpy(), 0.9, rtol=1e-6)
