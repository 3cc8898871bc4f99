"""Train the AMP tutorial's SimpleNet: three Linear layers with two ReLUs, MSE loss, SGD.

This is the network of Paddle's mixed-precision tutorial, written against minitorch_amp's
Paddle-style API (only the import differs). The default sizes finish in seconds on a laptop
CPU; ``--full`` uses the tutorial's sizes (4096 wide, batch 512, 50 batches, 5 epochs).

    python examples/simple_net.py            # small and quick, CPU or GPU
    python examples/simple_net.py --full     # the tutorial's sizes
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout too

import minitorch_amp as mt
from minitorch_amp import nn

try:
    from tqdm import tqdm
except ImportError:  # the 'examples' extra brings tqdm; without it, plain output

    def tqdm(iterable, **_):
        return iterable


MODES = ("fp32",)


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
    progress=False,
    log=print,
) -> list[float]:
    """Train SimpleNet and return the mean loss of each epoch."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is not available; choose one of {MODES}")
    mt.seed(seed)
    model = SimpleNet(input_size, input_size)
    optimizer = mt.optimizer.SGD(learning_rate=learning_rate, parameters=model.parameters())
    mse = nn.MSELoss()
    data, labels = make_data(input_size, batch_size, batches)

    epoch_losses = []
    for epoch in range(epochs):
        total = 0.0
        steps = zip(data, labels)
        if progress:
            steps = tqdm(steps, total=batches, desc=f"epoch {epoch + 1}/{epochs}", leave=False)
        for x, y in steps:
            loss = mse(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.clear_grad()
            total += loss.item()
        epoch_losses.append(total / batches)
        log(f"epoch {epoch + 1}: loss = {epoch_losses[-1]:.6f}")
    return epoch_losses


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
    parser.add_argument(
        "--full", action="store_true", help="the tutorial's sizes: 4096 wide, batch 512, 50 batches"
    )
    args = parser.parse_args(argv)
    if args.full:
        args.input_size, args.batch_size, args.batches, args.epochs = 4096, 512, 50, 5
    if args.device is not None:
        mt.set_device(args.device)

    print(
        f"SimpleNet {args.mode} on {mt.get_device()}: width {args.input_size}, "
        f"batch {args.batch_size}, {args.batches} batches x {args.epochs} epochs"
    )
    start = time.perf_counter()
    log = tqdm.write if hasattr(tqdm, "write") else print
    train(
        args.input_size,
        args.batch_size,
        args.batches,
        args.epochs,
        args.seed,
        args.learning_rate,
        args.mode,
        progress=True,
        log=log,
    )
    print(f"\n{args.mode} time:\ntotal time = {time.perf_counter() - start:.3f} sec")


if __name__ == "__main__":
    main()
