"""h19 (issue 27 item 3 and item 9's small items): docs numbers checked against the commands
that print them, the bf16 property test's overflow warning, plot_bf16's progress and help,
and the elementwise losses' broadcast warning."""

from __future__ import annotations

from mutant_sets import Mutant

COMPARE_TABLE = (
    "tests/test_docs_numbers.py::"
    "test_the_compare_table_shows_the_losses_and_memory_the_command_prints"
)

MUTANTS: list[Mutant] = [
    Mutant(
        "amp-md-compare-loss-stale",
        "docs/amp.md",
        "| O1 | 7.505 | 0.44x | 1.249706 | 41.6 |",
        "| O1 | 7.505 | 0.44x | 1.249698 | 41.6 |",
        (f"{COMPARE_TABLE}[amp.md]",),
        "amp.md's --compare table keeps a final loss the command no longer prints (issue 27: "
        "1.249698 shown, 1.249706 printed since Linear became matmul-then-add)",
    ),
    Mutant(
        "benchmarks-md-compare-peak-stale",
        "docs/benchmarks.md",
        "| fp32 | 3.279 | 1.00x | 1.249699 | 35.3 |",
        "| fp32 | 3.279 | 1.00x | 1.249699 | 59.3 |",
        (f"{COMPARE_TABLE}[benchmarks.md]",),
        "benchmarks.md's --compare table keeps the peak memory of the flat-copy optimizer step",
    ),
    Mutant(
        "simple-net-learning-rate-moves-the-docs-losses",
        "examples/simple_net.py",
        'parser.add_argument("--learning-rate", type=float, default=1e-4, help="SGD\'s step")',
        'parser.add_argument("--learning-rate", type=float, default=1.1e-4, help="SGD\'s step")',
        (f"{COMPARE_TABLE}[amp.md]", f"{COMPARE_TABLE}[benchmarks.md]"),
        "a code change moves what --compare prints while the pages keep the old losses",
    ),
    Mutant(
        "amp-md-claims-the-sixth-digit",
        "docs/amp.md",
        "O1 differs from fp32 in the fifth\nsignificant digit",
        "O1 differs from fp32 in the sixth\nsignificant digit",
        (
            "tests/test_docs_numbers.py::"
            "test_amp_md_says_how_close_o1_comes_to_fp32_as_its_table_shows",
        ),
        "amp.md's lesson claims more agreement between O1 and fp32 than its table shows",
    ),
    Mutant(
        "amp-md-lesson-moved-count-stale",
        "docs/amp.md",
        "(244,210 of\n3,148,800)",
        "(244,205 of\n3,148,800)",
        ("tests/test_docs_numbers.py::test_amp_md_lessons_numbers_are_what_its_measurement_gives",),
        "amp.md's master-weight lesson quotes a count of float16 weights its measurement no "
        "longer gives",
    ),
    Mutant(
        "examples-md-digits-accuracy-stale",
        "docs/examples.md",
        "O2                3.91      0.0530        98.00%",
        "O2                3.91      0.0530        97.78%",
        ("tests/test_digits_cnn.py::test_the_examples_page_shows_what_the_default_run_prints",),
        "examples.md's digits CNN block keeps an O2 accuracy the command no longer prints "
        "(issue 27: 97.78% shown, 98.00% printed)",
    ),
    Mutant(
        "bf16-found-inf-property-overflows-outside-errstate",
        "tests/test_bf16_properties.py",
        '    with np.errstate(over="ignore", invalid="ignore"):\n'
        "        wide = g.numpy().astype(np.float32) * np.float32(1 / scale)",
        "    wide = g.numpy().astype(np.float32) * np.float32(1 / scale)\n"
        '    with np.errstate(over="ignore", invalid="ignore"):',
        (
            "tests/test_bf16_properties.py::"
            "test_found_inf_is_exactly_a_non_finite_unscaled_bf16_gradient",
        ),
        "the suite prints NumPy's overflow RuntimeWarning where the overflow is the point",
    ),
    Mutant(
        "mse-loss-broadcasts-silently",
        "minitorch_amp/nn/functional/loss.py",
        '    warn_if_label_broadcasts("mse_loss", input, label)\n',
        "",
        (
            "tests/test_loss_shapes.py::"
            "test_a_label_of_another_shape_warns_and_still_broadcasts_as_paddle",
        ),
        "mse_loss of [4, 1] against [4] averages 16 differences without a word",
    ),
    Mutant(
        "loss-broadcast-warning-points-inside-the-library",
        "minitorch_amp/nn/functional/loss.py",
        "def warn_if_label_broadcasts(name: str, input, label, stacklevel: int = 3)",
        "def warn_if_label_broadcasts(name: str, input, label, stacklevel: int = 2)",
        (
            "tests/test_loss_shapes.py::"
            "test_the_warning_says_what_it_broadcasts_to_and_how_to_match_the_shapes",
        ),
        "the broadcast warning names a line of loss.py instead of the caller's",
    ),
    Mutant(
        "plot-bf16-help-without-defaults",
        "examples/plot_bf16.py",
        "        formatter_class=argparse.ArgumentDefaultsHelpFormatter,\n",
        "",
        ("tests/test_plot_bf16.py::test_help_shows_the_defaults",),
        "plot_bf16.py --help does not say where the PNGs go by default",
    ),
    Mutant(
        "plot-bf16-runs-without-progress",
        "examples/plot_bf16.py",
        '    runs = progress(RUNS, desc=f"SimpleNet, {sizes.epochs} epochs per run")',
        "    runs = RUNS",
        ("tests/test_plot_bf16.py::test_every_run_of_the_loss_curves_goes_through_a_progress_bar",),
        "plot_bf16's minutes of SimpleNet runs show no progress",
    ),
]
