"""Eager overhead: what one op costs to dispatch, and how a training step scales with its size.

Two measurements, minitorch_amp against PyTorch eager on the same device, interleaved:

1. **Per-op cost** of a tiny op, where the arithmetic is nothing and the dispatch is everything:
   ``a + b`` on two 4-element tensors and ``a @ b`` on two 4x4 matrices, with inputs that
   need no gradient and with inputs that do (so the graph is recorded), against the same call
   on the raw arrays underneath (NumPy, or CuPy on a GPU). Microseconds per call: the median
   over repeats of a loop of calls.
2. **Scaling** of a SimpleNet-like fp32 training step (Linear layers with ReLU between, MSE,
   backward, SGD) with the width (256 ... 4096 at depth 3) and the depth (3 ... 48 layers at
   width 256), batch 32. Small steps are overhead-bound, so the two frameworks' per-op costs
   show; big ones are GEMM-bound and the BLAS decides. A log-log plot goes to
   ``overhead_scaling.png`` (``--plot docs/img/overhead_scaling.png`` replaces the docs').

    python benchmarks/overhead.py            # both parts and the plot: ~1 min on 2 CPU cores
    python benchmarks/overhead.py --quick    # fewer repeats, a rough picture in ~20 s
    python benchmarks/overhead.py --no-plot  # tables only

Every call and step is warmed up untimed first: one call (on a GPU it compiles the kernels),
then more, for at least 1 s of sustained work on a GPU so its clocks are up (``timing.py``).

PyTorch is required (it is what we compare against); it is never needed by the package.
"""

from __future__ import annotations

import argparse
import operator
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout

from timing import interleave, timed, torch_device, warm_up, warmup_seconds

import minitorch_amp as mt
from minitorch_amp import nn
from minitorch_amp.utils.progress import progress

WIDTHS = (256, 512, 1024, 2048, 4096)
DEPTHS = (3, 6, 12, 24, 48)
BATCH = 32


def syncs(device) -> dict:
    """How to wait for each framework's queued work (no-ops on a CPU)."""
    cuda = device.type == "cuda"
    raw = mt.device.synchronize  # CuPy shares our device and stream
    return {
        "ours": mt.device.synchronize,
        "torch": torch.cuda.synchronize if cuda else raw,
        "raw": raw,
    }


# ---- 1. per-op cost --------------------------------------------------------------------------
def raw_array(t: mt.Tensor):
    """The data of ``t`` as the backend's own array: NumPy, or CuPy when we run on a GPU."""
    host = t.numpy()
    if str(mt.get_device()).startswith("gpu"):
        import cupy

        return cupy.asarray(host)
    return host


def tiny_ops(device) -> list:
    """``(op, grad, {framework: call})`` for each tiny op, with and without grad recording."""
    cases = []
    for op, shape in (("add [4]", [4]), ("matmul 4x4", [4, 4])):
        fn = operator.add if op.startswith("add") else operator.matmul
        for grad in (False, True):
            mt.seed(0)
            a, b = mt.randn(shape), mt.randn(shape)
            a.stop_gradient = b.stop_gradient = not grad
            ta, tb = (torch.from_numpy(t.numpy()).to(device).requires_grad_(grad) for t in (a, b))
            calls = {"ours": partial(fn, a, b), "torch": partial(fn, ta, tb)}
            if not grad:  # raw arrays record nothing: one row per op is enough
                ra, rb = raw_array(a), raw_array(b)
                calls["raw"] = partial(fn, ra, rb)
            cases.append((op, grad, calls))
    return cases


def per_call_seconds(call, sync, number: int) -> float:
    """Seconds per call of ``call()``, over a loop of ``number`` calls."""
    sync()
    start = time.perf_counter()
    for _ in range(number):
        call()
    sync()
    return (time.perf_counter() - start) / number


def dispatch_table(device, repeats: int, number: int, warmup_s: float) -> list:
    """Median microseconds per call of every tiny op, the frameworks interleaved per repeat."""
    sync = syncs(device)
    rows = []
    for op, grad, calls in progress(tiny_ops(device), desc="tiny ops", total=4):
        samples = {name: [] for name in calls}
        for name, call in calls.items():
            warm_up(call, sync[name], warmup_s, number // 10)
        for _ in range(repeats):
            for name, call in calls.items():
                samples[name].append(per_call_seconds(call, sync[name], number))
        us = {name: statistics.median(s) * 1e6 for name, s in samples.items()}
        rows.append((op, grad, us))
    return rows


def print_dispatch(rows: list) -> None:
    print("| op | inputs need grad | ours µs | torch µs | raw µs | ours/torch | ours − raw |")
    print("|---|---|---|---|---|---|---|")
    raw_of = {op: us["raw"] for op, grad, us in rows if "raw" in us}
    for op, grad, us in rows:
        raw = raw_of[op]
        cells = [op, "yes" if grad else "no", f"{us['ours']:.2f}", f"{us['torch']:.2f}"]
        cells += [f"{raw:.2f}", f"{us['ours'] / us['torch']:.2f}", f"{us['ours'] - raw:.2f}"]
        print("| " + " | ".join(cells) + " |")


# ---- 2. step time against width and depth ----------------------------------------------------
def mlp_steps(width: int, depth: int, device) -> dict:
    """``{framework: (step, sync)}`` for one fp32 training step of the same MLP in each."""
    mt.seed(0)
    layers = []
    for i in range(depth):
        layers += [nn.Linear(width, width)] + ([nn.ReLU()] if i < depth - 1 else [])
    model = nn.Sequential(*layers)
    optimizer = mt.optimizer.SGD(learning_rate=1e-4, parameters=model.parameters())
    mse = nn.MSELoss()
    x, y = mt.randn([BATCH, width]), mt.randn([BATCH, width])

    def ours():
        loss = mse(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()

    t_layers = [
        torch.nn.Linear(width, width) if isinstance(m, nn.Linear) else torch.nn.ReLU()
        for m in layers
    ]
    with torch.no_grad():
        for theirs, mine in zip(t_layers, layers):
            if isinstance(mine, nn.Linear):  # ours is [in, out], torch's [out, in]
                theirs.weight.copy_(torch.from_numpy(mine.weight.numpy().T))
                theirs.bias.copy_(torch.from_numpy(mine.bias.numpy()))
    t_model = torch.nn.Sequential(*t_layers).to(device)
    t_optimizer = torch.optim.SGD(t_model.parameters(), lr=1e-4)
    tx, ty = (torch.from_numpy(t.numpy()).to(device) for t in (x, y))

    def theirs():
        loss = torch.nn.functional.mse_loss(t_model(tx), ty)
        loss.backward()
        t_optimizer.step()
        t_optimizer.zero_grad()

    sync = syncs(device)
    return {"ours": (ours, sync["ours"]), "torch": (theirs, sync["torch"])}


def ms_per_step(runs: dict, seconds: float, warmup_s: float, warmup: int = 3) -> dict:
    """Median ms/step of each run, with about ``seconds`` of timed steps each (20 at least).

    Fast steps get many more samples than slow ones, in 4 turns per framework.
    """
    for step, _ in runs.values():
        step()  # the first step compiles kernels on a GPU: it would spoil the estimate
    one = max(timed(step, sync) for step, sync in runs.values())
    steps = int(min(400, max(20, seconds / one)))
    medians = interleave(runs, steps, warmup, block=max(5, steps // 4), warmup_s=warmup_s)
    return {name: median * 1e3 for name, median in medians.items()}


def scaling(device, seconds: float, warmup_s: float) -> dict:
    """Median ms/step for every width (depth 3) and every depth (width 256)."""
    results = {"width": {}, "depth": {}}
    for width in progress(WIDTHS, desc="widths (depth 3)"):
        results["width"][width] = ms_per_step(mlp_steps(width, 3, device), seconds, warmup_s)
    for depth in progress(DEPTHS, desc="depths (width 256)"):
        results["depth"][depth] = ms_per_step(mlp_steps(256, depth, device), seconds, warmup_s)
    return results


def per_layer_us(depth_results: dict) -> dict:
    """Least-squares slope of ms/step against depth, in µs per extra Linear+ReLU layer."""
    depths = np.array(list(depth_results), dtype=float)
    return {
        name: np.polyfit(depths, [r[name] for r in depth_results.values()], 1)[0] * 1e3
        for name in ("ours", "torch")
    }


def print_scaling(results: dict) -> None:
    for axis, fixed in (("width", "depth 3"), ("depth", "width 256")):
        print(f"\n{axis} ({fixed}, batch {BATCH}, fp32 step)")
        print(f"| {axis} | ours ms/step | torch ms/step | ours/torch |")
        print("|---|---|---|---|")
        for size, r in results[axis].items():
            print(f"| {size} | {r['ours']:.3f} | {r['torch']:.3f} | {r['ours'] / r['torch']:.2f} |")
    slope = per_layer_us(results["depth"])
    print(f"\nper extra layer: ours {slope['ours']:.0f} µs, torch {slope['torch']:.0f} µs (slope)")


def plot(results: dict, path: Path, title: str) -> None:
    """ms/step against width and against depth, log-log, ours and torch on each panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    fig, panels = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    for ax, axis, fixed in zip(panels, ("width", "depth"), ("depth 3", "width 256")):
        sizes = list(results[axis])
        for name, style in (("ours", "o-"), ("torch", "s--")):
            label = "minitorch_amp" if name == "ours" else "PyTorch eager"
            ax.loglog(sizes, [results[axis][s][name] for s in sizes], style, label=label)
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.xaxis.set_minor_locator(NullLocator())  # the sizes themselves are the ticks
        ax.set_xlabel(f"{axis} ({fixed}, batch {BATCH})")
        ax.set_ylabel("ms per fp32 training step")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="fewer repeats: a rough picture")
    parser.add_argument("--device", default=None, help="'cpu', 'gpu' or 'gpu:N'; None: auto")
    parser.add_argument(
        "--plot",
        type=Path,
        default=Path("overhead_scaling.png"),
        help="where the figure goes; docs/img/overhead_scaling.png for the docs' figure",
    )
    parser.add_argument("--no-plot", action="store_true", help="draw no figure")
    args = parser.parse_args(argv)
    if args.device is not None:
        mt.set_device(args.device)
    device = torch_device()
    repeats, number, seconds = (5, 500, 0.1) if args.quick else (25, 2000, 1.0)
    warmup_s = warmup_seconds(device.type == "cuda")
    where = f"{mt.get_device()}, torch {torch.__version__} ({torch.get_num_threads()} threads)"

    print(f"Per-op cost on {where}: median of {repeats} x {number} calls")
    print_dispatch(dispatch_table(device, repeats, number, warmup_s))
    results = scaling(device, seconds, warmup_s)
    print(f"\nTraining-step scaling on {where}: median of ~{seconds:g} s of steps (20 at least)")
    print_scaling(results)
    if not args.no_plot:
        plot(results, args.plot, f"fp32 training step, minitorch_amp vs PyTorch eager ({where})")
        print(f"\nplot: {args.plot}")


if __name__ == "__main__":
    main()
