"""h33: cuda/fp8_scale.cu, the delayed-scaling update in one launch, and ScalingState.cast's
two-launch delayed cast (checked on the emulator against update_amax_history_and_scale)."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

SCALE = "tests/test_fp8_scale_kernel.py"
STATE = "tests/test_fp8_scale_state.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "fp8-scale-kernel-float-compare-flushes-subnormal-amax",
        "cuda/fp8_scale.cu",
        "    if (amax == 0u || amax >= 0x7f800000u) return scale;  // 0, inf, NaN, any negative\n",
        "    if (!(__uint_as_float(amax) > 0.0f) || amax >= 0x7f800000u) return scale;\n",
        (f"{SCALE}::test_subnormal_amaxes_and_numerators_are_not_flushed",),
        "the update kernel tests amax > 0 as a float32 compare: under -ftz a subnormal amax reads as 0 and the old scale is kept",
    ),
    Mutant(
        "fp8-scale-kernel-float32-division-under-ftz",
        "cuda/fp8_scale.cu",
        "    const double quotient = exact_double(numerator) / exact_double(__uint_as_float(amax));\n    const float fresh = nearest_float(quotient);\n",
        "    const float fresh = numerator / __uint_as_float(amax);\n",
        (f"{SCALE}::test_subnormal_amaxes_and_numerators_are_not_flushed",),
        "the update kernel divides in float32: under -ftz a subnormal amax or numerator is read as 0 and a subnormal scale written as 0",
    ),
    Mutant(
        "fp8-scale-kernel-max-skips-nan",
        "cuda/fp8_scale.cu",
        "    if (is_nan(bits)) return 0xffffffffu;\n",
        "    if (is_nan(bits)) return 0u;\n",
        (f"{SCALE}::test_the_update_is_the_twins_bits_for_histories_with_special_amaxes",),
        "the kernel's max over the history skips NaNs (NumPy's max is NaN: that step keeps the old scale)",
    ),
    Mutant(
        "fp8-scale-kernel-rotation-loses-this-steps-amax",
        "cuda/fp8_scale.cu",
        "        history[n - 1] = first;\n",
        "        history[n - 1] = history[0];\n",
        (f"{SCALE}::test_the_rotation_moves_every_entry_down_one_and_zeroes_the_first",),
        "the rotation writes the rotated entry 0 to the end instead of this step's amax, read before any write",
    ),
    Mutant(
        "fp8-scale-kernel-used-inverse-copied-after-the-update",
        "cuda/fp8_scale.cu",
        "        reinterpret_cast<unsigned int*>(used_scale_inv)[0] = old_inv[0];\n        const unsigned int s = next_scale(chosen, __float_as_uint(scale[0]), numerator);\n        reinterpret_cast<unsigned int*>(scale)[0] = s;\n        reinterpret_cast<unsigned int*>(scale_inv)[0] = inverse_bits(s);\n",
        "        const unsigned int s = next_scale(chosen, __float_as_uint(scale[0]), numerator);\n        reinterpret_cast<unsigned int*>(scale)[0] = s;\n        reinterpret_cast<unsigned int*>(scale_inv)[0] = inverse_bits(s);\n        reinterpret_cast<unsigned int*>(used_scale_inv)[0] = old_inv[0];\n",
        (f"{SCALE}::test_the_inverse_the_cast_used_is_copied_before_the_update",),
        "the inverse scale returned with the FP8 tensor is the updated one, not the one its cast used",
    ),
    Mutant(
        "fp8-scale-launcher-always-max",
        "minitorch_amp/backend/fp8_scale.py",
        "        args += (numerator(fp8_max, margin), np.int32(ALGOS[algo]))\n",
        "        args += (numerator(fp8_max, margin), np.int32(0))\n",
        (f"{SCALE}::test_the_update_is_the_twins_bits_for_histories_with_special_amaxes",),
        "the launcher hands the kernel 'max' whatever the recipe's amax_compute_algo",
    ),
    Mutant(
        "fp8-scale-kernel-ignores-the-amax-slot",
        "cuda/fp8_scale.cu",
        "        slot != nullptr ? *reinterpret_cast<volatile unsigned int*>(slot) : history[0];\n",
        "        history[0];\n",
        (f"{STATE}::test_a_state_loaded_with_an_amax_in_its_first_entry_casts_as_on_numpy",),
        "the update reads this step's amax from the history's entry 0, not from the slot the cast folded it into",
    ),
    Mutant(
        "fp8-scale-kernel-slot-not-zeroed",
        "cuda/fp8_scale.cu",
        "        if (slot != nullptr) slot[0] = 0u;  // the slot the next cast folds its amax into\n",
        "",
        (f"{STATE}::test_scaling_state_cast_on_the_gpu_is_the_numpy_path_bit_for_bit",),
        "the amax slot keeps this step's amax: the next cast folds max(old, new), and a falling amax never lowers the history",
    ),
    Mutant(
        "fp8-fused-cast-folds-into-the-histories-first-entry",
        "minitorch_amp/amp/fp8/scaling.py",
        "        amax = self._amax_slot\n",
        "        amax = self._amax_slot = self.amax_history[:1]\n",
        (f"{STATE}::test_a_state_loaded_with_an_amax_in_its_first_entry_casts_as_on_numpy",),
        "the GPU cast folds its amax into amax_history[0]: a loaded state's amax there (a current-scaling checkpoint) is kept as max(old, new)",
    ),
    Mutant(
        "fp8-fused-cast-skips-the-amax-all-reduce",
        "minitorch_amp/amp/fp8/scaling.py",
        "                reduce_amax(amax)  # the ranks' maximum, in place\n",
        "                pass\n",
        (
            f"{STATE}::test_in_a_world_of_ranks_the_amax_in_the_history_is_all_reduced_before_the_update",
        ),
        "on a GPU the delayed cast no longer max-reduces its amax over the ranks: replicas' scales drift apart",
    ),
    Mutant(
        "fp8-fused-cast-ignores-raw-kernels-off",
        "minitorch_amp/amp/fp8/scaling.py",
        "        return _xp(x) is not np and _xp(self.amax_history) is not np and _kernels.enabled()\n",
        "        return _xp(x) is not np and _xp(self.amax_history) is not np\n",
        (f"{STATE}::test_without_raw_kernels_the_state_runs_the_twin_on_the_device",),
        "MINITORCH_AMP_RAW_KERNELS=0 still launches the update kernel",
    ),
]
