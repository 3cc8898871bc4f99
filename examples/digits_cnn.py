"""Classify scikit-learn's 8x8 digits with a small CNN in fp32, O1 and O2, through a DataLoader.

The images of ``examples/digits_mlp.py`` (1,797 grey-scale 8x8 digits, the same fixed
stratified 75/25 split, standardised per pixel), kept as images this time, ``[N, 1, 8, 8]``:

    Conv2D(1, C, 3, padding=1) -> BatchNorm2D -> ReLU -> MaxPool2D(2)        [N, C, 4, 4]
    Conv2D(C, 2C, 3, padding=1) -> BatchNorm2D -> ReLU -> AvgPool2D(2)       [N, 2C, 2, 2]
    Flatten -> Linear(8C, 10)

trained with softmax cross-entropy and Adam, batches drawn by a shuffling
``minitorch_amp.io.DataLoader``. Under AMP the convolutions and the Linear are white-list ops
(float16); batch norm and pooling follow their input; O2's ``decorate`` makes the weights
float16 and keeps BatchNorm2D in float32. Every mode starts from the same weights and sees the
same batch order (``seed`` fixes both), so the table shows what AMP alone changes.

    python examples/digits_cnn.py               # fp32, O1 and O2 side by side
    python examples/digits_cnn.py --mode O1     # one mode
    python examples/digits_cnn.py --dtype float8     # bfloat16; convolutions, Linear in FP8
    python examples/digits_cnn.py --device gpu  # on the GPU (CuPy and a CUDA device)

Needs scikit-learn (``python -m pip install -e ".[examples]"`` from the repository root).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout too
sys.path.insert(0, str(Path(__file__).resolve().parent))  # digits_mlp, beside this file

from digits_mlp import (
    DTYPES,
    MODES,
    Digits,
    Result,
    amp_dtype,
    autocast_for,
    load_data,
    print_table,
)

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.io import DataLoader, TensorDataset
from minitorch_amp.utils.progress import progress, write


class DigitsCNN(nn.Layer):
    """Two conv blocks (conv, batch norm, ReLU, pooling) and a linear classifier."""

    def __init__(self, channels: int = 16):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2D(1, channels, 3, padding=1),
            nn.BatchNorm2D(channels),
            nn.ReLU(),
            nn.MaxPool2D(2),
            nn.Conv2D(channels, 2 * channels, 3, padding=1),
            nn.BatchNorm2D(2 * channels),
            nn.ReLU(),
            nn.AvgPool2D(2),
        )
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(8 * channels, 10))

    def forward(self, x):
        return self.classifier(self.features(x))


def as_images(x: np.ndarray) -> np.ndarray:
    """``[N, 64]`` standardised pixels as ``[N, 1, 8, 8]`` images."""
    return x.reshape(-1, 1, 8, 8)


def evaluate(
    model: nn.Layer, x: np.ndarray, y: np.ndarray, mode: str, dtype: str = "float16"
) -> float:
    """Test accuracy, as deployed: eval mode (running batch-norm statistics), no graph, the
    training mode's ``auto_cast`` level and dtype."""
    model.eval()
    with mt.no_grad(), autocast_for(mode, dtype):
        predicted = model(mt.to_tensor(as_images(x))).argmax(axis=-1).numpy()
    model.train()
    return float((predicted == y).mean())


def train(
    mode: str = "fp32",
    epochs: int = 8,
    batch_size: int = 64,
    channels: int = 16,
    learning_rate: float = 5e-3,
    seed: int = 0,
    data: Digits | None = None,
    log=print,
    dtype: str = "float16",
) -> Result:
    """Train :class:`DigitsCNN` in ``mode``; return its test accuracy, loss and time.

    O1 wraps forward and loss in ``auto_cast`` and scales the loss with a ``GradScaler``;
    O2 also ``decorate``s model and optimizer (float16 weights, float32 master weights).
    ``dtype='bfloat16'`` needs no GradScaler; ``'float8'`` is bfloat16 with the two
    convolutions' GEMMs and the Linear classifier in FP8 (batch norm, pooling in bfloat16).
    """
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is not available; choose one of {MODES}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    if min(epochs, batch_size, channels) < 1:
        raise ValueError(
            f"epochs, batch_size and channels must be at least 1, got {epochs}, {batch_size}, "
            f"{channels}"
        )
    data = load_data() if data is None else data
    log = log or (lambda *_: None)

    start = time.perf_counter()
    mt.seed(seed)  # the initial weights, then the batch order: the same in every mode
    model = DigitsCNN(channels)
    optimizer = mt.optimizer.Adam(learning_rate=learning_rate, parameters=model.parameters())
    scaler = amp.GradScaler(enable=mode != "fp32" and dtype == "float16", init_loss_scaling=1024)
    if mode == "O2":
        model, optimizer = amp.decorate(
            models=model, optimizers=optimizer, level="O2", dtype=amp_dtype(dtype)
        )
    train_set = TensorDataset([mt.to_tensor(as_images(data.x_train)), mt.to_tensor(data.y_train)])
    loader = DataLoader(train_set, batch_size=batch_size, shuffle=True)

    epoch_losses = []
    for epoch in progress(range(epochs), desc=f"{mode}, {epochs} epochs"):
        batch_losses = []  # device scalars, read once per epoch: no host sync per step
        for x, y in loader:
            with autocast_for(mode, dtype):
                loss = nn.functional.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.minimize(optimizer, loss)  # = optimizer.step() when scaling is off
            optimizer.clear_grad()
            batch_losses.append(loss.detach())
        epoch_losses.append(float(np.mean([b.item() for b in batch_losses])))
        log(f"{mode} epoch {epoch + 1}/{epochs}: train loss = {epoch_losses[-1]:.4f}")
    seconds = time.perf_counter() - start

    accuracy = evaluate(model, data.x_test, data.y_test, mode, dtype)
    return Result(mode, accuracy, epoch_losses[-1], seconds, epoch_losses)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--mode", default="all", choices=(*MODES, "all"), help="AMP mode")
    parser.add_argument("--epochs", type=int, default=8, help="passes over the training set")
    parser.add_argument("--batch-size", type=int, default=64, help="images per batch")
    parser.add_argument("--channels", type=int, default=16, help="channels of the first conv")
    parser.add_argument("--learning-rate", type=float, default=5e-3, help="Adam's step size")
    parser.add_argument("--seed", type=int, default=0, help="initial weights and batch order")
    parser.add_argument("--dtype", default="float16", choices=DTYPES, help="O1/O2's type")
    parser.add_argument("--device", default=None, help="'cpu', 'gpu' or 'gpu:N' (None: auto)")
    parser.add_argument("--verbose", action="store_true", help="print the loss of every epoch")
    args = parser.parse_args(argv)
    if min(args.epochs, args.batch_size, args.channels) < 1:
        parser.error("--epochs, --batch-size and --channels must be at least 1")
    if args.device is not None:
        mt.set_device(args.device)

    data = load_data()
    modes = MODES if args.mode == "all" else (args.mode,)
    print(
        f"digits CNN on {mt.get_device()}: {len(data.y_train)} train / {len(data.y_test)} test "
        f"images, {args.channels} channels, batch {args.batch_size}, {args.epochs} epochs, "
        f"seed {args.seed}"
    )
    results = [
        train(
            mode,
            epochs=args.epochs,
            batch_size=args.batch_size,
            channels=args.channels,
            learning_rate=args.learning_rate,
            seed=args.seed,
            data=data,
            log=write if args.verbose else None,
            dtype=args.dtype,
        )
        for mode in modes
    ]
    print_table(results)


if __name__ == "__main__":
    main()
