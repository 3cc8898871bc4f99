"""``python -m minitorch_amp.distributed.launch --nproc_per_node N train.py [args]``.

A thin wrapper over ``mpiexec -n N python train.py [args]``: it finds the ``mpiexec`` that
the ``dist`` extra installed (next to this Python first, then on ``PATH``), runs it, and
exits with its status. Everything after the script's name goes to the script.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

__all__ = ["find_mpiexec", "main", "mpiexec_command"]


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
        "mpiexec was not found; install MPI with: pip install 'minitorch_amp[dist]' "
        "(mpi4py and mpich from PyPI)"
    )


def mpiexec_command(nproc: int, script: str, script_args=(), mpiexec: str | None = None) -> list:
    """``[mpiexec, -n, N, python, script, *args]``, with this Python."""
    return [mpiexec or find_mpiexec(), "-n", str(nproc), sys.executable, script, *script_args]


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
    env = dict(os.environ)
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
