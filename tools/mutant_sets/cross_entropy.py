"""Softmax cross-entropy with integer labels in two launches forward and one backward
(cuda/cross_entropy.cu; backend/cross_entropy.py; loss.CrossEntropy)."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

TESTS = "tests/test_cross_entropy_kernel.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "cross-entropy-label-past-the-classes-passes",
        "cuda/cross_entropy.cu",
        "    *bad = !ignored && (y < 0 || y >= n);",
        "    *bad = !ignored && y < 0;",
        (TESTS,),
        "cross_entropy's kernels take a label >= the class count as a class: no error, a read past the row",
    ),
    Mutant(
        "cross-entropy-mean-over-rows",
        "cuda/cross_entropy.cu",
        "const float s = __fdiv_rn(1.0f, den == 0.0f ? 1.0f : den);",
        "const float s = __fdiv_rn(1.0f, static_cast<float>(rows));",
        (TESTS,),
        "cross_entropy's mean divides by the row count, not by the weights of the labels kept",
    ),
    Mutant(
        "cross-entropy-none-gradient-of-the-first-row",
        "minitorch_amp/backend/cross_entropy.py",
        "    args += (np.int32(rows.per_row), scale, dx)",
        "    args += (np.int32(0), scale, dx)",
        (TESTS,),
        "reduction='none': every row's gradient is scaled by the first row's incoming gradient",
    ),
    Mutant(
        "cross-entropy-kernel-along-another-axis",
        "minitorch_amp/backend/cross_entropy.py",
        "        axis % logits.ndim == logits.ndim - 1",
        "        True",
        (TESTS,),
        "cross_entropy over the first axis runs the last-axis kernels",
    ),
]
