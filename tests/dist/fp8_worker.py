"""A rank of the FP8 data-parallel test: ``mpiexec -n 2 python fp8_worker.py``.

Every rank wraps the same model in ``DataParallel`` and trains a few FP8 steps under
delayed scaling on its own slice of each batch; rank 1's slices are ten times larger, so
each rank alone would see other amaxes. After the first step rank 0 alone evaluates a copy
of the model under ``DelayedScaling(reduce_amax=False)``: no amax reduction, so nothing waits
for rank 1, and the copy's scaling states are its own. It saves its scaling states, its
parameters and the absolute maximum of each of its input slices (``test_fp8_distributed.py``
compares them).
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from mpi_run import save_result

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp import distributed as dist

STEPS = 3
RECIPE = amp.DelayedScaling(amax_history_len=4)


def main() -> None:
    env = dist.init_parallel_env()
    rank = env.rank
    mt.seed(0)
    model = dist.DataParallel(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)))
    opt = mt.optimizer.SGD(learning_rate=0.05, parameters=model.parameters())
    out = {}
    for step in range(STEPS):
        rng = np.random.default_rng(100 * step + rank)
        x = rng.normal(0, 1, (4, 8)).astype("float32") * (10.0 if rank == 1 else 1.0)
        out[f"input_amax:{step}"] = np.array([np.abs(x).max()], "float32")
        with amp.fp8_autocast(recipe=RECIPE):
            y = model(mt.to_tensor(x))
        (y * y).mean().backward()
        opt.step()
        opt.clear_grad()
        if step == 0 and rank == 0:  # an evaluation on this rank alone
            judge = copy.deepcopy(model._layers)
            local = amp.DelayedScaling(amax_history_len=4, reduce_amax=False)
            with amp.fp8_autocast(recipe=local), mt.no_grad():
                out["rank 0 alone"] = judge(mt.to_tensor(x * 100.0)).numpy()
    for op in ("SUM", "MAX"):  # an FP8 tensor's reduction: in float32, rounded once
        t = mt.to_tensor(np.array([1.5, -3.0, 13.0 * (rank + 1)], "float32")).astype(
            "float8_e4m3fn"
        )
        dist.all_reduce(t, getattr(dist.ReduceOp, op))
        out[f"fp8_all_reduce:{op}"] = t.numpy().astype("float32")
    for name, param in model.named_parameters():
        out[f"param:{name}"] = param.numpy()
        meta = amp.fp8_meta(param)
        if meta is not None:
            for role in ("input", "weight", "grad"):
                state = getattr(meta, role)
                out[f"{name}.{role}.scale"] = np.array(state.scale)
                out[f"{name}.{role}.amax_history"] = np.array(state.amax_history)
    save_result(rank, **out)


if __name__ == "__main__":
    main()
