"""SimpleNet fp32 training step: minitorch_amp against the same maths hand-written in NumPy.

Both run in one process on the same data, interleaved, and the script prints the median
ms/step of each and their ratio: what the framework (Tensor, apply, the graph, the engine,
Layer, the optimizer) costs on top of the raw array calls.

    python benchmarks/simple_net_vs_numpy.py                 # width 256, batch 32
    python benchmarks/simple_net_vs_numpy.py --width 1024 --batch 128
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from simple_net import SimpleNet

import minitorch_amp as mt
from minitorch_amp.utils.progress import progress


def numpy_step(params, x, y, lr):
    """Forward, MSE, backward and SGD for SimpleNet, written directly in NumPy."""
    (w1, b1), (w2, b2), (w3, b3) = params
    h1 = x @ w1 + b1
    a1 = np.maximum(h1, 0)
    h2 = a1 @ w2 + b2
    a2 = np.maximum(h2, 0)
    out = a2 @ w3 + b3
    diff = out - y
    loss = float((diff * diff).mean())
    g = diff * (2.0 / diff.size)
    grads = [None] * 3
    grads[2] = (a2.T @ g, g.sum(0))
    g = (g @ w3.T) * (h2 > 0)
    grads[1] = (a1.T @ g, g.sum(0))
    g = (g @ w2.T) * (h1 > 0)
    grads[0] = (x.T @ g, g.sum(0))
    for (w, b), (gw, gb) in zip(params, grads):
        w -= lr * gw
        b -= lr * gb
    return loss


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()

    mt.set_device("cpu")
    mt.seed(0)
    model = SimpleNet(args.width, args.width)
    opt = mt.optimizer.SGD(learning_rate=1e-4, parameters=model.parameters())
    mse = mt.nn.MSELoss()
    x = mt.randn([args.batch, args.width])
    y = mt.randn([args.batch, args.width])
    params = [
        (layer.weight.numpy().copy(), layer.bias.numpy().copy())
        for layer in (model.linear1, model.linear2, model.linear3)
    ]
    xn, yn = x.numpy(), y.numpy()

    def ours():
        loss = mse(model(x), y)
        loss.backward()
        opt.step()
        opt.clear_grad()

    def raw():
        numpy_step(params, xn, yn, 1e-4)

    times = {"minitorch_amp": [], "numpy": []}
    for i in progress(range(args.warmup + args.steps), desc="steps"):
        for name, fn in (("minitorch_amp", ours), ("numpy", raw)):
            start = time.perf_counter()
            fn()
            if i >= args.warmup:
                times[name].append(time.perf_counter() - start)

    ours_ms = statistics.median(times["minitorch_amp"]) * 1e3
    raw_ms = statistics.median(times["numpy"]) * 1e3
    print(f"SimpleNet fp32, width {args.width}, batch {args.batch}, CPU, median of {args.steps}")
    print(f"{'engine':<15}{'ms/step':>10}")
    print(f"{'minitorch_amp':<15}{ours_ms:>10.3f}")
    print(f"{'numpy (raw)':<15}{raw_ms:>10.3f}")
    print(f"ratio minitorch_amp / numpy = {ours_ms / raw_ms:.2f}")


if __name__ == "__main__":
    main()
