"""The launcher and the failures of a distributed job.

* Failure modes under ``mpiexec``: ``tests/dist/comm_worker.py`` on 2 ranks, one short launch
  each with a small timeout (a rank that dies, raises, leaves or hangs).
* In this process: goodbyes through a stand-in MPI, ``minitorch_amp.distributed.launch``'s
  command line and environment (Open MPI as root), and finding ``mpiexec``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import mpi_run
import pytest
from mpi_run import (  # noqa: F401 (own_world: an autouse fixture)
    HAPPY_ENV,
    WORKERS,
    load_result,
    mpiexec_or_skip,
    own_world,
    run_mpi,
)

from minitorch_amp import distributed as dist
from minitorch_amp.backend import comm as _comm
from minitorch_amp.backend import comm_mpi
from minitorch_amp.distributed import launch

ROOT = Path(__file__).resolve().parents[1]


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
