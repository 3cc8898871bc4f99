"""Draw the figures of docs/fp16.md and docs/loss-scaling.md from real minitorch_amp runs.

Every number in the figures comes from training the tutorial's SimpleNet here, on the CPU
or the GPU. One command regenerates all three PNGs:

    python examples/plot_amp.py                  # ./*.png, about a minute on a laptop
    python examples/plot_amp.py --out docs/img   # replace the figures of the docs
    python examples/plot_amp.py --quick        # tiny sizes, a few seconds (the tests use it)

Data collection (``gradient_magnitudes``, ``fp16_fate``, ``train_per_step``) is separate
from plotting and does not need matplotlib; the ``plot_*`` functions do (the 'examples'
extra brings it).
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

from simple_net import SimpleNet, make_data  # noqa: E402

import minitorch_amp as mt  # noqa: E402
from minitorch_amp import amp, nn  # noqa: E402
from minitorch_amp.utils.progress import progress  # noqa: E402

# float16's landmarks (IEEE 754 binary16: 1 sign bit, 5 exponent bits, 10 mantissa bits).
SUBNORMAL_MIN = 2.0**-24  # the smallest positive float16; half of it rounds to 0
NORMAL_MIN = 2.0**-14  # the smallest normal float16: full 11-bit precision from here up
FP16_MAX = 65504.0  # the largest finite float16, (2 - 2**-10) * 2**15
OVERFLOW_AT = 65520.0  # halfway from 65504 to 2**16: from here up, rounding gives inf

MODES = ("fp32", "O1", "O2")


@dataclass(frozen=True)
class Sizes:
    """The sizes of every run; QUICK keeps the tests fast, FULL draws the docs' figures."""

    width: int = 256  # SimpleNet's input_size = output_size
    batch: int = 64
    batches: int = 4  # the data set: this many random batches, cycled
    steps: int = 150  # steps of each loss curve
    trajectory_steps: int = 200
    learning_rate: float = 0.1


FULL = Sizes()
QUICK = Sizes(width=32, batch=8, batches=2, steps=8, trajectory_steps=40)


# ---- data ---------------------------------------------------------------------------------
def gradient_magnitudes(
    width: int, batch: int, residual: float | None = 1e-3, seed: int = 0
) -> np.ndarray:
    """``|grad|`` of every parameter after one float32 backward pass of SimpleNet (MSE loss).

    Args:
        residual: None uses the tutorial's random targets (the start of training). A number
            makes the targets the network's own prediction plus Gaussian noise of that
            standard deviation: a network that has nearly fit its data, whose loss and
            gradients are correspondingly small.

    Returns:
        A flat float32 array with one entry per parameter element (exact zeros included).
    """
    mt.seed(seed)
    model = SimpleNet(width, width)
    x = mt.randn([batch, width])
    if residual is None:
        y = mt.randn([batch, width])
    else:
        with mt.no_grad():
            y = model(x) + residual * mt.randn([batch, width])
    nn.MSELoss()(model(x), y).backward()
    return np.concatenate([np.abs(p.grad.numpy()).ravel() for p in model.parameters()])


def fp16_fate(values: np.ndarray) -> dict[str, float]:
    """What casting ``values`` to float16 (round to nearest even) does, as fractions.

    Keys: ``zero`` (nonzero values that round to 0), ``subnormal`` (land below 2**-14, with
    fewer than 11 significant bits), ``normal``, ``overflow`` (round to inf). Values that
    are exactly 0 already are not counted.
    """
    values = np.asarray(values, dtype=np.float32)
    values = values[values != 0]
    with np.errstate(over="ignore"):
        half = np.abs(values.astype(np.float16))
    n = max(values.size, 1)
    return {
        "zero": float(np.count_nonzero(half == 0)) / n,
        "subnormal": float(np.count_nonzero((half > 0) & (half < NORMAL_MIN))) / n,
        "normal": float(np.count_nonzero((half >= NORMAL_MIN) & np.isfinite(half))) / n,
        "overflow": float(np.count_nonzero(np.isinf(half))) / n,
    }


@dataclass
class Run:
    """Per-step records of one training run."""

    loss: np.ndarray  # the (unscaled) loss of each step
    scale: np.ndarray  # the loss scale used in each step (1.0 without scaling)
    skipped: np.ndarray  # True where the gradients had inf/nan and the update was skipped
    grew: np.ndarray  # True where the scaler grew the scale after the step


def train_per_step(mode: str, sizes: Sizes, steps: int, seed: int = 0, **scaler_kwargs) -> Run:
    """Train SimpleNet for ``steps`` steps as examples/simple_net.py does; record every step.

    The loop is the tutorial's, in the PyTorch spelling so the skip is visible: after
    ``scaler.unscale_(opt)`` the gradients are unscaled, and any inf/nan among them means
    ``scaler.step`` skips the update. ``scaler_kwargs`` go to ``GradScaler`` (default: the
    tutorial's ``init_loss_scaling=1024``). The same ``seed`` gives every mode the same
    initial weights and the same data.
    """
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is not available; choose one of {MODES}")
    mt.seed(seed)
    model = SimpleNet(sizes.width, sizes.width)
    opt = mt.optimizer.SGD(learning_rate=sizes.learning_rate, parameters=model.parameters())
    data, labels = make_data(sizes.width, sizes.batch, sizes.batches)
    scaler = amp.GradScaler(enable=mode != "fp32", **{"init_loss_scaling": 1024, **scaler_kwargs})
    if mode == "O2":
        model, opt = amp.decorate(models=model, optimizers=opt, level="O2")
    mse = nn.MSELoss()
    records = []
    # NOTE: overflowing float16 casts are the point of the trajectory run; keep NumPy quiet.
    with np.errstate(over="ignore", invalid="ignore"):
        for step in progress(range(steps), desc=f"{mode}, {steps} steps"):
            x, y = data[step % sizes.batches], labels[step % sizes.batches]
            with amp.auto_cast(enable=mode != "fp32", level="O1" if mode == "fp32" else mode):
                loss = mse(model(x), y)
            scale = scaler.get_loss_scaling()
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            skipped = not all(np.isfinite(p.grad.numpy()).all() for p in model.parameters())
            scaler.step(opt)
            scaler.update()
            opt.clear_grad()
            grew = scaler.get_loss_scaling() > scale
            records.append((loss.item(), scale, skipped, grew))
    loss, scale, skipped, grew = (np.array(column) for column in zip(*records))
    return Run(loss=loss, scale=scale, skipped=skipped, grew=grew)


def scale_trajectory(sizes: Sizes, seed: int = 0) -> Run:
    """An O2 run whose dynamic scale both backs off and grows within a few hundred steps.

    It starts at 2**24, far above what float16 gradients can take, so the first steps
    overflow and halve the scale; it grows after every 10 clean steps, so it keeps climbing
    back to the overflow point: the saw-tooth every dynamic scaler settles into.
    """
    return train_per_step(
        "O2", sizes, sizes.trajectory_steps, seed, init_loss_scaling=2.0**24, incr_every_n_steps=10
    )


def loss_curves(sizes: Sizes, seed: int = 0) -> dict[str, np.ndarray]:
    """Per-step losses of fp32, O1 and O2 runs with the same seed, data and tutorial scaler."""
    return {mode: train_per_step(mode, sizes, sizes.steps, seed).loss for mode in MODES}


# ---- plots --------------------------------------------------------------------------------
STYLE = {  # matplotlib rcParams: light and uncluttered
    "font.size": 10,
    "axes.titlesize": 12,
    "axes.titleweight": "bold",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
}
COLORS = {"fp32": "#222222", "O1": "#1f77b4", "O2": "#d62728", "skip": "#d62728"}
SKIP_MARK = {"marker": "x", "color": COLORS["skip"], "zorder": 3}
UNDERFLOW, SUBNORMAL, NORMAL = "#f4b6b6", "#fbe3a6", "#cfe8cf"
LOG2_OVERFLOW = float(np.log2(OVERFLOW_AT))
REGIONS = [  # (from log2, to log2, label, color) for the fp16 number line
    (-60.0, -24.0, "underflow\n(rounds to 0\nor up to 2$^{-24}$)", UNDERFLOW),
    (-24.0, -14.0, "subnormal\n(fewer than 11\nsignificant bits)", SUBNORMAL),
    (-14.0, LOG2_OVERFLOW, "normal: 11 significant bits, relative spacing ≤ 2$^{-10}$", NORMAL),
    (LOG2_OVERFLOW, 60.0, "overflow\n(inf)", UNDERFLOW),
]
LANDMARKS = [  # (log2, label)
    (-24.0, "2$^{-24}$ ≈ 6.0e-8\nsmallest subnormal"),
    (-14.0, "2$^{-14}$ ≈ 6.1e-5\nsmallest normal"),
    (LOG2_OVERFLOW, "65504 = max\n≥ 65520 → inf"),
]
SCALINGS = [  # (legend name, factor, style) of the gradient histograms
    ("×1 (no scaling)", 1.0, {"color": "#3b4cc0", "fill": True, "alpha": 0.5}),
    ("×1024 = 2$^{10}$", 1024.0, {"color": "#8e44ad"}),
    ("×65536 = 2$^{16}$", 65536.0, {"color": "#16a085"}),
]


def _pyplot():
    """pyplot on the Agg backend (files only, no display), with a light, uncluttered style."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(STYLE)
    return plt


def _two_panels(plt):
    """A figure with a tall top panel and a short one below it, sharing the step axis."""
    return plt.subplots(
        2, 1, figsize=(10, 6.4), sharex=True, height_ratios=[2, 1], layout="constrained"
    )


def _log2_histogram(ax, values: np.ndarray, bins: np.ndarray, **style) -> None:
    """Percent of ``values`` per bin of log2|value|; zeros are left out but count in the total."""
    nonzero = values[values > 0]
    log2 = np.clip(np.log2(nonzero), bins[0], bins[-1] - 1e-6)  # the tails go in the end bins
    counts, _ = np.histogram(log2, bins=bins)
    ax.stairs(100 * counts / values.size, bins, lw=2, **style)


def _percent(fraction: float) -> str:
    """0%, 0.005%, 12.6%: small fractions keep a significant digit instead of showing 0.0%."""
    if fraction == 0:
        return "0%"
    return f"{fraction:.3%}" if fraction < 1e-3 else f"{fraction:.1%}"


def _fate_label(name: str, values: np.ndarray) -> str:
    fate = fp16_fate(values)
    return f"{name}: {_percent(fate['zero'])} → 0, {_percent(fate['subnormal'])} subnormal"


def _zoom(ax, values, red_from, red_to, note: str, note_x: float, ticks, labels) -> None:
    """A short stretch of the float16 line on a linear axis: every float16 in it is a dot,
    the rounding boundaries halfway between neighbours are small ticks, and the interval
    that rounds to 0 or to inf is shaded."""
    values = np.asarray(values, dtype=np.float64)
    halfway = (values[:-1] + values[1:]) / 2
    ax.axhline(0, color="#999999", lw=1, zorder=1)
    ax.axvspan(red_from, red_to, color=UNDERFLOW, alpha=0.55, lw=0)
    ax.vlines(halfway, -0.12, 0.12, color="#999999", lw=1)
    ax.plot(values, np.zeros_like(values), "o", color="#3b4cc0", ms=7, zorder=3)
    ax.text(note_x, 0.85, note, fontsize=8.5, va="top")
    ax.set_ylim(-0.5, 1)
    ax.set_yticks([])
    ax.spines["left"].set_visible(False)
    ax.set_xticks(ticks, labels)


def _zoom_at_zero(ax) -> None:
    unit = "2$^{-24}$"
    _zoom(
        ax,
        values=np.arange(7),
        red_from=-0.4,
        red_to=0.5,
        note="• = a float16 value, | = a rounding boundary (halfway between).\n"
        "Below 2$^{-25}$ rounds to 0; 2$^{-25}$ itself is a tie and goes to\n"
        "the neighbour with an even mantissa, which is also 0.",
        note_x=-0.3,
        ticks=range(7),
        labels=["0", unit, *(f"{k}·{unit}" for k in range(2, 7))],
    )
    ax.set_xlim(-0.4, 6.5)
    ax.set_xlabel("|value|")
    ax.set_title("Zoom at zero: subnormals are evenly spaced, 2$^{-24}$ apart", fontsize=10)


def _zoom_at_top(ax) -> None:
    values = FP16_MAX - 32.0 * np.arange(4, -1, -1)
    _zoom(
        ax,
        values=[*values, 2.0**16],  # 2**16 is not a float16: the next step would need it
        red_from=OVERFLOW_AT,
        red_to=65600,
        note="65520 is halfway from 65504 to 2$^{16}$, the next value, which float16\n"
        "cannot hold: from 65520 up, round-to-nearest gives inf.",
        note_x=values[0] - 12,
        ticks=values,
        labels=[*(f"{v:.0f}" for v in values[:-1]), "65504\n(max)"],
    )
    ax.plot([2.0**16], [0], "o", color="white", mec="#d62728", ms=7, zorder=4)
    ax.text(2.0**16, 0.15, "2$^{16}$", ha="center", fontsize=8.5)
    ax.text(OVERFLOW_AT, -0.35, "65520", ha="center", fontsize=8.5)
    ax.set_xlim(values[0] - 16, 65545)
    ax.set_xlabel("value")
    ax.set_title("Zoom at the top: float16s are 32 apart here", fontsize=10)


def plot_number_line(start: np.ndarray, nearly_fit: np.ndarray, path: Path) -> None:
    """fp16's regions on a log2 axis with gradient histograms before and after scaling;
    below, the two ends of the line zoomed in on linear axes."""
    plt = _pyplot()
    fig = plt.figure(figsize=(11, 7.4), layout="constrained")
    grid = fig.add_gridspec(2, 2, height_ratios=[2.6, 1])
    ax = fig.add_subplot(grid[0, :])
    lo, hi = -36, 20
    axis_height = ax.get_xaxis_transform()  # x in data, y in axes fractions
    for left, right, label, color in REGIONS:
        left, right = max(left, lo), min(right, hi)
        ax.axvspan(left, right, color=color, alpha=0.55, lw=0)
        ax.text((left + right) / 2, 0.97, label, transform=axis_height, ha="center", va="top")
    for x, label in LANDMARKS:
        ax.axvline(x, color="#555555", lw=1, ls="--")
        ax.text(x + 0.3, 0.80, label, transform=axis_height, fontsize=8.5, va="top")

    bins = np.arange(lo, hi + 0.5, 0.5)  # half-binade bins
    for name, factor, style in SCALINGS:
        scaled = nearly_fit * np.float32(factor)
        _log2_histogram(ax, scaled, bins, label=_fate_label(name, scaled), **style)
    label = _fate_label("start of training (×1)", start)
    _log2_histogram(ax, start, bins, color="#777777", ls=":", label=label)
    ax.set_xlim(lo, hi)
    ax.set_ylim(0, ax.get_ylim()[1] * 1.75)
    ticks = np.arange(lo, hi + 1, 4)
    ax.set_xticks(ticks, [f"2$^{{{t}}}$" for t in ticks])
    ax.set_xlabel("|value| (log2 scale)")
    ax.set_ylabel("% of parameters per half binade")
    ax.set_title("The float16 number line, and where SimpleNet's gradients fall on it")
    title = "|grad| of a nearly fit SimpleNet, scaled by:"
    ax.legend(loc="upper right", bbox_to_anchor=(0.925, 0.84), alignment="left", title=title)

    _zoom_at_zero(fig.add_subplot(grid[1, 0]))
    _zoom_at_top(fig.add_subplot(grid[1, 1]))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_trajectory(run: Run, path: Path) -> None:
    """The loss scale per step (log2) with skipped steps and growths marked; the loss below."""
    plt = _pyplot()
    fig, (ax, ax_loss) = _two_panels(plt)
    steps, log2, skipped, grew = (
        np.arange(len(run.scale)),
        np.log2(run.scale),
        run.skipped,
        run.grew,
    )
    ax.step(steps, log2, where="post", color="#3b4cc0", lw=2, label="loss scale S of the step")
    label = f"inf/nan in the gradients: step skipped, S halved ({skipped.sum()} steps)"
    ax.scatter(steps[skipped], log2[skipped], s=60, label=label, **SKIP_MARK)
    label = f"10th clean step in a row: S doubled ({grew.sum()} times)"
    ax.scatter(steps[grew], log2[grew], marker="^", s=40, color="#2ca02c", zorder=3, label=label)
    ax.set_ylabel("log2 of the loss scale S")
    ax.yaxis.set_major_locator(plt.MaxNLocator(integer=True))
    ax.set_ylim(log2.min() - 0.6, log2.max() + 0.4)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(
        "Dynamic loss scaling in an O2 SimpleNet run\n"
        "GradScaler(init_loss_scaling=2**24, incr_every_n_steps=10), otherwise defaults"
    )
    ax.legend(loc="lower right")
    ax_loss.plot(steps, run.loss, color="#444444", lw=1.2, label="loss of the step")
    label = "skipped step (no update)"
    ax_loss.scatter(steps[skipped], run.loss[skipped], s=40, label=label, **SKIP_MARK)
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("MSE loss")
    ax_loss.grid(alpha=0.3)
    ax_loss.legend(loc="upper right")
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_loss_curves(curves: dict[str, np.ndarray], path: Path) -> None:
    """fp32, O1 and O2 per-step losses; below, each AMP run's relative difference from fp32."""
    plt = _pyplot()
    fig, (ax, ax_diff) = _two_panels(plt)
    steps = np.arange(len(curves["fp32"]))
    styles = {"fp32": {"lw": 3.5, "alpha": 0.35}, "O1": {"lw": 1.5}, "O2": {"lw": 1.5, "ls": "--"}}
    for mode, loss in curves.items():
        ax.plot(steps, loss, color=COLORS[mode], label=mode, **styles[mode])
    ax.set_ylabel("MSE loss")
    ax.set_title(
        "The same SimpleNet run in fp32, O1 and O2 (same seed, same data)\n"
        "the three curves lie on top of each other; the difference is shown below"
    )
    ax.legend(loc="upper right")
    ax.grid(alpha=0.3)
    for mode in ("O1", "O2"):
        diff = 100 * (curves[mode] - curves["fp32"]) / curves["fp32"]
        ax_diff.plot(steps, diff, color=COLORS[mode], lw=1.2, label=mode)
    ax_diff.axhline(0, color=COLORS["fp32"], lw=1)
    ax_diff.set_xlabel("step")
    ax_diff.set_ylabel("(AMP − fp32) / fp32\nin %")
    ax_diff.legend(loc="upper right", ncols=2)
    ax_diff.grid(alpha=0.3)
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---- the command ----------------------------------------------------------------------------
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--out", type=Path, default=Path("."), help="output folder; docs/img for the docs' figures"
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes (for the tests)")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()

    nearly_fit = gradient_magnitudes(sizes.width, sizes.batch, residual=1e-3)
    at_start = gradient_magnitudes(sizes.width, sizes.batch, residual=None)
    for name, grads in [("start of training", at_start), ("nearly fit", nearly_fit)]:
        for factor in (1, 1024, 65536):
            fate = fp16_fate(grads * np.float32(factor))
            print(f"|grad| {name} x{factor}: " + ", ".join(f"{k} {v:.3%}" for k, v in fate.items()))
    plot_number_line(at_start, nearly_fit, args.out / "fp16_number_line.png")

    run = scale_trajectory(sizes)
    print(
        f"trajectory: {run.skipped.sum()} skipped steps, {run.grew.sum()} growths, "
        f"final scale 2^{np.log2(run.scale[-1]):.0f}"
    )
    plot_trajectory(run, args.out / "loss_scale_trajectory.png")

    curves = loss_curves(sizes)
    for mode, loss in curves.items():
        print(f"{mode}: loss {loss[0]:.4f} -> {loss[-1]:.4f}")
    plot_loss_curves(curves, args.out / "loss_curves.png")
    print(f"wrote 3 PNGs to {args.out} in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
