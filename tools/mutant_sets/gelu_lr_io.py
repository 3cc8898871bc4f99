"""Issue 26: the float32 error function and exact GELU, LambdaDecay and OneCycleLR, the io datasets
and samplers."""

from __future__ import annotations

from mutant_sets import Mutant

SPECIAL = "minitorch_amp/backend/special.py"
LR_SCHEDULER = "minitorch_amp/optimizer/lr/scheduler.py"
LR_DECAY = "minitorch_amp/optimizer/lr/decay.py"
LR_ONE_CYCLE = "minitorch_amp/optimizer/lr/one_cycle.py"
IO_DATASETS = "minitorch_amp/io/datasets.py"
IO_SAMPLERS = "minitorch_amp/io/samplers.py"
ERF_ULP = "tests/test_erf.py::test_float32_erf_is_within_one_ulp_of_float64"

MUTANTS: list[Mutant] = [
    Mutant(
        "erf-small-polynomial-past-its-range",
        SPECIAL,
        "_SPLIT_SQUARED = np.float32(0.75 * 0.75)",
        "_SPLIT_SQUARED = np.float32(0.9 * 0.9)",
        (ERF_ULP,),
        "float32 erf uses x + x*P(x^2) up to |x| = 0.9, past the 0.75 it was fitted on",
    ),
    Mutant(
        "erf-clipped-below-where-it-rounds-to-one",
        SPECIAL,
        "_ERF_ONE_AT = 4.0",
        "_ERF_ONE_AT = 3.9",
        ("tests/test_erf.py::test_special_values_signs_and_shapes",),
        "float32 erf clips |x| at 3.9, where erf is still below 1: erf(inf) = 0.99999994",
    ),
    Mutant(
        "erf-tail-in-float32",
        SPECIAL,
        "        xt = flat[tail].astype(np.float64)",
        "        xt = flat[tail]",
        (ERF_ULP,),
        "float32 erf's tail (|x| >= 0.75) runs in float32: NumPy's float32 exp costs > 1 ULP",
    ),
    Mutant(
        "erf-float32-through-float64",
        SPECIAL,
        "    if dtype == float32:\n",
        "    if dtype == float64:\n",
        ("tests/test_erf.py::test_16_and_32_bit_erf_never_runs_the_float64_approximation",),
        "float32 erf goes through Cody's float64 pass again (GELU's 41 ms on [16, 64, 512])",
    ),
    Mutant(
        "lr-refused-step-keeps-the-new-epoch",
        LR_SCHEDULER,
        "            self.last_epoch = previous\n",
        "            pass\n",
        (
            "tests/test_lr.py::test_lambda_decay_whose_function_fails_keeps_its_epoch",
            "tests/test_lr.py::test_one_cycle_refuses_to_step_past_total_steps_and_keeps_its_state",
        ),
        "a step that get_lr refuses still advances last_epoch (the state moves on an error)",
    ),
    Mutant(
        "lambda-decay-reads-the-next-epoch",
        LR_DECAY,
        "        epoch = self.last_epoch\n",
        "        epoch = self.last_epoch + 1\n",
        ("tests/test_lr.py::test_lambda_decay_multiplies_the_base_rate_by_the_functions_factor",),
        "LambdaDecay multiplies by lr_lambda(epoch + 1): every rate one epoch early",
    ),
    Mutant(
        "one-cycle-three-phase-falls-to-the-end-rate",
        LR_ONE_CYCLE,
        "(p - 1, 2 * p - 2, peak, initial)",
        "(p - 1, 2 * p - 2, peak, end)",
        ("tests/test_lr.py::test_one_cycle_three_phases_by_hand",),
        "OneCycleLR(three_phase=True)'s second phase falls to end_learning_rate, not the start",
    ),
    Mutant(
        "random-split-remainder-to-the-last-splits",
        IO_DATASETS,
        "            counts[i % len(counts)] += 1",
        "            counts[-1 - i % len(counts)] += 1",
        ("tests/test_io_datasets.py",),
        "random_split with fractions gives the leftover samples to the last splits (Paddle: first)",
    ),
    Mutant(
        "concat-dataset-bisect-left",
        IO_DATASETS,
        "        which = bisect.bisect_right(self.cumulative_sizes, idx)",
        "        which = bisect.bisect_left(self.cumulative_sizes, idx)",
        ("tests/test_io_datasets.py::test_concat_dataset_indexes_across_its_parts",),
        "ConcatDataset reads the first sample of each part from the previous part",
    ),
    Mutant(
        "subset-accepts-the-index-one-past-the-end",
        IO_DATASETS,
        "            bad = np.flatnonzero((found < -n) | (found >= n))",
        "            bad = np.flatnonzero((found < -n) | (found > n))",
        ("tests/test_io_datasets.py",),
        "Subset takes index len(dataset) and fails only when the sample is read",
    ),
    Mutant(
        "weighted-sampler-one-draw-too-many-without-replacement",
        IO_SAMPLERS,
        "        if not replacement and num_samples > positive:",
        "        if not replacement and num_samples > positive + 1:",
        ("tests/test_io_datasets.py",),
        "WeightedRandomSampler(replacement=False) accepts one draw more than positive weights",
    ),
]
