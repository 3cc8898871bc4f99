"""Run a script under ``mpiexec -n N`` from a test, and read back what each rank wrote.

A worker script writes its results with :func:`save_result` into ``$MT_RESULTS_DIR``; the
test gets a list with one dict per rank. ``mpiexec`` always runs under a hard time limit, so
a test of a hang fails instead of hanging the suite. The environment comes from the
launcher's :func:`~minitorch_amp.distributed.launch.mpiexec_env`, so Open MPI runs as root too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import needs
import numpy as np
import pytest

from minitorch_amp.backend import comm as _comm
from minitorch_amp.distributed.launch import mpiexec_env

WORKERS = Path(__file__).parent / "dist"
ROOT = Path(__file__).resolve().parents[1]
# the dtypes and reductions tests/dist/comm_worker.py runs every collective with
DTYPES = ("float32", "float64", "int32", "int64", "float16")
OPS = ("SUM", "MAX", "MIN", "PROD", "AVG")
# what mpiexec sets in a rank: this process must not look launched
LAUNCH_VARS = (
    "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMIX_SIZE", "MPI_LOCALRANKID",
    "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
)  # fmt: skip
# a worker's environment: a timeout long enough for a loaded machine, the default backend
HAPPY_ENV = {_comm.TIMEOUT_ENV: "60", _comm.BACKEND_ENV: "", "MINITORCH_AMP_DEVICE": "cpu"}


@pytest.fixture(autouse=True)  # autouse where a test module imports it
def own_world(monkeypatch):
    """Each test starts with no world and no launcher variables; the world from before the
    test (another module's) comes back afterwards."""
    for key in (*LAUNCH_VARS, _comm.BACKEND_ENV, _comm.TIMEOUT_ENV):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(_comm, "_world", None)
    yield
    _comm.shutdown()


def mpiexec_or_skip() -> str:
    """``mpiexec``; skip without MPI, fail under CI=true (the test extra brings it)."""
    return needs.mpiexec()


def run_mpi(script: str, nproc: int, *args, tmp_path: Path, timeout: float = 120,
            env: dict | None = None, check: bool = True):  # fmt: skip
    """Run ``tests/dist/<script>`` on ``nproc`` ranks; return ``(completed, results)``.

    ``results[r]`` is the dict rank r saved (npz arrays and JSON values), or None.
    """
    mpiexec = mpiexec_or_skip()
    out = tmp_path / f"results-{script}-{nproc}"
    out.mkdir(parents=True, exist_ok=True)
    full_env = {
        **mpiexec_env(),
        "MT_RESULTS_DIR": str(out),
        "MINITORCH_AMP_DEVICE": os.environ.get("MINITORCH_AMP_DEVICE", "cpu"),
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        # the ranks import this checkout, as the test does (not whatever pip installed)
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        **(env or {}),
    }
    command = [mpiexec, "-n", str(nproc), sys.executable, str(WORKERS / script), *map(str, args)]
    completed = subprocess.run(
        command, env=full_env, capture_output=True, text=True, timeout=timeout
    )
    if check and completed.returncode != 0:
        raise AssertionError(
            f"{' '.join(command)} exited with {completed.returncode}\n"
            f"stdout:\n{completed.stdout[-4000:]}\nstderr:\n{completed.stderr[-4000:]}"
        )
    return completed, [load_result(out, r) for r in range(nproc)]


def save_result(rank: int, **values) -> None:
    """In a worker: save arrays (npz) and plain values (JSON) for the test to read."""
    out = Path(os.environ["MT_RESULTS_DIR"])
    arrays = {k: np.asarray(v) for k, v in values.items() if isinstance(v, np.ndarray)}
    plain = {k: v for k, v in values.items() if not isinstance(v, np.ndarray)}
    np.savez(out / f"rank{rank}.npz", **arrays)
    (out / f"rank{rank}.json").write_text(json.dumps(plain))


def load_result(out: Path, rank: int):
    if not (out / f"rank{rank}.json").exists():
        return None
    result = json.loads((out / f"rank{rank}.json").read_text())
    with np.load(out / f"rank{rank}.npz") as arrays:
        result.update({k: arrays[k] for k in arrays.files})
    return result
