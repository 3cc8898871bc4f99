"""The parts of the example GPT's encoder layer, forward + backward, ours against PyTorch's.

``benchmarks/gpt_step.py`` times the whole step; this says where the difference lies. Each
row is one part of the first encoder layer of the same model in both frameworks (the same
weights: ``gpt_step.setup``), run forward and backward on the same input and output
gradient, the two timed side by side in blocks (``timing.interleave_rounds``), the ratio
the median of the rounds' (``timing.paired_ratio``):

=================  ==========================================================================
part               what runs
=================  ==========================================================================
self-attention     ``MultiHeadAttention`` with the causal mask (PyTorch: ``is_causal=True``,
                   its fused CPU attention kernel)
layer_norm         the layer's first LayerNorm
feed-forward       ``linear2(gelu(linear1(x)))``
linear1            128 -> 512 alone
linear2            512 -> 128 alone, on a ``[batch, 64, 512]`` input
gelu               exact GELU alone on ``[batch, 64, 512]``
encoder layer      the whole pre-norm layer
=================  ==========================================================================

Inputs are standard normal (``[batch, 64, 512]`` ones: standard deviation 0.3, as the
example's activations after ``linear1``), output gradients 1e-3 times standard normal.

    python benchmarks/gpt_parts.py               # ~40 s on 2 cores, 1 thread each
    python benchmarks/gpt_parts.py --parts gelu layer_norm

Needs PyTorch (the comparison is the point).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import gpt_step
from timing import interleave_rounds, paired_ratio

import minitorch_amp as mt
import minitorch_amp.nn.functional as F

PARTS = (
    "self-attention", "layer_norm", "feed-forward", "linear1", "linear2", "gelu", "encoder layer",
)  # fmt: skip
WIDE = 4  # the feed-forward width over the model's


def parts(batch: int, torch) -> dict:
    """``{part: (ours, theirs)}``: forward + backward steps of each part in both."""
    ours_gpt, theirs_gpt = gpt_step.models()
    context, width = gpt_step.CONFIG["context"], gpt_step.CONFIG["width"]
    ours, theirs = ours_gpt.blocks.layers[0], theirs_gpt.blocks.layers[0]
    rng = np.random.default_rng(0)
    mask = mt.to_tensor(np.triu(np.full((context, context), -np.inf, np.float32), 1))
    causal = theirs_gpt.causal_mask

    def pair(shape, std):
        x = (rng.standard_normal(shape) * std).astype(np.float32)
        g = (rng.standard_normal(shape) * 1e-3).astype(np.float32)
        return x, g

    narrow = pair((batch, context, width), 1.0)
    wide = pair((batch, context, WIDE * width), 0.3)

    def step(fn, arrays, out_width, framework):
        x_array, _ = arrays
        g_array = narrow[1] if out_width == width else wide[1]
        if framework == "ours":
            x = mt.to_tensor(x_array, stop_gradient=False)
            g = mt.to_tensor(g_array)

            def run():
                fn(x).backward(g)
                x.clear_grad()

        else:
            x = torch.from_numpy(x_array).requires_grad_()
            g = torch.from_numpy(g_array)

            def run():
                fn(x).backward(g)
                x.grad = None

        return run

    def attention(x):
        return theirs.self_attn(x, x, x, attn_mask=causal, need_weights=False, is_causal=True)[0]

    table = {
        "self-attention": (lambda x: ours.self_attn(x, x, x, mask), attention, narrow, width),
        "layer_norm": (ours.norm1, theirs.norm1, narrow, width),
        "feed-forward": (
            lambda x: ours.linear2(F.gelu(ours.linear1(x))),
            lambda x: theirs.linear2(torch.nn.functional.gelu(theirs.linear1(x))),
            narrow,
            width,
        ),
        "linear1": (ours.linear1, theirs.linear1, narrow, WIDE * width),
        "linear2": (ours.linear2, theirs.linear2, wide, width),
        "gelu": (F.gelu, torch.nn.functional.gelu, wide, WIDE * width),
        "encoder layer": (
            lambda x: ours(x, src_mask=mask),
            lambda x: theirs(x, src_mask=causal, is_causal=True),
            narrow,
            width,
        ),
    }
    return {
        name: (step(o, arrays, w, "ours"), step(t, arrays, w, "torch"))
        for name, (o, t, arrays, w) in table.items()
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--batch", type=int, default=16, help="windows of 64 tokens")
    parser.add_argument("--steps", type=int, default=40, help="timed calls of each framework")
    parser.add_argument("--block", type=int, default=5, help="calls per turn")
    parser.add_argument("--threads", type=int, default=1, help="BLAS / intra-op threads")
    args = parser.parse_args(argv)
    if min(args.batch, args.steps, args.block) < 1:
        parser.error("--batch, --steps and --block must be at least 1")
    torch = gpt_step.torch
    if torch is None:
        raise SystemExit("gpt_parts.py compares with PyTorch: install torch")
    if mt.get_device() != "cpu":
        mt.set_device("cpu")  # the CPU comparison: PyTorch's model is built on the CPU
    if gpt_step.threadpool_limits is not None:
        gpt_step.threadpool_limits(limits=args.threads, user_api="blas")
    torch.set_num_threads(args.threads)
    steps = parts(args.batch, torch)
    print(
        f"GPT encoder layer parts on the CPU, torch {torch.__version__}, {args.threads} "
        f"thread(s), batch {args.batch}: forward + backward, median of {args.steps} calls each "
        f"after 3 warm-up, interleaved in blocks of {args.block}; ours / torch: the median of "
        "the rounds' ratios"
    )
    print("| part | ours ms | torch ms | ours / torch |")
    print("|---|---|---|---|")
    results = {}
    for name in args.parts:
        ours, theirs = steps[name]
        runs = {"ours": (ours, lambda: None), "torch": (theirs, lambda: None)}
        medians, rounds = interleave_rounds(runs, args.steps, 3, args.block, warmup_s=0.0)
        ratio = paired_ratio(rounds, "ours", "torch")
        results[name] = (medians["ours"], medians["torch"], ratio)
        print(
            f"| {name} | {medians['ours'] * 1e3:.2f} | {medians['torch'] * 1e3:.2f} | {ratio:.2f} |"
        )
    return results


if __name__ == "__main__":
    main()
