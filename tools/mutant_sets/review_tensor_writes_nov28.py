"""Defects a review found (session of 2026-11-28, evening), each planted back: the tests
written with the fixes must see them."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

WRITES = "tests/test_tensor_writes_nov28.py::"
OPERATORS = "minitorch_amp/autograd/tensor_operators.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "setitem-plain-write-bumps-nothing",
        OPERATORS,
        "        x._version += 1\n",
        "",
        (
            WRITES
            + "test_item_assignment_without_gradients_is_a_plain_write_that_bumps_the_version",
        ),
        "x[i] = v with no gradient involved leaves x's version: an op that saved x differentiates with the new values",
    ),
    Mutant(
        "setitem-stand-in-not-written",
        OPERATORS,
        "    as_was._version = before + 1  # written, as x is (ops that saved its result check it)\n",
        "    as_was._version = before\n",
        (WRITES + "test_backward_through_an_op_that_saved_x_before_the_write_raises",),
        "y = x.exp(); y[0] = 0: exp's backward reads its overwritten result, silently",
    ),
    Mutant(
        "setitem-earlier-ops-go-through-the-write",
        "minitorch_amp/autograd/versions.py",
        "            t = _as_it_was(node, i, t, saved)\n",
        "            pass\n",
        (WRITES + "test_ops_that_took_x_before_a_write_send_their_gradient_to_x_as_it_was",),
        "an op that took x before x[i] = v sends its gradient through the write: zeroed there and given to v",
    ),
    Mutant(
        "setitem-x-gradient-not-zeroed",
        "minitorch_amp/autograd/ops/shape.py",
        "            grad_x[ctx.index] = 0\n",
        "",
        (WRITES + "test_item_assignment_gradients_zero_the_written_positions_and_reach_the_value",),
        "the overwritten positions of x still get a gradient",
    ),
    Mutant(
        "setitem-writes-into-a-leaf-that-needs-grad",
        OPERATORS,
        "    if record and not x.stop_gradient and x._node is None:\n",
        "    if False:\n",
        (WRITES + "test_a_leaf_that_needs_a_gradient_is_refused_unless_under_no_grad",),
        "x[i] = v on a parameter outside no_grad is not refused (Paddle refuses it)",
    ),
    Mutant(
        "setitem-shape-unchecked",
        OPERATORS,
        "    if not fits:\n",
        "    if False:\n",
        (WRITES + "test_a_bad_index_or_a_value_that_does_not_broadcast_writes_nothing",),
        "a value that does not broadcast gets NumPy's error, not one that names x[index]'s shape",
    ),
    Mutant(
        "sum-dtype-casts-after-summing",
        OPERATORS,
        "        return apply(_ops.Sum, x, axis=_axis_arg(axis), keepdim=keepdim)\n",
        "        out = apply(_ops.Sum, self, axis=_axis_arg(axis), keepdim=keepdim)\n        return out if x is self else out.astype(dtype)\n",
        (WRITES + "test_sum_with_a_dtype_casts_first_so_float16_values_do_not_overflow",),
        "sum(float16 x, dtype='float32') sums in float16 and overflows to inf",
    ),
    Mutant(
        "squeeze-wraps-its-axis",
        OPERATORS,
        '        axes = {check_axis("squeeze", int(a), max(len(shape), 1)) for a in named}\n',
        "        axes = {int(a) % max(len(shape), 1) for a in named}\n",
        (WRITES + "test_out_of_range_axes_raise_a_value_error_instead_of_wrapping",),
        "squeeze(x, 5) on a 3-D tensor squeezes axis 2",
    ),
    Mutant(
        "unsqueeze-wraps-its-axis",
        OPERATORS,
        "            if not -(nd + 1) <= a <= nd:\n",
        "            if False:\n",
        (WRITES + "test_out_of_range_axes_raise_a_value_error_instead_of_wrapping",),
        "unsqueeze(x, 7) on a 2-D tensor inserts at 7 % 3",
    ),
    Mutant(
        "flatten-takes-start-after-stop",
        OPERATORS,
        "        if start > stop:\n",
        "        if False:\n",
        (WRITES + "test_out_of_range_axes_raise_a_value_error_instead_of_wrapping",),
        "flatten(x, 2, 1) (and nn.Flatten(2, 1)) inserts a size-1 axis instead of raising",
    ),
    Mutant(
        "transpose-perm-wraps",
        "minitorch_amp/autograd/ops/shape.py",
        "            any(not -nd <= p < nd for p in perm) or sorted(p % nd for p in perm) != list(range(nd))\n",
        "            sorted(p % nd for p in perm) != list(range(nd))\n",
        (WRITES + "test_out_of_range_axes_raise_a_value_error_instead_of_wrapping",),
        "transpose with perm [0, 5] fails with NumPy's AxisError instead of the library's message",
    ),
    Mutant(
        "set-value-writes-through-a-view",
        "minitorch_amp/autograd/tensor.py",
        "        if data.base is not None:  # a view of another tensor's memory: copy on write\n",
        "        if False:\n",
        (
            WRITES
            + "test_a_write_into_a_view_result_leaves_the_source_and_what_an_op_saved_of_it_alone",
        ),
        "set_value on a split piece rewrites the source behind its version: a saved input changes silently",
    ),
    Mutant(
        "setitem-writes-through-a-view",
        OPERATORS,
        "    data = x._writable()  # (a view gets its own array first: copy on write)\n",
        "    data = x._data\n",
        (
            WRITES
            + "test_a_write_into_a_view_result_leaves_the_source_and_what_an_op_saved_of_it_alone",
        ),
        "x[i] = v on a reshape result rewrites the source behind its version",
    ),
    Mutant(
        "py-layer-taken-before-a-write-goes-through-it",
        "minitorch_amp/autograd/py_layer.py",
        "    call.input_versions = tuple(None if w is None else w._version for w in wants)\n",
        "    call.input_versions = ()\n",
        (
            "tests/test_tensor_writes_nov28.py::test_a_py_layer_that_took_x_before_a_write_sends_its_gradient_to_x_as_it_was",
        ),
        "a PyLayer that took x before x[0] = v loses its gradient at the written position",
    ),
]
