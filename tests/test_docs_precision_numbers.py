"""docs/bf16.md's and docs/fp8.md's measured tables are what their trainings give today.

The pages compare float32, float16 O2, bfloat16 O2 and FP8 O2 on SimpleNet and the digits
examples, with the commands that print each number. The runs are tests/precision_runs.py's,
shared with tests/test_fp8_training.py (each training once per session), and every cell is
compared exactly as the command prints it: a changed number on a page, or in what the
training gives, fails here. The pages' numbers belong to OpenBLAS's SkylakeX kernel (another
kernel sums in another order, and the 16-bit runs differ in the sixth digit); on a machine
with another kernel these tests skip and say so.
"""

from __future__ import annotations

import pytest
from docs_tables import columns, section_after, table_after
from precision_runs import BLAS_KERNEL, blas_kernel, digits_run, simple_net_losses

pytestmark = pytest.mark.skipif(
    blas_kernel() != BLAS_KERNEL,
    reason=f"the pages' numbers are OpenBLAS {BLAS_KERNEL}'s; this machine runs {blas_kernel()}",
)

SIMPLE_NET_RUNS = {  # the column of each run, as the pages head them
    "fp32": ("fp32", "float16"),
    "fp16 O2": ("O2", "float16"),
    "bf16 O2": ("O2", "bfloat16"),
    "FP8 O2": ("O2", "float8"),
}


def simple_net_epochs(*names: str, epochs: int = 8) -> dict[str, tuple[str, ...]]:
    """``{epoch: (the loss of each named run)}``, printed as simple_net.py prints them."""
    runs = [simple_net_losses(*SIMPLE_NET_RUNS[name], epochs=epochs) for name in names]
    return {
        str(epoch): tuple(f"{losses[epoch - 1]:.6f}" for losses in runs)
        for epoch in range(1, epochs + 1)
    }


def stale(page: str, what: str, expected) -> str:
    return (
        f"docs/{page}'s {what} is stale: the runs give {expected}; copy them into the page "
        "(and re-read the prose around the table)"
    )


@pytest.mark.slow
def test_fp8_md_simple_net_table_shows_the_three_runs_losses():
    table = table_after("fp8.md", "## Measured: fp32, bfloat16 and FP8 on the CPU")
    shown = columns(table, "fp32", "bf16 O2", "FP8 O2 (bf16 + FP8 GEMMs)")
    expected = simple_net_epochs("fp32", "bf16 O2", "FP8 O2")
    assert shown == expected, stale("fp8.md", "SimpleNet table", expected)


@pytest.mark.slow
def test_fp8_md_digits_table_shows_each_runs_accuracy_and_final_loss():
    table = table_after("fp8.md", "The digits (`examples/digits_mlp.py`")
    shown = columns(table, "fp32", "bf16 O2", "FP8 O2")
    runs = (("fp32", "float16"), ("O2", "bfloat16"), ("O2", "float8"))
    expected = {
        f"digits {name}, {epochs} epochs": tuple(
            f"{r.accuracy:.2%} ({r.loss:.4f})" for r in (digits_run(example, *run) for run in runs)
        )
        for name, example, epochs in (("MLP", "digits_mlp", 20), ("CNN", "digits_cnn", 8))
    }
    assert shown == expected, stale("fp8.md", "digits table", expected)


@pytest.mark.slow
def test_bf16_md_epoch_table_shows_the_three_runs_losses():
    table = table_after("bf16.md", "## Measured: SimpleNet and the digits")
    shown = columns(
        table, "fp32", "fp16 O2 (scaler, fp32 masters)", "bf16 O2 (no scaler, fp32 masters)"
    )
    expected = simple_net_epochs("fp32", "fp16 O2", "bf16 O2")
    assert shown == expected, stale("bf16.md", "SimpleNet table", expected)


@pytest.mark.slow
def test_bf16_md_final_losses_are_the_last_epochs_of_the_figures_runs():
    # examples/plot_bf16.py's runs: SimpleNet for 30 epochs, the digits MLP for its 20
    shown = columns(table_after("bf16.md", "![Loss curves"), "fp32", "fp16 O2", "bf16 O2")
    names = ("fp32", "fp16 O2", "bf16 O2")
    expected = {
        "SimpleNet, epoch 30": simple_net_epochs(*names, epochs=30)["30"],
        "digits MLP, epoch 20": tuple(
            f"{digits_run('digits_mlp', *SIMPLE_NET_RUNS[name]).loss:.6f}" for name in names
        ),
    }
    assert shown == expected, stale("bf16.md", "final-loss table", expected)


def test_bf16_md_number_line_table_shows_where_the_figures_gradients_land():
    import plot_amp
    import plot_bf16

    table = table_after("bf16.md", "![float16's and bfloat16's number lines")
    shown = {row["gradients"]: tuple(list(row.values())[1:]) for row in table}
    sizes = plot_bf16.FULL
    expected = {}
    for name, residual in (("start of training", None), ("a nearly fit network", 1e-3)):
        grads = plot_amp.gradient_magnitudes(sizes.width, sizes.batch, residual=residual)
        fates = [plot_bf16.fate(grads, dtype) for dtype in ("float16", "bfloat16")]
        expected[name] = tuple(
            plot_amp._percent(fate[key]) for fate in fates for key in ("zero", "subnormal")
        )
    assert shown == expected, stale("bf16.md", "number-line table", expected)


def percent_apart(a: float, b: float) -> str:
    """``a`` against ``b`` as the pages say it: "0.44% below", "1.8% above"."""
    difference = 100 * (a - b) / b
    return f"{abs(difference):.2g}% {'below' if difference < 0 else 'above'}"


@pytest.mark.slow
def test_bf16_md_says_where_the_digits_runs_end_against_fp32():
    fp32, fp16, bf16 = (
        digits_run("digits_mlp", *SIMPLE_NET_RUNS[name]).loss
        for name in ("fp32", "fp16 O2", "bf16 O2")
    )
    said = " ".join(section_after("bf16.md", "On SimpleNet bfloat16's difference")[:6])
    expected = (
        f"at epoch 20 float16 is {percent_apart(fp16, fp32)} "
        f"and bfloat16 {percent_apart(bf16, fp32)}."
    )
    assert expected in said, stale("bf16.md", "sentence on the digits' epoch 20", expected)


@pytest.mark.slow
def test_fp8_md_says_where_fp8_ends_against_bfloat16_and_fp32():
    fp32, bf16, fp8 = (
        simple_net_losses(*SIMPLE_NET_RUNS[name])[-1] for name in ("fp32", "bf16 O2", "FP8 O2")
    )
    said = " ".join(section_after("fp8.md", "The three curves are one.")[:6])
    expected = (
        f"ends {percent_apart(fp8, bf16).replace(' below', ' *below*')} bfloat16's final loss "
        f"({percent_apart(fp8, fp32)} float32's)"
    )
    assert expected in said, stale("fp8.md", "sentence on the final losses", expected)
