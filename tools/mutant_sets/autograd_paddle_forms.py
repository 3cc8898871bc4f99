"""Issue 26: the autograd behaviours of Paddle's own tests (hooks that change dtype or place, non-
scalar backward, grad's stop_gradient, [1] seeds, PyLayer dtypes and returns)."""

from __future__ import annotations

from mutant_sets import Mutant

FORMS = "tests/test_autograd_paddle_forms.py"
PYLAYER_CASES = "tests/test_py_layer_paddle_cases.py"
ALL_OR_NOTHING = "tests/test_backward_all_or_nothing.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "hook-dtype-change-is-a-type-error",
        "minitorch_amp/autograd/hooks.py",
        "    if out.dtype != dtype:\n        raise RuntimeError(",
        "    if out.dtype != dtype:\n        raise TypeError(",
        (
            f"{ALL_OR_NOTHING}::"
            "test_a_hook_computing_in_float16_under_auto_cast_raises_runtime_error",
        ),
        "a hook whose fp16 mm under auto_cast changes the gradient's dtype raises TypeError, "
        "where Paddle's and PyTorch's code catches RuntimeError",
    ),
    Mutant(
        "hook-place-check-removed",
        "minitorch_amp/autograd/hooks.py",
        "    if place != expected:\n",
        "    if False:\n",
        (
            f"{ALL_OR_NOTHING}::"
            "test_a_hook_moving_the_gradient_to_another_place_raises_runtime_error",
        ),
        "a hook returning grad.cpu() for a GPU tensor goes unchecked: a NumPy array meets "
        "CuPy buffers in the accumulation",
    ),
    Mutant(
        "non-scalar-backward-refused",
        "minitorch_amp/autograd/seeds.py",
        "    if grad_tensor is None:\n        return Tensor._xp_of(data).ones_like(data)\n",
        "    if grad_tensor is None:\n"
        "        if data.size != 1:\n"
        "            raise RuntimeError('grad can be implicitly created only for scalars')\n"
        "        return Tensor._xp_of(data).ones_like(data)\n",
        (f"{FORMS}::test_backward_of_a_matrix_without_grad_tensor_is_the_backward_of_its_sum",),
        "y.backward() on a non-scalar raises as in PyTorch, where Paddle seeds it with ones",
    ),
    Mutant(
        "create-graph-constant-gradient-stops-gradient",
        "minitorch_amp/autograd/gradients.py",
        "        elif g is not None and g.stop_gradient:\n",
        "        elif False:\n",
        (f"{FORMS}::test_grad_with_create_graph_returns_tensors_that_do_not_stop_gradient",),
        "grad(2 * x, x, create_graph=True) returns a tensor with stop_gradient=True (Paddle: "
        "False)",
    ),
    Mutant(
        "create-graph-constant-gradient-is-the-callers-tensor",
        "minitorch_amp/autograd/gradients.py",
        "            g = Tensor._wrap(g._data.copy())\n",
        "            pass\n",
        (
            f"{FORMS}::"
            "test_grad_with_create_graph_of_a_tensor_by_itself_does_not_touch_grad_outputs",
        ),
        "grad(y, y, grad_outputs=v, create_graph=True) flips the caller's v to "
        "stop_gradient=False and returns v itself",
    ),
    Mutant(
        "one-element-seed-for-0d-output-refused",
        "minitorch_amp/autograd/seeds.py",
        '    if getattr(data, "shape", None) != (1,):\n',
        "    if True:\n",
        (
            f"{FORMS}::test_grad_accepts_a_one_element_grad_outputs_for_a_0d_output",
            f"{FORMS}::"
            "test_backward_and_autograd_backward_accept_a_one_element_gradient_for_a_0d_output",
        ),
        "a [1] grad_outputs for a 0-D output is refused (Paddle's grad accepts it)",
    ),
    Mutant(
        "pylayer-integer-output-stops-gradient",
        "minitorch_amp/autograd/py_layer.py",
        "        if any(t is n for n in ctx.non_differentiable):\n",
        '        if t._data.dtype.kind != "f" or any(t is n for n in ctx.non_differentiable):\n',
        (f"{PYLAYER_CASES}::test_an_output_cast_to_any_dtype_keeps_the_graph",),
        "a PyLayer output cast to int32/bool (and bfloat16) gets stop_gradient=True: the "
        "graph is cut, x.grad stays None",
    ),
    Mutant(
        "cast-of-an-integer-pylayer-output-not-recorded",
        "minitorch_amp/autograd/dispatch.py",
        " or dtype == bfloat16 or x._node is not None\n",
        " or dtype == bfloat16\n",
        (f"{PYLAYER_CASES}::test_an_integer_output_gets_its_gradient_in_its_dtype",),
        "casting a PyLayer's int32 output back to float32 records nothing: no gradient "
        "reaches the PyLayer",
    ),
    Mutant(
        "pylayer-non-tensor-gradient-is-a-type-error",
        "minitorch_amp/autograd/py_layer.py",
        "            raise ValueError(\n"
        '                f"{name}: We can only support Tensor or None',
        "            raise TypeError(\n"
        '                f"{name}: We can only support Tensor or None',
        (f"{PYLAYER_CASES}::test_backward_returning_a_non_tensor_for_an_input_is_a_value_error",),
        "a PyLayer backward returning 1 raises TypeError where Paddle raises ValueError",
    ),
    Mutant(
        "pylayer-forward-without-tensor-is-a-type-error",
        "minitorch_amp/autograd/py_layer.py",
        "            raise ValueError(  # (Paddle's InvalidArgument",
        "            raise TypeError(  # (Paddle's InvalidArgument",
        (f"{PYLAYER_CASES}::test_forward_returning_no_tensor_is_a_value_error",),
        "a PyLayer forward returning None raises TypeError where Paddle raises ValueError",
    ),
]
