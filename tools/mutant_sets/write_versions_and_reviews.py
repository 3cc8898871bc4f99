"""Writes that bump versions (an optimizer step, an initializer) and the caches that follow
them; the defects a review of the AMP and FP8 code found (session of 2026-11-28), each
planted back: the tests written with the fixes must see them."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

CACHE = "tests/test_cast_cache.py::"
VERSIONS = "tests/test_optimizer_versions.py::"
MASTERS = "tests/test_reliability_masters.py::"
APEX = "tests/test_apex.py::"
MASTER_WEIGHTS = "tests/test_optimizer_o2_keys.py::"
FP8 = "tests/test_fp8_autocast.py::"
RECIPE = "tests/test_fp8_recipe.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "cast-cache-ignores-writes",
        "minitorch_amp/amp/auto_cast.py",
        "    if entry is not None and (entry[2] != t._version or _freed(entry[1])):\n",
        "    if entry is not None and _freed(entry[1]):\n",
        (CACHE + "test_a_weight_written_inside_the_region_is_cast_again",),
        "an O1 weight written inside the region (set_value, a step) feeds its old float16 cast",
    ),
    Mutant(
        "cast-cache-reuses-a-freed-cast",
        "minitorch_amp/amp/auto_cast.py",
        "    return cast._node is not None and cast._node.freed\n",
        "    return False\n",
        (
            CACHE
            + "test_a_forward_after_a_backward_in_one_region_casts_again_and_reaches_the_weights",
        ),
        "a second forward in one region reuses a cast whose graph a backward freed: AttributeError",
    ),
    Mutant(
        "optimizer-step-bumps-nothing",
        "minitorch_amp/optimizer/state.py",
        "            param._version += 1\n",
        "",
        (VERSIONS + "test_backward_through_a_graph_that_saved_a_weight_before_the_step_raises",),
        "a graph that saved a weight before the step differentiates with the new weight, silently",
    ),
    Mutant(
        "plan-signature-left-behind-the-bumps",
        "minitorch_amp/optimizer/state.py",
        "            signature[slot] = param._version\n",
        "",
        (VERSIONS + "test_each_step_bumps_the_written_parameters_and_keeps_its_plan",),
        "the step's own bumps make every next step rebuild its plan (and re-seed every master)",
    ),
    Mutant(
        "masters-take-the-steps-writes-for-outside-ones",
        "minitorch_amp/optimizer/state.py",
        "            master_seen[name] = (param._version, master_seen[name][1])\n",
        "            pass\n",
        (VERSIONS + "test_a_rebuilt_plan_does_not_take_the_steps_own_writes_for_outside_ones",),
        "a plan rebuilt after steps re-seeds every master from its float16 parameter: fp32 digits lost",
    ),
    Mutant(
        "initializer-bumps-nothing",
        "minitorch_amp/nn/initializer_base.py",
        "        param._version += 1  # a write: an fp32 master, a cached cast, a saved input follow\n",
        "",
        (MASTERS + "test_an_initializer_run_again_is_not_undone_by_the_next_step",),
        "an O2 weight re-initialized is written back from its master by the next step",
    ),
    Mutant(
        "apex-loads-scaler-by-scaler",
        "minitorch_amp/amp/apex.py",
        "            loads.append(scaler._prepare_load(sd))\n",
        "            scaler.load_state_dict(sd)\n",
        (APEX + "test_state_dict_round_trips_and_bad_dicts_change_nothing",),
        "amp.load_state_dict loads the first scaler, then refuses the second: half a load",
    ),
    Mutant(
        "apex-initialize-forgets-before-checking",
        "minitorch_amp/amp/apex.py",
        '    if enabled and opt_level == "O2":  # decorate checks everything before changing anything\n',
        '    _amp_state.reset()\n    if enabled and opt_level == "O2":\n',
        (APEX + "test_an_initialize_that_decorate_refuses_leaves_the_previous_one_in_force",),
        "an initialize that decorate refuses wipes the previous one: scale_loss then raises",
    ),
    Mutant(
        "o2-moments-keyed-by-the-parameter",
        "minitorch_amp/optimizer/state_dict.py",
        "        owner = _master_name(param) if param.name in opt._master_weights else None\n",
        "        owner = None\n",
        (
            MASTER_WEIGHTS
            + "test_accumulators_of_a_param_with_a_master_are_keyed_by_the_masters_name_as_paddle_does",
        ),
        "an O2 checkpoint keys the moments by the float16 parameter: Paddle's .pdopt restarts them",
    ),
    Mutant(
        "old-o2-moment-keys-not-loaded",
        "minitorch_amp/optimizer/state_dict.py",
        "        for owner in (_master_name(param), None):  # Paddle's O2 keys, then the plain ones\n",
        "        for owner in (_master_name(param),):\n",
        (
            MASTER_WEIGHTS
            + "test_a_checkpoint_keying_the_masters_accumulators_by_the_param_still_loads",
        ),
        "a checkpoint saved before Paddle's O2 keys loses its moments",
    ),
    Mutant(
        "fp8-checker-shown-one-over-scale-inv",
        "minitorch_amp/amp/fp8/gemm.py",
        "            scaled = x.astype(float32) * (state.scale if current else used)\n",
        "            scaled = x.astype(float32) * (np.float32(1.0) / scale_inv)\n",
        (FP8 + "test_the_tensor_checker_sees_the_scale_the_cast_used_even_float32s_largest",),
        "the tensor checker reports NaN for an FP8 cast at float32's largest scale (0 * inf)",
    ),
    Mutant(
        "fp8-matmul-promotes-with-numpy",
        "minitorch_amp/amp/fp8/gemm.py",
        "        dtype = result_type(x.dtype, y.dtype)  # bfloat16 with float16: float32, as outside\n",
        "        dtype = np.result_type(x.dtype, y.dtype) if x.dtype != y.dtype else x.dtype\n",
        (
            FP8
            + "test_a_product_of_bfloat16_and_float16_activations_promotes_to_float32_as_outside",
        ),
        "an FP8 matmul of bfloat16 and float16 activations raises DTypePromotionError",
    ),
    Mutant(
        "fp8-linear-of-a-temporary-weight-is-delayed",
        "minitorch_amp/amp/fp8/autocast.py",
        "        if y._node is None:  # a tensor that lives on (a parameter, frozen or not): delayed\n",
        "        if True:\n",
        (FP8 + "test_f_linear_with_a_weight_made_this_step_takes_current_scaling_as_matmul_does",),
        "F.linear(x, w.T) keeps a delayed state on a temporary: scale 1 at every step",
    ),
    Mutant(
        "fp8-broadcast-bias-folded",
        "minitorch_amp/amp/fp8/autocast.py",
        "        if bias is not None and tuple(bias.shape) != (y.shape[1],):  # a bias that broadcasts:\n",
        "        if False:\n",
        (FP8 + "test_a_bias_that_broadcasts_is_added_after_the_fp8_gemm_as_outside",),
        "a bias of shape [1] or [rows, N] is sent to the epilogue and refused there",
    ),
    Mutant(
        "fp8-weight-cache-ignores-writes",
        "minitorch_amp/amp/fp8/autocast.py",
        "    if entry is None or entry[0] is not weight or entry[4] != weight._version:\n",
        "    if entry is None or entry[0] is not weight:\n",
        (FP8 + "test_a_weight_written_inside_the_region_is_cast_again",),
        "a weight stepped inside an FP8 region feeds its old FP8 copy to the next GEMM",
    ),
    Mutant(
        "pure-e5m2-recipe-accepted",
        "minitorch_amp/amp/fp8/recipe.py",
        "    if fp8_format is Format.E5M2:\n",
        "    if False:\n",
        (RECIPE,),
        "a recipe takes E5M2 for every tensor, which the GPU GEMM refuses at the first product",
    ),
    Mutant(
        "margin-unbounded",
        "minitorch_amp/amp/fp8/recipe.py",
        "        if not np.float32(min(FP8_MAX.values()) * 2.0 ** -float(self.margin)) >= _TINY:\n",
        "        if False:\n",
        (RECIPE,),
        "margin=inf gives scale 0, inverse inf: every FP8 GEMM is NaN and the checkpoint refuses itself",
    ),
    Mutant(
        "apex-merged-overflow-not-flagged",
        "minitorch_amp/amp/apex_stash.py",
        "            found_inf = xp.logical_or(found_inf, ~xp.isfinite(new._data).all())\n",
        "            pass\n",
        (APEX + "test_float16_grads_that_add_up_past_65504_skip_the_step",),
        "two finite float16 micro-step grads summing past 65504 are stepped with: the weight is inf",
    ),
    Mutant(
        "grad-frees-the-graph-below-its-inputs",
        "minitorch_amp/autograd/engine.py",
        "        for node in order if needed is None else needed:\n",
        "        for node in order:\n",
        (
            "tests/test_hooks_and_grad.py::test_grad_of_an_intermediate_leaves_the_graph_below_it_for_a_later_backward",
        ),
        "grad(loss, act) frees act's own graph, which it never ran: act.backward(g) then raises",
    ),
    Mutant(
        "grad-runs-hooks-off-its-path",
        "minitorch_amp/autograd/engine.py",
        "                if grad is None or (visited is not None and node not in visited):\n",
        "                if grad is None:\n",
        (
            "tests/test_hooks_and_grad.py::test_grad_runs_no_hook_of_a_branch_that_leads_to_no_input",
        ),
        "grad(z, x) runs the hook of a branch that leads to no input (and fails if it raises)",
    ),
    Mutant(
        "no-grad-leaves-a-generator-unwrapped",
        "minitorch_amp/autograd/grad_mode.py",
        "        if inspect.isgeneratorfunction(func):\n",
        "        if False:\n",
        (
            "tests/test_autograd.py::test_no_grad_decorates_a_generator_each_of_whose_steps_records_nothing",
        ),
        "@no_grad() on a generator leaves the block before its body runs: every step records",
    ),
    Mutant(
        "bare-no-grad-refused",
        "minitorch_amp/autograd/grad_mode.py",
        "        if callable(func):\n            return cls()(func)\n",
        "",
        ("tests/test_autograd.py::test_no_grad_decorates_without_parentheses_as_pytorch_allows",),
        "@no_grad without parentheses raises TypeError",
    ),
    Mutant(
        "data-loader-asks-a-batch-sampler-its-length",
        "minitorch_amp/io/dataloader.py",
        '            getattr(batch_sampler, "batch_size", None) if batch_sampler is not None else batch_size\n',
        '            getattr(batch_sampler, "batch_size", None) if batch_sampler else batch_size\n',
        ("tests/test_samplers.py::test_a_batch_sampler_of_unknown_length_drives_a_data_loader",),
        "a batch sampler without __len__ (Paddle's Sampler has none) makes DataLoader raise",
    ),
    Mutant(
        "load-state-dict-skips-a-none-silently",
        "minitorch_amp/nn/layer/torch_compat.py",
        "        if empty:  # (set_state_dict, Paddle's, takes None for absent: here it is present)\n",
        "        if False:\n",
        (
            "tests/test_torch_spellings.py::test_load_state_dict_refuses_a_key_holding_none_as_pytorch_does",
        ),
        "strict load_state_dict passes a key holding None and loads the rest, reporting nothing",
    ),
    Mutant(
        "mha-mask-shape-unchecked",
        "minitorch_amp/nn/layer/attention.py",
        "            _attention._check_mask_shape(mask, product)  # (a wider mask would widen the output)\n",
        "",
        ("tests/test_attention.py::test_mha_refuses_a_mask_that_would_widen_its_output",),
        "a mask wider than the scores widens MultiHeadAttention's output, silently",
    ),
    Mutant(
        "dropout-p-unchecked-in-inference",
        "minitorch_amp/nn/functional/common.py",
        "    check_dropout(p, mode)  # (before the short cuts: a bad p would hide until training)\n",
        "",
        ("tests/test_ops.py::test_dropout_rejects_bad_arguments",),
        "F.dropout(p=1.5, training=False) returns its input; the bad p shows only in training",
    ),
    Mutant(
        "a-none-value-listed-unexpected-too",
        "minitorch_amp/nn/layer/state_dict.py",
        "    used = {name for name, _, _ in plan} | extra_used | set(missing)  # (a key holding None)\n",
        "    used = {name for name, _, _ in plan} | extra_used\n",
        (
            "tests/test_torch_spellings.py::test_load_state_dict_refuses_a_key_holding_none_as_pytorch_does",
        ),
        "set_state_dict lists a key holding None as missing and as unexpected",
    ),
    Mutant(
        "place-equality-parses-as-a-use",
        "minitorch_amp/backend/place.py",
        "        return isinstance(other, str) and other == str(self)\n",
        "        from .device import parse_device\n\n"
        "        return isinstance(other, str) and parse_device(other) == self\n",
        (
            "tests/test_device_dtype_errors.py::test_a_place_compared_with_any_string_answers_and_hashes_as_its_name",
        ),
        "place == 'gpu' on a machine without CuPy raises DeviceError instead of answering False",
    ),
    Mutant(
        "sharding-ignores-the-optimizers-order",
        "minitorch_amp/distributed/sharding/group_sharded.py",
        "    _check_same_order(model, optimizer, comm)\n",
        "",
        (
            "tests/test_distributed_checks.py::test_ranks_whose_optimizers_list_the_parameters_in_other_orders_fail_at_wrap_time",
        ),
        "ranks listing the parameters in other orders shard and sum gradients into the wrong ones",
    ),
    Mutant(
        "data-parallel-syncs-one-backward-per-forward",
        "minitorch_amp/distributed/parallel.py",
        "            self._sync_after_backward = engine.graph_kept\n",
        "            self._sync_after_backward = False\n",
        (
            "tests/test_distributed_checks.py::test_a_second_backward_of_one_forward_is_averaged_too",
        ),
        "a second backward of one forward adds each rank's own gradient: the ranks part",
    ),
    Mutant(
        "mpi-all-gather-makes-0d-1d",
        "minitorch_amp/backend/comm_mpi.py",
        "        host = np.ascontiguousarray(_device.asnumpy(array)).reshape(array.shape)\n",
        "        host = np.ascontiguousarray(_device.asnumpy(array))\n",
        ("tests/test_distributed_collectives.py::test_all_gather_lists_every_rank_in_rank_order",),
        "all_gather of a 0-d tensor gives [1]-shaped tensors under MPI",
    ),
    Mutant(
        "a-started-world-ignores-new-arguments",
        "minitorch_amp/backend/comm.py",
        "        _same_world(_world, backend, timeout)\n",
        "",
        (
            "tests/test_distributed_comm.py::test_a_started_world_refuses_arguments_it_does_not_have",
        ),
        "init_parallel_env(timeout=5) after the start is ignored, silently",
    ),
]
