"""A rank of the internal-check tests: ``mpiexec -n 2 python check_worker.py SCENARIO...``.

In every scenario rank 1 runs a slightly different program from rank 0, so that one of the
collectives the library makes on its own (gradient buckets, found_inf, the model check at
wrap time, a sharded step) meets a different collective on the other rank. Each rank saves
the error it got, whether its parameters changed, and the result of one more all_reduce
(the world must still work: nothing unpaired was sent).

* ``level``: rank 0 shards at level ``'os'``, rank 1 at ``'os_g'``; then one training step.
* ``fewer_batches``: DataParallel; rank 1 has one batch fewer, then both all_reduce a metric.
* ``no_scaler``: sharded O2; rank 0 steps through its GradScaler, rank 1 calls ``opt.step()``.
* ``wrap_vs_metric``: rank 0 wraps its model in DataParallel while rank 1 all_reduces a metric.
* ``bad_part``: rank 0's reduce_scatter list holds a float16 tensor (refused on rank 0 only).
* ``bad_src``: every rank passes ``src='0'`` to broadcast (refused on every rank alike).
* ``shard_order``: rank 1's optimizer lists the model's parameters in reverse, then shards.
* ``two_backward``: DataParallel; two backwards of one forward (``retain_graph=True``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from dist_training import batch, build, loss_of, masters_of, params_of, step
from mpi_run import save_result

import minitorch_amp as mt
from minitorch_amp import distributed as dist


def attempt(fn) -> dict:
    """Run ``fn``; report the exception it raised (type, message), or None."""
    try:
        fn()
    except Exception as exc:
        return {"type": type(exc).__name__, "msg": str(exc)}
    return {"type": None, "msg": ""}


def snapshot(model, opt) -> dict:
    return {**params_of(model), **{"master:" + k: v for k, v in masters_of(opt).items()}}


def unchanged(before: dict, after: dict) -> bool:
    return before.keys() == after.keys() and all(
        np.array_equal(before[k], after[k]) for k in before
    )


def still_works() -> list:
    x = mt.ones([2])
    dist.all_reduce(x)
    return x.numpy().tolist()


def scenario_level(rank: int, size: int) -> dict:
    model, opt, scaler = build("O2")
    level = ("os", "os_g")[rank]
    before = snapshot(model, opt)

    def wrap_and_train():
        wrapped, sharded, sc = dist.sharding.group_sharded_parallel(model, opt, level, scaler)
        x, y = batch(0, rank, size)
        step(wrapped, sharded, sc, loss_of(wrapped, x, y, "O2"))

    report = attempt(wrap_and_train)
    report["unchanged"] = unchanged(before, snapshot(model, opt))
    report["sharded"] = len(opt._parameter_list) != len(model.parameters())
    return report


def scenario_fewer_batches(rank: int, size: int) -> dict:
    model, opt, _ = build("fp32")
    model = dist.DataParallel(model)
    batches = 2 - rank  # rank 1 has one batch fewer
    losses = []

    def epoch():
        for s in range(batches):
            x, y = batch(s, rank, size)
            loss = loss_of(model, x, y, "fp32")
            losses.append(float(loss.numpy()))
            step(model, opt, None, loss)
        metric = mt.to_tensor([sum(losses)])
        dist.all_reduce(metric)

    before = snapshot(model, opt)
    report = attempt(epoch)
    after = snapshot(model, opt)
    # rank 0's second step never ran: both ranks hold the model of the first, shared step
    report["params"] = {k: v.tolist() for k, v in after.items()}
    report["changed"] = not unchanged(before, after)
    return report


def scenario_no_scaler(rank: int, size: int) -> dict:
    model, opt, scaler = build("O2")
    model, opt, scaler = dist.sharding.group_sharded_parallel(model, opt, "os_g", scaler)
    x, y = batch(0, rank, size)
    scaler.scale(loss_of(model, x, y, "O2")).backward()
    before = snapshot(model, opt)
    report = attempt(lambda: scaler.step(opt) if rank == 0 else opt.step())
    report["unchanged"] = unchanged(before, snapshot(model, opt))
    return report


def scenario_wrap_vs_metric(rank: int, size: int) -> dict:
    model, opt, _ = build("fp32")
    before = snapshot(model, opt)
    if rank == 0:
        report = attempt(lambda: dist.DataParallel(model))
    else:
        report = attempt(lambda: dist.all_reduce(mt.to_tensor([1.5])))
    report["unchanged"] = unchanged(before, snapshot(model, opt))
    return report


def scenario_bad_part(rank: int, size: int) -> dict:
    out = mt.zeros([2])
    parts = [mt.ones([2]) for _ in range(size)]
    if rank == 0:
        parts[-1] = parts[-1].astype("float16")
    report = attempt(lambda: dist.reduce_scatter(out, parts))
    report["unchanged"] = out.numpy().tolist() == [0.0, 0.0]
    return report


def scenario_bad_src(rank: int, size: int) -> dict:
    x = mt.to_tensor([float(rank), 1.0])
    report = attempt(lambda: dist.broadcast(x, src="0"))
    report["unchanged"] = x.numpy().tolist() == [float(rank), 1.0]
    return report


def scenario_shard_order(rank: int, size: int) -> dict:
    model, _, _ = build("fp32")
    params = list(model.parameters())
    opt = mt.optimizer.SGD(0.1, parameters=params if rank == 0 else params[::-1])
    before = snapshot(model, opt)
    report = attempt(lambda: dist.sharding.group_sharded_parallel(model, opt, "os"))
    report["unchanged"] = unchanged(before, snapshot(model, opt))
    report["sharded"] = len(opt._parameter_list) != len(params)
    return report


def scenario_two_backward(rank: int, size: int) -> dict:
    model, _, _ = build("fp32")
    model = dist.DataParallel(model)
    x, y = batch(0, rank, size)
    loss = loss_of(model, x, y, "fp32")
    loss.backward(retain_graph=True)
    first = {p.name: p.grad.numpy().copy() for p in model.parameters()}
    report = attempt(loss.backward)
    report["first"] = {k: v.tolist() for k, v in first.items()}
    report["second"] = {p.name: p.grad.numpy().tolist() for p in model.parameters()}
    return report


SCENARIOS = {
    "two_backward": scenario_two_backward,
    "shard_order": scenario_shard_order,
    "bad_part": scenario_bad_part,
    "bad_src": scenario_bad_src,
    "level": scenario_level,
    "fewer_batches": scenario_fewer_batches,
    "no_scaler": scenario_no_scaler,
    "wrap_vs_metric": scenario_wrap_vs_metric,
}


def main(names: list) -> None:
    env = dist.init_parallel_env()
    out: dict = {}
    for name in names:
        report = SCENARIOS[name](env.rank, env.world_size)
        report["next_all_reduce"] = still_works()
        out[name] = report
    save_result(env.rank, **out)


if __name__ == "__main__":
    main(sys.argv[1:])
