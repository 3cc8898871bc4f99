"""The training case the distributed tests share: one model, one data stream, one step.

Used in-process by the tests (the single-process reference) and by ``dist/train_worker.py``
(the ranks), so both sides train exactly the same model on exactly the same numbers. The
parameters have fixed names (``fc0.w_0`` ...) so that optimizer checkpoints, which are keyed
by parameter name as in Paddle, load across processes.
"""

from __future__ import annotations

import itertools

import numpy as np

import minitorch_amp as mt
from minitorch_amp import amp, nn, optimizer
from minitorch_amp.nn.param_attr import ParamAttr

SIZES = (8, 32, 16, 4)  # input, hidden, hidden, output: 6 parameters of unequal sizes
GLOBAL_BATCH = 16
LR = 0.01
STEPS_ALL = range(4)  # the steps of a full run


def build(mode: str, seed: int = 0, clip: float | None = None):
    """``(model, optimizer, scaler)`` for ``mode`` 'fp32' or 'O2' (decorated, fp32 masters),
    with ``ClipGradByGlobalNorm(clip)`` when ``clip`` is given."""
    mt.seed(seed)
    layers = []
    for i, (a, b) in enumerate(itertools.pairwise(SIZES)):
        weight, bias = ParamAttr(name=f"fc{i}.w_0"), ParamAttr(name=f"fc{i}.b_0")
        layers += [nn.Linear(a, b, weight_attr=weight, bias_attr=bias), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    # L2 decay makes the update depend on the gradient's scale (plain Adam would not notice
    # a sum where an average belongs).
    grad_clip = None if clip is None else nn.ClipGradByGlobalNorm(clip)
    opt = optimizer.Adam(LR, parameters=model.parameters(), weight_decay=0.05, grad_clip=grad_clip)
    scaler = None
    if mode == "O2":
        model, opt = amp.decorate(model, opt, level="O2")
        scaler = amp.GradScaler(init_loss_scaling=1024.0, incr_every_n_steps=1000)
    return model, opt, scaler


def batch(step: int, rank: int | None = None, world_size: int = 1, size: int = GLOBAL_BATCH):
    """The global batch of ``step`` (the same on every rank), or rank ``rank``'s slice of it."""
    rng = np.random.default_rng(1000 + step)
    x = rng.standard_normal((size, SIZES[0])).astype("float32")
    y = rng.standard_normal((size, SIZES[-1])).astype("float32")
    if rank is not None:
        part = size // world_size
        x, y = x[rank * part : (rank + 1) * part], y[rank * part : (rank + 1) * part]
    return mt.to_tensor(x), mt.to_tensor(y)


def loss_of(model, x, y, mode: str):
    """Mean squared error, computed in float32 (under ``auto_cast`` O2 for 'O2')."""
    if mode == "O2":
        with amp.auto_cast(level="O2"):
            out = model(x)
        out = out.astype("float32")
    else:
        out = model(x)
    return ((out - y) ** 2).mean()


def step(model, opt, scaler, loss) -> None:
    """Backward (scaled under O2), update, clear."""
    if scaler is None:
        loss.backward()
        opt.step()
    else:
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    opt.clear_grad()


def train(model, opt, scaler, mode: str, steps, rank=None, world_size: int = 1) -> list:
    """Run ``steps`` (an iterable of step numbers); return the losses (floats)."""
    losses = []
    for s in steps:
        x, y = batch(s, rank, world_size)
        loss = loss_of(model, x, y, mode)
        losses.append(float(loss.numpy()))
        step(model, opt, scaler, loss)
    return losses


def params_of(model) -> dict:
    """``name -> float32 array`` of every parameter."""
    return {p.name: p.numpy().astype("float32") for p in model.parameters()}


def masters_of(opt) -> dict:
    """``name -> array`` of the fp32 master weights the (inner) optimizer holds."""
    inner = getattr(opt, "_inner_opt", opt)
    return {name: m.numpy() for name, m in inner._master_weights.items()}


def state_bytes(opt) -> tuple[int, int]:
    """(master-weight bytes, moment/accumulator bytes) this process's optimizer holds."""
    inner = getattr(opt, "_inner_opt", opt)
    masters = sum(m._data.nbytes for m in inner._master_weights.values())
    moments = sum(a.nbytes for state in inner._accumulators.values() for a in state.values())
    return masters, moments
