"""Train the AMP tutorial's SimpleNet in fp32, O1 or O2: three Linear layers, MSE loss, SGD.

This is the network of Paddle's mixed-precision tutorial, written against minitorch_amp's
Paddle-style API (only the import differs). The default sizes finish in seconds on a laptop
CPU; ``--full`` uses the tutorial's sizes (4096 wide, batch 512, 50 batches, 5 epochs).

    python examples/simple_net.py                  # fp32, small and quick, CPU or GPU
    python examples/simple_net.py --mode O2        # pure fp16 with fp32 master weights
    python examples/simple_net.py --mode O2 --dtype bfloat16   # pure bf16 (no loss scaling)
    python examples/simple_net.py --mode O2 --dtype float8     # bf16, Linear as FP8 GEMMs
    python examples/simple_net.py --accumulate 10  # update every 10 batches
    python examples/simple_net.py --compare        # fp32, O1 and O2 side by side, each warmed up
    python examples/simple_net.py --compare --dtype bfloat16   # plus O1 and O2 in bfloat16
    python examples/simple_net.py --mode O2 --graph   # GPU: each update replayed as a CUDA graph

Losses are summed on the device and read once per epoch: a ``loss.item()`` per batch would
make the host wait for the GPU at every step.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout too

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.device.cuda import graphs
from minitorch_amp.utils.progress import progress as progress_bar
from minitorch_amp.utils.progress import write

MODES = ("fp32", "O1", "O2")
GRAPH_WARMUP = 2  # eager calls of a graphed update before its capture (graphed's default)
DTYPES = ("float16", "bfloat16", "float8")  # float8: bfloat16 AMP plus FP8 GEMMs


class SimpleNet(nn.Layer):
    """linear1 -> relu -> linear2 -> relu -> linear3, each ``input_size -> output_size``."""

    def __init__(self, input_size: int, output_size: int):
        super().__init__()
        self.linear1 = nn.Linear(input_size, output_size)
        self.relu1 = nn.ReLU()
        self.linear2 = nn.Linear(input_size, output_size)
        self.relu2 = nn.ReLU()
        self.linear3 = nn.Linear(input_size, output_size)

    def forward(self, x):
        x = self.relu1(self.linear1(x))
        x = self.relu2(self.linear2(x))
        return self.linear3(x)


def make_data(input_size: int, batch_size: int, batches: int):
    """Random inputs and targets, as in the tutorial (drawn from the seeded generator)."""
    data = [mt.randn([batch_size, input_size]) for _ in range(batches)]
    labels = [mt.randn([batch_size, input_size]) for _ in range(batches)]
    return data, labels


def train(
    input_size=1024,
    batch_size=64,
    batches=20,
    epochs=5,
    seed=0,
    learning_rate=1e-4,
    mode="fp32",
    accumulate=1,
    progress=False,
    log=print,
    graph=False,
    dtype="float16",
) -> list[float]:
    """Train SimpleNet and return the mean loss of each epoch.

    The AMP modes follow the tutorial: a GradScaler with ``init_loss_scaling=1024``;
    ``auto_cast()`` around forward and loss; O2 also ``decorate``s model and optimizer
    (fp16 parameters, fp32 master weights updated by the optimizer). With ``accumulate=N``
    gradients of N batches add up before each update. With ``graph=True`` (O1 or O2, on a
    GPU) ``update`` is wrapped by ``graphs.graphed``: its first two calls run eagerly, the
    third is captured as a CUDA graph, and every later call copies its batches into the
    graph's input tensors and replays it.

    ``dtype='bfloat16'`` runs O1/O2 in bfloat16 without a GradScaler: bfloat16 has float32's
    exponent range, so there is no underflow for a loss scale to prevent (Paddle's GradScaler
    turns dynamic scaling off by itself after a bfloat16 auto_cast, with a warning).
    ``dtype='float8'`` is bfloat16 with the three Linear layers' GEMMs in FP8 inside
    ``amp.fp8_autocast`` (Transformer Engine's default recipe: E4M3 forward, E5M2 gradients,
    delayed per-tensor scaling); no GradScaler either.
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is not available; choose one of {MODES}")
    if accumulate < 1:
        raise ValueError(f"accumulate must be at least 1, got {accumulate}")
    if min(input_size, batch_size, batches, epochs) < 1:
        raise ValueError("input_size, batch_size, batches and epochs must be at least 1")
    if accumulate > batches:
        raise ValueError(f"accumulate ({accumulate}) is more than batches ({batches}): no update")
    if graph:
        check_graph(mode, batches, accumulate)
    mt.seed(seed)
    model = SimpleNet(input_size, input_size)
    optimizer = mt.optimizer.SGD(learning_rate=learning_rate, parameters=model.parameters())
    mse = nn.MSELoss()
    data, labels = make_data(input_size, batch_size, batches)
    scaler = amp.GradScaler(enable=mode != "fp32" and dtype == "float16", init_loss_scaling=1024)
    amp_dtype = "bfloat16" if dtype == "float8" else dtype
    if mode == "O2":
        model, optimizer = amp.decorate(
            models=model, optimizers=optimizer, level="O2", dtype=amp_dtype
        )
    fp8 = amp.fp8_autocast(enabled=dtype == "float8" and mode != "fp32")

    def forward_backward(x, y):
        level = "O1" if mode == "fp32" else mode
        with amp.auto_cast(enable=mode != "fp32", level=level, dtype=amp_dtype), fp8:
            loss = mse(model(x), y)
        scaler.scale(loss).backward()
        return loss

    def update(pairs):
        """Forward and backward on each batch, then one optimizer update; the losses' sum."""
        losses = [forward_backward(x, y) for x, y in pairs]
        scaler.minimize(optimizer, losses[-1])  # = optimizer.step() when scaling is off
        optimizer.clear_grad()
        return sum(losses[1:], losses[0])

    if graph:
        update = graphs.graphed(update)  # warm up, capture, then replay on each new window
    epoch_losses = []
    for epoch in range(epochs):
        total = mt.zeros([], dtype="float64")  # on the device: read once per epoch
        steps = range(0, batches, accumulate)
        if progress:
            steps = progress_bar(steps, desc=f"{mode} epoch {epoch + 1}/{epochs}")
        for i in steps:
            pairs = list(zip(data, labels))[i : i + accumulate]
            if len(pairs) < accumulate:  # a last, partial window: its gradients wait
                for x, y in pairs:
                    total = total + forward_backward(x, y).astype("float64")
                continue
            total = total + update(pairs).astype("float64")
        epoch_losses.append(total.item() / batches)
        log(f"epoch {epoch + 1}: loss = {epoch_losses[-1]:.6f}")
    return epoch_losses


def check_graph(mode: str, batches: int, accumulate: int) -> None:
    """Raise ValueError unless ``mode`` and the sizes can run as a CUDA graph here."""
    if not graphs.is_cuda_graph_supported():
        raise ValueError("--graph needs CuPy on an NVIDIA GPU (this run is on the CPU)")
    if mode == "fp32":
        raise ValueError(
            "--graph needs --mode O1 or O2: fp32 matmuls run on cuBLAS, which CuPy cannot "
            "capture, while the AMP modes' float16 matmuls run on minitorch_amp's own kernel"
        )
    if batches % accumulate:
        raise ValueError(f"--graph needs --batches ({batches}) a multiple of --accumulate")


def warm_up(mode: str, seconds: float = 1.0, **kwargs) -> int:
    """Untimed runs of ``mode`` at the same sizes; returns the batches run.

    The first run compiles the GPU kernels that ``mode`` launches (NVRTC), so the timed run
    that follows reuses them. Each run makes two updates, or with ``graph=True`` as many as
    reach a capture and a replay (``graphed``'s two eager calls, the capture, one replay): a
    process's first capture costs more than the capture each timed graph run still makes.
    On a GPU the runs go on for at least ``seconds``: an idle GPU runs at low clocks and
    needs about a second of sustained work to ramp up. On the CPU one short run is enough.
    """
    updates = GRAPH_WARMUP + 2 if kwargs.get("graph") else 2
    batches = updates * kwargs.get("accumulate", 1)
    run = {**kwargs, "mode": mode, "batches": batches, "epochs": 1, "log": lambda *_: None}
    start, done = time.perf_counter(), 0
    while True:
        train(**run)
        mt.device.synchronize()
        done += batches
        if mt.get_device() == "cpu" or time.perf_counter() - start >= seconds:
            return done


def compared_runs(graph=False, bfloat16=False, float8=False) -> list[tuple[str, bool, str]]:
    """:func:`compare`'s runs in order, as ``(mode, replayed as a graph, dtype)``: fp32 first
    (the speed-ups are against it), then O1 and O2 in each dtype, eager then graphed."""
    runs = [("fp32", False, "float16")]
    dtypes = ["float16"] + ["bfloat16"] * (bfloat16 or float8) + ["float8"] * float8
    for dtype in dtypes:
        replays = (False, True) if graph else (False,)
        runs += [(mode, graphed, dtype) for graphed in replays for mode in MODES[1:]]
    return runs


def compare(graph=False, bfloat16=False, float8=False, **kwargs) -> None:
    """Run every mode on the same data; print time, speed-up, final loss, peak device memory.

    With ``graph=True`` the O1 and O2 runs are repeated with every update replayed as a
    CUDA graph (rows ``O1 graph``, ``O2 graph``). With ``bfloat16=True`` O1 and O2 run in
    bfloat16 as well (rows ``O1 bf16``, ``O2 bf16``); with ``float8=True`` in bfloat16 and
    again with FP8 GEMMs (rows ``O1 fp8``, ``O2 fp8``). With both, each dtype's rows are
    replayed too (``O2 bf16 graph``, ``O2 fp8 graph``: issue 28 compares the FP8 graph step
    with the float16 one).

    Each mode is timed after its own :func:`warm_up`. NOTE: timing a cold run is wrong on a
    GPU: its first steps compile the kernels the mode launches, which is not training time
    (a cold O1 run on an H100 reported 0.42x the speed of fp32).

    Peak memory is the device's (``minitorch_amp.device.max_memory_allocated``): tensor
    storage on the CPU, CuPy's pool on a GPU, above what was allocated before the run.
    """
    rows, warmup_batches = [], float("inf")
    for mode, graphed, dtype in compared_runs(graph, bfloat16, float8):
        warmup_batches = min(warmup_batches, warm_up(mode, graph=graphed, dtype=dtype, **kwargs))
        gc.collect()
        base = mt.device.memory_allocated()
        mt.device.reset_max_memory_allocated()
        start = time.perf_counter()
        run = {**kwargs, "mode": mode, "graph": graphed, "dtype": dtype, "log": lambda *_: None}
        losses = train(**run, progress=True)
        seconds = time.perf_counter() - start
        short = {"bfloat16": " bf16", "float8": " fp8"}.get(dtype, "")
        name = f"{mode}{short}{' graph' if graphed else ''}"
        rows.append((name, seconds, losses[-1], mt.device.max_memory_allocated() - base))
    base = rows[0][1]
    print(
        f"each mode timed after at least {warmup_batches} untimed warm-up batches of its own "
        "(compiling its kernels; on a GPU, at least 1 s of them)"
    )
    print(f"{'mode':<13}{'total time (s)':>16}{'speed-up':>10}{'final loss':>14}{'peak MiB':>10}")
    for mode, seconds, loss, peak in rows:
        print(
            f"{mode:<13}{seconds:>16.3f}{base / seconds:>9.2f}x{loss:>14.6f}{peak / 2**20:>10.1f}"
        )


# The sizes: a quick run by default, the tutorial's with --full; a flag given wins over both.
SIZES = {"input_size": 1024, "batch_size": 64, "batches": 20, "epochs": 5}
FULL_SIZES = {"input_size": 4096, "batch_size": 512, "batches": 50, "epochs": 5}


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Adds "(default: ...)" to each option, except where the help says it (the sizes)."""

    def _get_help_string(self, action):
        if "(default: " in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def parse_args(parser: argparse.ArgumentParser, argv=None) -> argparse.Namespace:
    """The options, each size from its flag, else from ``--full``'s presets, else the default."""
    args = parser.parse_args(argv)
    presets = FULL_SIZES if args.full else SIZES
    for name, value in presets.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=_HelpFormatter
    )
    for flag, name, what in (
        ("--input-size", "input_size", "width of every layer"),
        ("--batch-size", "batch_size", "rows per batch"),
        ("--batches", "batches", "batches per epoch"),
        ("--epochs", "epochs", "passes over the batches"),
    ):
        default = f"(default: {SIZES[name]}; with --full: {FULL_SIZES[name]})"
        parser.add_argument(flag, type=int, default=None, help=f"{what} {default}")
    parser.add_argument("--learning-rate", type=float, default=1e-4, help="SGD's step")
    parser.add_argument("--seed", type=int, default=0, help="weights and data")
    parser.add_argument(
        "--device", default=None, help="'cpu', 'gpu' or 'gpu:N'; None: the GPU if usable"
    )
    parser.add_argument("--mode", default="fp32", choices=MODES, help="precision")
    parser.add_argument(
        "--dtype", default="float16", choices=DTYPES, help="O1/O2's type (float8: bf16 + FP8)"
    )
    parser.add_argument("--accumulate", type=int, default=1, help="batches per update")
    parser.add_argument("--compare", action="store_true", help="run fp32, O1 and O2; a table")
    parser.add_argument(
        "--graph", action="store_true", help="GPU, O1/O2: replay each update as a CUDA graph"
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="the tutorial's sizes: 4096 wide, batch 512, 50 batches (a size flag still wins)",
    )
    return parser


def main(argv=None) -> None:
    parser = make_parser()
    args = parse_args(parser, argv)
    if args.device is not None:
        mt.set_device(args.device)
    if args.accumulate < 1:
        parser.error(f"--accumulate must be at least 1, got {args.accumulate}")
    for name in ("input_size", "batch_size", "batches", "epochs"):
        if getattr(args, name) < 1:
            flag = "--" + name.replace("_", "-")
            parser.error(f"{flag} must be at least 1, got {getattr(args, name)}")
    if args.accumulate > args.batches:
        parser.error(
            f"--accumulate ({args.accumulate}) is more than --batches ({args.batches}): no "
            "window of batches would be complete, so the optimizer would never step"
        )

    sizes = dict(
        input_size=args.input_size,
        batch_size=args.batch_size,
        batches=args.batches,
        epochs=args.epochs,
        seed=args.seed,
        learning_rate=args.learning_rate,
        accumulate=args.accumulate,
    )
    print(
        f"SimpleNet on {mt.get_device()}: width {args.input_size}, batch {args.batch_size}, "
        f"{args.batches} batches x {args.epochs} epochs, update every {args.accumulate} batch(es)"
    )
    if args.graph:
        try:
            check_graph("O1" if args.compare else args.mode, args.batches, args.accumulate)
        except ValueError as exc:
            parser.error(str(exc))
    if args.compare:
        compare(
            graph=args.graph,
            bfloat16=args.dtype == "bfloat16",
            float8=args.dtype == "float8",
            **sizes,
        )
        return
    start = time.perf_counter()
    train(**sizes, mode=args.mode, progress=True, log=write, graph=args.graph, dtype=args.dtype)
    short = {"bfloat16": " bf16", "float8": " fp8"}.get(args.dtype, "")
    bf16 = short if args.mode != "fp32" else ""
    name = f"{args.mode}{bf16}{' graph' if args.graph else ''}"
    print(f"\n{name} time:\ntotal time = {time.perf_counter() - start:.3f} sec")


if __name__ == "__main__":
    main()
