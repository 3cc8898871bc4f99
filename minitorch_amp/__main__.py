"""``python -m minitorch_amp``: what this installation runs on, and whether it works.

Prints the environment report (:mod:`minitorch_amp.utils.environment`) at once, then a line
per raw kernel as each is checked (run against its twin on a GPU; compiled with NVRTC
without one, through the kernel cache of :mod:`minitorch_amp.utils.kernel_cache`), then runs
:func:`minitorch_amp.utils.run_check`. Exits 1 when a kernel or the training check fails, or
when ``MINITORCH_AMP_GEMM_KERNEL`` asks for what cannot run.

``--warm-kernel-cache [-j N]`` does none of that: on a GPU it compiles every kernel module
(a file, or one kernel of a split file) into CuPy's on-disk cache, N at once
(:mod:`minitorch_amp.backend.kernel_warmup`), and exits 1 when there is no GPU or a module
does not compile.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from .backend import kernel_warmup
from .utils import collect_env, format_report, kernel_cache, kernel_check, run_check
from .utils.environment import kernel_line


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m minitorch_amp",
        description="Report the environment, check the kernels, train a tiny model.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--no-compile",
        action="store_true",
        help="without a GPU, skip compiling the kernels with NVRTC",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="compile every kernel afresh, neither reading nor writing the kernel cache",
    )
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        type=Path,
        default=kernel_cache.cache_dir(),
        help=f"where kernels compiled without a GPU are kept between runs (set by "
        f"{kernel_cache.CACHE_ENV}, None when it is 0; else $XDG_CACHE_HOME or ~/.cache)",
    )
    parser.add_argument(
        "--warm-kernel-cache",
        action="store_true",
        help="only compile every kernel into CuPy's on-disk kernel cache, on the GPU, -j "
        "modules at once (later processes then load them instead of compiling); no report",
    )
    parser.add_argument(
        "-j",
        "--jobs",
        metavar="N",
        type=_at_least_one,
        help="with --warm-kernel-cache: how many processes compile; None: one per CPU core",
    )
    args = parser.parse_args(argv)
    if args.jobs is not None and not args.warm_kernel_cache:
        parser.error("-j/--jobs goes with --warm-kernel-cache")
    return args


def _at_least_one(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"takes a whole number of processes from 1, got {text!r}")
    return int(text)


def warm_kernel_cache(jobs: int | None) -> int:
    """``--warm-kernel-cache``: a line per module as it is done (a kernel file, or one kernel
    of a split file), then the total; the exit status (1 without a GPU or when a module did
    not compile, the error on stderr)."""
    start = time.perf_counter()

    def done(file: str, seconds: float, error: str | None) -> None:
        status = f"FAILED after {seconds:.1f} s: {error}" if error else f"cached in {seconds:.1f} s"
        print(kernel_line(file, status), flush=True)

    try:
        seconds = kernel_warmup.warm_cache(jobs, progress=done)
    except (RuntimeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    processes = min(jobs or os.cpu_count() or 1, len(seconds))
    longest = max(seconds, key=seconds.get)
    files = len({label.split(" ", 1)[0] for label in seconds})
    print(
        f"CuPy kernel cache: {len(seconds)} modules of {files} kernel files in "
        f"{time.perf_counter() - start:.1f} s, {processes} at once (the longest: {longest}, "
        f"{seconds[longest]:.1f} s)",
        flush=True,
    )
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.warm_kernel_cache:
        return warm_kernel_cache(args.jobs)
    info = collect_env()
    print(format_report(info), flush=True)  # at once: the kernels take a while
    print()
    cache = kernel_cache.KernelCache(None if args.no_cache else args.cache_dir)
    heading, lines = kernel_check.check_kernels(not args.no_compile, cache)
    print(heading, flush=True)
    failed = []
    for file, status in lines:
        print(kernel_line(file, status), flush=True)  # as each one is done
        if status.startswith(("FAILED", "MISMATCH")):
            failed.append(file)
    print(flush=True)
    if info["gemm kernel"].startswith("error: "):
        print(info["gemm kernel"], file=sys.stderr)
        return 1
    try:
        run_check()
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if failed:
        print(f"error: kernel check failed for {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
