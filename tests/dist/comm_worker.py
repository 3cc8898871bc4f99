"""A rank of the communication tests: ``mpiexec -n N python comm_worker.py GROUP...``.

Every rank makes its inputs from its rank number, runs the collectives of each GROUP and
saves what it contributed (``*_in``) next to what it got back (``*_out``);
``test_distributed_comm.py`` computes the float64 NumPy references from all ranks' inputs.

Groups that run together in one launch: ``collectives``, ``errors``, ``launch``.
Failure modes, one per launch (rank 1 misbehaves, rank 0 calls ``all_reduce``):

* ``die``: rank 1 ends with ``os._exit(3)`` before the collective.
* ``raise``: rank 1 raises an exception that nobody catches.
* ``skip_exit``: rank 1 leaves cleanly (``sys.exit(0)``) without calling the collective.
* ``skip_exit_error``: the same with ``sys.exit(3)``.
* ``skip_return``: rank 1's script returns normally without calling the collective.
* ``skip_sleep``: rank 1 hangs (sleeps) instead of calling the collective.

In the ``skip_*`` modes rank 0 catches the ``CollectiveTimeoutError`` (``RankExitedError``
when rank 1 left), saves it, and ends its script normally.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from mpi_run import save_result

import minitorch_amp as mt
from minitorch_amp import distributed as dist
from minitorch_amp.autograd.tensor import Tensor
from minitorch_amp.backend import comm as _comm
from minitorch_amp.backend import device

OPS = {"SUM": dist.ReduceOp.SUM, "MAX": dist.ReduceOp.MAX, "MIN": dist.ReduceOp.MIN,
       "PROD": dist.ReduceOp.PROD, "AVG": dist.ReduceOp.AVG}  # fmt: skip
DTYPES = ("float32", "float64", "int32", "int64", "float16")
BYTE_KINDS = ("float32", "float16_bits", "bool", "int64_scalar")  # broadcast / all_gather
FAILURES = ("die", "raise", "skip_exit", "skip_exit_error", "skip_return", "skip_sleep")


# ---- inputs ------------------------------------------------------------------------------
def inputs(rank: int, dtype: str, op: str, shape=(3, 4)) -> np.ndarray:
    """Rank ``rank``'s contribution; the reductions of these are exact in float32.

    Floats are multiples of 2**-9 below 4 (exact in float16); PROD gets small factors so the
    product of 4 ranks stays exact. float16 SUM/AVG also carry two edge cases: element 0 is
    2048 on rank 0 and 1 elsewhere (rounding once differs from rounding after every partial
    sum) and element 1 is 60000 everywhere (the float16 sum overflows, the float32 average
    does not).
    """
    kinds = (*DTYPES, "bool")
    rng = np.random.default_rng([rank, kinds.index(dtype), list(OPS).index(op)])
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("int"):
        values = rng.integers(-3, 4, size=shape) if op == "PROD" else rng.integers(-50, 50, shape)
    elif op == "PROD":
        values = rng.choice([-2.0, -1.5, -1.0, -0.5, 0.5, 1.0, 1.5, 2.0], size=shape)
    else:
        values = rng.integers(-2048, 2048, size=shape) / 512
    values = values.astype(dtype)
    if dtype == "float16" and op in ("SUM", "AVG"):
        flat = values.reshape(-1)
        flat[0] = 2048.0 if rank == 0 else 1.0
        flat[1] = 60000.0
    return values


def byte_payload(kind: str, rank: int, salt: int) -> np.ndarray:
    """Payloads that must arrive bit for bit (float16 random bit patterns: NaNs, -0, inf)."""
    rng = np.random.default_rng([rank, salt, BYTE_KINDS.index(kind)])
    if kind == "float32":
        return rng.standard_normal((2, 3)).astype(np.float32)
    if kind == "float16_bits":
        bits = rng.integers(0, 2**16, size=16, dtype=np.uint16)
        bits[:3] = (0x7E01, 0x8000, 0x0001)  # NaN with a payload, -0.0, the smallest subnormal
        return bits.view(np.float16)
    if kind == "bool":
        return rng.random(7) < 0.5
    return np.array(rng.integers(-(2**62), 2**62), dtype=np.int64)  # a 0-d tensor


def tensor(array: np.ndarray) -> Tensor:
    """A tensor on this rank's current device holding ``array``'s exact bits."""
    return mt.to_tensor(array.copy())


def host(t: Tensor) -> np.ndarray:
    return t.numpy().copy()


# ---- happy paths -------------------------------------------------------------------------
def group_collectives(rank: int, size: int) -> dict:
    out: dict = {"places": []}

    def record_place(t: Tensor) -> None:
        out["places"].append(str(t.place))

    # all_reduce: every op on every dtype; bool with MAX (or), MIN (and), SUM, PROD
    for dtype in DTYPES:
        for name, op in OPS.items():
            x = tensor(inputs(rank, dtype, name))
            out[f"ar_{dtype}_{name}_in"] = host(x)
            dist.all_reduce(x, op=op)
            out[f"ar_{dtype}_{name}_out"] = host(x)
            record_place(x)
    for name in ("MAX", "MIN", "SUM", "PROD"):
        x = tensor(inputs(rank, "bool", name))
        out[f"ar_bool_{name}_in"] = host(x)
        dist.all_reduce(x, op=OPS[name])
        out[f"ar_bool_{name}_out"] = host(x)

    # non-contiguous tensors: the reduction lands in the memory they view
    xp = device.xp_for(device.current_place())
    base = xp.asarray(inputs(rank, "float32", "SUM", (4, 6)))
    out["nc_T_in"] = device.asnumpy(base).copy()
    dist.all_reduce(Tensor._wrap(base.T), op=dist.ReduceOp.SUM)  # a transposed view
    out["nc_T_out"] = device.asnumpy(base).copy()
    base = xp.asarray(inputs(rank, "float16", "MAX", (6, 4)))
    out["nc_step_in"] = device.asnumpy(base).copy()
    dist.all_reduce(Tensor._wrap(base[::2, 1:]), op=dist.ReduceOp.MAX)  # every other row
    out["nc_step_out"] = device.asnumpy(base).copy()

    # broadcast from every src: every rank ends with src's bits
    for src in range(size):
        for kind in BYTE_KINDS:
            x = tensor(byte_payload(kind, rank, salt=src))
            out[f"bc_{kind}_{src}_in"] = host(x)
            dist.broadcast(x, src=src)
            out[f"bc_{kind}_{src}_out"] = host(x)
            record_place(x)

    # all_gather: tensor_list[q] is rank q's tensor
    for kind in BYTE_KINDS:
        x = tensor(byte_payload(kind, rank, salt=100))
        gathered: list = []
        dist.all_gather(gathered, x)
        out[f"ag_{kind}_in"] = host(x)
        out[f"ag_{kind}_out"] = np.stack([host(t) for t in gathered])
        record_place(gathered[-1])

    # reduce_scatter: rank r gets the reduction over ranks of tensor_list[r]
    for dtype, name in (("float32", "SUM"), ("float16", "SUM"), ("float16", "AVG"),
                        ("float64", "MAX"), ("int64", "AVG"), ("int32", "PROD"),
                        ("bool", "MAX")):  # fmt: skip
        parts = inputs(rank, dtype, name, (size, 2, 3))
        result = tensor(np.zeros((2, 3), dtype))
        dist.reduce_scatter(result, [tensor(p) for p in parts], op=OPS[name])
        out[f"rs_{dtype}_{name}_in"] = parts
        out[f"rs_{dtype}_{name}_out"] = host(result)
        record_place(result)

    # barrier: nobody leaves before the last rank arrives (the last one comes 0.8 s late)
    if rank == size - 1:
        time.sleep(0.8)
    start = time.monotonic()
    out["barrier_returns"] = repr(dist.barrier())
    out["barrier_waited"] = time.monotonic() - start

    # sync_op=False: a task whose wait() says done; the data is already there
    x = tensor(np.full(3, rank + 1.0, np.float32))
    task = dist.all_reduce(x, sync_op=False)
    out["async_wait"], out["async_completed"] = task.wait(), task.is_completed()
    out["async_out"] = host(x)
    y = tensor(np.ones(2, np.float32))
    out["sync_returns"] = repr(dist.all_reduce(y))
    tasks = [
        dist.broadcast(y, src=0, sync_op=False),
        dist.all_gather([], y, sync_op=False),
        dist.reduce_scatter(y, [y] * size, sync_op=False),
    ]
    out["async_others"] = [t.wait() for t in tasks]

    # Comm.stats: bytes this rank puts on the wire, by collective and wire dtype
    comm = _comm.get_world()
    comm.stats.clear()
    dist.all_reduce(tensor(np.ones(5, np.float32)))
    dist.all_reduce(tensor(np.ones(6, np.float16)))  # travels as float32
    dist.all_reduce(tensor(np.ones(3, np.bool_)), op=dist.ReduceOp.MAX)  # travels as uint8
    dist.broadcast(tensor(np.ones(4, np.float64)), src=0)  # counted on the root only
    dist.all_gather([], tensor(np.ones(2, np.int32)))
    dist.reduce_scatter(tensor(np.ones(3, np.float16)), [tensor(np.ones(3, np.float16))] * size)
    out["stats"] = sorted([op, dtype, count] for (op, dtype), count in comm.stats.items())

    # gather_object: root gets every rank's object in rank order, the others None
    for root in (0, size - 1):
        got = comm.gather_object({"rank": rank, "payload": list(range(rank))}, root=root)
        out[f"gather_object_root{root}"] = got

    # the environment as this rank sees it
    world = _comm.get_world()
    env = dist.init_parallel_env()  # a second call returns the same world
    out["env"] = {
        "rank": dist.get_rank(),
        "world_size": dist.get_world_size(),
        "backend": dist.get_backend(),
        "env_rank": env.rank,
        "env_nranks": env.nranks,
        "local_rank": env.local_rank,
        "repr": repr(env),
        "same_world": _comm.get_world() is world,
        "initialized": dist.is_initialized(),
    }
    return out


# ---- bad input ---------------------------------------------------------------------------
def attempt(fn) -> dict:
    """Run ``fn``; report the exception it raised (type, message), or None."""
    try:
        fn()
    except Exception as exc:
        return {"type": type(exc).__name__, "msg": str(exc)}
    return {"type": None, "msg": ""}


def group_errors(rank: int, size: int) -> dict:
    """Each case raises on every rank; the tensor is untouched; the next collective works."""
    comm = _comm.get_world()
    cases = {
        "shape": (np.full(2 + rank, rank + 1.0, np.float32), lambda x: dist.all_reduce(x)),
        "dtype": (
            np.full(3, rank + 1, ("float32", "float64", "float16", "int32")[rank % 4]),
            lambda x: dist.all_reduce(x),
        ),
        "collective": (
            np.full(3, rank + 1.0, np.float32),
            lambda x: dist.all_reduce(x) if rank == 0 else dist.broadcast(x, src=0),
        ),
        "src": (np.full(3, rank + 1.0, np.float32), lambda x: dist.broadcast(x, src=rank)),
        "op": (
            np.full(3, rank + 1.0, np.float32),
            lambda x: dist.all_reduce(x, op=dist.ReduceOp.SUM if rank else dist.ReduceOp.MAX),
        ),
        "barrier": (
            np.full(3, rank + 1.0, np.float32),
            lambda x: dist.barrier() if rank == 0 else dist.all_reduce(x),
        ),
        "gather_object": (
            np.full(3, rank + 1.0, np.float32),
            lambda x: comm.gather_object(rank) if rank == 0 else dist.all_reduce(x),
        ),
        "all_gather_shape": (
            np.full((2, 1 + rank), rank + 1.0, np.float32),
            lambda x: dist.all_gather([], x),
        ),
        "reduce_scatter_shape": (
            np.full(1 + rank, rank + 1.0, np.float32),
            lambda x: dist.reduce_scatter(x, [x] * size),
        ),
        # the same bad argument on every rank: a local error everywhere
        "src_out_of_range": (np.ones(3, np.float32), lambda x: dist.broadcast(x, src=size)),
        "bad_op": (np.ones(3, np.float32), lambda x: dist.all_reduce(x, op=7)),
        "not_a_tensor": (np.ones(3, np.float32), lambda x: dist.all_reduce(x.numpy())),
        "rs_list_length": (
            np.ones(3, np.float32),
            lambda x: dist.reduce_scatter(x, [x] * (size + 1)),
        ),
        "rs_list_entry": (
            np.ones(3, np.float32),
            lambda x: dist.reduce_scatter(x, [x] * (size - 1) + [tensor(np.ones(4, np.float32))]),
        ),
        "group": (np.ones(3, np.float32), lambda x: dist.all_reduce(x, group=1)),
    }
    out: dict = {}
    for name, (array, call) in cases.items():
        x = tensor(array)
        before = host(x)
        report = attempt(lambda call=call, x=x: call(x))
        report["unchanged"] = bool(
            np.array_equal(host(x), before) and host(x).dtype == before.dtype
        )
        check = tensor(np.ones(2, np.float32))
        dist.all_reduce(check)  # the world still works
        report["next_all_reduce"] = host(check).tolist()
        out[f"err_{name}"] = report
    return out


def group_launch(rank: int, size: int) -> dict:
    """What a script started by ``minitorch_amp.distributed.launch`` sees."""
    x = tensor(np.full(2, rank + 1.0, np.float32))
    dist.all_reduce(x)
    return {
        "argv": sys.argv[1:],
        "env_backend": os.environ.get(_comm.BACKEND_ENV),
        "env_timeout": os.environ.get(_comm.TIMEOUT_ENV),
        "backend": dist.get_backend(),
        "timeout": _comm.get_world().timeout,
        "world_size": size,
        "sum": host(x).tolist(),
    }


# ---- failure modes -----------------------------------------------------------------------
def failure(mode: str) -> None:
    env = dist.init_parallel_env()
    x = tensor(np.ones(4, np.float32))
    if env.rank == 1:
        if mode == "die":
            os._exit(3)
        if mode == "raise":
            raise RuntimeError("rank 1 breaks on purpose")
        if mode.startswith("skip_") and mode != "skip_sleep":
            save_result(1, skipped=True)
            if mode == "skip_return":
                return  # the script ends normally
            sys.exit(3 if mode == "skip_exit_error" else 0)
        time.sleep(120)  # skip_sleep: hangs, long past the others' timeout
        return
    start = time.monotonic()
    try:
        dist.all_reduce(x)
    except dist.CollectiveTimeoutError as exc:
        waited = time.monotonic() - start
        again = time.monotonic()
        retry = attempt(lambda: dist.all_reduce(x))  # the world is broken: refused at once
        save_result(env.rank, raised=type(exc).__name__, msg=str(exc), waited=waited,
                    retry=retry, retry_waited=time.monotonic() - again)  # fmt: skip
        return  # ends normally: exiting after a timeout must still end the job
    save_result(env.rank, raised=None, out=host(x))


GROUPS = {"collectives": group_collectives, "errors": group_errors, "launch": group_launch}


def main(groups: list) -> None:
    if groups and groups[0] in FAILURES:
        failure(groups[0])
        return
    env = dist.init_parallel_env()
    results: dict = {}
    for name in groups:
        if name in GROUPS:  # other arguments are the launcher test's pass-through arguments
            results.update(GROUPS[name](env.rank, env.world_size))
    save_result(env.rank, **results)


if __name__ == "__main__":
    main(sys.argv[1:])
