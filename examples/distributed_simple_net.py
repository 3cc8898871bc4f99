"""Train SimpleNet data-parallel on N ranks, with optimizer sharding and optimize-cast.

Every rank builds the same SimpleNet (stacked Linear + ReLU), draws the same seeded global
batch and trains on its own slice of it. The gradients are averaged over the ranks after
each backward. With ``--sharding os`` or ``os_g`` each rank also keeps the fp32 master
weights and Adam moments of its own share of the parameters only, updates that share, and
broadcasts the float16 result (see docs/distributed.md).

    mpiexec -n 2 python examples/distributed_simple_net.py                  # O2, sharding os_g
    mpiexec -n 4 python examples/distributed_simple_net.py --sharding os    # moments sharded
    mpiexec -n 2 python examples/distributed_simple_net.py --sharding none  # DataParallel
    mpiexec -n 2 python examples/distributed_simple_net.py --mode fp32 --sharding none
    python -m minitorch_amp.distributed.launch --nproc_per_node 2 examples/distributed_simple_net.py
    python examples/distributed_simple_net.py                               # one rank, no MPI

Rank 0 prints, for every rank, the bytes of parameters, fp32 master weights, optimizer
moments, gradients and communication buffers it holds, and the bytes it sends per step by
collective and dtype;
``--report out.json`` writes the same numbers as JSON. MPI comes with the ``dist`` extra:
``python -m pip install -e ".[dist]"`` from the repository root.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout too

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp import distributed as dist
from minitorch_amp.backend import comm as _comm
from minitorch_amp.utils.progress import progress

MODES = ("fp32", "O2")
SHARDING = ("none", "os", "os_g")


class SimpleNet(nn.Layer):
    """``layers`` Linear layers ``width -> width``, a ReLU between two of them."""

    def __init__(self, width: int, layers: int):
        super().__init__()
        stack = []
        for i in range(layers):
            stack.append(nn.Linear(width, width))
            if i < layers - 1:
                stack.append(nn.ReLU())
        self.body = nn.Sequential(*stack)

    def forward(self, x):
        return self.body(x)


def build(width: int, layers: int, mode: str, sharding: str, lr: float = 1e-3):
    """The model, optimizer and scaler, prepared in the order that matters.

    1. ``amp.decorate(level='O2')``: float16 parameters, fp32 masters in the optimizer.
    2. ``GradScaler``: in a world of several ranks it ORs found_inf over all of them.
    3. ``group_sharded_parallel`` (or ``DataParallel``): wraps the decorated model, so the
       parameters broadcast from rank 0 at wrap time are already the float16 ones.
    """
    model = SimpleNet(width, layers)
    opt = mt.optimizer.Adam(
        learning_rate=lr,
        parameters=model.parameters(),
        grad_clip=nn.ClipGradByGlobalNorm(1.0),  # sharded: the norm is summed over the ranks
    )
    if mode == "O2":
        model, opt = amp.decorate(models=model, optimizers=opt, level="O2")
    scaler = amp.GradScaler(enable=mode == "O2", init_loss_scaling=1024)
    if sharding == "none":
        model = dist.DataParallel(model)
    else:
        model, opt, scaler = dist.sharding.group_sharded_parallel(model, opt, sharding, scaler)
    return model, opt, scaler


def global_batch(batch: int, width: int):
    """The same seeded global batch on every rank (each calls the generator the same way)."""
    return mt.randn([batch, width]), mt.randn([batch, width])


def my_slice(tensor, rank: int, world_size: int):
    """Rows ``rank * b ... (rank + 1) * b`` of the global batch, ``b = batch / world_size``."""
    b = tensor.shape[0] // world_size
    return tensor[rank * b : (rank + 1) * b]


def state_bytes(model, opt) -> dict:
    """Bytes this rank holds in parameters, fp32 master weights and optimizer moments.

    Sharded, the inner optimizer (``opt._inner_opt``) sees only this rank's parameters, so
    its masters and moments are this rank's share. Moments are every accumulator (Adam's
    ``moment1``, ``moment2`` and the two beta powers).
    """
    inner = getattr(opt, "_inner_opt", opt)
    params = model.parameters()
    return {
        "params": sum(p._data.nbytes for p in params),
        "params_dtype": sorted({str(p.dtype) for p in params}),
        "master_weights": sum(m._data.nbytes for m in inner._master_weights.values()),
        "moments": sum(a.nbytes for s in inner._accumulators.values() for a in s.values()),
    }


def grad_bytes(model) -> int:
    """Bytes of the gradients held (after the sync, ``os_g`` drops those others own)."""
    return sum(p.grad._data.nbytes for p in model.parameters() if p.grad is not None)


def buffer_bytes(model, opt) -> int:
    """Bytes of the staging buffers the communication keeps from step to step.

    The gradient buckets are float32 (the sum over ranks is taken in float32), so they are
    twice the float16 gradients; sharded, each rank also keeps a packed float16 copy of
    every owner's parameters to broadcast into.
    """
    buckets = getattr(getattr(model, "_grad_sync", None), "_buffers", {})
    packed = getattr(opt, "_buffers", {}) if hasattr(opt, "_inner_opt") else {}
    return sum(b.nbytes for b in [*buckets.values(), *packed.values()])


def per_step(before: Counter, after: Counter, steps: int) -> dict:
    """``{collective: {dtype: bytes sent per step}}`` from two snapshots of ``comm.stats``."""
    out: dict = {}
    for (collective, dtype), nbytes in sorted((after - before).items()):
        out.setdefault(collective, {})[dtype] = nbytes / steps
    return out


def train(args) -> dict:
    """Train, and return this rank's measurements."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    mt.seed(args.seed)  # the same model on every rank (rank 0's is broadcast anyway)
    mt.device.reset_max_memory_allocated()
    model, opt, scaler = build(args.width, args.layers, args.mode, args.sharding)
    mse = nn.MSELoss()
    stats = _comm.get_world().stats
    before = stats.copy()  # after the wrap-time broadcast: count the steps only
    start = time.perf_counter()
    steps = range(args.steps)
    for _ in progress(steps, desc=f"{args.mode} steps", disable=None if rank == 0 else True):
        x, y = global_batch(args.batch, args.width)
        x, y = my_slice(x, rank, world_size), my_slice(y, rank, world_size)
        with amp.auto_cast(enable=args.mode == "O2", level="O2"):
            loss = mse(model(x), y)
        scaler.scale(loss).backward()  # the grads are averaged (or reduce-scattered) here
        grads = grad_bytes(model)  # after the sync: under os_g, only this rank's own
        scaler.step(opt)  # clip, update the owned fp32 masters, write fp16, broadcast
        scaler.update()
        opt.clear_grad()
    seconds = (time.perf_counter() - start) / args.steps
    comm_per_step = per_step(before, stats, args.steps)
    # The final loss on the whole global batch, computed by each rank alone: equal numbers
    # mean the ranks hold equal models.
    x, y = global_batch(args.batch, args.width)
    with mt.no_grad(), amp.auto_cast(enable=args.mode == "O2", level="O2"):
        final_loss = mse(model(x), y).item()
    return {
        "rank": rank,
        "bytes": {**state_bytes(model, opt), "grads": grads, "buffers": buffer_bytes(model, opt)},
        "comm_per_step": comm_per_step,
        "peak_tensor_bytes": mt.device.max_memory_allocated(),
        "seconds_per_step": seconds,
        "final_loss": final_loss,
    }


def fmt(nbytes: float) -> str:
    return f"{nbytes:,.0f}"


def print_table(config: dict, ranks: list[dict]) -> None:
    """One table of memory per rank, one of bytes sent per step per rank."""
    print(
        f"SimpleNet {config['layers']} x {config['width']}, {config['mode']}, sharding "
        f"{config['sharding']}, {config['world_size']} rank(s) ({config['backend']}), "
        f"global batch {config['batch']} ({config['batch'] // config['world_size']} per rank), "
        f"{config['steps']} steps\n"
    )
    print("bytes held after the gradient sync; peak = tensor storage (CPU) or pool (GPU)")
    header = ("rank", "params", "masters", "moments", "grads", "buffers", "peak", "s/step")
    print("".join(f"{h:>12}" for h in header) + f"{'final loss':>14}")
    for r in ranks:
        b = r["bytes"]
        cells = (r["rank"], b["params"], b["master_weights"], b["moments"], b["grads"])
        cells = [*map(fmt, cells), fmt(b["buffers"]), fmt(r["peak_tensor_bytes"])]
        cells.append(f"{r['seconds_per_step']:.3f}")
        print("".join(f"{c:>12}" for c in cells) + f"{r['final_loss']:>14.8f}")

    print("\nbytes sent per step, by collective and dtype on the wire")
    rows = sorted({(c, d) for r in ranks for c, by in r["comm_per_step"].items() for d in by})
    print(f"{'collective':<24}" + "".join(f"{'rank ' + str(r['rank']):>12}" for r in ranks))
    for collective, dtype in rows:
        cells = [r["comm_per_step"].get(collective, {}).get(dtype, 0) for r in ranks]
        print(f"{collective + ' ' + dtype:<24}" + "".join(f"{fmt(c):>12}" for c in cells))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--mode", default="O2", choices=MODES, help="precision")
    parser.add_argument("--sharding", default="os_g", choices=SHARDING, help="what is sharded")
    parser.add_argument("--width", type=int, default=256, help="width of every layer")
    parser.add_argument("--layers", type=int, default=4, help="Linear + ReLU layers")
    parser.add_argument("--batch", type=int, default=64, help="global batch, split over ranks")
    parser.add_argument("--steps", type=int, default=5, help="training steps")
    parser.add_argument("--seed", type=int, default=0, help="weights and data")
    parser.add_argument("--report", type=Path, help="rank 0 writes the measurements as JSON")
    args = parser.parse_args(argv)
    for name in ("width", "layers", "batch", "steps"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")

    env = dist.init_parallel_env()  # not under mpiexec: a world of one
    if args.batch % env.world_size:
        parser.error(f"--batch {args.batch} does not split evenly over {env.world_size} ranks")
    mine = train(args)
    ranks = _comm.get_world().gather_object(mine, root=0)  # a list on rank 0, else None
    if env.rank != 0:
        return
    config = {**vars(args), "report": None, "world_size": env.world_size}
    config["backend"] = dist.get_backend()
    print_table(config, ranks)
    if args.report is not None:
        args.report.write_text(json.dumps({"config": config, "ranks": ranks}, indent=1))


if __name__ == "__main__":
    main()
