"""mse_loss's forward in one deterministic launch (reduction.cu's squared_error<Acc>,
mean_partials<Acc>; backend/squared_error.py; MseLoss.forward)."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

SQUARED_ERROR_TESTS = "tests/test_squared_error.py::"

MUTANTS: list[Mutant] = [
    Mutant(
        "squared-error-diff-not-written",
        "cuda/reduction.cu",
        "                diff[i] = d;\n",
        "",
        (
            SQUARED_ERROR_TESTS
            + "test_the_kernels_write_the_difference_and_add_in_their_stated_order_bit_for_bit",
        ),
        "squared_error: the difference MseLoss saves for its backward is never written (the loss alone is right)",
    ),
    Mutant(
        "squared-error-label-minus-input",
        "cuda/reduction.cu",
        "const Acc d = add(input[i], -label[i]);",
        "const Acc d = add(label[i], -input[i]);",
        (
            SQUARED_ERROR_TESTS
            + "test_the_kernels_write_the_difference_and_add_in_their_stated_order_bit_for_bit",
        ),
        "squared_error: diff = label - input: the same squares and loss, a backward of the wrong sign",
    ),
    Mutant(
        "squared-error-one-block-mean-not-divided",
        "cuda/reduction.cu",
        "        if (mean != 0 && threadIdx.x == 0) *out = divide(*out, n);\n",
        "",
        (
            SQUARED_ERROR_TESTS
            + "test_the_kernels_write_the_difference_and_add_in_their_stated_order_bit_for_bit",
        ),
        "squared_error: up to 64Ki elements (one launch) the mean is the sum",
    ),
    Mutant(
        "mean-partials-not-dividing",
        "cuda/reduction.cu",
        "    if (threadIdx.x == 0) *out = divide(*out, n);\n}",
        "}",
        (
            SQUARED_ERROR_TESTS
            + "test_the_kernels_write_the_difference_and_add_in_their_stated_order_bit_for_bit",
        ),
        "mean_partials: past 64Ki elements (two launches) the mean is the sum",
    ),
    Mutant(
        "squared-error-float-mean-flushed",
        "cuda/reduction.cu",
        "    if (!(fabs(quotient) < 0x1p-126)) return static_cast<float>(quotient);  // normal, inf, NaN",
        "    return static_cast<float>(quotient);  // normal, inf, NaN",
        (SQUARED_ERROR_TESTS + "test_edge_values",),
        "squared_error: a float32 mean below 2**-126 is rounded by a conversion that -ftz flushes to 0 (NumPy keeps the subnormal)",
    ),
    Mutant(
        "squared-error-float-mean-divided-in-float",
        "cuda/reduction.cu",
        "    const double quotient = static_cast<double>(sum) / static_cast<double>(n);",
        "    const double quotient = static_cast<double>(sum / static_cast<float>(n));",
        (SQUARED_ERROR_TESTS + "test_edge_values",),
        "squared_error: the float32 mean divided in float, whose quotient -ftz flushes below 2**-126",
    ),
    Mutant(
        "squared-error-launcher-skips-the-second-launch",
        "minitorch_amp/backend/squared_error.py",
        "        if blocks > 1:  # a one-block grid finishes in its own launch",
        "        if blocks > 1024:  # a one-block grid finishes in its own launch",
        (
            SQUARED_ERROR_TESTS
            + "test_the_kernels_write_the_difference_and_add_in_their_stated_order_bit_for_bit",
        ),
        "squared_error's launcher: past 16 tiles nothing adds the partials (the result is never written)",
    ),
    Mutant(
        "mse-loss-mean-takes-the-sum",
        "minitorch_amp/autograd/ops/loss.py",
        '            ctx.diff, out = squared_error(x, y, mean=reduction == "mean")',
        '            ctx.diff, out = squared_error(x, y, mean=reduction == "sum")',
        (
            SQUARED_ERROR_TESTS
            + "test_mse_loss_on_the_gpu_saves_the_twins_difference_and_launches_once",
        ),
        "MseLoss: mean and sum swapped in the call to squared_error",
    ),
    Mutant(
        "squared-error-twin-mean-in-another-order",
        "minitorch_amp/backend/squared_error.py",
        "    return diff, squares.mean() if diff.size else xp.full((), xp.nan, dtype=x.dtype)",
        "    return diff, squares[::-1].sum() / squares.size if diff.size else xp.full((), xp.nan, dtype=x.dtype)",
        (
            SQUARED_ERROR_TESTS
            + "test_on_numpy_the_difference_and_the_mean_and_sum_are_the_former_maths_bit_for_bit",
        ),
        "squared_error's twin: the CPU mean summed in another order (the docs numbers' bits would move)",
    ),
]
