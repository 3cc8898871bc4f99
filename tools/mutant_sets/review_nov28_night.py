"""Defects found and fixed in the night session of 2026-11-28 (the noticed-but-not-fixed list
of the evening's note, and the reviews of transformers, initializers and clipping, the graph
helper, the learning-rate schedulers and the PyTorch spellings), each planted back: the tests
written with the fixes must see them."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

CREATION = "tests/test_creation_review_nov28.py::"
INPUT = "minitorch_amp/autograd/tensor_input.py"
VERSIONS = "tests/test_saved_versions.py"
ELEMENTWISE = "minitorch_amp/autograd/ops/elementwise.py"
F16 = "tests/test_float16_scalars.py"
SOURCE_WRITE = VERSIONS + "::test_a_write_into_a_source_is_seen_through_the_views_an_op_saved"

MUTANTS: list[Mutant] = [
    Mutant(
        "a-numpy-scalar-takes-the-default-dtype",
        INPUT,
        "    if _device.is_array(data) or isinstance(data, np.generic):\n",
        "    if _device.is_array(data):\n",
        (CREATION + "test_to_tensor_of_a_numpy_scalar_keeps_its_dtype_as_paddle_does",),
        "to_tensor(np.float64(1.5)) is float32 and to_tensor(np.int32(3)) int64 (Paddle keeps both)",
    ),
    Mutant(
        "views-are-not-noted",
        "minitorch_amp/autograd/tensor.py",
        "            _view_writes.note_view(t)\n            _memory.track(array)\n",
        "            _memory.track(array)\n",
        (VERSIONS,),
        "a write into a source leaves its views' versions: backward uses the new values silently",
    ),
    Mutant(
        "a-write-bumps-no-view",
        "minitorch_amp/autograd/view_writes.py",
        "            view._version += 1\n",
        "            pass\n",
        (VERSIONS,),
        "the views of a written source keep their versions",
    ),
    Mutant(
        "set-value-announces-no-write",
        "minitorch_amp/autograd/tensor.py",
        "        _view_writes.wrote(self)\n",
        "",
        (SOURCE_WRITE,),
        "set_value into a source is not seen through its views",
    ),
    Mutant(
        "setitem-announces-no-write",
        "minitorch_amp/autograd/tensor_operators.py",
        "        x._version += 1\n        _view_writes.wrote(x)\n",
        "        x._version += 1\n",
        (SOURCE_WRITE,),
        "x[i] = v (not recorded) into a source is not seen through its views",
    ),
    Mutant(
        "set-state-dict-announces-no-write",
        "minitorch_amp/nn/layer/state_dict.py",
        "        _view_writes.wrote(target)\n",
        "",
        (SOURCE_WRITE,),
        "set_state_dict into a source is not seen through its views",
    ),
    Mutant(
        "a-view-with-its-own-memory-is-bumped-too",
        "minitorch_amp/autograd/view_writes.py",
        " and owner(t._data) is array]",
        "]",
        (
            VERSIONS
            + "::test_a_view_that_got_its_own_memory_is_not_refused_when_its_source_is_written",
        ),
        "a view that copied on write is refused when its old source is written",
    ),
    Mutant(
        "detach-is-not-noted",
        "minitorch_amp/autograd/tensor.py",
        "            _view_writes.note_view(self)\n            _view_writes.note_view(t)\n",
        "            pass\n",
        (VERSIONS + "::test_a_write_into_a_tensor_or_its_detached_twin_is_seen_through_the_other",),
        "a write through x.detach() is not seen by a graph that saved x",
    ),
    Mutant(
        "a-number-after-float16-is-rounded-to-float16",
        ELEMENTWISE,
        "        return None if _exact_in_float16(y) else x\n",
        "        return None\n",
        (F16 + "::test_a_number_meets_float16_in_float32_rounded_once",),
        "x * 1e9 for a float16 x is inf (NumPy rounds 1e9 to float16 first)",
    ),
    Mutant(
        "a-number-before-float16-is-rounded-to-float16",
        ELEMENTWISE,
        "        return None if _exact_in_float16(x) else y\n",
        "        return None\n",
        (F16 + "::test_a_number_meets_float16_in_float32_rounded_once",),
        "1e9 * x for a float16 x is inf",
    ),
    Mutant(
        "float16-exactness-ignores-the-range",
        ELEMENTWISE,
        "    return -65504.0 <= number <= 65504.0 and float(np.float16(number)) == number\n",
        "    return float(np.float16(number)) == number or number > 65504.0\n",
        (F16 + "::test_a_number_meets_float16_in_float32_rounded_once",),
        "numbers past float16's range are taken as exact: x * 1e9 is inf again",
    ),
    Mutant(
        "multiply-backward-rounds-the-number-to-float16",
        ELEMENTWISE,
        '        gx = binary("multiply", _mul, grad, ctx.y) if needs_x else None\n',
        "        gx = grad * ctx.y if needs_x else None\n",
        (F16 + "::test_the_gradients_of_multiply_and_divide_by_a_number_follow_the_same_rule",),
        "the gradient of x * 1e5 in float16 is inf",
    ),
    Mutant(
        "divide-backward-rounds-the-number-to-float16",
        ELEMENTWISE,
        '        gx = binary("divide", _div, grad, ctx.y)\n',
        "        gx = grad / ctx.y\n",
        (F16 + "::test_the_gradients_of_multiply_and_divide_by_a_number_follow_the_same_rule",),
        "the gradient of x / 1e5 in float16 is 0",
    ),
    Mutant(
        "comparisons-compare-in-float32",
        ELEMENTWISE,
        '           "pow": "power"}  # fmt: skip\n',
        '           "pow": "power", "less": "less", "equal": "equal"}  # fmt: skip\n',
        (F16 + "::test_a_comparison_rounds_the_number_to_float16_first_and_gives_bool",),
        "x == 0.1 for a float16 x compares in float32 (False) and returns float16",
    ),
    Mutant(
        "an-optimizer-step-bumps-no-view",
        "minitorch_amp/optimizer/state.py",
        "            wrote(param)  # views of it (a reshaped weight) are written too\n",
        "",
        (VERSIONS + "::test_an_optimizer_step_is_seen_through_a_view_of_the_parameter",),
        "an optimizer step is not seen through a saved view of the parameter",
    ),
    Mutant(
        "a-loaded-view-writes-its-source",
        "minitorch_amp/nn/layer/state_dict.py",
        "        if mine is not None:\n            target._data = mine\n",
        "",
        (VERSIONS + "::test_loading_or_initializing_a_view_leaves_the_tensor_it_was_made_from",),
        "set_state_dict into a view buffer writes the tensor it was made from",
    ),
    Mutant(
        "an-initialized-view-writes-its-source",
        "minitorch_amp/nn/initializer_base.py",
        "        param._writable(whole=True)[...] = values  # (a view gets its own memory first)\n",
        "        param._data[...] = values\n",
        (VERSIONS + "::test_loading_or_initializing_a_view_leaves_the_tensor_it_was_made_from",),
        "an initializer on a view writes the tensor it was made from",
    ),
    Mutant(
        "tensor-of-a-tensor-is-no-twin",
        "minitorch_amp/autograd/tensor.py",
        "        if isinstance(data, Tensor) and self._data is data._data:  # twins, as detach() makes\n",
        "        if False:\n",
        (VERSIONS + "::test_a_tensor_made_from_a_tensor_shares_its_writes_as_detach_does",),
        "mt.Tensor(t) and Parameter(t) share t's array unseen by its version",
    ),
    Mutant(
        "a-tensor-noted-again-is-a-new-entry",
        "minitorch_amp/autograd/view_writes.py",
        "    views[id(tensor)] = weakref.ref(tensor)\n",
        "    views[id(r := weakref.ref(tensor, id))] = r\n",
        (VERSIONS + "::test_repeated_detach_and_many_live_views_keep_one_entry_each",),
        "each detach() of a long-lived tensor adds an entry that lives as long as it",
    ),
    Mutant(
        "a-number-over-float16-differentiated-by-its-product",
        ELEMENTWISE,
        '            return None, -gx * binary("divide", _div, ctx.x, ctx.y)  # (-g * 1e5 would not be)\n',
        "            return None, -gx * ctx.x / ctx.y\n",
        (F16 + "::test_the_gradient_of_a_number_divided_by_float16_stays_in_range",),
        "the gradient of 1e5 / x in float16 is -inf",
    ),
    Mutant(
        "pow-backward-rounds-the-number-to-float16",
        ELEMENTWISE,
        '            return binary("multiply", _mul, scaled, binary("pow", _pow, x, y - 1)), None\n',
        "            return grad * y * x ** (y - 1), None\n",
        (F16 + "::test_the_gradient_of_float16_to_a_number_meets_the_number_in_float32",),
        "the gradient of x ** (1/3) in float16 uses 1/3 rounded to float16",
    ),
]
