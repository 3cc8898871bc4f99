"""Train the AMP tutorial's SimpleNet in fp32, O1 or O2: three Linear layers, MSE loss, SGD.

This is the network of Paddle's mixed-precision tutorial, written against minitorch_amp's
Paddle-style API (only the import differs). The default sizes finish in seconds on a laptop
CPU; ``--full`` uses the tutorial's sizes (4096 wide, batch 512, 50 batches, 5 epochs).

    python examples/simple_net.py                  # fp32, small and quick, CPU or GPU
    python examples/simple_net.py --mode O2        # pure fp16 with fp32 master weights
    python examples/simple_net.py --accumulate 10  # update every 10 batches
    python examples/simple_net.py --compare        # fp32, O1 and O2 side by side, each warmed up
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

try:
    from tqdm import tqdm
except ImportError:  # the 'examples' extra brings tqdm; without it, plain output

    def tqdm(iterable, **_):
        return iterable


MODES = ("fp32", "O1", "O2")


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
) -> list[float]:
    """Train SimpleNet and return the mean loss of each epoch.

    The AMP modes follow the tutorial: a GradScaler with ``init_loss_scaling=1024``;
    ``auto_cast()`` around forward and loss; O2 also ``decorate``s model and optimizer
    (fp16 parameters, fp32 master weights updated by the optimizer). With ``accumulate=N``
    gradients of N batches add up before each update.
    """
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is not available; choose one of {MODES}")
    if accumulate < 1:
        raise ValueError(f"accumulate must be at least 1, got {accumulate}")
    mt.seed(seed)
    model = SimpleNet(input_size, input_size)
    optimizer = mt.optimizer.SGD(learning_rate=learning_rate, parameters=model.parameters())
    mse = nn.MSELoss()
    data, labels = make_data(input_size, batch_size, batches)
    scaler = amp.GradScaler(enable=mode != "fp32", init_loss_scaling=1024)
    if mode == "O2":
        model, optimizer = amp.decorate(models=model, optimizers=optimizer, level="O2")

    epoch_losses = []
    for epoch in range(epochs):
        total = 0.0
        steps = enumerate(zip(data, labels))
        if progress:
            steps = tqdm(steps, total=batches, desc=f"epoch {epoch + 1}/{epochs}", leave=False)
        for i, (x, y) in steps:
            with amp.auto_cast(enable=mode != "fp32", level="O1" if mode == "fp32" else mode):
                loss = mse(model(x), y)
            scaler.scale(loss).backward()
            if (i + 1) % accumulate == 0:
                scaler.minimize(optimizer, loss)  # = optimizer.step() when scaling is off
                optimizer.clear_grad()
            total += loss.item()
        epoch_losses.append(total / batches)
        log(f"epoch {epoch + 1}: loss = {epoch_losses[-1]:.6f}")
    return epoch_losses


def warm_up(mode: str, **kwargs) -> int:
    """An untimed run of ``mode`` at the same sizes: two updates, one epoch; returns the batches.

    Its first steps compile the GPU kernels that ``mode`` launches (NVRTC), so the timed run
    that follows reuses them; on the CPU it is a short run more.
    """
    batches = 2 * kwargs.get("accumulate", 1)
    train(**{**kwargs, "mode": mode, "batches": batches, "epochs": 1, "log": lambda *_: None})
    mt.device.synchronize()
    return batches


def compare(**kwargs) -> None:
    """Run every mode on the same data; print time, speed-up, final loss, peak device memory.

    Each mode is timed after its own :func:`warm_up`. NOTE: timing a cold run is wrong on a
    GPU: its first steps compile the kernels the mode launches, which is not training time
    (a cold O1 run on an H100 reported 0.42x the speed of fp32).

    Peak memory is the device's (``minitorch_amp.device.max_memory_allocated``): tensor
    storage on the CPU, CuPy's pool on a GPU, above what was allocated before the run.
    """
    rows = []
    for mode in MODES:
        warmup_batches = warm_up(mode, **kwargs)
        gc.collect()
        base = mt.device.memory_allocated()
        mt.device.reset_max_memory_allocated()
        start = time.perf_counter()
        losses = train(**{**kwargs, "mode": mode, "log": lambda *_: None})
        seconds = time.perf_counter() - start
        rows.append((mode, seconds, losses[-1], mt.device.max_memory_allocated() - base))
    base = rows[0][1]
    print(f"each mode timed after {warmup_batches} untimed warm-up batches (compiling kernels)")
    print(f"{'mode':<6}{'total time (s)':>16}{'speed-up':>10}{'final loss':>14}{'peak MiB':>10}")
    for mode, seconds, loss, peak in rows:
        print(f"{mode:<6}{seconds:>16.3f}{base / seconds:>9.2f}x{loss:>14.6f}{peak / 2**20:>10.1f}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input-size", type=int, default=1024)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None, help="'cpu', 'gpu' or 'gpu:N' (default: auto)")
    parser.add_argument("--mode", default="fp32", choices=MODES)
    parser.add_argument("--accumulate", type=int, default=1, help="batches per update")
    parser.add_argument("--compare", action="store_true", help="run fp32, O1 and O2; a table")
    parser.add_argument(
        "--full", action="store_true", help="the tutorial's sizes: 4096 wide, batch 512, 50 batches"
    )
    args = parser.parse_args(argv)
    if args.full:
        args.input_size, args.batch_size, args.batches, args.epochs = 4096, 512, 50, 5
    if args.device is not None:
        mt.set_device(args.device)
    if args.accumulate < 1:
        parser.error(f"--accumulate must be at least 1, got {args.accumulate}")

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
    if args.compare:
        compare(**sizes)
        return
    start = time.perf_counter()
    log = tqdm.write if hasattr(tqdm, "write") else print
    train(**sizes, mode=args.mode, progress=True, log=log)
    print(f"\n{args.mode} time:\ntotal time = {time.perf_counter() - start:.3f} sec")


if __name__ == "__main__":
    main()
