"""A whole training checkpoint: model + optimizer + scheduler through save/load, resumed exactly."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import nn


class Net(nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.bn = nn.BatchNorm1D(8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(nn.functional.relu(self.bn(self.fc1(x))))


def make(seed):
    mt.seed(seed)
    model = Net()
    sched = mt.optimizer.lr.StepDecay(learning_rate=0.05, step_size=2, gamma=0.5)
    opt = mt.optimizer.Adam(learning_rate=sched, parameters=model.parameters())
    return model, opt, sched


def train(model, opt, sched, batches):
    losses = []
    for x, y in batches:
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.clear_grad()
        sched.step()
        losses.append(loss.item())
    return losses


SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
import minitorch_amp as mt
from test_checkpoint import make, train, make_batches
batches = make_batches()
if {resume!r}:
    model, opt, sched = make(seed=99)  # different initial weights: all must come from the file
    state = mt.load({path!r})
    assert state["epoch"] == 3
    model.set_state_dict(state["model"])
    opt.set_state_dict(state["opt"])
    assert sched.last_epoch == 3, sched.last_epoch
else:
    model, opt, sched = make(seed=0)
    train(model, opt, sched, batches[:3])
    state = {{"model": model.state_dict(), "opt": opt.state_dict(), "epoch": 3}}
    mt.save(state, {path!r})
print(repr(train(model, opt, sched, batches[3:])))
"""


def make_batches():
    mt.seed(123)
    return [(mt.randn([5, 6]), mt.randint(0, 3, [5])) for _ in range(6)]


def run_fresh(path, resume: bool) -> list[float]:
    script = SCRIPT.format(tests=str(Path(__file__).parent), path=str(path), resume=resume)
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return ast.literal_eval(out.stdout.strip().splitlines()[-1])


def test_resuming_from_a_checkpoint_in_a_new_process_continues_bit_identically(tmp_path):
    # Optimizer state is keyed by parameter names (linear_0.w_0, as in Paddle), which a fresh
    # process regenerates identically for the same model code: train, save and resume each
    # in a fresh process, as users do.
    path = tmp_path / "ckpt.npz"
    uninterrupted = run_fresh(path, resume=False)  # saves after 3 batches, then trains on
    assert run_fresh(path, resume=True) == uninterrupted


def test_a_corrupt_checkpoint_leaves_the_model_untouched(tmp_path):
    model, _, _ = make(seed=0)
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    path = tmp_path / "ckpt.npz"
    mt.save(model.state_dict(), str(path))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"ckpt\.npz"):
        model.set_state_dict(mt.load(str(path)))
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), before[key])
