"""Issue 25: saved-tensor versions, all-or-nothing backward, hook results, grad_outputs copies,
PyLayer backward without recording."""

from __future__ import annotations

from mutant_sets import Mutant

SAVED_VERSIONS = "tests/test_saved_versions.py"
ALL_OR_NOTHING = "tests/test_backward_all_or_nothing.py"
HOOK_RAISES = (
    "tests/test_backward_all_or_nothing.py::"
    "test_a_raising_hook_leaves_every_grad_as_it_was_and_the_graph_retriable"
)
HOOK_DTYPE = (
    "tests/test_backward_all_or_nothing.py::"
    "test_a_hook_returning_another_dtype_raises_naming_the_hook_and_both_dtypes"
)

MUTANTS: list[Mutant] = [
    Mutant(
        "saved-version-check-removed",
        "minitorch_amp/autograd/engine.py",
        "                    versions.check(node, written.get(node), create_graph)\n",
        "",
        (SAVED_VERSIONS,),
        "backward never compares the versions of the tensors an op saved: y = x * x, then "
        "x.set_value(5), gives 10 instead of 2, silently",
    ),
    Mutant(
        "saved-version-check-ignores-the-result",
        "minitorch_amp/autograd/versions.py",
        "    if output is not None and _holds(node.ctx, output._data):",
        "    if False:",
        (f"{SAVED_VERSIONS}::test_a_saved_result_is_checked_too",),
        "an op that saved its result (exp, tanh) runs its backward on a result changed since",
    ),
    Mutant(
        "py-layer-saved-version-check-removed",
        "minitorch_amp/autograd/py_layer.py",
        "        if self.container is not None:\n"
        "            versions.check_saved(self._layer, self.container, self._saved_versions)\n",
        "",
        (
            f"{SAVED_VERSIONS}::"
            "test_a_py_layers_saved_tensor_changed_before_backward_raises_naming_the_layer",
        ),
        "PyLayer.saved_tensor() hands backward a tensor written in place since save_for_backward",
    ),
    Mutant(
        "backward-undo-removed",
        "minitorch_amp/autograd/engine.py",
        "    except BaseException:\n        writes.undo()\n        raise\n",
        "    except BaseException:\n        raise\n",
        (HOOK_RAISES,),
        "a backward whose hook raises leaves some .grad written (a weight's) and others not",
    ),
    Mutant(
        "backward-staging-bypassed",
        "minitorch_amp/autograd/engine.py",
        "    if writes.holds_old(leaf):\n        writes.stage(leaf, grad)\n        return\n",
        "",
        (f"{HOOK_RAISES}[first weight-accumulating]",),
        "a failed backward has already added into the gradients held from earlier backwards",
    ),
    Mutant(
        "failed-backward-frees-the-graph",
        "minitorch_amp/autograd/engine.py",
        "                    _propagate(node, grad, create_graph, capture, blocked, arrive)\n",
        "                    _propagate(node, grad, create_graph, capture, blocked, arrive)\n"
        "                if not retain_graph:\n"
        "                    node.free()\n",
        (f"{ALL_OR_NOTHING}::test_a_failed_pass_through_grad_frees_nothing",),
        "a backward that fails half-way has freed the graph: it cannot be retried",
    ),
    Mutant(
        "hook-dtype-check-removed",
        "minitorch_amp/autograd/hooks.py",
        "    if out.dtype != dtype:\n",
        "    if False:\n",
        (HOOK_DTYPE,),
        "a hook's float64 result for a float32 leaf becomes its .grad (float64), silently",
    ),
    Mutant(
        "hook-dtype-cast-back",
        "minitorch_amp/autograd/hooks.py",
        "        _check_result(name, out._data, value._data, shape, dtype)\n",
        "        if out._data.dtype != dtype:\n            out = out.astype(dtype)\n"
        "        _check_result(name, out._data, value._data, shape, out._data.dtype)\n",
        (HOOK_DTYPE,),
        "a hook returning float16 or int64 for a float32 gradient is cast back silently",
    ),
    Mutant(
        "grad-outputs-copy-removed",
        "minitorch_amp/autograd/gradients.py",
        "g = Tensor._wrap(g.copy())",
        "g = Tensor._wrap(g)",
        ("tests/test_hooks_and_grad.py::test_grad_never_returns_the_callers_grad_outputs_array",),
        "paddle.grad(y, x, grad_outputs=v) returns a gradient sharing memory with v",
    ),
    Mutant(
        "py-layer-backward-records",
        "minitorch_amp/autograd/py_layer.py",
        "        with no_grad():\n            result = _call_backward(ctx, grads)\n",
        "        result = _call_backward(ctx, grads)\n",
        ("tests/test_py_layer.py::test_backward_runs_with_grad_recording_off_unless_create_graph",),
        "a PyLayer's backward runs with grad recording on (is_grad_enabled() is True inside)",
    ),
]
