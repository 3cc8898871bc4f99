"""Issue 26: the tensor ops (tril/triu, masked_fill, split, gather, sort/topk, einsum, cumsum,
multinomial, ...)."""

from __future__ import annotations

from mutant_sets import Mutant

MUTANTS: list[Mutant] = [
    Mutant(
        "cumsum-gradient-runs-forward",
        "minitorch_amp/autograd/ops/reduce.py",
        "        return _running_sum(grad, ctx.axis, not ctx.reverse)",
        "        return _running_sum(grad, ctx.axis, ctx.reverse)",
        ("tests/test_ops.py::test_backward_matches_finite_differences[cumsum]",),
        "cumsum's gradient is the running sum of grad in the forward's direction, not reversed",
    ),
    Mutant(
        "index-select-gradient-overwrites-repeats",
        "minitorch_amp/autograd/ops/index.py",
        "    scatter_add(full, index, grad.astype(acc, copy=False))",
        "    full[index] = grad.astype(acc, copy=False)",
        ("tests/test_tensor_ops.py::test_repeated_indices_add_their_gradients",),
        "index_select/gather/take_along_axis keep one of the gradients of a repeated index",
    ),
    Mutant(
        "einsum-implicit-output-unsorted",
        "minitorch_amp/autograd/ops/einsum.py",
        "        once = sorted(c for c, n in counts.items() if n == 1 and c not in broadcast)",
        "        once = [c for t in terms for c in t if counts[c] == 1 and c not in broadcast]",
        (
            "tests/test_tensor_ops.py::"
            "test_einsum_without_an_output_puts_broadcast_dims_first_then_letters_alphabetically",
        ),
        "einsum without '->' keeps the letters in the order written instead of alphabetical",
    ),
    Mutant(
        "split-gradients-to-the-wrong-pieces",
        "minitorch_amp/autograd/ops/index.py",
        "        for index, g in zip(ctx.indexes, grads):",
        "        for index, g in zip(reversed(ctx.indexes), grads):",
        (
            "tests/test_ops.py::test_backward_matches_finite_differences[unbind]",
            "tests/test_ops.py::test_backward_matches_finite_differences[split]",
        ),
        "split's joint writes each piece's gradient where another piece came from",
    ),
    Mutant(
        "masked-fill-gradient-swapped",
        "minitorch_amp/autograd/ops/masking.py",
        "        return grad * ~mask, None, grad * mask",
        "        return grad * mask, None, grad * ~mask",
        (
            "tests/test_tensor_ops.py::"
            "test_masked_fill_broadcasts_the_mask_and_gives_a_tensor_value_its_gradient",
        ),
        "masked_fill gives x the gradient where the mask replaced it, and the value elsewhere",
    ),
    Mutant(
        "rsqrt-gradient-one-power-short",
        "minitorch_amp/autograd/ops/unary_math.py",
        "(-0.5 * y * y * y)",
        "(-0.5 * y * y)",
        ("tests/test_ops.py::test_backward_matches_finite_differences[rsqrt]",),
        "rsqrt's gradient is -y^2/2 instead of -y^3/2",
    ),
]
