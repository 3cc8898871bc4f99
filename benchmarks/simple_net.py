"""SimpleNet training steps in fp32, O1, O2 (float16 or bfloat16), O2 with accumulation:
minitorch_amp vs PyTorch.

One training step is forward, MSE loss, backward, loss scaling and the SGD update. Both
frameworks train the same SimpleNet (three Linear layers, ReLU between) from the same initial
weights on the same batches, on the same device, in one process; their first losses must
agree. After a warm-up (the first step compiles the kernels on a GPU; then more steps, on a
GPU for at least 1 s of sustained work so its clocks are up) the two take turns in short blocks
of steps (``timing.py`` says why not single steps), so a noisy neighbour slows both alike; the
table shows the median of each, and as ours/torch the median over the rounds of each round's
ratio (``timing.paired_ratio``: a drift of the machine's speed cancels in each round).

The modes, side by side:

=========  ==========================================  ==========================================
mode       minitorch_amp                               PyTorch
=========  ==========================================  ==========================================
fp32       plain float32                               plain float32
O1         ``amp.auto_cast(level='O1')`` +             ``torch.autocast(device, float16)`` +
           ``amp.GradScaler``                          ``torch.amp.GradScaler``
O2         ``amp.decorate(level='O2')`` (fp16 model,   ``model.half()`` and fp32 master weights
           fp32 masters in the optimizer) +            kept by hand: after backward the fp16
           ``auto_cast(level='O2')`` + GradScaler      grads are copied into the fp32 masters'
                                                       ``.grad``, ``GradScaler.step`` unscales
                                                       them, checks for inf/NaN and steps an SGD
                                                       over the masters, and the masters are
                                                       copied back into the fp16 model
O2+acc4    O2, gradients of 4 batches summed in fp16   the same
           before one update
O1-bf16,   O1 / O2 in bfloat16 (``dtype='bfloat16'``  ``torch.autocast(device, bfloat16)`` /
O2-bf16    in ``auto_cast`` and ``decorate``), no      ``model.bfloat16()`` with fp32 masters as
           GradScaler (bfloat16 has float32's range)   above; no GradScaler
O1+graph,  the O1 / O2 step captured once as a CUDA    the same step captured with
O2+graph   graph (``device.cuda.graphs.CUDAGraph``)    ``torch.cuda.graph``; its optimizer is
           after one eager step, then replayed: one    SGD(fused=True), whose GradScaler step
           launch per step, no Python in between       never reads the host (a plain SGD's does)
=========  ==========================================  ==========================================

The graph modes need a GPU (CuPy on an NVIDIA device); elsewhere their rows say n/a. The
``kernels/step`` columns count the GPU activities of one step (kernels, memsets, copies) with
``torch.profiler``, which sees CuPy's launches too; they need PyTorch with CUDA.

The loss is computed in float32 in every mode by both (our AMP lists run MSE in float32, or
promote it to the float32 targets in bfloat16; the PyTorch O2 step casts the 16-bit output up
first). Both float16 scalers start at 1024, dynamic. For
O2+acc4 one timed step is 4 batches and one update; the table divides it by 4 (ms per batch).

Memory: the peak device memory of each mode above what was allocated before it (model, grads,
master weights, activations; the input batches are shared and excluded). Ours comes from our
accounting (``minitorch_amp.device.max_memory_allocated``: tensor storage on the CPU, the CuPy
pool on a GPU); PyTorch's from ``torch.cuda.max_memory_allocated`` on a GPU. On the CPU
PyTorch has no allocation counter (and its allocations bypass ``tracemalloc``), so it is n/a.

    python benchmarks/simple_net.py                        # width 256, batch 32: ~20 s on 2 cores
    python benchmarks/simple_net.py --full --modes fp32    # width 4096, batch 512: ~1 min
    python benchmarks/simple_net.py --no-torch             # ours only
    python benchmarks/simple_net.py --full --modes O2 O2+graph   # eager vs graph on a GPU

NOTE: on a CPU, PyTorch has no fast float16 GEMM (it falls back to a scalar loop: ~60 s for one
512x4096x4096 product on 2 cores), so ``--full`` with O1/O2 runs for hours there. Ours
emulates fp16 GEMMs as float32 GEMMs on fp16-rounded inputs, so the fp16 modes stay usable.
"""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

# NOTE: examples/ goes first: this file is also called simple_net.py, and the model we want
# is the example's (benchmarks/ is on the path too, for timing.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from simple_net import SimpleNet
from timing import interleave_rounds, paired_ratio, torch_device, warmup_seconds

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.device.cuda import graphs

try:
    import torch
except ImportError:  # the comparison is optional: ours alone still runs
    torch = None

MODES = ("fp32", "O1", "O2", "O2+acc4", "O1+graph", "O2+graph", "O1-bf16", "O2-bf16")
GRAPH = "+graph"
BF16 = "-bf16"
ACCUMULATE = 4
LEARNING_RATE = 1e-4
INIT_SCALE = 1024.0


# ---- minitorch_amp ---------------------------------------------------------------------------
def ours_step(mode: str, width: int, batches: list, optimizer_name: str = "SGD"):
    """A fresh SimpleNet for ``mode``: ``(step, initial fp32 weights as NumPy)``.

    ``step()`` trains one step and returns the (last) loss tensor, without reading it.
    The weights are Paddle-shaped: Linear weights are ``[in, out]``. A graph mode runs the
    eager step once, captures it, and its ``step()`` replays the graph.
    """
    if mode.endswith(GRAPH):
        eager, weights = ours_step(mode.removesuffix(GRAPH), width, batches, optimizer_name)
        eager()  # the warm-up the capture needs: optimizer state, kernels, kernel tables
        g = graphs.CUDAGraph()
        with graphs.graph(g):
            loss = eager()

        def replay():
            g.replay()
            return loss

        return replay, weights
    mt.seed(0)
    model = SimpleNet(width, width)
    weights = [
        (layer.weight.numpy().copy(), layer.bias.numpy().copy())
        for layer in (model.linear1, model.linear2, model.linear3)
    ]
    optimizer = getattr(mt.optimizer, optimizer_name)(
        learning_rate=LEARNING_RATE, parameters=model.parameters()
    )
    mse = nn.MSELoss()
    if mode == "fp32":

        def step():
            x, y = batches[0]
            loss = mse(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.clear_grad()
            return loss

        return step, weights

    level = "O1" if mode.startswith("O1") else "O2"
    dtype = "bfloat16" if mode.endswith(BF16) else "float16"
    if level == "O2":
        model, optimizer = amp.decorate(model, optimizer, level="O2", dtype=dtype)
    # bfloat16 needs no loss scaling: a disabled scaler passes the loss and the step through
    scaler = amp.GradScaler(enable=dtype == "float16", init_loss_scaling=INIT_SCALE)
    accumulate = ACCUMULATE if mode == "O2+acc4" else 1

    def step():
        for x, y in batches[:accumulate]:
            with amp.auto_cast(level=level, dtype=dtype):
                loss = mse(model(x), y)
            scaler.scale(loss).backward()
        scaler.minimize(optimizer, loss)
        optimizer.clear_grad()
        return loss

    return step, weights


# ---- PyTorch ---------------------------------------------------------------------------------
def torch_optimizer(name: str, params, fused: bool):
    """PyTorch's ``SGD`` or ``Adam``: fused (capturable) for graph modes; Adam's multi-tensor
    ``foreach`` path otherwise (SGD keeps PyTorch's default)."""
    if name == "SGD":
        return torch.optim.SGD(params, lr=LEARNING_RATE, fused=fused)
    return torch.optim.Adam(
        params, lr=LEARNING_RATE, **({"fused": True} if fused else {"foreach": True})
    )


def torch_step(mode: str, weights: list, batches: list, device, optimizer_name: str = "SGD"):
    """The same SimpleNet in PyTorch from ``weights`` (ours, ``[in, out]``); return ``step``."""
    mse_loss = torch.nn.functional.mse_loss
    linears = [torch.nn.Linear(*w.shape) for w, _ in weights]
    model = torch.nn.Sequential(
        linears[0], torch.nn.ReLU(), linears[1], torch.nn.ReLU(), linears[2]
    )
    with torch.no_grad():
        for linear, (w, b) in zip(linears, weights):
            linear.weight.copy_(torch.from_numpy(w.T))  # torch's Linear weight is [out, in]
            linear.bias.copy_(torch.from_numpy(b))
    model.to(device)
    if mode == "fp32":
        optimizer = torch_optimizer(optimizer_name, model.parameters(), fused=False)

        def step():
            x, y = batches[0]
            loss = mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            return loss

        return step

    low = torch.bfloat16 if mode.endswith(BF16) else torch.float16
    scaler = torch.amp.GradScaler(device.type, init_scale=INIT_SCALE, enabled=low == torch.float16)
    fused = mode.endswith(GRAPH)  # capturable: its scaler step reads no host value
    if mode.startswith("O1"):
        optimizer = torch_optimizer(optimizer_name, model.parameters(), fused=fused)

        def step():
            x, y = batches[0]
            with torch.autocast(device.type, dtype=low):
                loss = mse_loss(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
            return loss

        return torch_graph(step) if fused else step

    # O2 by hand: a 16-bit model, fp32 master copies that the optimizer owns.
    params = list(model.to(low).parameters())
    masters = [p.detach().float().requires_grad_() for p in params]
    optimizer = torch_optimizer(optimizer_name, masters, fused=fused)
    accumulate = ACCUMULATE if mode == "O2+acc4" else 1

    def step():
        for x, y in batches[:accumulate]:
            loss = mse_loss(model(x.to(low)).float(), y)
            scaler.scale(loss).backward()
        for master, p in zip(masters, params):
            master.grad = p.grad.float()
        scaler.step(optimizer)  # unscales the master grads, skips the step on inf/NaN
        scaler.update()
        with torch.no_grad():
            torch._foreach_copy_(params, masters)  # fp32 -> 16 bits, round to nearest even
        model.zero_grad()
        optimizer.zero_grad()
        return loss

    return torch_graph(step) if fused else step


def torch_graph(step):
    """``step`` captured with ``torch.cuda.graph`` after one eager step on a side stream (as
    PyTorch's docs ask); returns the replaying step."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        loss = step()

    def replay():
        g.replay()
        return loss

    return replay


def count_gpu_activities(step, sync):
    """Kernels, memsets and copies that one ``step()`` puts on the GPU (torch.profiler), or
    None without PyTorch with CUDA."""
    if torch is None or not torch.cuda.is_available():
        return None
    from torch.profiler import ProfilerActivity, profile

    sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        sync()
    return sum(1 for e in prof.events() if e.device_type.name == "CUDA")


# ---- measuring -------------------------------------------------------------------------------
def check_same_start(mode: str, ours_loss, torch_loss) -> None:
    """Both frameworks must train the same model: their first losses agree."""
    a, b = float(ours_loss.item()), float(torch_loss.item())
    # 16-bit activations round differently; bfloat16 keeps 3 bits fewer than float16
    tolerance = 1e-4 if mode == "fp32" else 3e-2 if mode.endswith(BF16) else 1e-2
    if abs(a - b) > tolerance * max(abs(a), abs(b)):
        raise RuntimeError(f"{mode}: first losses differ (ours {a}, torch {b}): not one model")


def measure(
    mode, width, ours_batches, torch_batches, device, warmup, steps, block, warmup_s,
    optimizer_name="SGD",
) -> dict:  # fmt: skip
    """Median seconds per batch and peak bytes of ``mode`` for ours and (if given) torch.

    Each run warms up untimed first: ``warmup`` steps and at least ``warmup_s`` seconds.
    """
    per_batch = ACCUMULATE if mode == "O2+acc4" else 1
    if mode.endswith(GRAPH) and not graphs.is_cuda_graph_supported():
        return {"ours": None, "ours_peak": None, "note": "graphs need a GPU"}
    gc.collect()
    base = mt.device.memory_allocated()
    mt.device.reset_max_memory_allocated()
    ours, weights = ours_step(mode, width, ours_batches, optimizer_name)
    runs = {"ours": (ours, mt.device.synchronize)}
    on_gpu = device is not None and device.type == "cuda"
    if device is not None:
        if on_gpu:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats(device)
            torch_base = torch.cuda.memory_allocated(device)
        theirs = torch_step(mode, weights, torch_batches, device, optimizer_name)
        runs["torch"] = (theirs, torch.cuda.synchronize if on_gpu else lambda: None)
        check_same_start(mode, ours(), theirs())

    wake = 1 if block > 1 else 0  # single long steps need no untimed step to wake threads
    medians, rounds = interleave_rounds(
        runs, steps, warmup, block, wake, warmup_s=warmup_s, desc=mode
    )
    result = {name: seconds / per_batch for name, seconds in medians.items()}
    if "torch" in runs:  # each round's two blocks side by side: a drifting machine cancels
        result["ratio"] = paired_ratio(rounds, "ours", "torch")
    for name, (step, sync) in runs.items():
        result[f"{name}_kernels"] = count_gpu_activities(step, sync)
    result["ours_peak"] = mt.device.max_memory_allocated() - base
    if on_gpu:
        result["torch_peak"] = torch.cuda.max_memory_allocated(device) - torch_base
    return result


# ---- the table -------------------------------------------------------------------------------
def _ms(seconds) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e3:.3f}"


def _ratio(a, b, suffix="") -> str:
    return "n/a" if a is None or b is None else f"{a / b:.2f}{suffix}"


def _mib(nbytes) -> str:
    return "n/a" if nbytes is None else f"{nbytes / 2**20:.1f}"


def _count(n) -> str:
    return "n/a" if n is None else str(n)


def print_table(results: dict) -> None:
    """One Markdown table: times, ratios, speed-ups over each framework's fp32, peak memory."""
    fp32 = results.get("fp32", {})
    print(
        "| mode | ours ms/step | torch ms/step | ours/torch | ours speed-up vs our fp32 "
        "| torch speed-up vs torch fp32 | ours peak MiB | torch peak MiB "
        "| ours kernels/step | torch kernels/step |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for mode, r in results.items():
        ours, theirs = r["ours"], r.get("torch")
        cells = [
            mode,
            _ms(ours),
            _ms(theirs),
            "n/a" if r.get("ratio") is None else f"{r['ratio']:.2f}",
            _ratio(fp32.get("ours"), ours, "x"),
            _ratio(fp32.get("torch"), theirs, "x"),
            _mib(r["ours_peak"]),
            _mib(r.get("torch_peak")),
            _count(r.get("ours_kernels")),
            _count(r.get("torch_kernels")),
        ]
        print("| " + " | ".join(cells) + " |")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--width", type=int, default=None, help="layer width (256; 4096 with --full)"
    )
    parser.add_argument(
        "--batch", type=int, default=None, help="rows per step (32; 512 with --full)"
    )
    parser.add_argument(
        "--full", action="store_true", help="the tutorial's sizes; --width/--batch still win"
    )
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--steps", type=int, default=None, help="timed steps (30; 15 with --full)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps (5; 2 with --full)")
    parser.add_argument("--block", type=int, default=None, help="steps per turn (5; 1 with --full)")
    parser.add_argument("--device", default=None, help="'cpu', 'gpu' or 'gpu:N'; None: auto")
    parser.add_argument("--no-torch", action="store_true", help="time minitorch_amp only")
    parser.add_argument(
        "--optimizer", default="SGD", choices=("SGD", "Adam"), help="the tutorial's SGD, or Adam"
    )
    args = parser.parse_args(argv)
    if args.width is None:
        args.width = 4096 if args.full else 256
    if args.batch is None:
        args.batch = 512 if args.full else 32
    steps = args.steps or (15 if args.full else 30)
    warmup = args.warmup if args.warmup is not None else (2 if args.full else 5)
    block = args.block or (1 if args.full else 5)
    if args.device is not None:
        mt.set_device(args.device)
    device = None if args.no_torch or torch is None else torch_device(required=False)
    warmup_s = warmup_seconds(str(mt.get_device()).startswith("gpu"))
    if torch is not None:
        torch.manual_seed(0)

    mt.seed(1)
    ours_batches = [
        (mt.randn([args.batch, args.width]), mt.randn([args.batch, args.width]))
        for _ in range(ACCUMULATE)
    ]
    torch_batches = []
    if device is not None:
        torch_batches = [
            (torch.from_numpy(x.numpy()).to(device), torch.from_numpy(y.numpy()).to(device))
            for x, y in ours_batches
        ]
    threads = f", torch {torch.__version__} ({torch.get_num_threads()} threads)" if device else ""
    sustained = f" (and >= {warmup_s:g} s)" if warmup_s else ""
    print(
        f"SimpleNet on {mt.get_device()}{threads}: width {args.width}, batch {args.batch}, "
        f"{args.optimizer}, "
        f"median of {steps} steps after {warmup} warm-up{sustained}, "
        f"interleaved in blocks of {block}"
    )
    if device is None and not args.no_torch:
        print("(PyTorch is not installed, or has no CUDA for our GPU: ours only)")
    slow = [m for m in args.modes if m != "fp32"] if device and device.type == "cpu" else []
    if slow and args.width >= 1024:
        print(
            f"NOTE: PyTorch has no fast float16 GEMM on a CPU; {', '.join(slow)} at width "
            f"{args.width} take minutes per step there. --no-torch or --modes fp32 skip them."
        )

    results = {}
    for mode in args.modes:
        results[mode] = measure(
            mode, args.width, ours_batches, torch_batches, device, warmup, steps, block,
            warmup_s, args.optimizer,
        )  # fmt: skip
    print_table(results)


if __name__ == "__main__":
    main()
