"""The collectives under ``mpiexec``: ``tests/dist/comm_worker.py`` runs every collective and
every bad call on 2 and on 4 ranks (one launch each); the references here are float64 NumPy
reductions of what every rank contributed. On a GPU (``@pytest.mark.gpu``): the same worker
with CuPy tensors, over MPI through the host.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi_run import DTYPES, HAPPY_ENV, OPS, own_world, run_mpi  # noqa: F401 (own_world: autouse)

from minitorch_amp.backend import comm as _comm
from minitorch_amp.backend import device

BYTE_KINDS = ("float32", "float16_bits", "bool", "int64_scalar")  # as comm_worker.py sends


# ==== under mpiexec ==========================================================================
# CPU tensors, the backend chosen automatically, a timeout that turns a bug into a failure


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
        assert got.shape == (len(results), *r[f"ag_{kind}_in"].shape)  # a 0-d tensor stays 0-d
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
