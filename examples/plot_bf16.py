"""Draw the figures of docs/bf16.md from real minitorch_amp runs.

Two PNGs, one command:

* ``bf16_number_line.png``: float16's and bfloat16's number lines on one log2 axis, with the
  same SimpleNet gradients as docs/fp16.md's figure (``plot_amp.gradient_magnitudes``),
  unscaled: where each format would put them;
* ``bf16_loss_curves.png``: fp32, fp16 O2 (GradScaler, fp32 masters) and bf16 O2 (no scaler,
  fp32 masters) on the tutorial's SimpleNet and on the digits MLP, and each 16-bit run's
  relative difference from fp32.

    python examples/plot_bf16.py                # docs/img/bf16_*.png, a few minutes on a CPU
    python examples/plot_bf16.py --quick --out /tmp/x   # tiny sizes (the tests use it)

The data functions (``fate``, ``simple_net_curves``, ``digits_curves``) need no matplotlib;
the plots do (the 'examples' extra brings it), and the digits curves need scikit-learn.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a source checkout too
sys.path.insert(0, str(ROOT / "examples"))

import plot_amp  # noqa: E402
import simple_net  # noqa: E402

from minitorch_amp.backend.dtypes import convert_dtype  # noqa: E402
from minitorch_amp.testing import bf16, fp16  # noqa: E402
from minitorch_amp.utils.progress import progress, write  # noqa: E402

RUNS = (("fp32", "float16"), ("O2", "float16"), ("O2", "bfloat16"))  # (mode, 16-bit dtype)
LABELS = {RUNS[0]: "fp32", RUNS[1]: "fp16 O2 (scaler)", RUNS[2]: "bf16 O2 (no scaler)"}
COLORS = {RUNS[0]: "#222222", RUNS[1]: "#d62728", RUNS[2]: "#1f77b4"}
KITS = {"float16": fp16, "bfloat16": bf16}  # the landmarks of each format
FRACTION_BITS = {"float16": 10, "bfloat16": 7}
LANDMARKS = {  # (log2, label) of the lines drawn on each number line
    "float16": [
        (-24.0, "2$^{-24}$ smallest subnormal"),
        (-14.0, "2$^{-14}$ smallest normal"),
        (float(np.log2(fp16.OVERFLOW_THRESHOLD)), "65520 and up: inf"),
    ],
    "bfloat16": [
        (-133.0, "2$^{-133}$ smallest subnormal"),
        (-126.0, "2$^{-126}$ smallest normal"),
        (float(np.log2(bf16.OVERFLOW_THRESHOLD)), "(2 − 2$^{-8}$)·2$^{127}$ and up: inf"),
    ],
}


@dataclass(frozen=True)
class Sizes:
    """The sizes of every run: QUICK keeps the tests fast, FULL draws the docs' figures."""

    width: int = 256  # SimpleNet's width, for the gradients and the loss curves
    batch: int = 64
    batches: int = 20  # SimpleNet batches per epoch
    epochs: int = 30  # SimpleNet epochs
    learning_rate: float = 0.01
    digits_epochs: int = 20


FULL = Sizes()
QUICK = Sizes(width=32, batch=8, batches=2, epochs=3, digits_epochs=1)


# ---- data ---------------------------------------------------------------------------------
def fate(values: np.ndarray, dtype: str) -> dict[str, float]:
    """What casting ``values`` (nonzero float32s) to ``dtype`` does to them, as fractions.

    Keys: ``zero`` (round to 0), ``subnormal`` (land below the smallest normal, with fewer
    significant bits), ``normal``, ``overflow`` (round to inf); values already 0 are left
    out. The same rule as ``plot_amp.fp16_fate``, for float16 or bfloat16.
    """
    kit = KITS[dtype]
    values = np.asarray(values, dtype=np.float32)
    values = values[values != 0]
    with np.errstate(over="ignore"):
        rounded = np.abs(values.astype(convert_dtype(dtype)).astype(np.float64))
    n = max(values.size, 1)
    normal = kit.SMALLEST_NORMAL
    return {
        "zero": float(np.count_nonzero(rounded == 0)) / n,
        "subnormal": float(np.count_nonzero((rounded > 0) & (rounded < normal))) / n,
        "normal": float(np.count_nonzero((rounded >= normal) & np.isfinite(rounded))) / n,
        "overflow": float(np.count_nonzero(np.isinf(rounded))) / n,
    }


def simple_net_curves(sizes: Sizes) -> dict[tuple[str, str], list[float]]:
    """Mean loss per epoch of the tutorial's SimpleNet in each run (same seed and data)."""
    kwargs = dict(
        input_size=sizes.width,
        batch_size=sizes.batch,
        batches=sizes.batches,
        epochs=sizes.epochs,
        learning_rate=sizes.learning_rate,
        log=lambda *_: None,
    )
    runs = progress(RUNS, desc=f"SimpleNet, {sizes.epochs} epochs per run")
    return {run: simple_net.train(mode=run[0], dtype=run[1], **kwargs) for run in runs}


def digits_curves(sizes: Sizes) -> dict[tuple[str, str], list[float]]:
    """Mean training loss per epoch of the digits MLP (Adam, dropout) in each run."""
    import digits_mlp

    data = digits_mlp.load_data()
    return {
        run: digits_mlp.train(
            run[0], epochs=sizes.digits_epochs, data=data, log=None, dtype=run[1]
        ).epoch_losses
        for run in progress(RUNS, desc=f"digits MLP, {sizes.digits_epochs} epochs per run")
    }


# ---- plots --------------------------------------------------------------------------------
def _regions(name: str) -> list[tuple[float, float, str, str]]:
    """(from log2, to log2, label, color) of one format's underflow/subnormal/normal/overflow."""
    kit = KITS[name]
    low, normal = np.log2(kit.SMALLEST_SUBNORMAL), np.log2(kit.SMALLEST_NORMAL)
    top = float(np.log2(kit.OVERFLOW_THRESHOLD))
    spacing = f"normal: relative spacing ≤ 2$^{{-{FRACTION_BITS[name]}}}$"
    return [
        (-300.0, low, "underflow", plot_amp.UNDERFLOW),
        (low, normal, "subnormal", plot_amp.SUBNORMAL),
        (normal, top, spacing, plot_amp.NORMAL),
        (top, 300.0, "overflow", plot_amp.UNDERFLOW),
    ]


def plot_number_line(start: np.ndarray, nearly_fit: np.ndarray, path: Path) -> None:
    """One panel per format on a shared log2 axis, with the same gradient histograms."""
    plt = plot_amp._pyplot()
    fig, axes = plt.subplots(2, 1, figsize=(11, 8), sharex=True, layout="constrained")
    lo, hi = -140, 132
    bins = np.arange(lo, hi + 1.0, 1.0)
    for ax, (name, kit) in zip(axes, KITS.items()):
        height = ax.get_xaxis_transform()
        for left, right, label, color in _regions(name):
            left, right = max(left, lo), min(right, hi)
            ax.axvspan(left, right, color=color, alpha=0.55, lw=0)
            if right - left >= 25:  # narrow regions are named by the landmark lines instead
                if right - left < 60:  # one line would run over the landmark lines beside it
                    label = label.replace(": ", ":\n").replace(" spacing", "\nspacing")
                ax.text((left + right) / 2, 0.98, label, transform=height, ha="center", va="top",
                        fontsize=9 if "\n" in label else None)  # fmt: skip
        for x, label in LANDMARKS[name]:
            ax.axvline(x, color="#555555", lw=1, ls="--")
            right = x > hi - 12  # near the right edge: the label goes on the line's left
            ax.text(x + (-1 if right else 1), 0.80, label, transform=height, rotation=90,
                    fontsize=8, va="top", ha="right" if right else "left")  # fmt: skip
        for values, label, style in (
            (start, "start of training", {"color": "#777777", "ls": ":"}),
            (nearly_fit, "nearly fit", {"color": "#3b4cc0", "fill": True, "alpha": 0.5}),
        ):
            f = fate(values, name)
            zero, subnormal = plot_amp._percent(f["zero"]), plot_amp._percent(f["subnormal"])
            text = f"|grad|, {label}: {zero} → 0, {subnormal} subnormal"
            plot_amp._log2_histogram(ax, values, bins, label=text, **style)
        # NOTE: room above the histograms: the landmark labels hang from 80% of the height down
        # to about 40%, and the tallest bins must stay below them (fp16's sit on its lines).
        ax.set_ylim(0, ax.get_ylim()[1] * 3.0)
        ax.set_ylabel("% of parameters\nper binade")
        title = f"{name}: {FRACTION_BITS[name]} fraction bits, largest {kit.MAX:.4g}"
        ax.set_title(title, loc="left")
        if name == "float16":  # where each panel has room
            ax.legend(loc="center left")
        else:
            ax.legend(loc="upper right", bbox_to_anchor=(0.93, 0.85))
    ticks = np.arange(-136, hi + 1, 16)
    axes[1].set_xticks(ticks, [f"2$^{{{t}}}$" for t in ticks])
    axes[1].set_xlabel("|value| (log2 scale)")
    fig.suptitle("The same SimpleNet gradients on the float16 and bfloat16 number lines")
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_loss_curves(curves: dict[str, dict], path: Path) -> None:
    """Per model: the three loss curves on top, each 16-bit run minus fp32 (in %) below."""
    plt = plot_amp._pyplot()
    fig, axes = plt.subplots(
        2, len(curves), figsize=(11, 6.4), sharex="col", height_ratios=[2, 1], layout="constrained"
    )
    for column, (title, runs) in enumerate(curves.items()):
        ax, ax_diff = axes[0, column], axes[1, column]
        fp32 = np.asarray(runs[RUNS[0]])
        epochs = np.arange(1, len(fp32) + 1)
        for run, loss in runs.items():
            width = 3.5 if run == RUNS[0] else 1.5
            alpha = 0.5 if width > 2 else 1
            ax.plot(epochs, loss, color=COLORS[run], lw=width, alpha=alpha, marker="o", ms=3)
            if run != RUNS[0]:
                diff = 100 * (np.asarray(loss) - fp32) / fp32
                ax_diff.plot(epochs, diff, color=COLORS[run], lw=1.2, marker="o", ms=3)
        ax_diff.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
        for run in runs:  # the legend once, in run order
            ax.plot([], [], color=COLORS[run], label=LABELS[run])
        ax.set_title(title)
        ax.set_ylabel("mean training loss of the epoch")
        ax.legend(loc="upper right")
        ax.grid(alpha=0.3)
        ax_diff.axhline(0, color=COLORS[RUNS[0]], lw=1)
        ax_diff.set_xlabel("epoch")
        ax_diff.set_ylabel("(16-bit − fp32) / fp32\nin %")
        ax_diff.grid(alpha=0.3)
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---- the command ----------------------------------------------------------------------------
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img", help="output folder")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (for the tests)")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    write(f"gradients of SimpleNet (width {sizes.width}, batch {sizes.batch}):")
    start = plot_amp.gradient_magnitudes(sizes.width, sizes.batch, residual=None)
    nearly_fit = plot_amp.gradient_magnitudes(sizes.width, sizes.batch, residual=1e-3)
    for name, grads in (("start of training", start), ("nearly fit", nearly_fit)):
        for dtype in KITS:
            write(f"|grad| {name} in {dtype}: " + ", ".join(
                f"{k} {v:.3%}" for k, v in fate(grads, dtype).items()
            ))  # fmt: skip
    plot_number_line(start, nearly_fit, args.out / "bf16_number_line.png")

    curves = {}
    for title, make in (
        (f"SimpleNet (width {sizes.width}, SGD)", simple_net_curves),
        ("digits MLP (Adam, dropout)", digits_curves),
    ):
        write(f"loss curves: {title}, {len(RUNS)} runs ({', '.join(LABELS.values())})")
        curves[title] = make(sizes)
        for run, loss in curves[title].items():
            write(f"{title}, {LABELS[run]}: " + " ".join(f"{v:.6f}" for v in loss))
    plot_loss_curves(curves, args.out / "bf16_loss_curves.png")
    write(f"wrote 2 PNGs to {args.out} in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
