"""Issue 26: padding, normalize, RMSNorm, leaky_relu, silu and summary."""

from __future__ import annotations

from mutant_sets import Mutant

ACTIVATION_OPS = "minitorch_amp/autograd/ops/activation.py"
PADDING_OPS = "minitorch_amp/autograd/ops/padding.py"
NORM_OPS = "minitorch_amp/autograd/ops/norm.py"
F_COMMON = "minitorch_amp/nn/functional/common.py"
MODEL_SUMMARY = "minitorch_amp/hapi/model_summary.py"
PADDING_TESTS = "tests/test_padding.py"
NORM_TESTS = "tests/test_norms_and_activations.py"
SUMMARY_TESTS = "tests/test_summary.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "leaky-relu-slope-one-at-zero",
        ACTIVATION_OPS,
        "get_array_module(x).where(x > 0, 1.0, negative_slope)",
        "get_array_module(x).where(x >= 0, 1.0, negative_slope)",
        (f"{NORM_TESTS}::test_leaky_relu_gradient_at_zero_is_the_slope",),
        "leaky_relu's gradient at x = 0 is 1, not negative_slope (Paddle and PyTorch)",
    ),
    Mutant(
        "pad-reflect-repeats-the-edge",
        PADDING_OPS,
        "np.where(p < 0, -p, np.where(p >= size, 2 * (size - 1) - p, p))",
        "np.where(p < 0, -p - 1, np.where(p >= size, 2 * size - 1 - p, p))",
        (f"{PADDING_TESTS}::test_pad_gives_the_outputs_paddle_documents",),
        "reflect padding repeats the edge element (NumPy's 'symmetric', not Paddle's reflect)",
    ),
    Mutant(
        "pad-always-last-axis-first",
        F_COMMON,
        "        if not (len(pad) == 2 * ndim and pad_from_left_axis):",
        "        if True:",
        (f"{PADDING_TESTS}::test_pad_examples_from_paddles_docstring",),
        "F.pad reads two widths per axis from the last axis (PyTorch's order), ignoring "
        "pad_from_left_axis=True",
    ),
    Mutant(
        "pad-channels-last-pads-the-channels",
        F_COMMON,
        '    axes = range(2, ndim) if fmt[1] == "C" else range(1, ndim - 1)',
        "    axes = range(2, ndim)",
        (f"{PADDING_TESTS}::test_channels_last_pads_the_spatial_axes_not_the_channels",),
        "the spatial form on NHWC input pads W and C instead of H and W",
    ),
    Mutant(
        "rms-norm-statistics-in-float16",
        NORM_OPS,
        "        acc = accumulation_dtype(x.dtype)\n",
        "        acc = x.dtype\n",
        (f"{NORM_TESTS}::test_float16_rms_norm_statistics_are_float32",),
        "rms_norm squares and sums float16 input in float16 (300**2 overflows to inf)",
    ),
    Mutant(
        "rms-norm-gray-under-o1",
        NORM_OPS,
        "    amp = BLACK\n",
        "    amp = GRAY\n",
        (f"{NORM_TESTS}::test_rms_norm_is_float32_at_o1_and_follows_x_at_o2_like_layer_norm",),
        "rms_norm follows its float16 input at O1 instead of running in float32 like layer_norm",
    ),
    Mutant(
        "p-norm-zero-norm-nan-gradient",
        NORM_OPS,
        "            safe_norm = xp.where(norm == 0, 1, norm)\n",
        "            safe_norm = norm\n",
        (
            f"{NORM_TESTS}::"
            "test_a_zero_vector_normalizes_to_zero_with_gradient_upstream_over_epsilon",
        ),
        "F.normalize of a zero vector gives a NaN gradient (p_norm's backward divides 0 by 0)",
    ),
    Mutant(
        "summary-leaves-layers-in-eval",
        MODEL_SUMMARY,
        "            layer.training = training\n",
        "            pass\n",
        (f"{SUMMARY_TESTS}::test_modes_are_restored_and_hooks_removed_even_when_forward_fails",),
        "summary leaves the model in eval mode (the modes it changed are not restored)",
    ),
    Mutant(
        "summary-rows-the-top-layer",
        MODEL_SUMMARY,
        "(layer is model and top_has_sublayers)",
        "False",
        (f"{SUMMARY_TESTS}::test_lenet_table_is_paddles",),
        "summary adds a row for the model itself (Paddle hooks it only when it has no sublayers)",
    ),
]
