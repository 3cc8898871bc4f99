"""Whole AMP training steps, built the way a user writes them, for the sync and graph tests.

``make_step(mode, optimizer)`` returns a :class:`Step`: a small classifier (Linear, ReLU,
Linear, cross-entropy), an optimizer with a global-norm clip and a learning-rate scheduler,
a dynamic GradScaler, and static input tensors ``x``/``y`` that every iteration reads (new
batches go in with ``set_value``, as a captured CUDA graph needs). ``step()`` is one full
iteration on the device: forward, scaled backward (``accumulate`` micro-batches), unscale +
step + update, clear_grad. The scheduler steps on the host, between iterations (a replayed
graph runs no Python, so it cannot step it): ``step.next_lr()``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.nn import functional as F

MODES = ("fp32", "O1", "O2", "O2-acc")
OPTIMIZERS = ("SGD", "Momentum", "Adam", "AdamW")
WIDTH, CLASSES, BATCH = 16, 5, 8


@dataclass
class Step:
    model: nn.Layer
    opt: object
    scaler: amp.GradScaler
    scheduler: object
    x: mt.Tensor
    y: mt.Tensor
    mode: str
    accumulate: int

    def __call__(self):
        """One iteration; returns the last micro-batch's loss (a device tensor, not read)."""
        level = {"fp32": "O0"}.get(self.mode, self.mode[:2])
        for _ in range(self.accumulate):
            with amp.auto_cast(enable=level != "O0", level=level if level != "O0" else "O1"):
                loss = F.cross_entropy(self.model(self.x), self.y)
            self.scaler.scale(loss).backward()
        self.scaler.step(self.opt)
        self.scaler.update()
        self.opt.clear_grad()
        return loss

    def next_lr(self) -> None:
        """The scheduler's step: host work between iterations (the optimizer's lr buffer and
        a replayed graph pick the new rate up)."""
        self.scheduler.step()

    def feed(self, rng, overflow: bool = False) -> None:
        """A new batch into the static inputs; ``overflow`` puts an inf in it."""
        x = rng.standard_normal((BATCH, WIDTH)).astype("float32")
        if overflow:
            x[0, 0] = np.inf
        self.x.set_value(x)
        self.y.set_value(rng.integers(0, CLASSES, BATCH).astype("int64"))

    def state(self) -> list:
        """Every value the step changes, as host arrays: parameters, masters, moments, scale."""
        arrays = [p.numpy() for p in self.model.parameters()]
        arrays += [m.numpy() for m in self.opt._master_weights.values()]
        for acc in self.opt._accumulators.values():
            arrays += [mt.backend.asnumpy(a) for a in acc.values()]
        sd = self.scaler.state_dict()
        arrays += [sd["scale"], np.array([sd["incr_count"], sd["decr_count"]])]
        return [np.array(a, copy=True) for a in arrays]  # (on the CPU numpy() is no copy)


def make_optimizer(name: str, params, scheduler):
    clip = nn.ClipGradByGlobalNorm(1.0)
    if name == "SGD":
        return mt.optimizer.SGD(scheduler, parameters=params, grad_clip=clip)
    if name == "Momentum":
        return mt.optimizer.Momentum(scheduler, 0.9, parameters=params, grad_clip=clip)
    if name == "Adam":
        return mt.optimizer.Adam(scheduler, parameters=params, grad_clip=clip)
    return mt.optimizer.AdamW(scheduler, parameters=params, grad_clip=clip, weight_decay=0.01)


def make_step(mode: str, optimizer: str, seed: int = 0, place=None) -> Step:
    """A fresh model, optimizer, scaler and scheduler for ``mode`` (see the module)."""
    mt.seed(seed)
    model = nn.Sequential(nn.Linear(WIDTH, 32), nn.ReLU(), nn.Linear(32, CLASSES))
    scheduler = mt.optimizer.lr.StepDecay(learning_rate=0.05, step_size=2, gamma=0.5)
    opt = make_optimizer(optimizer, model.parameters(), scheduler)
    if mode.startswith("O2"):
        model, opt = amp.decorate(models=model, optimizers=opt, level="O2")
    # A small incr_every_n_steps, so that the scale grows within a test, too.
    scaler = amp.GradScaler(init_loss_scaling=2.0**10, incr_every_n_steps=3)
    x = mt.zeros([BATCH, WIDTH], place=place)
    y = mt.zeros([BATCH], dtype="int64", place=place)
    accumulate = 2 if mode == "O2-acc" else 1
    return Step(model, opt, scaler, scheduler, x, y, mode, accumulate)
