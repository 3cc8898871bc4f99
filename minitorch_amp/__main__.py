"""``python -m minitorch_amp``: what this installation runs on, and whether it works.

Prints the environment report (:mod:`minitorch_amp.utils.environment`) at once, then a line
per raw kernel as each is checked (run against its twin on a GPU; compiled with NVRTC
without one, through the kernel cache of :mod:`minitorch_amp.utils.kernel_cache`), then runs
:func:`minitorch_amp.utils.run_check`. Exits 1 when a kernel or the training check fails, or
when ``MINITORCH_AMP_GEMM_KERNEL`` asks for what cannot run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

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
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
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
