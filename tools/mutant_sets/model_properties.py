"""Issue 29: property tests of a whole model under AMP (the first op that overflowed, the first
divergent layer, the loss-scale stream, the strategies)."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

PROPS = "tests/test_model_properties.py"
TRAIN = "tests/test_model_properties_training.py"
THRESHOLD = (
    f"{PROPS}::test_the_search_lands_within_10_percent_of_the_hand_computed_threshold_and_"
    "names_the_op"
)

MUTANTS: list[Mutant] = [
    Mutant(
        "model-property-names-the-last-bad-op",
        "minitorch_amp/testing/op_trace.py",
        "        if self.first_bad is not None and not wanted:\n"
        "            return\n"
        "        bad = next((i for i, r in enumerate(results) if not _finite(r)), None)\n"
        "        if bad is not None and self.first_bad is None:\n",
        "        bad = next((i for i, r in enumerate(results) if not _finite(r)), None)\n"
        "        if bad is not None:\n",
        (f"{PROPS}::test_the_first_op_that_overflows_is_named_not_a_later_one",),
        "the finiteness property reports the last op that produced inf/NaN (the loss, its "
        "backward) instead of the first, where the overflow happened",
    ),
    Mutant(
        "differential-reports-the-final-output",
        "minitorch_amp/testing/model_properties.py",
        "    for (name, layer, a), (_, _, r) in zip(amp, fp32, strict=True):\n",
        "    for (name, layer, a), (_, _, r) in reversed(list(zip(amp, fp32, strict=True))):\n",
        (
            f"{PROPS}::test_the_differential_property_names_the_first_layer_past_an_"
            "unmeetable_bound",
        ),
        "the differential property blames the model's output (the last layer to finish) "
        "instead of the first layer whose divergence exceeds the bound",
    ),
    Mutant(
        "skip-streak-off-by-one",
        "minitorch_amp/testing/training_properties.py",
        "        if max_skip_streak is not None and streak > max_skip_streak:\n",
        "        if max_skip_streak is not None and streak >= max_skip_streak:\n",
        (f"{TRAIN}::test_exactly_k_skips_in_a_row_pass_and_k_plus_1_fail",),
        "the loss-scale property fails a stream with exactly max_skip_streak skips in a row, "
        "which the rule allows",
    ),
    Mutant(
        "skipped-step-compared-with-itself",
        "minitorch_amp/testing/training_properties.py",
        "            for p, old in zip(params, before):\n",
        "            for p, old in zip(params, [p.numpy().copy() for p in params]):\n",
        (f"{TRAIN}::test_a_step_that_changes_parameters_after_an_overflow_is_caught",),
        "the loss-scale property compares the parameters after a skipped step with themselves, "
        "so a scaler that steps on inf gradients passes",
    ),
    Mutant(
        "op-trace-leaves-its-observers-installed",
        "minitorch_amp/testing/op_trace.py",
        "        observers.uninstall(self._observers[0])\n",
        "        observers.uninstall(self._forward)\n",
        (f"{PROPS}::test_finite_inputs_pass_and_the_model_is_left_unchanged",),
        "each check leaves its forward observer installed (a fresh bound method is not the "
        "one installed): every later op anywhere runs it, and the searches slow down",
    ),
    Mutant(
        "fp32-reference-shows-another-result",
        "minitorch_amp/testing/model_properties.py",
        "    with OpTrace(want=(bad.op, bad.occurrence, bad.slot)) as reference:\n",
        "    with OpTrace(want=(bad.op, bad.occurrence, 0)) as reference:\n",
        (f"{THRESHOLD}[backward-O1-float16]",),
        "the float32 run's values are those of the backward's first result (an input's "
        "gradient, or None) instead of the one that overflowed under AMP (the weight's)",
    ),
    Mutant(
        "scaled-batches-shrink-to-the-largest-scale",
        "minitorch_amp/testing/model_strategies.py",
        "            scaled = (base * (low * 2.0 ** (k / steps_per_octave))).astype(np.float32)\n",
        "            scaled = (base * (high * 2.0 ** (-k / steps_per_octave))).astype(np.float32)\n",
        (f"{THRESHOLD}[forward-O1-float16]",),
        "scaled_batches shrinks towards the largest scale, so the search reports a huge "
        "input instead of the smallest one that overflows",
    ),
    Mutant(
        "observers-keep-the-last-inputs",
        "minitorch_amp/autograd/dispatch.py",
        "        hooks.inputs = ()  # not kept alive\n",
        "",
        (f"{PROPS}::test_observers_see_what_each_op_read_and_nothing_is_kept_after",),
        "with a debugging observer on, apply keeps the last op's input arrays alive after "
        "the observers return",
    ),
    Mutant(
        "grad-observers-see-no-incoming-gradient",
        "minitorch_amp/autograd/engine.py",
        "    hooks.inputs = (grad_out._data if isinstance(grad_out, Tensor) else grad_out,)\n",
        "",
        (f"{PROPS}::test_observers_see_what_each_op_read_and_nothing_is_kept_after",),
        "backward's observers are not shown the gradient flowing in, so the report of a "
        "backward op has no input range",
    ),
]
