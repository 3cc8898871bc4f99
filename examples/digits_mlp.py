"""Classify scikit-learn's 8x8 handwritten digits with an MLP in fp32, O1 and O2.

A real classification task, small enough for a laptop CPU: 1,797 grey-scale 8x8 images of the
digits 0-9 (``sklearn.datasets.load_digits``, shipped inside scikit-learn, no download). A
fixed stratified split keeps 25% aside for testing; the features are standardised with the
training set's mean and standard deviation. The model is a small MLP,

    Linear(64, 128) -> LayerNorm -> ReLU -> Dropout -> Linear(128, 64) -> ReLU -> Linear(64, 10)

trained with softmax cross-entropy and Adam on shuffled minibatches. Every mode sees the same
initial weights, the same batches and the same dropout draws, so the table shows what AMP
alone changes: on a CPU float16 is emulated and slower, and the test accuracy stays the same.

    python examples/digits_mlp.py               # fp32, O1 and O2 side by side
    python examples/digits_mlp.py --mode O2     # pure fp16 with fp32 master weights only
    python examples/digits_mlp.py --dtype bfloat16   # O1 and O2 in bfloat16 (no loss scaling)
    python examples/digits_mlp.py --dtype float8     # bfloat16, the Linear layers in FP8
    python examples/digits_mlp.py --device gpu  # on the GPU (CuPy and a CUDA device)

Needs scikit-learn (``python -m pip install -e ".[examples]"`` from the repository root).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout too

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.utils.progress import progress, write

MODES = ("fp32", "O1", "O2")


@dataclass
class Digits:
    """The standardised train/test split, as NumPy arrays (features float32, labels int64)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


@dataclass
class Result:
    """What one training run reports: the mode, its test accuracy and what it cost."""

    mode: str
    accuracy: float  # fraction of test images classified correctly, in [0, 1]
    loss: float  # mean training loss over the last epoch
    seconds: float  # wall-clock time of the training loop (evaluation excluded)
    epoch_losses: list[float] = field(default_factory=list)


def load_data(test_size: float = 0.25, split_seed: int = 0) -> Digits:
    """The digits, split once (stratified, fixed ``split_seed``) and standardised.

    Mean and standard deviation come from the training images only, so nothing about the
    test set leaks into training. Border pixels that are always 0 have no spread; they are
    left at 0 instead of being divided by 0.
    """
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError as exc:
        raise SystemExit(
            "this example needs scikit-learn: from the repository root, "
            'python -m pip install -e ".[examples]" (or pip install scikit-learn)'
        ) from exc

    images, labels = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=test_size, random_state=split_seed, stratify=labels
    )
    mean = x_train.mean(axis=0)
    std = x_train.std(axis=0)
    std[std == 0] = 1.0
    return Digits(
        x_train=((x_train - mean) / std).astype(np.float32),
        y_train=y_train.astype(np.int64),
        x_test=((x_test - mean) / std).astype(np.float32),
        y_test=y_test.astype(np.int64),
    )


class DigitsMLP(nn.Layer):
    """64 pixels -> 128 -> 64 -> 10 logits, with LayerNorm and Dropout after the first layer.

    Under O2 ``decorate`` turns the Linear weights into float16 and keeps LayerNorm in float32.
    """

    def __init__(self, hidden: int = 128, dropout: float = 0.1):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(64, hidden),
            nn.LayerNorm(hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, 64),
            nn.ReLU(),
            nn.Linear(64, 10),
        )

    def forward(self, x):
        return self.net(x)


DTYPES = ("float16", "bfloat16", "float8")  # float8: bfloat16 AMP plus FP8 GEMMs


@contextlib.contextmanager
def autocast_for(mode: str, dtype: str = "float16"):
    """``auto_cast`` at the mode's level in ``dtype``; switched off (a no-op region) for fp32.
    ``'float8'``: bfloat16, and inside ``amp.fp8_autocast`` the Linear layers' GEMMs in FP8
    (Transformer Engine's default recipe: E4M3 forward, E5M2 gradients, delayed scaling)."""
    if mode == "fp32":
        with amp.auto_cast(enable=False):
            yield
        return
    fp8 = dtype == "float8"
    with amp.auto_cast(level=mode, dtype=amp_dtype(dtype)), amp.fp8_autocast(enabled=fp8):
        yield


def amp_dtype(dtype: str) -> str:
    """The 16-bit type AMP computes in: bfloat16 for ``'float8'`` (around the FP8 GEMMs)."""
    return "bfloat16" if dtype == "float8" else dtype


def evaluate(
    model: nn.Layer, x: np.ndarray, y: np.ndarray, mode: str, dtype: str = "float16"
) -> float:
    """Accuracy of ``model`` on ``(x, y)``, run as it would be deployed: eval mode, no graph,
    the same ``auto_cast`` as training (so O1/O2 infer in 16 bits too)."""
    model.eval()
    with mt.no_grad(), autocast_for(mode, dtype):
        predicted = model(mt.to_tensor(x)).argmax(axis=-1).numpy()
    model.train()
    return float((predicted == y).mean())


def train(
    mode: str = "fp32",
    epochs: int = 20,
    batch_size: int = 64,
    learning_rate: float = 2e-3,
    seed: int = 0,
    data: Digits | None = None,
    log=print,
    dtype: str = "float16",
) -> Result:
    """Train :class:`DigitsMLP` in ``mode`` and return its test accuracy, loss and time.

    The AMP set-up is the usual one: O1 wraps forward and loss in ``auto_cast`` and scales
    the loss with a ``GradScaler``; O2 also ``decorate``s model and optimizer (float16
    weights, fp32 master weights kept and updated by Adam). ``seed`` fixes the initial
    weights, the batch order and the dropout masks, identically for every mode.
    ``dtype='bfloat16'`` runs O1/O2 in bfloat16, without a GradScaler (bfloat16 has float32's
    exponent range: nothing underflows that loss scaling would rescue); ``'float8'`` too, with
    the Linear layers as FP8 GEMMs (per-tensor scales take the place of a loss scale).

    Example:
        >>> result = train("O2", epochs=1, log=None)  # doctest: +SKIP
        >>> result.accuracy > 0.8  # doctest: +SKIP
        True
    """
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is not available; choose one of {MODES}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    if epochs < 1 or batch_size < 1:
        raise ValueError(f"epochs and batch_size must be at least 1, got {epochs}, {batch_size}")
    data = load_data() if data is None else data
    log = log or (lambda *_: None)

    start = time.perf_counter()
    mt.seed(seed)
    model = DigitsMLP()
    optimizer = mt.optimizer.Adam(learning_rate=learning_rate, parameters=model.parameters())
    scaler = amp.GradScaler(enable=mode != "fp32" and dtype == "float16", init_loss_scaling=1024)
    if mode == "O2":
        model, optimizer = amp.decorate(model, optimizer, level="O2", dtype=amp_dtype(dtype))

    order = np.random.default_rng(seed)  # the batch order: a NumPy generator, same every mode
    n = len(data.y_train)
    epoch_losses = []
    for epoch in progress(range(epochs), desc=f"{mode}, {epochs} epochs"):
        perm = order.permutation(n)
        x_all, y_all = mt.to_tensor(data.x_train[perm]), mt.to_tensor(data.y_train[perm])
        batch_losses = []  # device scalars, read once per epoch: no host sync per step
        for i in range(0, n, batch_size):
            x, y = x_all[i : i + batch_size], y_all[i : i + batch_size]
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


def print_table(results: list[Result]) -> None:
    """One row per mode: train time, final train loss, test accuracy."""
    print(f"{'mode':<6}{'train time (s)':>16}{'train loss':>12}{'test accuracy':>15}")
    for r in results:
        print(f"{r.mode:<6}{r.seconds:>16.2f}{r.loss:>12.4f}{r.accuracy:>14.2%}")
    if len(results) > 1:
        accuracies = [r.accuracy for r in results]
        spread = max(accuracies) - min(accuracies)
        print(f"test accuracy spread across modes: {spread * 100:.2f} percentage points")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--mode", default="all", choices=(*MODES, "all"), help="precision")
    parser.add_argument("--epochs", type=int, default=20, help="passes over the training set")
    parser.add_argument("--batch-size", type=int, default=64, help="images per batch")
    parser.add_argument("--learning-rate", type=float, default=2e-3, help="Adam's step")
    parser.add_argument("--seed", type=int, default=0, help="weights and batch order")
    parser.add_argument(
        "--dtype", default="float16", choices=DTYPES, help="O1/O2's type (float8: bf16 + FP8)"
    )
    parser.add_argument(
        "--device", default=None, help="'cpu', 'gpu' or 'gpu:N'; None: the GPU if usable"
    )
    parser.add_argument("--verbose", action="store_true", help="print the loss of every epoch")
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 1:
        parser.error("--epochs and --batch-size must be at least 1")
    if args.device is not None:
        mt.set_device(args.device)

    data = load_data()
    modes = MODES if args.mode == "all" else (args.mode,)
    print(
        f"digits MLP on {mt.get_device()}: {len(data.y_train)} train / {len(data.y_test)} test "
        f"images, batch {args.batch_size}, {args.epochs} epochs, seed {args.seed}"
    )
    results = [
        train(
            mode,
            epochs=args.epochs,
            batch_size=args.batch_size,
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
