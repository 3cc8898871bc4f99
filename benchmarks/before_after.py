"""Our training step at an earlier commit and now, in one process, taking turns.

On the shared 2-core development machine two runs of one benchmark differ by 30% and more
(the neighbours' load comes and goes), far more than most host-cost changes, so comparing a
run before a change with a run after it says little. Here both versions of the package are
imported into one process (the earlier one extracted with ``git archive REV``) and their steps
take turns in short blocks, as ``timing.interleave`` runs ours against PyTorch: a noisy
neighbour slows both alike. Python's garbage collector waits between turns (as ``timeit``
makes it wait): one version's cycles are not collected in the other's steps. The table shows
the median step of each, and the median over the rounds of each round's after / before
(``timing.paired_ratio``: a drift of the machine's speed cancels in each round).

    python benchmarks/before_after.py --before 0a377f9                # tiny SimpleNet, fp32/O1/O2
    python benchmarks/before_after.py --before HEAD~3 --modes O2      # one mode
    python benchmarks/before_after.py --before 0a377f9 --workload gpt # the GPT step, 1 BLAS thread
    python benchmarks/before_after.py --before HEAD~1 --modes fp32 --width 256 --batch 32 \
        --optimizer SGD                                                 # a wider SimpleNet
    python benchmarks/before_after.py --before HEAD~1 --control       # and the harness's noise
    python benchmarks/before_after.py --before HEAD~1 --gpu-stand-in  # the GPU path's Python
    python benchmarks/before_after.py --before HEAD~1 --workload fp8 --gpu-stand-in  # FP8's
    python benchmarks/before_after.py --before HEAD~1 --workload gpt --gpu-stand-in  # GPT O2's

``--control`` adds a third contestant, the working tree imported a second time: *after* against
its own copy measures what this harness calls a change when there is none (on the 2-core
machine 0.98 to 1.08 for two copies of one commit), printed beside every after / before.

*After* is this checkout's working tree, uncommitted changes included. The tiny workload is
``benchmarks/simple_net.py``'s step at width 64, batch 8, Adam (the step issue 24's CPU target
names; ``--width``, ``--batch`` and ``--optimizer`` change it); the GPT workload is
``benchmarks/gpt_step.py``'s fp32 step (batch 16, 1 BLAS thread when threadpoolctl is
installed). Each version runs its own copy of those scripts. ``--gpu-stand-in`` runs the
SimpleNet step on the GPU path with CuPy and a Hopper GPU stood in for
(``benchmarks/gpu_stand_in.py``): the library's own Python of a GPU step, on the CPU. The
fp8 workload is ``benchmarks/step_kernels.py``'s O2 step with FP8 GEMMs (bfloat16 O2 under
``amp.fp8_autocast``, SGD, no scaler), width 64 and batch 16 unless told. The GPT on the
stand-in is its O2 step at context 8, width 16 and batch 1: every op of the example's step
(4 layers, 4 heads), on arrays small enough that the stand-in's NumPy arithmetic does not
drown the Python.

NOTE: two versions of one package in one process. Each version's modules are kept apart and
put back into ``sys.modules`` at the start of each of its turns: a function that imports
lazily must find its own version's modules, not the other's.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]  # (timing imports this checkout's package)
import gpu_stand_in  # noqa: E402 (this checkout's, whichever version stands on it)
from timing import SETTLE_S, paired_ratio  # noqa: E402 (benchmarks/ first on the path)

TINY_MODES = ("fp32", "O1", "O2")
OURS = ("minitorch_amp", "simple_net", "gpt", "gpt_step", "timing")  # modules kept per version


def _ours(name: str) -> bool:
    return name.split(".")[0] in OURS or name.startswith("_before_after_")


def extract(rev: str, into: Path) -> str:
    """``git archive rev`` of this checkout unpacked into ``into``; returns the short hash and
    subject. Raises SystemExit with the reason when it cannot."""
    describe = subprocess.run(
        ["git", "log", "-1", "--format=%h %s", rev], cwd=ROOT, capture_output=True, text=True
    )
    if describe.returncode != 0:
        raise SystemExit(
            f"--before {rev!r}: not a revision of this checkout ({describe.stderr.strip()}); "
            "name a commit, a tag or e.g. HEAD~1 of a git clone"
        )
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True)
    if archive.returncode != 0:
        raise SystemExit(f"git archive {rev} failed: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return describe.stdout.strip()


def load(root: Path, build):
    """Import the package and scripts of the checkout at ``root``, call ``build(script)``
    with ``script(name)`` importing ``root/benchmarks/name.py``; return ``(what build
    returned, that version's modules)``."""
    for name in [n for n in sys.modules if _ours(n)]:
        del sys.modules[name]
    paths = [str(root), str(root / "benchmarks"), str(root / "examples")]
    sys.path[:0] = paths

    def script(name: str):
        spec = importlib.util.spec_from_file_location(
            f"_before_after_{name}", root / "benchmarks" / f"{name}.py"
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module

    try:
        built = build(script)
        import minitorch_amp

        if not Path(minitorch_amp.__file__).resolve().is_relative_to(root.resolve()):
            raise SystemExit(f"imported {minitorch_amp.__file__}, not the checkout at {root}")
    finally:
        del sys.path[: len(paths)]
    return built, {n: m for n, m in sys.modules.items() if _ours(n)}


def use(modules: dict) -> None:
    """Make ``modules`` (one version's) the ones ``import`` finds."""
    for name in [n for n in sys.modules if _ours(n)]:
        del sys.modules[name]
    sys.modules.update(modules)


def tiny_steps(modes, width: int = 64, batch: int = 8, optimizer: str = "Adam", stand_in=None):
    """``build`` for the SimpleNet step (tiny by default): mode -> step. With ``stand_in``
    (an ``ExitStack``, open while the steps run), each version's step runs the GPU path on
    ``gpu_stand_in``'s stand-in for CuPy and a Hopper GPU."""

    def build(script):
        bench = script("simple_net")
        import minitorch_amp as mt

        _on_the_stand_in(stand_in, mt)

        rng = np.random.default_rng(0)
        x, y = (rng.standard_normal((batch, width)).astype(np.float32) for _ in range(2))
        batches = [(mt.to_tensor(x), mt.to_tensor(y))]
        return {mode: bench.ours_step(mode, width, batches, optimizer)[0] for mode in modes}

    return build


def fp8_steps(width: int, batch: int, stand_in=None):
    """``build`` for ``benchmarks/step_kernels.py``'s O2 step with FP8 GEMMs (bfloat16 O2
    under ``amp.fp8_autocast``, SGD, no scaler): {'O2 FP8': step}."""

    def build(script):
        bench = script("step_kernels")
        import minitorch_amp as mt

        _on_the_stand_in(stand_in, mt)
        return {"O2 FP8": bench.make_step("O2", "float8", width, batch)}

    return build


def _on_the_stand_in(stand_in, mt) -> None:
    """With ``stand_in`` (an open ``ExitStack``), the GPU stood in for under ``mt``, the
    version being loaded (``gpu_stand_in`` patches the modules it imports now)."""
    if stand_in is None:
        return
    stand_in.enter_context(gpu_stand_in.stand_in())
    mt.set_device("gpu:0")


def gpt_steps(stand_in=None):
    """``build`` for the GPT step: {'GPT fp32': step}, a new batch each call; with
    ``stand_in``, {'GPT O2': step} on the GPU path at :data:`gpu_stand_in.GPT_SIZE`'s size."""

    def build(script):
        bench = script("gpt_step")
        level, batch = "fp32", 16
        if stand_in is not None:
            import minitorch_amp as mt

            _on_the_stand_in(stand_in, mt)
            bench.CONFIG.update(gpu_stand_in.GPT_SIZE)
            level, batch = "O2", 1
        ours, _, batches = bench.setup(level, batch, None)
        return {f"GPT {level}": lambda: ours(*batches()[0])}

    return build


def measure(versions: dict, names, steps: int, warmup: int, block: int) -> dict:
    """``{name: {version: median seconds, 'ratio': after over before}}`` (and ``'noise'``:
    after over ``control`` when that version is there): the versions take turns, ``block``
    steps each, each version first as often as any other; a ratio is the median of the
    rounds' (``paired_ratio``)."""
    results = {}
    for name in names:
        times = {version: [] for version in versions}
        rounds = []  # per round: each version's block median
        for steps_of, modules in versions.values():
            use(modules)
            for _ in range(warmup):
                steps_of[name]()
        order = list(versions.items())
        while min(len(t) for t in times.values()) < steps:
            order = order[1:] + order[:1]  # each goes first in turn: none always follows a pause
            rounds.append({})
            for version, (steps_of, modules) in order:
                use(modules)
                gc.collect()  # both versions' garbage, collected between turns (timeit's way)
                time.sleep(SETTLE_S)
                step = steps_of[name]
                step()  # untimed: wakes the thread pools after the pause
                gc.disable()
                turn = []
                try:
                    for _ in range(min(block, steps - len(times[version]))):
                        start = time.perf_counter()
                        step()
                        turn.append(time.perf_counter() - start)
                finally:
                    gc.enable()
                times[version] += turn
                if turn:
                    rounds[-1][version] = statistics.median(turn)
        results[name] = {version: statistics.median(t) for version, t in times.items()}
        results[name]["ratio"] = paired_ratio(rounds, "after", "before")
        if "control" in versions:
            results[name]["noise"] = paired_ratio(rounds, "after", "control")
    return results


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--before", required=True, help="the earlier revision (git)")
    parser.add_argument("--workload", choices=("tiny", "fp8", "gpt"), default="tiny")
    parser.add_argument("--modes", nargs="+", choices=TINY_MODES, default=list(TINY_MODES))
    parser.add_argument("--width", type=int, default=64, help="the SimpleNet workloads' width")
    parser.add_argument(
        "--batch", type=int, default=None, help="the SimpleNet workloads' rows (tiny 8, fp8 16)"
    )
    parser.add_argument("--optimizer", choices=("Adam", "SGD"), default="Adam")
    parser.add_argument("--steps", type=int, default=None, help="timed steps (tiny 300, gpt 16)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps (tiny 30, gpt 3)")
    parser.add_argument("--block", type=int, default=None, help="steps per turn (tiny 10, gpt 2)")
    parser.add_argument(
        "--control",
        action="store_true",
        help="also time a second copy of the working tree: after / control is the noise",
    )
    parser.add_argument(
        "--gpu-stand-in",
        action="store_true",
        help="the step on the GPU path, CuPy and the GPU stood in for on the CPU (the GPT: O2, "
        "context 8, width 16, batch 1)",
    )
    args = parser.parse_args(argv)
    tiny = args.workload != "gpt"  # a SimpleNet step: tiny or fp8
    if args.batch is None:  # (an FP8 GEMM's K is at least 16: the weight gradients' is batch)
        args.batch = 16 if args.workload == "fp8" else 8
    steps = args.steps or (300 if tiny else 16)
    warmup = args.warmup if args.warmup is not None else (30 if tiny else 3)
    block = args.block or (10 if tiny else 2)
    if min(steps, block, args.width, args.batch) < 1 or warmup < 0:
        raise SystemExit(
            "--steps, --block, --width and --batch must be at least 1, --warmup at least 0"
        )
    if not tiny:
        try:
            from threadpoolctl import threadpool_limits

            threadpool_limits(limits=1, user_api="blas")
        except ImportError:
            print("threadpoolctl is not installed: NumPy's BLAS keeps its default thread count")
    stand_in = contextlib.ExitStack() if args.gpu_stand_in else None
    if args.workload == "fp8":
        build = fp8_steps(args.width, args.batch, stand_in)
    elif tiny:
        build = tiny_steps(args.modes, args.width, args.batch, args.optimizer, stand_in)
    else:
        build = gpt_steps(stand_in)
    with tempfile.TemporaryDirectory() as scratch, stand_in or contextlib.nullcontext():
        before_root = Path(scratch)
        described = extract(args.before, before_root)
        head = subprocess.run(
            ["git", "log", "-1", "--format=%h"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        versions = {"before": load(before_root, build), "after": load(ROOT, build)}
        if args.control:
            versions["control"] = load(ROOT, build)  # fresh modules: the same code again
        names = list(versions["after"][0])
        results = measure(versions, names, steps, warmup, block)
    size = f"width {args.width}, batch {args.batch}, {args.optimizer}"
    simple_net_label = f"{'tiny ' if (args.width, args.batch) == (64, 8) else ''}SimpleNet ({size})"
    if args.workload == "fp8":
        simple_net_label = (
            f"SimpleNet O2 with FP8 GEMMs (bfloat16, width {args.width}, batch {args.batch}, SGD)"
        )
    where = "on the GPU path, CuPy and the GPU stood in for" if args.gpu_stand_in else "on the CPU"
    gpt_label = "GPT (batch 16)"
    if args.gpu_stand_in:
        size = gpu_stand_in.GPT_SIZE
        gpt_label = f"GPT O2 (context {size['context']}, width {size['width']}, batch 1)"
    print(
        f"{simple_net_label if tiny else gpt_label} {where}: "
        f"before {described}; after the working tree at {head or 'this checkout'}; median of "
        f"{steps} steps each after {warmup} warm-up, taking turns in blocks of {block}; "
        "after / before: the median of the rounds' ratios"
    )
    control = " | control ms | after / control (no change: the noise)" if args.control else ""
    print(f"| step | before ms | after ms | after / before{control} |")
    print("|---|---|---|---|" + ("---|---|" if args.control else ""))
    for name, medians in results.items():
        before, after, ratio = medians["before"], medians["after"], medians["ratio"]
        row = f"| {name} | {before * 1e3:.3f} | {after * 1e3:.3f} | {ratio:.3f} |"
        if args.control:
            row += f" {medians['control'] * 1e3:.3f} | {medians['noise']:.3f} |"
        print(row)


if __name__ == "__main__":
    main()
