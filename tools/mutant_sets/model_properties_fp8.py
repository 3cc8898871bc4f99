"""Issue 29 in FP8: saturation counted as the failure, the cast named, fresh scaling state per
example, FP8 bounds."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

FP8 = "tests/test_model_properties_fp8.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "fp8-property-blind-to-fp8-results",
        "minitorch_amp/testing/op_trace.py",
        '    return data.dtype.kind == "f" or str(data.dtype) == "bfloat16" or data.dtype in FP8\n',
        '    return data.dtype.kind == "f" or str(data.dtype) == "bfloat16"\n',
        (
            f"{FP8}::test_delayed_scalings_unscaled_first_step_saturates_e4m3_at_448_and_names_the_cast",
        ),
        "the op trace does not look inside FP8 arrays (float8_e4m3fn's kind is 'V'), so the plain "
        "conversion's NaN of a saturating cast goes unseen and the finiteness property passes",
    ),
    Mutant(
        "fp8-cast-recorded-as-a-plain-op",
        "minitorch_amp/testing/op_trace.py",
        "        if name == CAST:\n"
        "            self._casts.append((occurrence, results[0]))\n"
        "            return\n",
        "",
        (
            f"{FP8}::test_delayed_scalings_unscaled_first_step_saturates_e4m3_at_448_and_names_the_cast",
        ),
        "a saturating cast_to_fp8 is recorded like any op: no GEMM operand, and as what it "
        "read the inputs of whichever op the observers saw before it",
    ),
    Mutant(
        "fp8-weight-and-input-casts-swapped",
        "minitorch_amp/testing/op_trace.py",
        '_OPERANDS = {1: (("input", 0),), 2: (("weight", 1), ("input", 0))}\n',
        '_OPERANDS = {1: (("input", 0),), 2: (("input", 0), ("weight", 1))}\n',
        (
            f"{FP8}::test_delayed_scalings_unscaled_first_step_saturates_e4m3_at_448_and_names_the_cast",
        ),
        "the report calls the saturated input cast of an fp8_linear the weight's (the weight is "
        "cast first, once per region) and shows the weight's values as what it read",
    ),
    Mutant(
        "fp8-amp-cast-overtakes-a-pending-fp8-cast",
        "minitorch_amp/testing/op_trace.py",
        "        elif any(not _finite(plain) for _, plain in self._casts):\n",
        "        elif False:\n",
        (f"{FP8}::test_a_saturating_weight_cast_is_named_before_the_amp_cast_that_follows_it",),
        "an AMP cast that shows between a saturated FP8 cast and its GEMM is named first, "
        "although the FP8 cast came before it",
    ),
    Mutant(
        "fp8-twin-keeps-the-fp8-name",
        "minitorch_amp/testing/op_trace.py",
        '            op = gemm.removeprefix("fp8_")\n',
        "            op = gemm\n",
        (
            f"{FP8}::test_delayed_scalings_unscaled_first_step_saturates_e4m3_at_448_and_names_the_cast",
        ),
        "the float32 run is searched for 'fp8_linear', which it never runs: the report shows no "
        "float32 values for a saturated cast",
    ),
    Mutant(
        "fp8-twin-shows-the-inputs-gradient",
        "minitorch_amp/testing/op_trace.py",
        "            return dataclasses.replace(self, op=op, occurrence=occurrence, slot=-1, feeds=())\n",
        "            return dataclasses.replace(self, op=op, occurrence=occurrence, slot=0, feeds=())\n",
        (f"{FP8}::test_the_output_gradients_e5m2_cast_saturates_in_backward",),
        "for a saturated output-gradient cast, float32's linear_grad shows its first result, "
        "the input's gradient, which is None when the input needs none: no float32 values",
    ),
    Mutant(
        "fp8-gemm-twin-keeps-the-fp8-name",
        "minitorch_amp/testing/op_trace.py",
        '        return dataclasses.replace(self, op=self.op.removeprefix("fp8_"))\n',
        "        return self\n",
        (f"{FP8}::test_a_gemm_whose_result_overflows_is_named_with_its_float32_twin",),
        "an fp8_linear whose result overflowed is looked up under its own name in the float32 "
        "run, so the report has no float32 values for it",
    ),
    Mutant(
        "fp8-history-carried-from-example-to-example",
        "minitorch_amp/testing/model_properties.py",
        "        fresh = self.fp8 is not None and isinstance(self.amp, Layer)\n",
        "        fresh = False\n",
        (f"{FP8}::test_every_example_starts_from_fresh_scaling_state_and_the_model_is_unchanged",),
        "every example runs on the same AMP copy, so delayed scaling's history from earlier "
        "examples decides whether this one saturates (a search's result depends on its order)",
    ),
    Mutant(
        "fp8-region-never-entered",
        "minitorch_amp/testing/model_properties.py",
        "        fp8 = fp8_autocast(use_amp, self.fp8) if self.fp8 is not None else contextlib.nullcontext()\n",
        "        fp8 = contextlib.nullcontext()\n",
        (
            f"{FP8}::test_delayed_scalings_unscaled_first_step_saturates_e4m3_at_448_and_names_the_cast",
            f"{FP8}::test_a_bound_bfloat16_meets_and_fp8s_three_mantissa_bits_cannot_names_that_layer",
        ),
        "dtype='float8' runs plain bfloat16 AMP: no FP8 GEMM, so neither saturation nor E4M3's "
        "rounding is ever tested",
    ),
    Mutant(
        "fp8-default-bound-as-tight-as-e4m3s-unit",
        "minitorch_amp/testing/model_properties.py",
        '"float8": 0.25}\n',
        '"float8": 2.0**-4}\n',
        (f"{FP8}::test_an_mlp_in_fp8_stays_within_the_default_bound",),
        "the differential property's float8 default is one E4M3 rounding: a healthy 4-layer "
        "MLP, whose layers add up their GEMM inputs' errors, fails it",
    ),
    Mutant(
        "fp8-default-bound-loose-enough-for-saturation",
        "minitorch_amp/testing/model_properties.py",
        '"float8": 0.25}\n',
        '"float8": 1.0}\n',
        (
            f"{FP8}::test_a_layer_whose_input_saturates_at_delayed_scalings_first_step_is_the_first_to_diverge",
        ),
        "the float8 default bound lets a layer whose input saturated (a clipped output) pass",
    ),
    Mutant(
        "fp8-recipe-with-another-dtype-ignored",
        "minitorch_amp/testing/model_properties.py",
        "        if recipe is not None:\n"
        "            raise ValueError(f\"fp8_recipe= goes with dtype='float8', got dtype={dtype!r}\")\n",
        "",
        (f"{FP8}::test_bad_fp8_arguments_say_what_to_pass",),
        "fp8_recipe= with dtype='float16' is silently ignored: the user believes FP8 was tested",
    ),
    Mutant(
        "fp8-stream-without-fp8-autocast",
        "minitorch_amp/testing/training_properties.py",
        "        with auto_cast(level=level, dtype=dtype), fp8_autocast(recipe is not None, recipe):\n",
        "        with auto_cast(level=level, dtype=dtype):\n",
        (f"{FP8}::test_an_inf_that_fp8_would_saturate_into_a_finite_output_is_still_reported",),
        "the loss-scale stream with dtype='float8' trains in plain bfloat16: FP8's casts, "
        "which saturate an inf into a finite step, are never run",
    ),
    Mutant(
        "fp8-stream-lets-non-finite-gradients-through-unnamed",
        "minitorch_amp/testing/training_properties.py",
        "        if skipped and not sc.is_enabled():\n",
        "        if False:\n",
        (f"{FP8}::test_fp8_gradients_that_are_not_finite_fail_with_no_scaler_to_skip_them",),
        "with no enabled scaler (FP8's default), a step whose gradients hold NaN is reported as "
        "a 'skipped step' that changed parameters, though nothing skipped it",
    ),
]
