"""Defects a review found (2026-11-28, night: clip summary), each planted back: the tests written
with the fixes must see them."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant, lines

T = "tests/test_clip_summary_review_nov28_night.py::"

MUTANTS: list[Mutant] = [
    Mutant(
        "clip-refuses-numpy-limits",
        "minitorch_amp/nn/clip.py",
        "    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):\n",
        "    if isinstance(value, bool | np.bool_) or not isinstance(value, (int, float)):\n",
        (
            T + "test_the_paddle_clippers_take_a_numpy_number_as_their_limit",
            T + "test_clip_grad_value_takes_a_numpy_number",
        ),
        "ClipGradByGlobalNorm(np.float32(1.0)) and clip_grad_value_(ps, np.float32(1)) are refused",
    ),
    Mutant(
        "clip-grad-value-refuses-zero",
        "minitorch_amp/nn/clip.py",
        '    clip_value = _check_positive(clip_value, "clip_grad_value_: clip_value", allow_zero=True)\n',
        '    clip_value = _check_positive(clip_value, "clip_grad_value_: clip_value")\n',
        (T + "test_clip_grad_value_of_zero_zeroes_the_gradients_as_in_torch",),
        "clip_grad_value_(ps, 0.0), which zeroes the gradients in PyTorch, is refused",
    ),
    Mutant(
        "clip-grad-norm-without-foreach",
        "minitorch_amp/nn/clip.py",
        lines("    foreach: bool | None = None,", "):"),
        lines("):", "    foreach = None"),
        (T + "test_clip_grad_norm_and_value_take_torchs_foreach_keyword",),
        "clip_grad_norm_(ps, 1.0, foreach=None), PyTorch's call, is a TypeError",
    ),
    Mutant(
        "summary-reads-an-array-as-an-input-spec",
        "minitorch_amp/hapi/model_summary.py",
        '    return hasattr(value, "shape") and not hasattr(value, "__array__")\n',
        '    return hasattr(value, "shape")\n',
        (T + "test_an_input_size_summary_would_misread_is_refused_before_the_model_runs",),
        "summary(net, np.array([1, 3, 8, 8])) runs the model on one input of shape [4]",
    ),
    Mutant(
        "summary-truncates-a-fractional-dim",
        "minitorch_amp/hapi/model_summary.py",
        "        if n is not None and (isinstance(n, bool) or not isinstance(n, numbers.Integral)):\n",
        "        if False:\n",
        (T + "test_an_input_size_summary_would_misread_is_refused_before_the_model_runs",),
        "summary(net, (1, 4.7)) runs the model on shape (1, 4)",
    ),
    Mutant(
        "summary-takes-a-list-inside-the-list",
        "minitorch_amp/hapi/model_summary.py",
        lines("    if isinstance(item, tuple):", "        return item"),
        lines("    if isinstance(item, tuple | list):", "        return item"),
        (T + "test_an_input_size_summary_would_misread_is_refused_before_the_model_runs",),
        "summary(net, [[1, 4]]) is read instead of refused as Paddle refuses it",
    ),
    Mutant(
        "orthogonal-ignores-paddles-row-convention",
        "minitorch_amp/nn/initializer_structured.py",
        lines("        if rows < cols:", "            q = q.T"),
        lines("        if rows < cols:", "            pass"),
        (T + "test_orthogonal_follows_paddles_rows_and_columns_times_gain",),
        "a wide [in, out] weight is Q reshaped, its rows not orthonormal",
    ),
    Mutant(
        "dirac-centre-of-an-even-kernel-rounded-down",
        "minitorch_amp/nn/initializer_structured.py",
        "        centre = tuple(int(k) // 2 for k in shape[2:])\n",
        "        centre = tuple((int(k) - 1) // 2 for k in shape[2:])\n",
        (T + "test_dirac_marks_the_centre_of_an_even_kernel_and_repeats_per_group",),
        "Dirac puts the 1 of an even kernel left of Paddle's k // 2",
    ),
    Mutant(
        "bilinear-factor-not-rounded-up",
        "minitorch_amp/nn/initializer_structured.py",
        "        f = math.ceil(size / 2.0)\n",
        "        f = size / 2.0\n",
        (T + "test_bilinear_is_the_outer_product_of_the_interpolation_ramp",),
        "an odd Bilinear kernel uses f = K / 2 (apache/mxnet#1290) instead of ceil(K / 2)",
    ),
    Mutant(
        "global-initializer-forgets-the-bias",
        "minitorch_amp/nn/initializer.py",
        "    _global_weight, _global_bias = weight_init, bias_init\n",
        "    _global_weight, _global_bias = weight_init, None\n",
        (T + "test_set_global_initializer_changes_the_defaults_of_later_parameters",),
        "set_global_initializer(w, b) leaves biases at zeros",
    ),
]
