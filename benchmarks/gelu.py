"""Exact GELU and its error function: ours against PyTorch's, time and accuracy.

One row per operation on a float32 tensor (default ``[16, 64, 512]``, a transformer MLP's
activation), ours and PyTorch's timed interleaved in one process (``timing.interleave``):

* ``erf``: ``backend.special.erf`` (float32 polynomials on the CPU, CuPy's erf on a GPU)
  against ``torch.erf``; on the CPU also ``erf, float64 (before)``, the path GELU took
  before (Cody's approximation in float64, every branch on every element), for the ratio;
* ``gelu``: ``F.gelu`` (exact) forward, and forward + backward, against
  ``torch.nn.functional.gelu``; ``gelu tanh`` is ``approximate=True`` for scale.

A last line gives each erf's largest error on the tensor in float32 ULPs against Python's
float64 ``math.erf``.

    python benchmarks/gelu.py                   # ~20 s on 2 CPU cores
    python benchmarks/gelu.py --shape 64 1024   # another shape
    python benchmarks/gelu.py --threads 2       # PyTorch's intra-op threads (default 1)
    python benchmarks/gelu.py --std 0.3         # inputs like the example GPT's activations

Without PyTorch the torch columns are left empty.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout

from timing import interleave, torch_device, warmup_seconds

import minitorch_amp as mt
import minitorch_amp.nn.functional as F
from minitorch_amp.backend import special

try:
    import torch
except ImportError:  # the comparison is optional
    torch = None


def cases(x: mt.Tensor, on_gpu: bool) -> dict:
    """``{row: {framework: step}}``: each framework's call for each timed row."""
    raw = x.numpy() if not on_gpu else None
    xg = x.detach()
    xg.stop_gradient = False

    def ours_backward():
        F.gelu(xg).sum().backward()
        xg.clear_grad(set_to_zero=False)

    rows = {"erf": {"ours": lambda: special.erf(x.data)}}
    if not on_gpu:
        rows["erf, float64 (before)"] = {
            "ours": lambda: special._erf_float64(raw.astype(np.float64)).astype(np.float32)
        }
    rows["gelu"] = {"ours": lambda: F.gelu(x)}
    rows["gelu fwd+bwd"] = {"ours": ours_backward}
    rows["gelu tanh"] = {"ours": lambda: F.gelu(x, approximate=True)}
    if torch is not None:
        t = torch.from_numpy(x.numpy()).to(torch_device())
        tg = t.clone().requires_grad_(True)

        def torch_backward():
            torch.nn.functional.gelu(tg).sum().backward()
            tg.grad = None

        rows["erf"]["torch"] = lambda: torch.erf(t)
        rows["gelu"]["torch"] = lambda: torch.nn.functional.gelu(t)
        rows["gelu fwd+bwd"]["torch"] = torch_backward
        rows["gelu tanh"]["torch"] = lambda: torch.nn.functional.gelu(t, approximate="tanh")
    return rows


def max_ulps(got: np.ndarray, x: np.ndarray) -> float:
    """The largest ``|got - erf(x)|`` in float32 ULPs, ``erf`` being Python's float64 one."""
    exact = np.frompyfunc(math.erf, 1, 1)(x.astype(np.float64)).astype(np.float64)
    _, exponent = np.frexp(np.abs(exact))
    spacing = np.maximum(np.ldexp(1.0, exponent - 24), 2.0**-149)
    return float((np.abs(got.astype(np.float64) - exact) / spacing).max())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--shape", type=int, nargs="+", default=[16, 64, 512])
    parser.add_argument("--steps", type=int, default=15, help="timed calls per framework")
    parser.add_argument("--threads", type=int, default=1, help="PyTorch's intra-op threads")
    parser.add_argument(
        "--std", type=float, default=1.0,
        help="the input's standard deviation (the example GPT's activations: about 0.3, "
        "none in the CDF's tail |x| >= 1.5; 1.0: 13%% there)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if not args.std > 0:
        parser.error(f"--std must be positive, got {args.std}")
    if min(args.shape) < 1:
        parser.error(f"--shape takes sizes of at least 1, got {args.shape}")
    if torch is not None:
        torch.set_num_threads(args.threads)
    on_gpu = str(mt.get_device()).startswith("gpu")
    mt.seed(0)
    x = mt.randn(args.shape) * args.std
    sync = mt.device.synchronize
    torch_sync = torch.cuda.synchronize if (torch is not None and on_gpu) else (lambda: None)
    device = f"{mt.get_device()}" + ("" if torch is None else f", torch {args.threads} thread(s)")
    print(f"float32 {args.shape}, standard deviation {args.std:g}, on {device}\n")
    print("| op | ours ms | torch ms | ours / torch |")
    print("|---|---|---|---|")
    for row, calls in cases(x, on_gpu).items():
        runs = {"ours": (calls["ours"], sync)}
        if "torch" in calls:
            runs["torch"] = (calls["torch"], torch_sync)
        ms = interleave(runs, args.steps, 2, warmup_s=warmup_seconds(on_gpu), desc=row)
        ours = ms["ours"] * 1e3
        if "torch" in ms:
            theirs = ms["torch"] * 1e3
            print(f"| {row} | {ours:.2f} | {theirs:.2f} | {ours / theirs:.2f} |")
        else:
            print(f"| {row} | {ours:.2f} | | |")
    host = x.numpy()
    line = f"\nerf's largest error on this tensor: ours {max_ulps(special.erf(host), host):.2f} ULP"
    if torch is not None:
        line += f", torch {max_ulps(torch.erf(torch.from_numpy(host)).numpy(), host):.2f} ULP"
    print(line + " (float32 ULPs against float64 math.erf)")


if __name__ == "__main__":
    main()
