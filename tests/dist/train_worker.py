"""A rank of the distributed training tests: ``mpiexec -n 2 python train_worker.py SCENARIO...``.

Each scenario trains ``dist_training``'s model on this rank's slice of the batches and saves
what the test compares (``test_distributed_training.py``), keys prefixed by the scenario.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from dist_training import (  # noqa: E402
    STEPS_ALL,
    batch,
    build,
    loss_of,
    masters_of,
    params_of,
    state_bytes,
    step,
    train,
)
from mpi_run import save_result  # noqa: E402

import minitorch_amp as mt  # noqa: E402
from minitorch_amp import distributed as dist  # noqa: E402
from minitorch_amp.backend import comm as _comm  # noqa: E402
from minitorch_amp.backend.cast_counter import cast_counts, reset_cast_counts  # noqa: E402


def wrap(model, opt, scaler, how: str, small: bool = False):
    """Wrap for ``how`` ('dp', 'os', 'os_g'); ``small``: 256-byte buckets and chunks, so
    that gradients and parameters travel in many pieces."""
    if how == "dp":
        return dist.DataParallel(model), opt, scaler
    size = 256 if small else 2**23
    return dist.sharding.group_sharded_parallel(model, opt, how, scaler, buffer_max_size=size)


def save_params(out: dict, prefix: str, model, opt=None) -> None:
    for name, value in params_of(model).items():
        out[f"{prefix}param:{name}"] = value
    if opt is not None:
        for name, value in masters_of(opt).items():
            out[f"{prefix}master:{name}"] = value


def plain(prefix: str, out: dict, **values) -> None:
    out.update({f"{prefix}{k}": v for k, v in values.items()})


def scenario_train(out: dict, how: str, mode: str, variant: str = "") -> None:
    """DataParallel or sharded training: params, masters, memory, casts and bytes sent.

    ``variant``: '' , 'clip' (a global-norm clip of 0.05) or 'small' (small buckets)."""
    prefix = f"{how}-{mode}{'+' + variant if variant else ''}/"
    rank, size = dist.get_rank(), dist.get_world_size()
    clip = 0.05 if variant == "clip" else None
    model, opt, scaler = wrap(*build(mode, clip=clip), how, small=variant == "small")
    world = _comm.get_world()
    before = Counter(world.stats)
    reset_cast_counts()
    grads_held = []
    losses = []
    for s in STEPS_ALL:
        x, y = batch(s, rank, size)
        loss = loss_of(model, x, y, mode)
        losses.append(float(loss.numpy()))
        if scaler is None:
            loss.backward()
        else:
            scaler.scale(loss).backward()
        grads_held.append(sorted(p.name for p in model.parameters() if p.grad is not None))
        if scaler is None:
            opt.step()
        else:
            scaler.step(opt)
            scaler.update()
        opt.clear_grad()
    sent = {f"{op}:{dtype}": n for (op, dtype), n in (Counter(world.stats) - before).items()}
    owned = sorted(p.name for p in opt._parameter_list)
    masters, moments = state_bytes(opt)
    save_params(out, prefix, model, opt)
    plain(prefix, out, losses=losses, sent=sent, owned=owned, casts=cast_counts(),
          master_bytes=masters, moment_bytes=moments, grads_held=grads_held,
          scale=scaler.get_loss_scaling() if scaler else None)  # fmt: skip


def scenario_inf(out: dict, how: str) -> None:
    """Rank 1 finds an inf in one gradient at step 1: every rank must skip that step."""
    prefix = f"inf-{how}/"
    rank, size = dist.get_rank(), dist.get_world_size()
    model, opt, scaler = wrap(*build("O2"), how)
    train(model, opt, scaler, "O2", [0], rank, size)
    x, y = batch(1, rank, size)
    scaler.scale(loss_of(model, x, y, "O2")).backward()
    if rank == 1:
        victim = next(p for p in opt._parameter_list if p.grad is not None)
        victim.grad._data.reshape(-1)[0] = np.inf
    scale_before = scaler.get_loss_scaling()
    save_params(out, prefix + "before:", model, opt)
    scaler.step(opt)
    scaler.update()
    opt.clear_grad()
    save_params(out, prefix + "after:", model, opt)
    plain(prefix, out, scale_before=scale_before, scale_after=scaler.get_loss_scaling())


def scenario_accumulate(out: dict) -> None:
    """Two micro-batches per step, the first under no_sync: one all-reduce per step."""
    prefix = "accum/"
    rank, size = dist.get_rank(), dist.get_world_size()
    model, opt, _ = build("fp32")
    model = dist.DataParallel(model)
    unsynced = []
    for s in STEPS_ALL:
        x, y = batch(s, rank, size)
        half = x.shape[0] // 2
        with model.no_sync():
            (loss_of(model, x[:half], y[:half], "fp32") / 2).backward()
        unsynced.append(model._layers[0].weight.grad.numpy().copy())
        (loss_of(model, x[half:], y[half:], "fp32") / 2).backward()
        opt.step()
        opt.clear_grad()
    save_params(out, prefix, model)
    out[prefix + "unsynced_grad"] = np.stack(unsynced)


def scenario_checkpoint(out: dict, folder: Path) -> None:
    """Train 2 steps sharded, save (shards and the gathered full state), train 2 more; then
    rebuild from the shards and train the same 2 steps again."""
    prefix = "ckpt/"
    rank, size = dist.get_rank(), dist.get_world_size()
    model, opt, scaler = wrap(*build("O2"), "os_g")
    train(model, opt, scaler, "O2", [0, 1], rank, size)
    dist.sharding.save_group_sharded_model(model, str(folder), opt)
    mt.save(opt.state_dict(), str(folder / f"shard{rank}.pdopt"))
    mt.save(model.state_dict(), str(folder / f"model{rank}.pdparams"))
    scaler_state = scaler.state_dict()
    if rank == 0:
        mt.save({"scale": scaler_state["scale"]}, str(folder / "scaler.pdparams"))
    train(model, opt, scaler, "O2", [2, 3], rank, size)
    save_params(out, prefix + "continued:", model, opt)
    # A new model and optimizer, restored from this rank's files.
    model2, opt2, scaler2 = build("O2", seed=123)  # different init: the checkpoint must win
    model2.set_state_dict(mt.load(str(folder / f"model{rank}.pdparams")))
    scaler2.load_state_dict(scaler_state)
    model2, opt2, scaler2 = wrap(model2, opt2, scaler2, "os_g")
    opt2.set_state_dict(mt.load(str(folder / f"shard{rank}.pdopt")))
    train(model2, opt2, scaler2, "O2", [2, 3], rank, size)
    save_params(out, prefix + "restored:", model2, opt2)


def scenario_mismatch(out: dict) -> None:
    """Rank 1 builds a wider model: wrapping fails on every rank, and changes nothing."""
    from minitorch_amp import nn, optimizer

    rank = dist.get_rank()
    model = nn.Linear(4, 4 + rank)
    opt = optimizer.Adam(0.1, parameters=model.parameters())
    errors = []
    for wrap_it in (
        lambda: dist.DataParallel(model),
        lambda: dist.sharding.group_sharded_parallel(model, opt, "os_g"),
    ):
        try:
            wrap_it()
        except ValueError as exc:
            errors.append(str(exc))
    plain("mismatch/", out, errors=errors, n_params=len(opt._parameter_list))


def main() -> None:
    dist.init_parallel_env(timeout=60)
    out: dict = {}
    folder = Path(os.environ["MT_RESULTS_DIR"]) / "checkpoint"
    for name in sys.argv[1:]:
        if name.startswith("inf-"):
            scenario_inf(out, name.split("-", 1)[1])
        elif name == "accum":
            scenario_accumulate(out)
        elif name == "mismatch":
            scenario_mismatch(out)
        elif name == "ckpt":
            scenario_checkpoint(out, folder)
        else:  # e.g. 'os_g-O2', 'os_g-O2+clip', 'os_g-O2+small'
            name, _, variant = name.partition("+")
            how, mode = name.rsplit("-", 1)
            scenario_train(out, how, mode, variant)
    arrays = {k: v for k, v in out.items() if isinstance(v, np.ndarray)}
    values = {k: v for k, v in out.items() if not isinstance(v, np.ndarray)}
    save_result(dist.get_rank(), **arrays, **values)


if __name__ == "__main__":
    main()
