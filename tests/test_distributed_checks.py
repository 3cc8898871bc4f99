"""Every collective is checked, the library's own included (issue 14, item 6).

The public collectives compare what each rank passed before they move data. The ones the
library makes on its own (gradient buckets, found_inf, the global-norm clip, the sharded
broadcasts, the model check and the broadcasts at wrap time) are checked the same way, so a
rank whose program went a different way raises the same ``CollectiveMismatchError`` as the
others, naming what each rank was doing, instead of pairing its data with an unrelated
collective (a wrong result, an MPICH assertion, or a wait until the timeout).

One ``mpiexec -n 2`` launch of ``dist/check_worker.py`` runs every scenario; in each, rank 1
runs a slightly different program. The timeout is short: an unchecked mismatch that hangs
fails the test in seconds.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from dist_training import SIZES
from mpi_run import run_mpi

from minitorch_amp.backend import comm as _comm

SCENARIOS = ["level", "fewer_batches", "no_scaler", "wrap_vs_metric", "bad_part", "bad_src"]
SCENARIOS += ["shard_order", "two_backward"]
N_PARAMS = sum(a * b + b for a, b in itertools.pairwise(SIZES))  # all in one gradient bucket


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    completed, results = run_mpi(
        "check_worker.py", 2, *SCENARIOS, tmp_path=tmp_path_factory.mktemp("checks"),
        timeout=60, check=False,
        env={_comm.TIMEOUT_ENV: "10", _comm.BACKEND_ENV: "", "MINITORCH_AMP_DEVICE": "cpu"},
    )  # fmt: skip
    assert completed.returncode == 0 and None not in results, (
        f"exit {completed.returncode}\n{completed.stdout[-3000:]}\n{completed.stderr[-3000:]}"
    )
    return results


def same_mismatch_on_every_rank(ranks, scenario: str, listing: str) -> None:
    """Every rank raised CollectiveMismatchError with one message that lists what each rank
    did, and the world still works afterwards (nothing unpaired was sent)."""
    messages = {r[scenario]["msg"] for r in ranks}
    assert len(messages) == 1, messages
    for rank, r in enumerate(ranks):
        report = r[scenario]
        assert report["type"] == "CollectiveMismatchError", f"rank {rank}: {report}"
        assert f"({listing})" in report["msg"], f"rank {rank}: {report['msg']}"
        assert report["next_all_reduce"] == [2.0, 2.0], f"rank {rank}"


def test_ranks_that_disagree_on_the_sharding_level_fail_at_wrap_time(ranks):
    """'os' on one rank and 'os_g' on the other would all-reduce against reduce-scatter;
    group_sharded_parallel compares the levels first, and shards nothing."""
    listing = (
        "rank 0: group_sharded_parallel(level='os'); rank 1: group_sharded_parallel(level='os_g')"
    )
    same_mismatch_on_every_rank(ranks, "level", listing)
    for r in ranks:
        assert r["level"]["unchanged"] and not r["level"]["sharded"]


def test_a_rank_with_one_batch_fewer_meets_the_gradient_bucket_with_its_metric(ranks):
    """DataParallel: rank 0's second backward all-reduces its gradient bucket while rank 1,
    out of batches, all-reduces a metric. Both raise, naming both; neither takes the step."""
    listing = (
        f"rank 0: all_reduce(float32, shape=[{N_PARAMS}], op=AVG) for gradient bucket 0; "
        "rank 1: all_reduce(float32, shape=[1], op=SUM)"
    )
    same_mismatch_on_every_rank(ranks, "fewer_batches", listing)
    params = [r["fewer_batches"]["params"] for r in ranks]
    assert params[0].keys() == params[1].keys()
    for name in params[0]:  # the one shared step, and nothing after it
        np.testing.assert_array_equal(params[0][name], params[1][name], err_msg=name)
    assert all(r["fewer_batches"]["changed"] for r in ranks)


def test_a_sharded_step_without_the_scaler_on_one_rank_changes_nothing(ranks):
    """Rank 0 steps through GradScaler (found_inf is OR-ed over the ranks), rank 1 calls
    opt.step() directly. The sharded step checks before it updates anything."""
    listing = (
        "rank 0: all_reduce(bool, shape=[1], op=MAX) for found_inf; rank 1: ShardedOptimizer.step()"
    )
    same_mismatch_on_every_rank(ranks, "no_scaler", listing)
    for rank, r in enumerate(ranks):
        assert r["no_scaler"]["unchanged"], f"rank {rank}: parameters or masters changed"


def test_wrapping_a_model_on_one_rank_meets_a_metric_on_the_other(ranks):
    """The model check at wrap time is a collective like the others: it is never mistaken
    for (or garbled by) another rank's all_reduce."""
    listing = "rank 0: wrapping a model; rank 1: all_reduce(float32, shape=[1], op=SUM)"
    same_mismatch_on_every_rank(ranks, "wrap_vs_metric", listing)
    assert all(r["wrap_vs_metric"]["unchanged"] for r in ranks)


def test_arguments_refused_on_one_rank_only_raise_the_same_mismatch_on_every_rank(ranks):
    """Refused before its descriptor exchange, rank 0 would have left rank 1 waiting in its
    reduce_scatter, to be paired with rank 0's next collective (a mismatch one call late,
    then a lost rank). The refusal is exchanged instead; the next collective works."""
    listing = (
        "rank 0: reduce_scatter: arguments refused; rank 1: reduce_scatter(float32, shape=[2, 2], "
        "op=SUM)"
    )
    same_mismatch_on_every_rank(ranks, "bad_part", listing)
    assert all(r["bad_part"]["unchanged"] for r in ranks)


def test_arguments_every_rank_refuses_raise_their_own_error_everywhere(ranks):
    for rank, r in enumerate(ranks):
        report = r["bad_src"]
        assert report["type"] == "TypeError" and "src must be a rank number" in report["msg"]
        assert report["unchanged"] and report["next_all_reduce"] == [2.0, 2.0], f"rank {rank}"


def test_ranks_whose_optimizers_list_the_parameters_in_other_orders_fail_at_wrap_time(ranks):
    """The shards and the gradient buckets follow the optimizer's order: same-shaped layers
    listed in another order passed the model check, then each rank added gradients into the
    wrong parameters, silently. The orders are compared first; nothing is sharded."""
    messages = {r["shard_order"]["msg"] for r in ranks}
    assert len(messages) == 1 and "parameters in different orders" in messages.pop()
    for r in ranks:
        report = r["shard_order"]
        assert report["type"] == "CollectiveMismatchError"
        assert report["unchanged"] and not report["sharded"]
        assert report["next_all_reduce"] == [2.0, 2.0]


def test_a_second_backward_of_one_forward_is_averaged_too(ranks):
    """Each rank's own gradient of the second backward was added to the first's average:
    the ranks' gradients (and then models) parted. Averaged again, every rank holds the
    same gradient, twice the first average (to float32 rounding)."""
    reports = [r["two_backward"] for r in ranks]
    assert all(report["type"] is None for report in reports)
    for name, first in reports[0]["first"].items():
        np.testing.assert_array_equal(reports[0]["second"][name], reports[1]["second"][name])
        np.testing.assert_allclose(reports[0]["second"][name], 2 * np.asarray(first), rtol=1e-5)
