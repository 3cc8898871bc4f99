"""The communication layer: collectives, the parallel environment, the launcher, failures.

* In this process (not started by ``mpiexec``): a world of one rank, the environment
  variables, the argument checks, the mismatch messages, the launcher's command line.
* Under ``mpiexec``: ``tests/dist/comm_worker.py`` runs every collective on 2 and on 4 ranks
  (one launch each); the references here are float64 NumPy reductions of what every rank
  contributed. Failure modes get one short launch each, with a small timeout.
* On a GPU (``@pytest.mark.gpu``): the same worker with CuPy tensors, over MPI through the host.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import mpi_run
import numpy as np
import pytest
from mpi_run import WORKERS, load_result, mpiexec_or_skip, run_mpi

import minitorch_amp as mt
from minitorch_amp import distributed as dist
from minitorch_amp.amp.found_inf import reduce_found_inf
from minitorch_amp.backend import comm as _comm
from minitorch_amp.backend import comm_mpi, device
from minitorch_amp.distributed import launch

ROOT = Path(__file__).resolve().parents[1]
DTYPES = ("float32", "float64", "int32", "int64", "float16")
OPS = ("SUM", "MAX", "MIN", "PROD", "AVG")
BYTE_KINDS = ("float32", "float16_bits", "bool", "int64_scalar")
# what mpiexec sets in a rank: this process must not look launched
LAUNCH_VARS = (
    "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMIX_SIZE", "MPI_LOCALRANKID",
    "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
)  # fmt: skip


@pytest.fixture(autouse=True)
def own_world(monkeypatch):
    """Each test starts with no world and no launcher variables; the world from before the
    test (another module's) comes back afterwards."""
    for key in (*LAUNCH_VARS, _comm.BACKEND_ENV, _comm.TIMEOUT_ENV):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(_comm, "_world", None)
    yield
    _comm.shutdown()


def values(dtype: str, shape=(2, 3)) -> np.ndarray:
    return (np.arange(math.prod(shape)).reshape(shape) % 5 - 2).astype(dtype)


# ==== one process: a world of one ==========================================================
def test_before_init_rank_0_of_1_and_collectives_ask_for_init():
    assert (dist.get_rank(), dist.get_world_size(), dist.is_initialized()) == (0, 1, False)
    with pytest.raises(RuntimeError, match=r"call minitorch_amp.distributed.init_parallel_env"):
        dist.get_backend()
    with pytest.raises(RuntimeError, match="init_parallel_env"):
        dist.all_reduce(mt.to_tensor([1.0]))
    with pytest.raises(RuntimeError, match="init_parallel_env"):
        dist.barrier()


def test_not_launched_is_a_local_world_of_one():
    env = dist.init_parallel_env()
    assert (env.rank, env.world_size, env.nranks, env.local_rank) == (0, 1, 1, 0)
    assert (dist.get_backend(), dist.is_initialized(), repr(env)) == (
        "local",
        True,
        "ParallelEnv(rank=0, world_size=1)",
    )
    world = _comm.get_world()
    assert world.timeout == _comm.DEFAULT_TIMEOUT
    dist.init_parallel_env(timeout=5)  # later calls return the world made first
    assert _comm.get_world() is world and world.timeout == _comm.DEFAULT_TIMEOUT


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", [*DTYPES, "bool"])
def test_world_of_one_all_reduce_is_the_identity(dtype, op):
    """Every op on one rank leaves the tensor as it was (AVG divides by 1), dtype included."""
    dist.init_parallel_env()
    x = mt.to_tensor(values(dtype) if dtype != "bool" else values("int32") > 0)
    before = x.numpy().copy()
    assert dist.all_reduce(x, op=getattr(dist.ReduceOp, op)) is None
    assert x.dtype == before.dtype
    np.testing.assert_array_equal(x.numpy(), before)


@pytest.mark.parametrize("dtype", [*DTYPES, "bool"])
def test_world_of_one_other_collectives_are_identities(dtype):
    dist.init_parallel_env()
    array = values(dtype) if dtype != "bool" else values("int32") > 0
    x = mt.to_tensor(array.copy())
    dist.broadcast(x, src=0)
    np.testing.assert_array_equal(x.numpy(), array)
    gathered = []
    dist.all_gather(gathered, x)
    assert len(gathered) == 1 and gathered[0].dtype == array.dtype
    np.testing.assert_array_equal(gathered[0].numpy(), array)
    out = mt.to_tensor(np.zeros_like(array))
    dist.reduce_scatter(out, [x])
    np.testing.assert_array_equal(out.numpy(), array)
    assert dist.barrier() is None
    assert _comm.get_world().gather_object({"a": 1}) == [{"a": 1}]


def test_world_of_one_sync_op_false_returns_a_finished_task():
    dist.init_parallel_env()
    x = mt.to_tensor([1.0, 2.0])
    for task in (
        dist.all_reduce(x, sync_op=False),
        dist.broadcast(x, 0, sync_op=False),
        dist.all_gather([], x, sync_op=False),
        dist.reduce_scatter(x, [x], sync_op=False),
    ):
        assert (task.wait(), task.is_completed()) == (True, True)


def _bad_calls():
    """(id, call on a float32 tensor x of shape [3], exception, message fragment)."""
    t = mt.to_tensor
    return [
        ("src out of range", lambda x: dist.broadcast(x, src=1), ValueError, "src=1 is not a rank"),
        ("src negative", lambda x: dist.broadcast(x, src=-1), ValueError, "is not a rank"),
        ("src bool", lambda x: dist.broadcast(x, src=True), TypeError, "src must be a rank"),
        ("src float", lambda x: dist.broadcast(x, src=0.0), TypeError, "src must be a rank"),
        ("op unknown", lambda x: dist.all_reduce(x, op=7), ValueError, "op must be one of"),
        ("op bool", lambda x: dist.all_reduce(x, op=True), ValueError, "op must be one of"),
        ("op name", lambda x: dist.all_reduce(x, op="sum"), ValueError, "op must be one of"),
        ("rs op", lambda x: dist.reduce_scatter(x, [x], op=9), ValueError, "op must be one of"),
        ("all_reduce array", lambda x: dist.all_reduce(x.numpy()), TypeError, "must be a Tensor"),
        ("broadcast list", lambda x: dist.broadcast([1.0], 0), TypeError, "must be a Tensor"),
        ("all_gather array", lambda x: dist.all_gather([], x.numpy()), TypeError, "a Tensor"),
        ("all_gather tuple", lambda x: dist.all_gather((), x), TypeError, "must be a list"),
        ("rs output", lambda x: dist.reduce_scatter(x.numpy(), [x]), TypeError, "a Tensor"),
        ("rs entry", lambda x: dist.reduce_scatter(x, [x.numpy()]), TypeError, r"list\[0\]"),
        ("rs too long", lambda x: dist.reduce_scatter(x, [x, x]), ValueError, r"per rank \(1\)"),
        ("rs empty", lambda x: dist.reduce_scatter(x, []), ValueError, "one tensor per rank"),
        ("rs not a list", lambda x: dist.reduce_scatter(x, x), ValueError, "one tensor per"),
        ("rs shape", lambda x: dist.reduce_scatter(x, [t([1.0])]), ValueError, "must match"),
        (
            "rs dtype",
            lambda x: dist.reduce_scatter(x, [t([1, 2, 3])]),
            ValueError,
            "int64 .* float32",
        ),
        ("group all_reduce", lambda x: dist.all_reduce(x, group=1), ValueError, "group=None"),
        ("group broadcast", lambda x: dist.broadcast(x, 0, group=1), ValueError, "group=None"),
        ("group all_gather", lambda x: dist.all_gather([], x, group=1), ValueError, "group"),
        ("group rs", lambda x: dist.reduce_scatter(x, [x], group=1), ValueError, "group"),
        ("group barrier", lambda x: dist.barrier(group=1), ValueError, "group=None"),
        ("group get_rank", lambda x: dist.get_rank(group=1), ValueError, "group=None"),
        ("group world size", lambda x: dist.get_world_size(group=1), ValueError, "group"),
        ("group backend", lambda x: dist.get_backend(group=1), ValueError, "group=None"),
    ]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [case[1:] for case in _bad_calls()],
    ids=[case[0] for case in _bad_calls()],
)
def test_world_of_one_rejects_bad_arguments_and_keeps_the_tensor(call, error, message):
    """The same checks as on many ranks: a clear error, and the tensor is left untouched."""
    dist.init_parallel_env()
    x = mt.to_tensor([1.0, 2.0, 3.0])
    with pytest.raises(error, match=message):
        call(x)
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0, 3.0])


# ---- configuration: backend and timeout ---------------------------------------------------
@pytest.mark.parametrize("name", ["gloo", "MPI-ish", "auto"])
def test_unknown_backend_in_the_environment_says_what_is_allowed(monkeypatch, name):
    monkeypatch.setenv(_comm.BACKEND_ENV, name)
    with pytest.raises(ValueError, match=rf"unknown distributed backend .*{_comm.BACKEND_ENV}"):
        dist.init_parallel_env()
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="use 'mpi', 'nccl' or 'local'"):
        dist.init_parallel_env(backend=name.lower())


def test_backend_from_the_environment_ignores_case_and_spaces(monkeypatch):
    monkeypatch.setenv(_comm.BACKEND_ENV, " Local ")
    dist.init_parallel_env()
    assert dist.get_backend() == "local"


@pytest.mark.parametrize("raw", ["soon", "", "2.5", "-1", "0", "nan"])
def test_timeout_from_the_environment(monkeypatch, raw):
    """A number of seconds > 0 (empty: the default); anything else names the variable."""
    monkeypatch.setenv(_comm.TIMEOUT_ENV, raw)
    if raw in ("", "2.5"):
        dist.init_parallel_env()
        assert _comm.get_world().timeout == (float(raw) if raw else _comm.DEFAULT_TIMEOUT)
        return
    with pytest.raises(ValueError, match=rf"{_comm.TIMEOUT_ENV}='{raw}'"):
        dist.init_parallel_env()
    assert not dist.is_initialized()


@pytest.mark.parametrize("timeout", [0, -3.0, float("nan"), True, "10", None])
def test_timeout_argument_must_be_positive_seconds(monkeypatch, timeout):
    monkeypatch.setenv(_comm.TIMEOUT_ENV, "7")  # the argument wins over the environment
    if timeout is None:
        dist.init_parallel_env(timeout=timeout)
        assert _comm.get_world().timeout == 7.0
        return
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
        dist.init_parallel_env(timeout=timeout)


def test_explicit_timeout_is_kept():
    dist.init_parallel_env(timeout=2)
    assert _comm.get_world().timeout == 2.0


def test_nccl_on_the_cpu_says_use_mpi(monkeypatch):
    mt.set_device("cpu")  # (the autouse fixture in conftest restores the device)
    with pytest.raises(dist.DistributedError, match=r"NCCL backend needs CuPy and a GPU.*'mpi'"):
        dist.init_parallel_env(backend="nccl")
    monkeypatch.setenv(_comm.BACKEND_ENV, "nccl")
    with pytest.raises(dist.DistributedError, match="NCCL"):
        dist.init_parallel_env()
    assert not dist.is_initialized()


# ---- the argument check and its message ---------------------------------------------------
class PeersComm(_comm.Comm):
    """Rank 0 of a world whose other ranks passed ``peers`` (arrays or None, with args)."""

    def __init__(self, *peers):
        super().__init__(0, 1 + len(peers), timeout=1.0)
        self.peers = peers

    def exchange(self, values, what=""):
        return np.stack([values, *(_comm.describe(*peer) for peer in self.peers)])


F32 = np.zeros((2, 3), np.float32)


@pytest.mark.parametrize(
    ("mine", "peer", "expected"),
    [
        (
            ("all_reduce", F32, _comm.ReduceOp.SUM),
            ("all_reduce", F32.T, _comm.ReduceOp.SUM),
            "rank 0: all_reduce(float32, shape=[2, 3], op=SUM); "
            "rank 1: all_reduce(float32, shape=[3, 2], op=SUM)",
        ),
        (
            ("all_reduce", F32, _comm.ReduceOp.AVG),
            ("all_reduce", F32, _comm.ReduceOp.PROD),
            "op=AVG); rank 1: all_reduce(float32, shape=[2, 3], op=PROD)",
        ),
        (
            ("broadcast", F32.astype(np.float16), 0),
            ("broadcast", F32.astype(np.float16), 1),
            "rank 0: broadcast(float16, shape=[2, 3], src=0); "
            "rank 1: broadcast(float16, shape=[2, 3], src=1)",
        ),
        (
            ("all_gather", np.zeros((), np.int64), 0),
            ("all_gather", np.zeros((), np.bool_), 0),
            "rank 0: all_gather(int64, shape=[]); rank 1: all_gather(bool, shape=[])",
        ),
        (
            ("all_gather", np.zeros((2,) * 9, np.float32), 0),
            ("all_gather", np.zeros((2,) * 8, np.float32), 0),
            "rank 0: all_gather(float32, shape=9-d, size 512); "
            "rank 1: all_gather(float32, shape=[2, 2, 2, 2, 2, 2, 2, 2])",
        ),
        (("barrier", None, 0), ("reduce_scatter", F32, 0), "rank 0: barrier; rank 1: reduce_"),
        (
            ("all_reduce", np.zeros(3, np.int8), 0),
            ("all_reduce", np.zeros(3, np.int16), 0),
            "rank 0: all_reduce(unsupported dtype, shape=[3], op=SUM); "
            "rank 1: all_reduce(unsupported dtype, shape=[3], op=SUM)",
        ),
    ],
    ids=["shape", "op", "src", "dtype, 0-d", "over 8 dims", "collective", "unsupported"],
)
def test_mismatch_message_lists_every_rank(mine, peer, expected):
    comm = PeersComm(peer)
    with pytest.raises(dist.CollectiveMismatchError) as info:
        comm.check(*mine)
    assert expected in str(info.value)
    assert str(info.value).endswith("nothing was sent.")
    assert isinstance(info.value, ValueError) and isinstance(info.value, dist.DistributedError)


@pytest.mark.parametrize(
    "call",
    [
        ("all_reduce", F32, _comm.ReduceOp.MAX),
        ("broadcast", np.zeros(4, np.bool_), 1),
        ("barrier", None, 0),
        ("all_gather", np.zeros((2,) * 9, np.float16), 0),
        ("all_reduce", np.zeros(3, np.int8), 0),  # outside the named dtypes, still compared
    ],
)
def test_matching_calls_pass_the_check(call):
    PeersComm(call, call).check(*call)


# ---- GradScaler's found_inf, OR-ed over the ranks (amp/found_inf.py) ----------------------
class FlagPeers(PeersComm):
    """Rank 0 of a world whose other ranks all-reduce their found_inf ``flags`` (bools)."""

    def __init__(self, *flags):
        super().__init__(
            *(("all_reduce", np.array([f]), _comm.ReduceOp.MAX, "found_inf") for f in flags)
        )
        self.flags = flags

    def _raw(self, kind, array, arg, counts=None):
        assert (kind, arg, array.dtype) == ("all_reduce", _comm.ReduceOp.MAX, np.uint8)
        np.maximum(array, np.uint8(any(self.flags)), out=array)  # the peers' bytes
        return array


def test_found_inf_outside_a_world_of_several_ranks_is_left_alone():
    flag = np.array([True])
    assert reduce_found_inf(flag) is flag and flag[0]  # no world started
    dist.init_parallel_env()  # a world of one
    assert not reduce_found_inf(np.array([False]))[0]
    assert _comm.get_world().stats == {}  # nothing sent, not even a check


@pytest.mark.parametrize(
    ("mine", "peers"),
    [(False, (True,)), (True, (False,)), (False, (False, True, False)), (False, (False,))],
)
def test_found_inf_is_or_ed_over_the_ranks_in_place(monkeypatch, mine, peers):
    """One rank's overflow makes every rank skip: a checked all_reduce MAX of one byte."""
    world = FlagPeers(*peers)
    monkeypatch.setattr(_comm, "_world", world)
    flag = np.array([mine])
    assert reduce_found_inf(flag) is flag
    assert flag.dtype == np.bool_ and flag[0] == (mine or any(peers))
    assert world.stats[("all_reduce", "uint8")] == 1


def test_found_inf_met_by_another_collective_names_found_inf(monkeypatch):
    monkeypatch.setattr(_comm, "_world", PeersComm(("all_reduce", F32, _comm.ReduceOp.SUM)))
    flag = np.array([True])
    with pytest.raises(dist.CollectiveMismatchError) as info:
        reduce_found_inf(flag)
    assert "rank 0: all_reduce(bool, shape=[1], op=MAX) for found_inf; rank 1: " in str(info.value)
    assert flag[0]


# ==== under mpiexec ==========================================================================
# CPU tensors, the backend chosen automatically, a timeout that turns a bug into a failure
HAPPY_ENV = {_comm.TIMEOUT_ENV: "60", _comm.BACKEND_ENV: "", "MINITORCH_AMP_DEVICE": "cpu"}


@pytest.fixture(scope="module", params=[2, 4], ids=["2 ranks", "4 ranks"])
def ranks(request, tmp_path_factory):
    """One launch per world size runs every happy-path collective and every bad input."""
    _, results = run_mpi(
        "comm_worker.py", request.param, "collectives", "errors",
        tmp_path=tmp_path_factory.mktemp("comm"), env=HAPPY_ENV, timeout=120,
    )  # fmt: skip
    return results


def reference(op: str, stacked: np.ndarray, dtype: str) -> np.ndarray:
    """The float64 reduction over ranks (axis 0), rounded once to ``dtype``.

    Integer AVG is a floor division; bool MAX/SUM are "any", MIN/PROD "all".
    """
    if dtype == "bool":
        return stacked.any(0) if op in ("MAX", "SUM") else stacked.all(0)
    wide, size = stacked.astype(np.float64), len(stacked)
    if op == "AVG" and np.dtype(dtype).kind == "i":
        exact = np.floor_divide(wide.sum(0), size)
    elif op == "AVG":
        exact = wide.sum(0) / size
    else:
        exact = {"SUM": np.sum, "MAX": np.max, "MIN": np.min, "PROD": np.prod}[op](wide, axis=0)
    with np.errstate(over="ignore"):  # float16 sums may overflow to inf, as specified
        return exact.astype(dtype)


def check_all_reduce(results, dtype, op):
    contributed = np.stack([r[f"ar_{dtype}_{op}_in"] for r in results])
    expected = reference(op, contributed, dtype)
    for rank, r in enumerate(results):
        out = r[f"ar_{dtype}_{op}_out"]
        assert out.dtype == np.dtype(dtype), f"rank {rank}"
        np.testing.assert_array_equal(out, expected, err_msg=f"rank {rank}, {dtype} {op}")
        if dtype == "bool":  # stored as real bools (bytes 0 and 1), whatever the op summed
            assert out.view(np.uint8).max() <= 1, f"rank {rank}: bool bytes {out.view(np.uint8)}"


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_all_reduce_matches_float64_reference(ranks, dtype, op):
    """Every rank gets the reduction of all contributions, in the input's dtype; float16 is
    reduced in float32 and rounded once (exact here: the inputs are chosen so)."""
    check_all_reduce(ranks, dtype, op)


@pytest.mark.parametrize("op", ["MAX", "MIN", "SUM", "PROD"])
def test_all_reduce_bool_is_any_or_all(ranks, op):
    check_all_reduce(ranks, "bool", op)


def test_float16_all_reduce_rounds_once_in_float32(ranks):
    """Element 0: 2048 + 1 + ... + 1 rounds once (not after each partial sum); element 1:
    the average of 60000s is 60000, though their float16 sum overflows."""
    size = len(ranks)
    total, avg = ranks[0]["ar_float16_SUM_out"].reshape(-1), ranks[0]["ar_float16_AVG_out"]
    assert total[0] == np.float16(2048 + (size - 1)) and total[1] == np.inf
    assert avg.reshape(-1)[:2].tolist() == [np.float16((2048 + size - 1) / size), 60000.0]
    partial = np.float16(2048)
    for _ in range(size - 1):  # what rounding after every partial sum would give
        partial = np.float16(partial + np.float16(1))
    assert (total[0] != partial) == (size > 2)  # 2 ranks round once either way


def check_non_contiguous(results):
    summed = np.sum([r["nc_T_in"] for r in results], axis=0)
    largest = np.max([r["nc_step_in"] for r in results], axis=0)
    for rank, r in enumerate(results):
        np.testing.assert_array_equal(r["nc_T_out"], summed, err_msg=f"rank {rank}")
        inside = np.zeros(r["nc_step_in"].shape, bool)
        inside[::2, 1:] = True
        expected = np.where(inside, largest, r["nc_step_in"])
        np.testing.assert_array_equal(r["nc_step_out"], expected, err_msg=f"rank {rank}")


def test_all_reduce_of_non_contiguous_views_writes_through(ranks):
    """A transposed view (SUM) and a strided float16 slice (MAX) are reduced in place: the
    memory they view holds the result, the elements outside keep this rank's values."""
    check_non_contiguous(ranks)


def check_broadcast(results, kind):
    for src in range(len(results)):
        sent = results[src][f"bc_{kind}_{src}_in"]
        for rank, r in enumerate(results):
            got = r[f"bc_{kind}_{src}_out"]
            assert (got.dtype, got.shape) == (sent.dtype, sent.shape)
            assert got.tobytes() == sent.tobytes(), f"rank {rank} from src {src}: {got} {sent}"


@pytest.mark.parametrize("kind", BYTE_KINDS)
def test_broadcast_from_every_src_is_bit_exact(ranks, kind):
    """float16 NaN payloads, -0.0 and subnormals, bools and 0-d int64: the src's bytes."""
    check_broadcast(ranks, kind)


def check_all_gather(results, kind):
    for rank, r in enumerate(results):
        got = r[f"ag_{kind}_out"]
        assert len(got) == len(results)
        for q, peer in enumerate(results):
            assert got[q].tobytes() == peer[f"ag_{kind}_in"].tobytes(), f"rank {rank}[{q}]"


@pytest.mark.parametrize("kind", BYTE_KINDS)
def test_all_gather_lists_every_rank_in_rank_order(ranks, kind):
    check_all_gather(ranks, kind)


RS_CASES = [("float32", "SUM"), ("float16", "SUM"), ("float16", "AVG"), ("float64", "MAX"),
            ("int64", "AVG"), ("int32", "PROD"), ("bool", "MAX")]  # fmt: skip


def check_reduce_scatter(results, dtype, op):
    for rank, r in enumerate(results):
        mine = np.stack([q[f"rs_{dtype}_{op}_in"][rank] for q in results])
        out = r[f"rs_{dtype}_{op}_out"]
        assert out.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(out, reference(op, mine, dtype), err_msg=f"rank {rank}")


@pytest.mark.parametrize(("dtype", "op"), RS_CASES)
def test_reduce_scatter_gives_rank_r_the_reduction_of_entry_r(ranks, dtype, op):
    """Paddle's ``reduce_scatter(out, tensor_list)``: out on rank r = reduce over ranks of
    tensor_list[r]."""
    check_reduce_scatter(ranks, dtype, op)


def test_barrier_waits_for_the_last_rank(ranks):
    """The last rank arrives 0.8 s late; nobody leaves the barrier before it."""
    for r in ranks[:-1]:
        assert r["barrier_returns"] == "None"
        assert r["barrier_waited"] > 0.4


def test_sync_op_false_returns_a_finished_task(ranks):
    size = len(ranks)
    for r in ranks:
        assert (r["async_wait"], r["async_completed"], r["sync_returns"]) == (True, True, "None")
        assert r["async_others"] == [True, True, True]
        np.testing.assert_array_equal(r["async_out"], np.full(3, size * (size + 1) / 2))


def test_stats_count_the_bytes_each_rank_puts_on_the_wire(ranks):
    """Inputs of 5 float32, 6 float16 (sent as float32), 3 bool (as uint8), a float64[4]
    broadcast from rank 0 (counted there only), an int32[2] all_gather and a reduce_scatter
    of `size` float16[3] (sent as float32); before each of the 6, one 152-byte check."""
    size = len(ranks)
    f32, f64, i32 = (np.dtype(t).itemsize for t in ("float32", "float64", "int32"))
    for rank, r in enumerate(ranks):
        expected = {
            ("all_reduce", "float32"): 5 * f32 + 6 * f32,
            ("all_reduce", "uint8"): 3,
            ("all_gather", "int32"): 2 * i32,
            ("reduce_scatter", "float32"): size * 3 * f32,
            ("check", "int64"): 6 * 152,
        }
        if rank == 0:
            expected["broadcast", "float64"] = 4 * f64
        assert {(op, dt): n for op, dt, n in r["stats"]} == expected, f"rank {rank}"


def test_gather_object_collects_on_the_root_only(ranks):
    size = len(ranks)
    sent = [{"rank": q, "payload": list(range(q))} for q in range(size)]
    for rank, r in enumerate(ranks):
        assert r["gather_object_root0"] == (sent if rank == 0 else None)
        assert r[f"gather_object_root{size - 1}"] == (sent if rank == size - 1 else None)


def test_environment_under_mpiexec(ranks):
    """mpiexec -n N: ranks 0 ... N-1, the MPI backend chosen on the CPU, one world per process."""
    size = len(ranks)
    for rank, r in enumerate(ranks):
        assert r["env"] == {
            "rank": rank,
            "world_size": size,
            "backend": "mpi",
            "env_rank": rank,
            "env_nranks": size,
            "local_rank": rank,  # one machine
            "repr": f"ParallelEnv(rank={rank}, world_size={size})",
            "same_world": True,
            "initialized": True,
        }
        assert set(r["places"]) == {"cpu"}


def describe_each_rank(case: str, rank: int, size: int) -> str:
    """What the mismatch message says rank ``rank`` passed in the worker's ``case``."""
    same = "all_reduce(float32, shape=[3], op=SUM)"
    return {
        "shape": f"all_reduce(float32, shape=[{2 + rank}], op=SUM)",
        "dtype": f"all_reduce({('float32', 'float64', 'float16', 'int32')[rank % 4]}, "
        "shape=[3], op=SUM)",
        "collective": same if rank == 0 else "broadcast(float32, shape=[3], src=0)",
        "src": f"broadcast(float32, shape=[3], src={rank})",
        "op": same.replace("SUM", "MAX") if rank == 0 else same,
        "barrier": "barrier" if rank == 0 else same,
        "gather_object": "gather_object" if rank == 0 else same,
        "all_gather_shape": f"all_gather(float32, shape=[2, {1 + rank}])",
        "reduce_scatter_shape": f"reduce_scatter(float32, shape=[{size}, {1 + rank}], op=SUM)",
    }[case]


MISMATCHES = ["shape", "dtype", "collective", "src", "op", "barrier", "gather_object",
              "all_gather_shape", "reduce_scatter_shape"]  # fmt: skip


@pytest.mark.parametrize("case", MISMATCHES)
def test_mismatched_calls_raise_the_same_error_on_every_rank(ranks, case):
    """Every rank raises CollectiveMismatchError naming what each rank passed; nothing moved
    (the tensor is unchanged) and the next collective works."""
    size = len(ranks)
    listing = "; ".join(f"rank {q}: {describe_each_rank(case, q, size)}" for q in range(size))
    for rank, r in enumerate(ranks):
        report = r[f"err_{case}"]
        assert report["type"] == "CollectiveMismatchError", f"rank {rank}: {report}"
        assert f"({listing})" in report["msg"], f"rank {rank}"
        assert report["unchanged"] and report["next_all_reduce"] == [size, size], f"rank {rank}"


@pytest.mark.parametrize(
    ("case", "error", "message"),
    [
        ("src_out_of_range", "ValueError", "src={size} is not a rank; there are {size} ranks"),
        ("bad_op", "ValueError", "op must be one of ReduceOp.SUM"),
        ("not_a_tensor", "TypeError", "all_reduce: tensor must be a Tensor, got ndarray"),
        ("rs_list_length", "ValueError", "one tensor per rank ({size}), got {size_1}"),
        ("rs_list_entry", "ValueError", "tensor_list[{size_0}] is float32 [4]"),
        ("group", "ValueError", "pass group=None"),
    ],
)
def test_bad_arguments_raise_on_every_rank_and_keep_the_ranks_in_step(ranks, case, error,
                                                                      message):  # fmt: skip
    size = len(ranks)
    message = message.format(size=size, size_1=size + 1, size_0=size - 1)
    for rank, r in enumerate(ranks):
        report = r[f"err_{case}"]
        assert (report["type"], message in report["msg"]) == (error, True), f"rank {rank}"
        assert report["unchanged"] and report["next_all_reduce"] == [size, size], f"rank {rank}"


# ---- failure modes: each its own launch, on 2 ranks -----------------------------------------
def run_failure(mode: str, tmp_path: Path, timeout_s: float):
    """Launch the worker's failure ``mode``; return (completed, results, wall seconds)."""
    start = time.monotonic()
    completed, results = run_mpi(
        "comm_worker.py", 2, mode, tmp_path=tmp_path, check=False, timeout=90,
        env={**HAPPY_ENV, _comm.TIMEOUT_ENV: str(timeout_s)},
    )  # fmt: skip
    return completed, results, time.monotonic() - start


def test_a_rank_that_dies_ends_the_job(tmp_path):
    """Rank 1 exits with os._exit(3) before the collective: mpiexec fails, nobody hangs."""
    completed, _, wall = run_failure("die", tmp_path, timeout_s=3)
    assert completed.returncode != 0
    assert wall < 3 + 15


def test_an_uncaught_exception_aborts_every_rank(tmp_path):
    """Rank 1 raises while rank 0 waits in all_reduce with a 60 s timeout: the excepthook
    calls MPI_Abort, so the job ends long before the timeout, naming the failed rank."""
    for attempt in range(2):
        completed, _, wall = run_failure("raise", tmp_path / f"try{attempt}", timeout_s=60)
        assert completed.returncode != 0
        assert wall < 20
        # NOTE: mpiexec may drop a rank's last output when MPI_Abort kills it; comm waits
        # until the output is read, which makes that rare, not impossible: one more try.
        if "aborting all" in completed.stderr:
            break
    assert "RuntimeError: rank 1 breaks on purpose" in completed.stderr
    assert "minitorch_amp.distributed: rank 1 failed; aborting all 2 ranks." in completed.stderr


def check_timed_out(completed, result, wall, timeout_s):
    """Rank 0 raised CollectiveTimeoutError after the timeout, refused the next collective at
    once, and its (normal) exit ended the whole job with an error."""
    assert result["raised"] == "CollectiveTimeoutError"
    assert f"rank 0 waited {timeout_s:g} s in" in result["msg"]
    assert _comm.TIMEOUT_ENV in result["msg"]
    assert timeout_s <= result["waited"] < timeout_s + 5
    assert result["retry"]["type"] == "CollectiveTimeoutError"
    assert result["retry"]["msg"].startswith("an earlier collective timed out: rank 0 waited")
    assert result["retry_waited"] < 1
    assert completed.returncode != 0  # rank 0 ended its script normally: the exit aborted
    assert wall < timeout_s + 15


@pytest.mark.parametrize("mode", ["skip_exit", "skip_exit_error", "skip_return"])
def test_a_rank_that_leaves_makes_the_others_fail_at_once_naming_it(tmp_path, mode):
    """Rank 1 leaves without calling all_reduce: sys.exit(0), sys.exit(3), or its script
    returns. MPICH does not end the job for a rank that finalized, so on its way out the rank
    tells the others: rank 0 raises RankExitedError (a CollectiveTimeoutError) within
    seconds, not after its 60 s timeout, naming rank 1. Its own exit then ends the job with
    an error, since the lost all_reduce stays posted."""
    completed, results, wall = run_failure(mode, tmp_path, timeout_s=60)
    assert results[1] == {"skipped": True}
    result = results[0]
    assert result["raised"] == "RankExitedError"
    assert result["msg"].startswith("rank 1 exited while rank 0 waited in all_reduce"), result
    assert result["waited"] < 5
    assert result["retry"]["type"] == "RankExitedError"
    assert result["retry"]["msg"].startswith("an earlier collective failed: rank 1 exited")
    assert result["retry_waited"] < 1
    assert completed.returncode != 0
    assert wall < 20


def test_a_hung_rank_is_ended_when_the_rank_that_timed_out_exits(tmp_path):
    """Rank 1 sleeps for 120 s instead of calling all_reduce; rank 0 times out, catches it and
    ends its script: that exit aborts the job, rank 1 included."""
    completed, results, wall = run_failure("skip_sleep", tmp_path, timeout_s=3)
    assert results[1] is None
    check_timed_out(completed, results[0], wall, timeout_s=3)


# ---- goodbyes, in this process: a stand-in MPI whose requests complete when told to ------------
class StandInRequest:
    """A request that completes at its ``polls``-th Test (never, when None)."""

    def __init__(self, polls=None, on_done=None):
        self.polls, self.on_done, self.active = polls, on_done, True

    def Test(self):
        if self.polls is not None:
            self.polls -= 1
            if self.polls <= 0:
                if self.on_done:
                    self.on_done()
                self.active = False  # as in mpi4py: a completed request becomes null
                return True
        return False

    def __bool__(self):
        return self.active

    def Cancel(self):
        self.active = False

    Wait = Cancel


class StandInMPI:
    """Rank 0 of 2. ``goodbye`` is the note rank 1 sends as it exits (None: it never does)."""

    ANY_SOURCE, SUM, MAX, MIN, PROD = -1, "sum", "max", "min", "prod"

    class Request:
        @staticmethod
        def Testall(requests):
            return all(r.Test() for r in requests)

    def __init__(self, goodbye=None):
        self.goodbye, self.sent = goodbye, []
        self.COMM_WORLD = self

    def Get_rank(self):
        return 0

    def Get_size(self):
        return 2

    def Dup(self):
        return self

    def Irecv(self, buffer, source, tag):
        note, self.goodbye = self.goodbye, None  # one goodbye, delivered on the first poll

        def deliver():
            buffer[:] = note

        return StandInRequest(1 if note is not None else None, deliver)

    def Isend(self, buffer, dest, tag):
        self.sent.append((dest, tag, buffer.tolist()))
        return StandInRequest(1)


@pytest.fixture
def at_exit(monkeypatch):
    """What the communicator registers to run at exit (recorded here, never run)."""
    registered = []
    fake = type("atexit", (), {"register": registered.append, "unregister": registered.remove})
    monkeypatch.setattr(comm_mpi, "atexit", fake)
    return registered


def test_a_rank_that_left_after_joining_the_collective_does_not_end_the_wait(at_exit):
    """Rank 1 started this collective (its goodbye says 1) and then left: its part may still be
    on its way, since goodbyes travel apart from the data, so rank 0 waits it out."""
    comm = _comm.MPIComm(timeout=5, mpi=StandInMPI(goodbye=[1, 1]))
    comm.wait(StandInRequest(polls=2000), "all_reduce")  # well past the spinning phase
    assert comm._left == {1: 1} and comm._failed is None
    comm.close()
    assert comm.MPI.sent == [(1, _comm._GOODBYE, [0, 1])]  # this rank says goodbye too
    assert at_exit == []  # and nothing is left to run at exit


def test_a_rank_that_left_before_the_collective_ends_the_wait_at_once(at_exit):
    comm = _comm.MPIComm(timeout=60, mpi=StandInMPI(goodbye=[1, 0]))
    start = time.monotonic()
    with pytest.raises(dist.RankExitedError, match="rank 1 exited while rank 0 waited in bcast"):
        comm.wait(StandInRequest(polls=None), "bcast")
    assert time.monotonic() - start < 1
    with pytest.raises(dist.CollectiveTimeoutError, match="an earlier collective failed: rank 1"):
        comm.wait(StandInRequest(polls=1), "the next one")
    assert at_exit == [comm._say_goodbye, comm._abort_at_exit]  # the exit ends the job
    comm._say_goodbye()
    assert comm.MPI.sent == []  # a broken world ends by MPI_Abort, not by goodbyes


# ==== the launcher ===========================================================================
def test_launch_runs_the_script_on_n_ranks_and_passes_arguments(tmp_path):
    """--backend and --timeout become the environment variables; arguments after the script,
    options included, go to the script."""
    mpiexec_or_skip()
    command = [
        sys.executable, "-m", "minitorch_amp.distributed.launch", "--nproc_per_node", "2",
        "--backend", "mpi", "--timeout", "7.5",
        str(WORKERS / "comm_worker.py"), "launch", "--nproc_per_node", "5", "--x=1",
    ]  # fmt: skip
    env = {**os.environ, "MT_RESULTS_DIR": str(tmp_path), "MINITORCH_AMP_DEVICE": "cpu"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    completed = subprocess.run(  # the ranks import this checkout, as run_mpi's do
        command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    for rank in range(2):
        assert load_result(tmp_path, rank) == {
            "argv": ["launch", "--nproc_per_node", "5", "--x=1"],
            "env_backend": "mpi",
            "env_timeout": "7.5",
            "backend": "mpi",
            "timeout": 7.5,
            "world_size": 2,
            "sum": [3.0, 3.0],
        }


@pytest.fixture
def fake_mpiexec(monkeypatch, tmp_path):
    """The launcher with a recorded (not run) mpiexec call that exits with status 7."""
    calls = []

    def call(command, env):
        calls.append((command, env))
        return 7

    monkeypatch.setattr(launch, "find_mpiexec", lambda: "/opt/mpi/bin/mpiexec")
    monkeypatch.setattr(launch.subprocess, "call", call)
    script = tmp_path / "train.py"
    script.write_text("")
    return calls, str(script)


def test_launch_builds_the_mpiexec_command_and_returns_its_status(fake_mpiexec):
    calls, script = fake_mpiexec
    assert launch.main(["--nproc_per_node", "3", "--timeout", "4", script, "--lr", "1"]) == 7
    (command, env), = calls  # fmt: skip
    assert command == ["/opt/mpi/bin/mpiexec", "-n", "3", sys.executable, script, "--lr", "1"]
    assert env[_comm.TIMEOUT_ENV] == "4.0" and _comm.BACKEND_ENV not in env


def test_launch_without_options_leaves_the_environment_alone(fake_mpiexec):
    calls, script = fake_mpiexec
    launch.main([script])
    (command, env), = calls  # fmt: skip
    assert command[1:3] == ["-n", "1"]
    assert _comm.TIMEOUT_ENV not in env and _comm.BACKEND_ENV not in env


# ---- Open MPI as root: mpiexec refuses to start unless both variables are set ----------------
ROOT_VARS = launch.OPENMPI_ROOT_VARS


@pytest.fixture
def user_id(monkeypatch):
    """Pretend to run as the user id given to the returned function; no root variables set."""
    for key in ROOT_VARS:
        monkeypatch.delenv(key, raising=False)
    return lambda uid: monkeypatch.setattr(launch.os, "geteuid", lambda: uid)


def root_vars(env: dict) -> dict:
    return {key: env[key] for key in ROOT_VARS if key in env}


@pytest.mark.parametrize(("uid", "expected"), [(0, {k: "1" for k in ROOT_VARS}), (1000, {})])
def test_launch_lets_open_mpi_run_as_root_and_only_as_root(fake_mpiexec, user_id, uid,
                                                           expected):  # fmt: skip
    """As root both variables are passed (MPICH ignores them); as anyone else neither is."""
    calls, script = fake_mpiexec
    user_id(uid)
    launch.main([script])
    (_, env), = calls  # fmt: skip
    assert root_vars(env) == expected


def test_launch_keeps_the_root_variables_the_user_set(fake_mpiexec, user_id, monkeypatch):
    calls, script = fake_mpiexec
    user_id(0)
    monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT", "0")
    launch.main([script])
    (_, env), = calls  # fmt: skip
    assert root_vars(env) == {"OMPI_ALLOW_RUN_AS_ROOT": "0", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def test_mpiexec_env_copies_the_environment_it_is_given():
    given = {"PATH": "/usr/bin", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "yes"}
    env = launch.mpiexec_env(given, as_root=True)
    assert env == {**given, "OMPI_ALLOW_RUN_AS_ROOT": "1"}
    assert given == {"PATH": "/usr/bin", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "yes"}  # unchanged
    assert launch.mpiexec_env(given, as_root=False) == given


@pytest.mark.parametrize(("uid", "expected"), [(0, {k: "1" for k in ROOT_VARS}), (1000, {})])
def test_the_test_runner_starts_mpiexec_with_the_launchers_environment(monkeypatch, tmp_path,
                                                                       user_id, uid,
                                                                       expected):  # fmt: skip
    """tests/mpi_run.py (every multi-rank test) passes the same root variables, and its own."""
    calls = []

    def fake_run(command, env, **kwargs):
        calls.append((command, env))
        return subprocess.CompletedProcess(command, 0, "", "")

    user_id(uid)
    monkeypatch.setattr(mpi_run, "mpiexec_or_skip", lambda: "/opt/mpi/bin/mpiexec")
    monkeypatch.setattr(mpi_run.subprocess, "run", fake_run)
    monkeypatch.setenv("MT_KEPT", "yes")
    _, results = run_mpi("comm_worker.py", 2, "launch", tmp_path=tmp_path)
    assert results == [None, None]  # nothing ran
    (command, env), = calls  # fmt: skip
    assert command[:3] == ["/opt/mpi/bin/mpiexec", "-n", "2"]
    assert root_vars(env) == expected
    assert env["MT_KEPT"] == "yes" and env["OPENBLAS_NUM_THREADS"] == "1"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nproc_per_node", "0", "{script}"], "--nproc_per_node must be >= 1, got 0"),
        (["--nproc_per_node", "two", "{script}"], "invalid int value: 'two'"),
        (["{missing}"], "no such script: {missing}"),
        (["--backend", "gloo", "{script}"], "invalid choice: 'gloo'"),
        (["--timeout", "0", "{script}"], "--timeout must be a positive number of seconds"),
        (["--timeout", "nan", "{script}"], "--timeout must be a positive number of seconds"),
        ([], "the following arguments are required: script"),
    ],
)
def test_launch_argument_errors_exit_with_status_2(fake_mpiexec, tmp_path, capsys, argv,
                                                   message):  # fmt: skip
    calls, script = fake_mpiexec
    missing = str(tmp_path / "nope.py")
    argv = [a.format(script=script, missing=missing) for a in argv]
    with pytest.raises(SystemExit) as info:
        launch.main(argv)
    assert info.value.code == 2
    assert message.format(missing=missing) in capsys.readouterr().err
    assert calls == []  # nothing was started


def without_mpiexec(monkeypatch, tmp_path):
    """A Python whose folder, scripts folder and PATH hold no mpiexec."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setattr(sys, "executable", str(empty / "python"))
    monkeypatch.setattr(launch.sysconfig, "get_path", lambda name: str(empty))
    monkeypatch.setenv("PATH", str(empty))
    return empty


def test_find_mpiexec_says_how_to_install_it(monkeypatch, tmp_path, capsys):
    without_mpiexec(monkeypatch, tmp_path)
    with pytest.raises(FileNotFoundError, match=r"pip install -e '\.\[dist\]'"):
        launch.find_mpiexec()
    script = tmp_path / "train.py"
    script.write_text("")
    assert launch.main([str(script)]) == 2
    assert "error: mpiexec was not found" in capsys.readouterr().err


def test_find_mpiexec_prefers_the_one_next_to_python(monkeypatch, tmp_path):
    folder = without_mpiexec(monkeypatch, tmp_path)
    (folder / "mpiexec").write_text("")  # not executable: skipped
    with pytest.raises(FileNotFoundError):
        launch.find_mpiexec()
    (folder / "mpiexec").chmod(0o755)
    assert launch.find_mpiexec() == str(folder / "mpiexec")


# ==== GPU: CuPy tensors over MPI (one GPU shared by the ranks: staged through the host) =====
@pytest.mark.gpu
def test_gpu_tensors_travel_through_the_host_and_come_back_on_the_gpu(tmp_path):
    """Two ranks on one GPU choose MPI (NCCL needs a GPU per rank); CuPy tensors are staged
    through the host and come back on the GPU with the same values as on the CPU."""
    env = {**HAPPY_ENV, "MINITORCH_AMP_DEVICE": "gpu"}
    if device.device_count() > 1:  # a GPU per rank would choose NCCL: ask for MPI here
        env[_comm.BACKEND_ENV] = "mpi"
    _, results = run_mpi(
        "comm_worker.py", 2, "collectives", "errors", tmp_path=tmp_path, timeout=300, env=env
    )
    for r in results:
        assert r["env"]["backend"] == "mpi"
        assert set(r["places"]) == {"gpu:0"}
    for dtype in DTYPES:
        for op in OPS:
            check_all_reduce(results, dtype, op)
    for op in ("MAX", "MIN", "SUM", "PROD"):
        check_all_reduce(results, "bool", op)
    check_non_contiguous(results)
    for kind in BYTE_KINDS:
        check_broadcast(results, kind)
        check_all_gather(results, kind)
    for dtype, op in RS_CASES:
        check_reduce_scatter(results, dtype, op)
    for case in MISMATCHES:
        assert all(r[f"err_{case}"]["type"] == "CollectiveMismatchError" for r in results)
        assert all(r[f"err_{case}"]["unchanged"] for r in results)
