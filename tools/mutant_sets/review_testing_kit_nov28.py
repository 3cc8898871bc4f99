"""Defects a review found (session of 2026-11-28, evening), each planted back: the tests
written with the fixes must see them."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant, lines

KIT = "tests/test_testing_kit_review_nov28.py::"

MUTANTS: list[Mutant] = [
    Mutant(
        "amp-cast-paired-with-the-models-cast",
        "minitorch_amp/testing/model_properties.py",
        "    if not found.amp_cast:\n",
        "    if True:\n",
        (KIT + "test_a_cast_amp_inserted_is_not_paired_with_the_models_own_cast",),
        "an overflowing AMP cast is reported beside the model's own unrelated cast of the float32 run",
    ),
    Mutant(
        "fp8-tensors-draw-floats-of-width-8",
        "minitorch_amp/testing/strategies.py",
        "    if dtype in FP8:  # NOTE: ml_dtypes' FP8 kinds differ (E4M3 'V', E5M2 'f'): test first\n",
        "    if False:\n",
        (KIT + "test_fp8_tensors_draw_finite_values_of_their_format",),
        "tensors(dtype=FP8) draws only 0 and 1 (E4M3) or crashes (E5M2: st.floats(width=8))",
    ),
    Mutant(
        "tensors-checks-its-dtype-at-the-first-draw",
        "minitorch_amp/testing/strategies.py",
        "        dtype = convert_dtype(dtype)\n        elements = _default_elements(dtype) if elements is None else elements\n    return _tensors(",
        "        pass\n    return _tensors(",
        (KIT + "test_tensors_refuses_a_dtype_it_cannot_draw_when_built",),
        "a dtype tensors() cannot draw is refused only inside the test, not where it is written",
    ),
    Mutant(
        "assert-close-ignores-integer-tolerances",
        "minitorch_amp/testing/assertions.py",
        "    ok = (diff <= allowed).astype(bool)\n",
        "    ok = a == e\n",
        (KIT + "test_assert_close_honours_explicit_tolerances_between_integers",),
        "assert_close(int, int, atol=5) still compares exactly",
    ),
    Mutant(
        "assert-close-prints-integers-as-float64",
        "minitorch_amp/testing/assertions.py",
        "        shown = a, e  # exact, also past 2**53 where float64 cannot tell integers apart\n",
        "        shown = a.astype(np.float64), e.astype(np.float64)\n",
        (KIT + "test_assert_close_tells_big_integers_apart_and_prints_them_exactly",),
        "2**62 and 2**62 + 1 are printed as the same float64 value",
    ),
    Mutant(
        "rtol-dict-misses-tuple-outputs",
        "minitorch_amp/testing/model_properties.py",
        "        own = rtol.get(layer) if isinstance(rtol, dict) else rtol\n",
        '        own = rtol.get(name.split("#")[0]) if isinstance(rtol, dict) else rtol\n',
        (KIT + "test_a_per_layer_rtol_holds_for_a_layer_that_returns_a_tuple",),
        "a layer returning a tuple ('pair[0]') gets the default bound, not its own",
    ),
    Mutant(
        "fp8-error-inf-becomes-max-float",
        "minitorch_amp/testing/fp8_assertions.py",
        "    return np.where(same, 0.0, np.where(np.isnan(error), np.inf, error))\n",
        "    return np.where(same, 0.0, np.nan_to_num(error, nan=np.inf))\n",
        (KIT + "test_fp8_error_in_ulps_is_inf_for_an_infinity_against_a_finite_value",),
        "fp8_error_in_ulps gives 1.797e308 where an infinity meets a finite value",
    ),
    Mutant(
        "fp8-bit-equal-across-formats",
        "minitorch_amp/testing/fp8_assertions.py",
        "            if x.dtype in FORMATS and x.dtype != fmt.dtype:\n",
        "            if False:\n",
        (KIT + "test_assert_fp8_bit_equal_refuses_an_array_of_another_format_than_dtype",),
        "with dtype=, an E4M3 1.0 'equals' an E5M2 0.5 (both byte 0x38)",
    ),
    Mutant(
        "assert-close-widens-snan-loudly",
        "minitorch_amp/testing/assertions.py",
        lines(
            '        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):',
            "            a64, e64 = a.astype(np.float64), e.astype(np.float64)",
        ),
        lines(
            "        a64, e64 = a.astype(np.float64), e.astype(np.float64)",
            '        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):',
        ),
        (KIT + "test_signalling_bfloat16_nans_compare_without_warnings",),
        "assert_close warns 'invalid value' widening a signalling bfloat16 NaN",
    ),
    Mutant(
        "ulp-distance-isnan-loudly",
        "minitorch_amp/testing/assertions.py",
        lines(
            '    with np.errstate(invalid="ignore"):  # a signalling NaN (bfloat16) warns "invalid value"',
            "        nan = np.isnan(a) | np.isnan(b)",
        ),
        "    nan = np.isnan(a) | np.isnan(b)\n",
        (KIT + "test_signalling_bfloat16_nans_compare_without_warnings",),
        "ulp_distance warns 'invalid value' on a signalling bfloat16 NaN",
    ),
    Mutant(
        "log-uniform-fills-most-elements",
        "minitorch_amp/testing/model_strategies.py",
        "    return st.lists(element, min_size=size, max_size=size).map(build)\n",
        lines(
            "    sign_bit = st.integers(0, 1) if signed else st.just(0)",
            "    parts = (st.integers(low, high), st.integers(0, 2**23 - 1), sign_bit)",
            "    arrays = [hnp.arrays(np.int64, shape, elements=s) for s in parts]",
            "    return st.tuples(*arrays).map(lambda p: build(np.stack(p, -1).reshape(-1, 3).tolist()))",
        ),
        (KIT + "test_log_uniform_tensors_draw_each_elements_exponent",),
        "three arrays with the default fill: about half the exponents are 0",
    ),
    Mutant(
        "star-import-needs-hypothesis",
        "minitorch_amp/testing/__init__.py",
        "    *(_NEEDS_HYPOTHESIS if _hypothesis_installed() else ()),\n",
        "    *_NEEDS_HYPOTHESIS,\n",
        (
            KIT
            + "test_without_hypothesis_the_fp8_strategies_say_how_to_get_it_and_star_import_works",
        ),
        "from minitorch_amp.testing import * fails without Hypothesis",
    ),
    Mutant(
        "fp8-strategies-lose-the-install-hint",
        "minitorch_amp/testing/fp8_strategies.py",
        lines(
            "try:",
            "    from hypothesis import strategies as st",
            "except ImportError as exc:  # the rest of minitorch_amp.testing works without it",
        ),
        lines(
            "from hypothesis import strategies as st",
            "",
            "if False:",
            "    exc = None",
        ),
        (
            KIT
            + "test_without_hypothesis_the_fp8_strategies_say_how_to_get_it_and_star_import_works",
        ),
        "without Hypothesis, fp8_values raises a bare ModuleNotFoundError, no pip install hint",
    ),
    Mutant(
        "gradient-magnitudes-past-float64",
        "minitorch_amp/testing/strategies.py",
        "    if not _FLOAT64_EXPONENTS[0] <= low_exp <= high_exp <= _FLOAT64_EXPONENTS[1]:\n",
        "    if False:\n",
        (KIT + "test_gradient_magnitudes_refuses_exponents_past_float64s_range",),
        "gradient_magnitudes(-1100, -1100) draws 0.0, (1024, 1024) raises OverflowError mid-test",
    ),
    Mutant(
        "adversarial-one-large-in-an-empty-tensor",
        "minitorch_amp/testing/model_strategies.py",
        "            if size:  # an empty tensor has no element to make large\n",
        "            if True:\n",
        (KIT + "test_adversarial_tensors_draw_empty_tensors_of_one_large",),
        "adversarial_tensors((0, 3), kinds=('one_large',)) raises while drawing",
    ),
    Mutant(
        "skipped-step-checks-only-parameters",
        "minitorch_amp/testing/training_properties.py",
        "            changed = _state_change(state, _optimizer_state(opt))\n",
        "            changed = None\n",
        (KIT + "test_a_skipped_step_that_writes_only_the_master_weights_is_caught",),
        "a skipped O2 step that writes only the fp32 master weights goes unnoticed",
    ),
    Mutant(
        "amp-cast-backward-counted-with-the-models",
        "minitorch_amp/testing/op_trace.py",
        '        self._seen(op.name + "_grad", grads, hooks.node in self._amp_nodes)\n',
        '        self._seen(op.name + "_grad", grads)\n',
        (KIT + "test_the_backward_of_a_cast_amp_inserted_is_counted_apart_from_the_models_own",),
        "the backward of AMP's casts is numbered with the model's own cast_grad ops",
    ),
]
