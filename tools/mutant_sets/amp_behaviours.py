"""Issue 26: the AMP behaviours of Paddle's own tests (disabled get_scale, autocast dtypes,
bfloat16 lists, amp_state lists, expand_as, cast counts)."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

MUTANTS: list[Mutant] = [
    Mutant(
        "disabled-get-scale-is-pytorchs-one",
        "minitorch_amp/amp/scaler_settings.py",
        "    _disabled_scale = 0.0\n",
        "    _disabled_scale = 1.0\n",
        (
            "tests/test_grad_scaler_forms.py::"
            "test_disabled_scaler_getters_answer_as_paddle_and_the_torch_spelling_as_pytorch",
        ),
        "a disabled paddle.amp.GradScaler's get_scale() answers PyTorch's 1.0, not Paddle's 0.0",
    ),
    Mutant(
        "casts-counted-by-their-target-dtype",
        "minitorch_amp/autograd/ops/cast.py",
        "        report_cast(x.dtype)\n",
        "        report_cast(dtype)\n",
        (
            "tests/test_debugging.py::test_auto_cast_casts_are_counted_as_cast_by_their_source_dtype",
            "tests/test_amp_api_fidelity.py::"
            "test_master_grad_casts_count_as_in_paddles_operator_statistics",
        ),
        "operator statistics bucket a cast by the dtype it casts to, not Paddle's kernel key "
        "(the dtype it casts from)",
    ),
    Mutant(
        "master-grad-write-after-clear-not-counted",
        "minitorch_amp/autograd/engine.py",
        "            report_cast(grad.dtype)  # (operator statistics count it: Paddle casts there too)\n",
        "            pass\n",
        (
            "tests/test_amp_api_fidelity.py::"
            "test_master_grad_casts_count_as_in_paddles_operator_statistics",
        ),
        "a float16 grad written into a cleared master_grad buffer (a cast) is missing from "
        "operator statistics: 8 float16 casts where Paddle counts total_steps * 2 + 2",
    ),
    Mutant(
        "amp-state-reports-only-our-ops",
        "minitorch_amp/amp/auto_cast.py",
        "            self._state = _amp_state(level, dt, white, black, promote, *reported_lists(*lists))\n",
        "            self._state = _amp_state(level, dt, white, black, promote, white, black)\n",
        (
            "tests/test_amp_api_fidelity.py::"
            "test_amp_state_reports_paddles_full_lists_with_the_custom_names_moved",
        ),
        "amp_state().white/.black hold the ops implemented here, not Paddle's full lists",
    ),
    Mutant(
        "no-fp16-kernel-op-follows-the-lists",
        "minitorch_amp/amp/auto_cast.py",
        '    if kind == "no_kernel":\n        return float32\n',
        "",
        (
            "tests/test_amp_api_fidelity.py::"
            "test_an_op_without_a_float16_kernel_in_paddle_runs_in_float32_under_o1_and_o2",
        ),
        "expand_as (no float16 kernel in Paddle) runs in float16 when its input is float16",
    ),
    Mutant(
        "bf16-black-list-is-paddle-2-5s-empty-one",
        "minitorch_amp/amp/op_lists.py",
        "        return _ops_in(BLACK) | _ops_in(EXTRA_BLACK)\n",
        '        black = _ops_in(BLACK) if dtype == "float16" else frozenset()\n'
        "        return black | _ops_in(EXTRA_BLACK)\n",
        (
            "tests/test_bfloat16_amp.py::test_o1_runs_white_ops_in_bf16_and_black_ops_in_float32",
            "tests/test_bfloat16_amp.py::"
            "test_bf16_black_list_is_float16s_at_o1_and_the_extra_black_ops_at_o2",
        ),
        "softmax, layer_norm, exp, sum... follow their inputs at O1 bfloat16 (Paddle 2.5's "
        "empty BF16_BLACK_LIST) instead of staying float32",
    ),
    Mutant(
        "disabled-autocast-refuses-float32",
        "minitorch_amp/amp/torch_autocast.py",
        '    if name in ("float32", "float64") and not enabled:\n        return "float16", False\n',
        "",
        (
            "tests/test_amp_api_fidelity.py::"
            "test_autocast_takes_any_floating_dtype_when_disabled_and_turns_a_cpu_float32_region_off",
        ),
        "autocast('cpu', dtype=float32, enabled=False) warns, and on 'cuda' raises, instead of "
        "being a plain disabled region",
    ),
    Mutant(
        "set-value-casts-a-wider-value",
        "minitorch_amp/autograd/tensor.py",
        "        if source.dtype != self._data.dtype:\n            raise TypeError(\n",
        "        if False:\n            raise TypeError(\n",
        (
            "tests/test_narrowing_loads.py::"
            "test_set_value_never_narrows_so_a_finite_value_never_lands_as_inf",
        ),
        "set_value casts a float32 value into a float16 tensor: 1e5 lands as inf, silently",
    ),
]
