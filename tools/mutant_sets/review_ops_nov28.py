"""Defects a review found (session of 2026-11-28, evening), each planted back: the tests
written with the fixes must see them."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant, lines

T = "tests/test_ops_review_nov28.py::"
ERRORS = T + "test_bad_arguments_to_argmax_neg_pow_and_argsort_get_clear_errors"
REDUCE = "minitorch_amp/autograd/ops/reduce.py"
ELEMENTWISE = "minitorch_amp/autograd/ops/elementwise.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "max-splits-the-gradient-among-ties",
        REDUCE,
        "        return mask * grad\n",
        "        return mask * (grad / mask.sum(axis=ctx.axes, keepdims=True)).astype(grad.dtype)\n",
        (T + "test_max_gives_every_tied_maximum_the_whole_gradient",),
        "max shares its gradient among tied maxima (Paddle's amax, not its max)",
    ),
    Mutant(
        "empty-axis-list-reduces-nothing",
        REDUCE,
        lines("    if not axes:", "        return tuple(range(ndim))"),
        lines("    if axis is None:", "        return tuple(range(ndim))"),
        (T + "test_an_empty_axis_list_reduces_every_axis",),
        "sum/mean/max with axis=[] return the tensor unreduced (NumPy's axis=())",
    ),
    Mutant(
        "clip-passes-the-gradient-at-min",
        ELEMENTWISE,
        "            ctx.mask &= x > min\n",
        "            ctx.mask &= x >= min\n",
        (
            T + "test_clip_passes_no_gradient_at_its_bounds",
            T + "test_normalize_at_a_norm_equal_to_epsilon_sends_nothing_through_the_norm",
        ),
        "clip's gradient passes at its lower bound (PyTorch's clamp, not Paddle's clip)",
    ),
    Mutant(
        "clip-passes-the-gradient-at-max",
        ELEMENTWISE,
        "            ctx.mask &= x < max\n",
        "            ctx.mask &= x <= max\n",
        (T + "test_clip_passes_no_gradient_at_its_bounds",),
        "clip's gradient passes at its upper bound",
    ),
    Mutant(
        "descending-sort-puts-nan-last",
        "minitorch_amp/autograd/ops/sort.py",
        lines(
            "    if descending:",
            "        key = xp.flip(key, axis)",
            '    order = np.argsort(key, axis=axis, kind="stable") if xp is np else xp.argsort(key, axis=axis)',
            "    if not descending:  # (CuPy's sort is always stable)",
            "        return order",
            "    return (x.shape[axis] - 1) - xp.flip(order, axis)",
        ),
        lines(
            "    if descending:",
            "        key = -key",
            '    return np.argsort(key, axis=axis, kind="stable") if xp is np else xp.argsort(key, axis=axis)',
        ),
        (T + "test_nan_counts_as_the_largest_value_in_sorts_and_topk",),
        "sort/argsort/topk negate the key when descending: NaN comes last, topk misses it",
    ),
    Mutant(
        "integer-division-left-to-numpy",
        "minitorch_amp/autograd/dispatch.py",
        lines('    if getattr(op, "integers_to_float", False):', "        return True"),
        "",
        (T + "test_integer_division_and_float_maths_of_integers_give_the_default_float_dtype",),
        "int32 / 2 and int32 / int32 come out float64 (NumPy's true division)",
    ),
    Mutant(
        "integer-times-python-float-left-to-numpy",
        "minitorch_amp/autograd/dispatch.py",
        "    return any(inputs[i].__class__ is float for i in positions if i < len(inputs))\n",
        "    return False\n",
        (T + "test_integer_division_and_float_maths_of_integers_give_the_default_float_dtype",),
        "int32 * 0.5 and int32 ** 0.5 come out float64 (Paddle's operators give float32)",
    ),
    Mutant(
        "float-maths-of-integers-left-to-numpy",
        "minitorch_amp/autograd/ops/unary_math.py",
        '    return x if x.dtype.kind in "fV" else x.astype(default_float())\n',
        "    return x\n",
        (T + "test_integer_division_and_float_maths_of_integers_give_the_default_float_dtype",),
        "sqrt, exp, log... of an integer tensor come out float64",
    ),
    Mutant(
        "argmax-axis-unchecked",
        REDUCE,
        '            axis = check_axis("argmax", int(axis), max(x.ndim, 1))\n',
        "            axis = int(axis)\n",
        (ERRORS,),
        "argmax with an out-of-range axis raises NumPy's AxisError",
    ),
    Mutant(
        "argmax-of-empty-unchecked",
        REDUCE,
        lines("        if x.size == 0:", "            raise ValueError(")
        + '                f"argmax of an empty',
        lines("        if False:", "            raise ValueError(")
        + '                f"argmax of an empty',
        (ERRORS,),
        "argmax of an empty tensor raises NumPy's 'attempt to get argmax of an empty sequence'",
    ),
    Mutant(
        "neg-of-bool-unchecked",
        ELEMENTWISE,
        '        if x.dtype.kind == "b":\n',
        "        if False:\n",
        (ERRORS,),
        "-bool_tensor raises NumPy's TypeError about the boolean negative",
    ),
    Mutant(
        "integer-negative-power-unchecked",
        ELEMENTWISE,
        "        _check_integer_power(x, y)\n",
        "",
        (ERRORS,),
        "int_tensor ** -1 raises NumPy's ValueError (and gives 0 on CuPy)",
    ),
    Mutant(
        "argsort-0d-axis-unchecked",
        "minitorch_amp/autograd/ops/sort.py",
        '        axis = check_axis("argsort", axis, max(x.ndim, 1))  # a 0-D tensor has axis 0 (or -1)\n',
        '        axis = axis if x.ndim == 0 else check_axis("argsort", axis, x.ndim)\n',
        (ERRORS,),
        "argsort of a 0-D tensor takes any axis, argsort(x, axis=5) returns 0",
    ),
    Mutant(
        "full-infers-int64",
        "minitorch_amp/autograd/creation.py",
        lines(
            '    _no_spread_shape("full", (), (shape, fill_value, dtype, place), tail=1)',
            "    dt = _dtypes.default_float() if dtype is None else _dtypes.convert_dtype(dtype)",
        ),
        lines(
            '    _no_spread_shape("full", (), (shape, fill_value, dtype, place), tail=1)',
            "    if dtype is None and isinstance(fill_value, int):",
            '        dtype = "bool" if isinstance(fill_value, bool) else "int64"',
            "    dt = _dtypes.default_float() if dtype is None else _dtypes.convert_dtype(dtype)",
        ),
        (T + "test_full_without_a_dtype_is_the_default_float_dtype",),
        "full([2], 3) is int64 (PyTorch's inference), not Paddle's default float dtype",
    ),
    Mutant(
        "double-backward-max-splits-the-gradient",
        "minitorch_amp/autograd/higher_order.py",
        "    return g * _const(mask.astype(g.dtype))\n",
        "    return g * _const((mask / mask.sum(axis=ctx.axes, keepdims=True)).astype(g.dtype))\n",
        (T + "test_max_gives_every_tied_maximum_the_whole_gradient",),
        "grad(max, create_graph=True) shares the gradient among ties while backward() does not",
    ),
]
