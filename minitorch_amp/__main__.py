"""``python -m minitorch_amp``: what this installation runs on, and whether it works.

Prints the environment report (:mod:`minitorch_amp.utils.environment`), checks each raw
kernel (run against its twin on a GPU, compiled with NVRTC without one), then runs
:func:`minitorch_amp.utils.run_check`. Exits 1 when a kernel or the training check fails, or
when ``MINITORCH_AMP_GEMM_KERNEL`` asks for what cannot run.
"""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m minitorch_amp",
        description="Report the environment, check the kernels, train a tiny model.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--no-compile",
        action="store_true",
        help="without a GPU, skip compiling the kernels with NVRTC (a few seconds)",
    )
    args = parser.parse_args(argv)

    from .utils import collect_env, format_report, run_check
    from .utils.kernel_check import check_kernels

    kernels = check_kernels(compile_without_gpu=not args.no_compile)
    info = collect_env()
    print(format_report(info, kernels))
    print()
    failed = [file for file, status in kernels if status.startswith(("FAILED", "MISMATCH"))]
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
