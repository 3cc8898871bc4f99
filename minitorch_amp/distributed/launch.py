"""``python -m minitorch_amp.distributed.launch --nproc_per_node N train.py [args]``.

A thin wrapper over ``mpiexec -n N python train.py [args]``: it finds the ``mpiexec`` that
the ``dist`` extra installed (next to this Python first, then on ``PATH``), runs it, and
exits with its status. Everything after the script's name goes to the script.

Run as root, it tells Open MPI that this is intended (see :func:`mpiexec_env`); MPICH, the
``dist`` extra's MPI, needs nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

__all__ = ["find_mpiexec", "main", "mpiexec_command", "mpiexec_env"]

# Open MPI's mpiexec refuses to start as root unless both are set; MPICH ignores them.
OPENMPI_ROOT_VARS = ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")


def find_mpiexec() -> str:
    """The path of ``mpiexec``; raises FileNotFoundError with the install command."""
    for folder in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        candidate = folder / "mpiexec"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("mpiexec")
    if found:
        return found
    raise FileNotFoundError(
        "mpiexec was not found; install MPI from the repository root with: "
        "python -m pip install -e '.[dist]' "
        "(mpi4py and mpich from PyPI)"
    )


def mpiexec_command(nproc: int, script: str, script_args=(), mpiexec: str | None = None) -> list:
    """``[mpiexec, -n, N, python, script, *args]``, with this Python."""
    return [mpiexec or find_mpiexec(), "-n", str(nproc), sys.executable, script, *script_args]


def mpiexec_env(env: dict | None = None, as_root: bool | None = None) -> dict:
    """A copy of ``env`` (default: ``os.environ``) that ``mpiexec`` may run with, MPI of any kind.

    As root, Open MPI's ``mpiexec`` exits at once ("mpirun has detected an attempt to run as
    root") unless ``OMPI_ALLOW_RUN_AS_ROOT=1`` and ``OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1`` are
    set, as in a container; MPICH ignores both. So they are added when running as root, and
    only then; a value the user already set is kept.

    Args:
        env: the environment to start from; not changed.
        as_root: whether this process runs as root (default: its effective user id is 0).

    Example:
        >>> from minitorch_amp.distributed.launch import mpiexec_env
        >>> mpiexec_env({"PATH": "/usr/bin"}, as_root=True)["OMPI_ALLOW_RUN_AS_ROOT"]
        '1'
        >>> "OMPI_ALLOW_RUN_AS_ROOT" in mpiexec_env({"PATH": "/usr/bin"}, as_root=False)
        False
    """
    env = dict(os.environ if env is None else env)
    if as_root is None:
        as_root = hasattr(os, "geteuid") and os.geteuid() == 0  # no geteuid on Windows
    if as_root:
        for key in OPENMPI_ROOT_VARS:
            env.setdefault(key, "1")
    return env


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m minitorch_amp.distributed.launch",
        description="Start N ranks of a training script with mpiexec.",
    )
    parser.add_argument("--nproc_per_node", type=int, default=1, help="ranks to start (>= 1)")
    parser.add_argument(
        "--backend", choices=("mpi", "nccl", "local"), help="sets MINITORCH_AMP_DIST_BACKEND"
    )
    parser.add_argument("--timeout", type=float, help="sets MINITORCH_AMP_DIST_TIMEOUT (s)")
    parser.add_argument("script", help="the training script")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, help="passed to the script")
    return parser


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.nproc_per_node < 1:
        _parser().error(f"--nproc_per_node must be >= 1, got {args.nproc_per_node}")
    if not Path(args.script).is_file():
        _parser().error(f"no such script: {args.script}")
    env = mpiexec_env()
    if args.backend:
        env["MINITORCH_AMP_DIST_BACKEND"] = args.backend
    if args.timeout is not None:
        if not args.timeout > 0:
            _parser().error("--timeout must be a positive number of seconds")
        env["MINITORCH_AMP_DIST_TIMEOUT"] = str(args.timeout)
    try:
        command = mpiexec_command(args.nproc_per_node, args.script, args.script_args)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        return subprocess.call(command, env=env)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
