"""h25 (issue 27 item 3's remainder): docs/fp8.md's and docs/bf16.md's measured tables and
the sentences that quote them, and docs/layer_to.md's memory table, checked against the runs
and the command that make them."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

PRECISION = "tests/test_docs_precision_numbers.py::"
FP8_SIMPLE = PRECISION + "test_fp8_md_simple_net_table_shows_the_three_runs_losses"
FP8_DIGITS = PRECISION + "test_fp8_md_digits_table_shows_each_runs_accuracy_and_final_loss"
BF16_EPOCHS = PRECISION + "test_bf16_md_epoch_table_shows_the_three_runs_losses"
BF16_FINAL = PRECISION + "test_bf16_md_final_losses_are_the_last_epochs_of_the_figures_runs"

MUTANTS: list[Mutant] = [
    Mutant(
        "fp8-md-simple-net-final-loss-stale",
        "docs/fp8.md",
        "| 8 | 1.138497 | 1.138577 | 1.138376 |",
        "| 8 | 1.138497 | 1.138577 | 1.138367 |",
        (FP8_SIMPLE,),
        "fp8.md's SimpleNet table keeps an FP8 loss the training no longer gives",
    ),
    Mutant(
        "fp8-md-digits-cnn-accuracy-stale",
        "docs/fp8.md",
        "| digits CNN, 8 epochs | 97.56% (0.0534) | 97.56% (0.0533) | 97.78% (0.0484) |",
        "| digits CNN, 8 epochs | 97.56% (0.0534) | 97.56% (0.0533) | 97.56% (0.0484) |",
        (FP8_DIGITS,),
        "fp8.md's digits table shows an FP8 CNN accuracy the run does not reach",
    ),
    Mutant(
        "bf16-md-digits-final-losses-stale",
        "docs/bf16.md",
        "| digits MLP, epoch 20 | 0.004353 | 0.004334 | 0.004433 |",
        "| digits MLP, epoch 20 | 0.004353 | 0.004263 | 0.004403 |",
        (BF16_FINAL,),
        "bf16.md's final-loss table kept the digits MLP's fp16 and bf16 losses of an older "
        "code (0.004263, 0.004403 shown; 0.004334, 0.004433 given), unchecked (issue 27)",
    ),
    Mutant(
        "bf16-md-epoch-table-stale",
        "docs/bf16.md",
        "| 1 | 1.245252 | 1.245353 | 1.248102 |",
        "| 1 | 1.245252 | 1.245352 | 1.248102 |",
        (BF16_EPOCHS,),
        "bf16.md's SimpleNet epoch table keeps a float16 O2 loss the training no longer gives",
    ),
    Mutant(
        "bf16-md-number-line-fraction-stale",
        "docs/bf16.md",
        "| a nearly fit network | 6.5% | 93.5% | 0% | 0% |",
        "| a nearly fit network | 6.4% | 93.6% | 0% | 0% |",
        (PRECISION + "test_bf16_md_number_line_table_shows_where_the_figures_gradients_land",),
        "bf16.md's number-line table shows fractions plot_bf16's gradients do not have",
    ),
    Mutant(
        "bf16-md-digits-sentence-stale",
        "docs/bf16.md",
        "at epoch 20 float16 is 0.44% below and bfloat16 1.8% above.",
        "at epoch 20 float16 is 2.1% below and bfloat16 1.1% above.",
        (PRECISION + "test_bf16_md_says_where_the_digits_runs_end_against_fp32",),
        "bf16.md's prose quotes the digits runs' old epoch-20 differences (issue 27)",
    ),
    Mutant(
        "fp8-md-final-loss-sentence-stale",
        "docs/fp8.md",
        "first epoch: both carry bfloat16 activations and gradients between the GEMMs) and ends 0.018%",
        "first epoch: both carry bfloat16 activations and gradients between the GEMMs) and ends 0.028%",
        (PRECISION + "test_fp8_md_says_where_fp8_ends_against_bfloat16_and_fp32",),
        "fp8.md's prose claims a final-loss difference its table does not show",
    ),
    Mutant(
        "digits-mlp-learning-rate-moves-the-docs-numbers",
        "examples/digits_mlp.py",
        "    learning_rate: float = 2e-3,\n",
        "    learning_rate: float = 2.1e-3,\n",
        (FP8_DIGITS, BF16_FINAL),
        "a code change moves the digits MLP's losses while bf16.md and fp8.md keep the old ones",
    ),
    Mutant(
        "layer-to-md-memory-stale",
        "docs/layer_to.md",
        "| 4 × 1024 | 4,198,400 | 16.02 | 24.02 | 24.02 | 16.02 |",
        "| 4 × 1024 | 4,198,400 | 16.02 | 24.02 | 20.02 | 16.02 |",
        (
            "tests/test_docs_numbers.py::test_layer_to_md_shows_the_peak_memory_the_benchmark_prints",
        ),
        "layer_to.md's table shows a peak the benchmark does not print (it was never checked)",
    ),
]
