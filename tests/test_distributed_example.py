"""examples/distributed_simple_net.py on 2 ranks: what sharding saves, and what it sends.

Two small ``mpiexec -n 2`` runs of the example (DataParallel, then sharding ``os_g``, both
O2) write their ``--report``; the tests read the per-rank numbers the docs tables show.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mpi_run import mpiexec_or_skip

from minitorch_amp.distributed.launch import mpiexec_env

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "distributed_simple_net.py"
TINY = ["--width", "64", "--layers", "4", "--batch", "8", "--steps", "2"]


def run_example(tmp_path: Path, *args: str) -> dict:
    """Run the example on 2 ranks (hard time limit) and return rank 0's JSON report."""
    report = tmp_path / "report.json"
    command = [mpiexec_or_skip(), "-n", "2", sys.executable, str(EXAMPLE), *TINY, *args]
    env = {**mpiexec_env(), "MINITORCH_AMP_DEVICE": "cpu", "OPENBLAS_NUM_THREADS": "1"}
    done = subprocess.run(
        [*command, "--report", str(report)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "final loss" in done.stdout  # rank 0 printed the table
    return json.loads(report.read_text())


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict:
    return {
        sharding: run_example(tmp_path_factory.mktemp(sharding), "--sharding", sharding)
        for sharding in ("none", "os_g")
    }


def test_every_rank_reports_and_ends_with_the_same_model(reports):
    for report in reports.values():
        assert report["config"]["world_size"] == 2
        assert [r["rank"] for r in report["ranks"]] == [0, 1]
        losses = {r["final_loss"] for r in report["ranks"]}
        assert len(losses) == 1, losses  # each rank evaluated the global batch on its own model


def test_sharding_halves_the_master_weights_and_moments_per_rank(reports):
    def optimizer_state(rank: dict) -> int:
        return rank["bytes"]["master_weights"] + rank["bytes"]["moments"]

    full = optimizer_state(reports["none"]["ranks"][0])
    assert full > 0
    for rank in reports["os_g"]["ranks"]:
        assert 0.4 <= optimizer_state(rank) / full <= 0.6, (rank["bytes"], full)
        # os_g keeps only this rank's gradients; the fp16 parameters stay whole
        assert 0.4 <= rank["bytes"]["grads"] / rank["bytes"]["params"] <= 0.6
    for rank in reports["none"]["ranks"]:
        assert rank["bytes"]["grads"] == rank["bytes"]["params"]


def test_params_are_broadcast_once_in_float16(reports):
    ranks = reports["os_g"]["ranks"]
    for rank in ranks:
        assert rank["bytes"]["params_dtype"] == ["float16"]
        assert set(rank["comm_per_step"]["broadcast"]) == {"float16"}
    # each parameter is sent by its owner only: together, the model once per step
    sent = sum(rank["comm_per_step"]["broadcast"]["float16"] for rank in ranks)
    assert sent == ranks[0]["bytes"]["params"]
    # DataParallel broadcasts nothing after wrapping: the averaged gradients keep it in step
    assert "broadcast" not in reports["none"]["ranks"][0]["comm_per_step"]


def test_sharded_training_follows_data_parallel(reports):
    none = reports["none"]["ranks"][0]["final_loss"]
    sharded = reports["os_g"]["ranks"][0]["final_loss"]
    assert sharded == pytest.approx(none, rel=1e-3)
