"""The communication layer: collectives and the parallel environment.

* In this process (not started by ``mpiexec``): a world of one rank, the environment
  variables, the argument checks, the mismatch messages.
* Under ``mpiexec``: ``tests/dist/comm_worker.py`` runs every collective on 2 and on 4 ranks
  (one launch each); the references here are float64 NumPy reductions of what every rank
  contributed. Failure modes and the launcher: ``tests/test_distributed_launch.py``.
* On a GPU (``@pytest.mark.gpu``): the same worker with CuPy tensors, over MPI through the host.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from mpi_run import DTYPES, OPS, own_world  # noqa: F401 (own_world: autouse, each test)

import minitorch_amp as mt
from minitorch_amp import distributed as dist
from minitorch_amp.amp.found_inf import reduce_found_inf
from minitorch_amp.backend import comm as _comm


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
    dist.init_parallel_env()  # later calls return the world made first
    dist.init_parallel_env("local", timeout=_comm.DEFAULT_TIMEOUT)  # (the same, said again)
    assert _comm.get_world() is world and world.timeout == _comm.DEFAULT_TIMEOUT


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"timeout": 5}, r"timeout=5.0 \(it has 600.0\)"),
        ({"backend": "mpi"}, r"backend='mpi' \(it has 'local'\)"),
        ({"timeout": -1}, "positive number of seconds"),
        ({"backend": "bogus"}, "unknown distributed backend"),
    ],
)
def test_a_started_world_refuses_arguments_it_does_not_have(kwargs, message):
    """It cannot change: a timeout or backend asked for later was ignored, silently."""
    world = dist.init_parallel_env() and _comm.get_world()
    with pytest.raises(ValueError, match=message):
        dist.init_parallel_env(**kwargs)
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
        (
            ("all_gather", np.zeros((1,) * 7 + (2, 3), np.float32), 0),
            ("all_gather", np.zeros((1,) * 7 + (3, 2), np.float32), 0),
            "rank 0: all_gather(float32, shape=9-d, size 6); "
            "rank 1: all_gather(float32, shape=9-d, size 6)",
        ),
        (("barrier", None, 0), ("reduce_scatter", F32, 0), "rank 0: barrier; rank 1: reduce_"),
        (
            ("all_reduce", np.zeros(3, np.int8), 0),
            ("all_reduce", np.zeros(3, np.int16), 0),
            "rank 0: all_reduce(unsupported dtype, shape=[3], op=SUM); "
            "rank 1: all_reduce(unsupported dtype, shape=[3], op=SUM)",
        ),
    ],
    ids=[
        "shape",
        "op",
        "src",
        "dtype, 0-d",
        "over 8 dims",
        "over 8 dims, same size",
        "collective",
        "unsupported",
    ],
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
