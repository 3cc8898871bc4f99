"""Issue 28 items 1-3: the FP8 dtypes and casts, the scaling recipes and fp8_autocast."""

from __future__ import annotations

from mutant_sets import Mutant

DTYPES_TESTS = "tests/test_fp8_dtypes.py"
RECIPE_TESTS = "tests/test_fp8_recipe.py"
AUTOCAST_TESTS = "tests/test_fp8_autocast.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "fp8-float64-rounded-twice",
        "minitorch_amp/backend/fp8.py",
        "        if x.dtype not in _EXACT_IN_FLOAT32:\n",
        "        if False:\n",
        (f"{DTYPES_TESTS}::test_float64_is_rounded_once_not_through_float32",),
        "float64 goes to FP8 through ml_dtypes, which rounds it through float32 (twice)",
    ),
    Mutant(
        "fp8-scaled-cast-not-saturating",
        "minitorch_amp/backend/fp8.py",
        "        if saturate:\n",
        "        if False:\n",
        (f"{DTYPES_TESTS}::test_saturating_casts_stop_at_the_largest_finite_value_and_keep_nan",),
        "the FP8 path's casts overflow to NaN (E4M3) / inf (E5M2) instead of saturating",
    ),
    Mutant(
        "fp8-gemm-epilogue-forgets-the-scales",
        "minitorch_amp/backend/fp8.py",
        "    acc *= scale_inv_a * scale_inv_b\n",
        "",
        (f"{AUTOCAST_TESTS}::test_linear_is_an_fp8_gemm_with_current_scaling",),
        "the FP8 GEMM returns the product of the scaled operands, not undoing their scales",
    ),
    Mutant(
        "fp8-e5m2-counted-as-floating",
        "minitorch_amp/backend/dtypes.py",
        '    return (dt.kind == "f" and dt not in FP8) or dt == bfloat16',
        '    return dt.kind == "f" or dt == bfloat16',
        (f"{DTYPES_TESTS}::test_promotion_with_wider_floats_gives_the_wider_float",),
        "float8_e5m2 (kind 'f' in ml_dtypes) passes for a compute float, unlike float8_e4m3fn",
    ),
    Mutant(
        "fp8-checkpoint-stores-fp8-as-is",
        "minitorch_amp/io/checkpoint.py",
        "    named = array.dtype == bfloat16 or array.dtype in FP8",
        "    named = array.dtype == bfloat16",
        (f"{DTYPES_TESTS}::test_save_and_load_are_bit_exact",),
        "save writes FP8 arrays with their ml_dtypes type, which .npy cannot name",
    ),
    Mutant(
        "fp8-delayed-scale-inv-aliased",
        "minitorch_amp/amp/fp8/scaling.py",
        "        scale_inv = self.scale_inv.copy()  # the inverse of the scale this cast uses\n",
        "        scale_inv = self.scale_inv\n",
        (f"{RECIPE_TESTS}::test_delayed_scaling_casts_with_the_previous_steps_scale",),
        "the returned inverse scale is the state's array, which the update then overwrites",
    ),
    Mutant(
        "fp8-history-rolled-the-wrong-way",
        "minitorch_amp/amp/fp8/scaling.py",
        "    amax_history[...] = xp.roll(amax_history, -1)\n",
        "    amax_history[...] = xp.roll(amax_history, 1)\n",
        (
            f"{RECIPE_TESTS}::test_max_algorithm_uses_the_largest_amax_in_the_history_and_rotates_it",
        ),
        "the amax history rotates forwards: the slot zeroed is this step's amax, not the oldest",
    ),
    Mutant(
        "fp8-margin-ignored",
        "minitorch_amp/amp/fp8/scaling.py",
        "        fresh = _finite(np.float32(fp8_max * 2.0**-margin) / amax)\n        usable",
        "        fresh = _finite(np.float32(fp8_max) / amax)\n        usable",
        (
            f"{RECIPE_TESTS}::test_max_algorithm_uses_the_largest_amax_in_the_history_and_rotates_it",
        ),
        "the delayed-scaling update ignores margin (no 2**margin headroom)",
    ),
    Mutant(
        "fp8-infinite-amax-sets-the-scale",
        "minitorch_amp/amp/fp8/scaling.py",
        "        usable = xp.isfinite(amax) & (amax > 0)\n",
        "        usable = amax > 0\n",
        (f"{RECIPE_TESTS}::test_a_zero_or_non_finite_amax_keeps_the_old_scale",),
        "an inf amax (an overflowed step) sets the scale to 0 instead of keeping the old one",
    ),
    Mutant(
        "fp8-tiny-amax-gives-an-infinite-scale",
        "minitorch_amp/amp/fp8/scaling.py",
        "    return xp.where(xp.isinf(scale), _FLOAT32_MAX, scale)\n",
        "    return scale\n",
        (f"{RECIPE_TESTS}::test_a_tiny_amax_gets_float32s_largest_scale_not_inf",),
        "fp8_max / amax overflows to an infinite scale for a tiny amax (TE clamps to float32 max)",
    ),
    Mutant(
        "fp8-gradients-in-e4m3-under-hybrid",
        "minitorch_amp/amp/fp8/autocast.py",
        "for d in (fwd, fwd, bwd))",
        "for d in (fwd, fwd, fwd))",
        (f"{AUTOCAST_TESTS}::test_gradients_flow_through_fp8_gemms_in_e5m2_under_hybrid",),
        "output gradients are cast to the forward format (E4M3) under HYBRID",
    ),
    Mutant(
        "fp8-weight-cast-every-call",
        "minitorch_amp/amp/fp8/autocast.py",
        "    if entry is None or entry[0] is not weight or entry[4] != weight._version:\n",
        "    if True:\n",
        (f"{AUTOCAST_TESTS}::test_each_weight_is_cast_to_fp8_once_per_region",),
        "the weight's FP8 copy is not cached: cast (and its amax recorded) at every use",
    ),
    Mutant(
        "fp8-conv2d-not-routed",
        "minitorch_amp/nn/functional/conv.py",
        "    if not depthwise and fp8_route.region.get() is not None:",
        "    if False:",
        (f"{AUTOCAST_TESTS}::test_conv2d_runs_its_im2col_gemm_in_fp8",),
        "F.conv2d ignores fp8_autocast: convolutions stay in the AMP dtype",
    ),
    Mutant(
        "fp8-tensor-checker-skips-e4m3",
        "minitorch_amp/amp/debugging/tensor_checker.py",
        '    if (data.dtype.kind == "f" or data.dtype == bfloat16 or data.dtype in FP8) and data.size:',  # noqa: E501
        '    if (data.dtype.kind == "f" or data.dtype == bfloat16) and data.size:',
        (f"{AUTOCAST_TESTS}::test_the_tensor_checker_sees_an_overflow_the_saturating_cast_hides",),
        "the tensor checker skips float8_e4m3fn (its kind is 'V'): E4M3 overflow goes unseen",
    ),
]
