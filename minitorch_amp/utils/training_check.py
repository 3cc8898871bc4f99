"""``run_check()``: Paddle's "is my installation working?", for minitorch_amp."""

from __future__ import annotations

import math

from ..backend import device as _device


def _train(level: str, steps: int = 30) -> tuple[float, float]:
    """The first and last loss of a tiny regression trained at ``level`` (fp32, O1 or O2)."""
    from .. import amp, nn, optimizer, randn, seed

    seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = optimizer.SGD(learning_rate=0.05, parameters=model.parameters())
    enable = level != "fp32"
    scaler = amp.GradScaler(enable=enable, init_loss_scaling=1024)
    if level == "O2":
        model, opt = amp.decorate(models=model, optimizers=opt, level="O2")
    x = randn([64, 8])
    y = x.sum(axis=1, keepdim=True)
    losses = []
    for _ in range(steps):
        with amp.auto_cast(enable=enable, level="O1" if level == "fp32" else level):
            loss = nn.functional.mse_loss(model(x).astype("float32"), y)
        scaler.scale(loss).backward()
        scaler.minimize(opt, loss)
        opt.clear_grad()
        losses.append(float(loss))
    return losses[0], losses[-1]


def run_check() -> None:
    """Train a tiny model in fp32, O1 and O2 on the current device; say that it works.

    Each level must bring the loss below half its first value within 30 steps, with finite
    losses all along. Paddle's ``paddle.utils.run_check()`` does the same for Paddle; on a GPU
    ``python -m minitorch_amp`` also checks every raw kernel against its twin.

    Raises:
        RuntimeError: a level did not learn or produced a non-finite loss; the message names
            it and its losses.

    Example:
        >>> import minitorch_amp as mt
        >>> mt.utils.run_check()  # doctest: +ELLIPSIS
        Running verify minitorch_amp program ...
        minitorch_amp works well on 1 ...: fp32, O1 and O2 training steps learn.
        minitorch_amp is installed successfully!
    """
    print("Running verify minitorch_amp program ...")
    for level in ("fp32", "O1", "O2"):
        first, last = _train(level)
        if not (math.isfinite(first) and math.isfinite(last) and last < 0.5 * first):
            raise RuntimeError(
                f"minitorch_amp does not train correctly on {_device.current_place()} at level "
                f"{level}: the loss went from {first} to {last} in 30 steps (expected below "
                "half). Run `python -m minitorch_amp` and report its output."
            )
    place = _device.current_place()
    where = "1 CPU" if place.kind == "cpu" else f"1 GPU ({place})"
    print(f"minitorch_amp works well on {where}: fp32, O1 and O2 training steps learn.")
    print("minitorch_amp is installed successfully!")
