"""h26 (issue 28 follow-up): FP8 scaling states in checkpoints, amax reduced over the ranks."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

CKPT = "tests/test_fp8_checkpoint.py::"

MUTANTS: list[Mutant] = [
    Mutant(
        "fp8-state-left-out-of-state-dict",
        "minitorch_amp/nn/layer/state_dict.py",
        "    if extra_state.entries is not None:\n",
        "    if False:\n",
        (
            CKPT + "test_state_dict_holds_the_scaling_states_of_weights_that_ran_in_fp8",
            CKPT + "test_a_resumed_run_takes_the_same_next_step_bit_for_bit",
        ),
        "a checkpoint leaves out the FP8 scales and amax histories: a resumed run restarts them at 1",
    ),
    Mutant(
        "fp8-state-of-current-scaling-saved",
        "minitorch_amp/amp/fp8/checkpoint.py",
        "    if meta is None or not (meta.recipe is None or isinstance(meta.recipe, DelayedScaling)):\n",
        "    if meta is None:\n",
        (CKPT + "test_current_scaling_keeps_nothing_to_save",),
        "a model under current scaling (which keeps nothing between steps) adds FP8 keys to its checkpoint",
    ),
    Mutant(
        "fp8-state-committed-before-the-others-are-checked",
        "minitorch_amp/nn/layer/state_dict.py",
        "            commits.append(extra_state.prepare(param, name, fields))\n",
        "            extra_state.prepare(param, name, fields)()\n",
        (CKPT + "test_a_corrupt_fp8_entry_is_refused_and_nothing_is_loaded",),
        "a corrupt FP8 entry of a later weight is refused after an earlier weight's FP8 state was loaded (half-loaded model)",
    ),
    Mutant(
        "fp8-keys-reported-unexpected",
        "minitorch_amp/nn/layer/state_dict.py",
        "    used = {name for name, _, _ in plan} | extra_used | set(missing)  # (a key holding None)\n",
        "    used = {name for name, _, _ in plan} | set(missing)\n",
        (CKPT + "test_a_resumed_run_takes_the_same_next_step_bit_for_bit",),
        "set_state_dict loads the FP8 entries but also returns them as unexpected keys",
    ),
    Mutant(
        "missing-fp8-keys-not-reported",
        "minitorch_amp/nn/layer/state_dict.py",
        "            if key not in state_dict and use_structured_name:\n",
        "            if False:\n",
        (
            CKPT
            + "test_a_plain_checkpoint_loaded_into_an_fp8_model_lists_the_fp8_entries_as_missing",
        ),
        "a checkpoint without FP8 entries loads into an FP8 model silently: the stale scales are not listed as missing",
    ),
    Mutant(
        "strict-load-refuses-fp8-entries-of-a-fresh-model",
        "minitorch_amp/nn/layer/torch_compat.py",
        "        known = set(own) | {k for k in state_dict if extra_owner(k) in own}  # FP8 states\n",
        "        known = set(own)\n",
        (CKPT + "test_torch_style_strict_loading_accepts_the_fp8_entries_of_a_fresh_model",),
        "load_state_dict(strict=True) calls a checkpoint's FP8 entries unexpected keys when the model has not run FP8 yet",
    ),
    Mutant(
        "fp8-scale-inverse-not-checked",
        "minitorch_amp/amp/fp8/checkpoint.py",
        "    if (np.float32(1.0) / scale).tobytes() != scale_inv.tobytes():\n",
        "    if False:\n",
        (CKPT + "test_a_corrupt_fp8_entry_is_refused_and_nothing_is_loaded",),
        "a scale_inv that does not belong to its scale loads, and the GEMM epilogue unscales wrongly",
    ),
    Mutant(
        "negative-amax-loads",
        "minitorch_amp/amp/fp8/checkpoint.py",
        "    if (amax_history < 0).any():\n",
        "    if False:\n",
        (CKPT + "test_a_corrupt_fp8_entry_is_refused_and_nothing_is_loaded",),
        "a corrupt amax history with a negative amax loads",
    ),
    Mutant(
        "history-length-against-the-recipe-not-checked",
        "minitorch_amp/amp/fp8/checkpoint.py",
        "    if training and meta.recipe.amax_history_len != length:\n",
        "    if False:\n",
        (
            CKPT
            + "test_a_history_length_other_than_the_weights_recipe_is_refused_and_nothing_is_loaded",
        ),
        "a saved amax history of another length than the weight's recipe keeps is loaded (or fails half-way)",
    ),
    Mutant(
        "fp8-state-replaced-not-overwritten-in-place",
        "minitorch_amp/amp/fp8/checkpoint.py",
        "        if training:  # in place: whatever holds these arrays sees the loaded values\n",
        "        if False:\n",
        (
            CKPT
            + "test_loading_into_a_model_that_already_trains_in_fp8_overwrites_its_states_in_place",
        ),
        "loading swaps in new scaling arrays, which a captured CUDA graph holding the old ones never sees",
    ),
    Mutant(
        "loaded-state-dropped-at-the-first-region",
        "minitorch_amp/amp/fp8/autocast.py",
        "        meta = _take_up(weight, meta, recipe)\n",
        "        meta = None\n",
        (CKPT + "test_a_resumed_run_takes_the_same_next_step_bit_for_bit",),
        "the first fp8_autocast after a load starts the scales afresh, as if nothing had been loaded",
    ),
    Mutant(
        "loaded-state-taken-up-by-any-history-length",
        "minitorch_amp/amp/fp8/autocast.py",
        "    if saved != recipe.amax_history_len:\n",
        "    if False:\n",
        (CKPT + "test_a_loaded_state_is_taken_up_by_a_recipe_with_its_history_length",),
        "a loaded amax history is taken up by a recipe of another length (its scale update then runs on the wrong window)",
    ),
    Mutant(
        "amax-not-reduced-over-the-ranks",
        "minitorch_amp/amp/fp8/scaling.py",
        "        self.amax_history[:1] = reduce_amax(amax) if self.recipe.reduce_amax else amax\n",
        "        self.amax_history[:1] = amax\n",
        (
            "tests/test_fp8_distributed.py::test_every_rank_ends_with_the_same_scales_and_amax_histories",
            "tests/test_fp8_distributed.py::test_the_input_amax_recorded_is_the_largest_over_the_ranks",
        ),
        "under data parallelism each rank scales by its own amaxes: the ranks' FP8 casts part ways",
    ),
    Mutant(
        "reduce-amax-false-still-reduces",
        "minitorch_amp/amp/fp8/scaling.py",
        "        self.amax_history[:1] = reduce_amax(amax) if self.recipe.reduce_amax else amax\n",
        "        self.amax_history[:1] = reduce_amax(amax)\n",
        (
            "tests/test_fp8_scale_state.py::"
            "test_a_recipe_without_amax_reduction_keeps_this_ranks_scales",
            "tests/test_fp8_distributed.py::"
            "test_a_region_on_one_rank_without_amax_reduction_waits_for_no_other",
        ),
        "DelayedScaling(reduce_amax=False) still all-reduces: a region on rank 0 alone makes the "
        "ranks' collectives differ",
    ),
    Mutant(
        "reduce-amax-false-still-reduces-on-the-gpu",
        "minitorch_amp/amp/fp8/scaling.py",
        "        reduces = self.recipe.reduce_amax and _several_ranks()\n",
        "        reduces = _several_ranks()\n",
        (
            "tests/test_fp8_scale_state.py::"
            "test_a_recipe_without_amax_reduction_keeps_this_ranks_scales",
        ),
        "the fused GPU cast ignores reduce_amax=False and all-reduces each amax",
    ),
    Mutant(
        "fp8-format-not-checked-at-take-up",
        "minitorch_amp/amp/fp8/autocast.py",
        "        if state.dtype is not None and state.dtype != dtype:\n",
        "        if False:\n",
        (CKPT + "test_a_loaded_state_is_taken_up_only_by_a_recipe_of_its_formats",),
        "a HYBRID checkpoint resumed under E4M3 casts its gradients with 57344 / amax: a step of saturated casts",
    ),
    Mutant(
        "fp8-format-not-checked-at-load",
        "minitorch_amp/amp/fp8/checkpoint.py",
        "        if training is not None and getattr(training, role).dtype != dtype:\n",
        "        if False:\n",
        (CKPT + "test_a_format_other_than_the_weights_recipe_is_refused_and_nothing_is_loaded",),
        "a checkpoint of another fp8_format overwrites the scales of a weight that trains in FP8",
    ),
    Mutant(
        "fp8-format-forgotten-by-a-loaded-state",
        "minitorch_amp/amp/fp8/checkpoint.py",
        '            ScalingState.restored(*(staged[f"{r}.{f}"] for f in FIELDS), dtype=dtypes[r])\n',
        '            ScalingState.restored(*(staged[f"{r}.{f}"] for f in FIELDS))\n',
        (CKPT + "test_a_loaded_state_saved_again_before_training_keeps_its_format",),
        "a loaded state forgets its format until it trains: saved again, then resumed under another format, it is taken up",
    ),
]
