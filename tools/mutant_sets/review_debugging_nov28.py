"""Defects a review of the AMP debugging tools (and Tensor.cuda) found (session of 2026-11-28, evening), each
planted back: the tests written with the fixes must see them."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

T = "tests/test_debugging_review_nov28.py::"

MUTANTS: list[Mutant] = [
    Mutant(
        "checker-skips-bfloat16",
        "minitorch_amp/amp/debugging/tensor_checker.py",
        '    if (data.dtype.kind == "f" or data.dtype == bfloat16 or data.dtype in FP8) and data.size:\n',
        '    if (data.dtype.kind == "f" or data.dtype in FP8) and data.size:\n',
        (T + "test_the_checker_sees_bfloat16_nan_and_inf_as_it_sees_float16",),
        "a bfloat16 NaN or inf passes the checker unseen, even in abort mode",
    ),
    Mutant(
        "checked-forward-undoes-the-users-checker",
        "minitorch_amp/amp/debugging/tensor_checker.py",
        "            if _checker is config:  # (a forward that turned the checker on or off wins)\n",
        "            if True:\n",
        (T + "test_a_checker_enabled_inside_a_checked_forward_stays_on_and_whole",),
        "a checker enabled inside a @check_layer_numerics forward is half removed: the next backward crashes",
    ),
    Mutant(
        "stats-count-comparisons-as-other",
        "minitorch_amp/amp/debugging/operator_stats.py",
        "    if not _floating(dtype):  # a comparison, argmax, topk: the kernel's dtype is its input's\n",
        "    if False:\n",
        (T + "test_operator_stats_count_an_op_with_an_integer_result_in_its_inputs_dtype",),
        "a float16 argmax or comparison counts as 'other', not as the fp16 kernel Paddle counts",
    ),
    Mutant(
        "debug-step-takes-none",
        "minitorch_amp/amp/debugging/tensor_checker.py",
        "            if not whole or not debug_step[1] > debug_step[0]:\n",
        "            if len(debug_step) != 2 or not debug_step[1] > debug_step[0]:\n",
        ("tests/test_debugging.py::test_bad_configs_raise_clear_errors",),
        "debug_step=[0, None] raises a bare TypeError from a comparison, not the documented ValueError",
    ),
    Mutant(
        "tensor-cuda-ignores-the-current-gpu",
        "minitorch_amp/autograd/tensor.py",
        '            device_id = place.index if place.kind == "gpu" else 0\n',
        "            device_id = 0\n",
        ("tests/test_tensor_cuda_nov28.py::test_cuda_without_an_index_asks_for_the_current_gpu",),
        "x.cuda() on a machine whose current device is gpu:1 copies to gpu:0",
    ),
]
