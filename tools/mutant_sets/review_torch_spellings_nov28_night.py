"""Defects a review found (2026-11-28, night: the PyTorch and apex spellings), each planted
back: the tests written with the fixes must see them."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

T = "tests/test_torch_spellings_review_nov28_night.py::"

MUTANTS: list[Mutant] = [
    Mutant(
        "overflow-lifts-a-scale-below-the-floor-host",
        "minitorch_amp/backend/scale_update.py",
        "            s = np.minimum(s, np.maximum(s * f32(decr_ratio), f32(min_scale)))\n",
        "            s = np.maximum(s * f32(decr_ratio), f32(min_scale))\n",
        (
            T + "test_an_overflow_holds_a_scale_set_below_the_floor",
            T + "test_a_pytorch_checkpoint_below_the_floor_is_not_raised_by_an_overflow",
        ),
        "GradScaler(init_scale=0.25) or a PyTorch checkpoint at 2**-7: one overflow lifts it to 1.0",
    ),
    Mutant(
        "overflow-lifts-a-scale-below-the-floor-twin",
        "minitorch_amp/backend/scale_update.py",
        "    shrunk = xp.minimum(scale, xp.maximum(scale * f32(decr_ratio), f32(min_loss_scaling)))\n",
        "    shrunk = xp.maximum(scale * f32(decr_ratio), f32(min_loss_scaling))\n",
        (T + "test_the_branch_free_twin_holds_a_scale_below_the_floor_and_still_backs_off_above",),
        "the CuPy-array twin lifts a scale under the floor to the floor on overflow",
    ),
    Mutant(
        "overflow-lifts-a-scale-below-the-floor-kernel",
        "cuda/amp.cu",
        "    const float shrunk = nan_min(nan_max(multiply(s, decr_ratio), min_loss_scaling), s);\n",
        "    const float shrunk = nan_max(multiply(s, decr_ratio), min_loss_scaling);\n",
        (T + "test_the_kernel_holds_a_scale_below_the_floor_as_its_twin_does",),
        "the GPU's update kernel lifts a scale under the floor to the floor on overflow",
    ),
    Mutant(
        "float64-params-step-with-a-float32-rate",
        "minitorch_amp/optimizer/bucket.py",
        "        self.lr_type = self.wide.type  # the rate as _update sees it: float64 for float64 params\n",
        "        self.lr_type = np.float32\n",
        (
            T + "test_a_float64_parameter_steps_with_the_learning_rate_in_float64[1]",
            T + "test_a_float64_parameter_steps_with_the_learning_rate_in_float64[131072]",
            T + "test_float64_momentum_and_adamw_match_float64_maths",
        ),
        "SGD lr=0.1 on a float64 parameter steps by float32(0.1): -1.0000000149011612",
    ),
    Mutant(
        "apex-fixed-scale-counts-nothing",
        "minitorch_amp/amp/apex.py",
        "        _amp_state.static_unskipped[loss_id] += 1\n",
        "        pass\n",
        (T + "test_a_fixed_apex_scale_counts_every_step_as_unskipped",),
        "amp.state_dict() of a fixed loss_scale says unskipped 0 after any number of steps",
    ),
    Mutant(
        "apex-fixed-scale-count-limited-to-the-window",
        "minitorch_amp/amp/apex.py",
        '        limit = scaler.get_incr_every_n_steps() if dynamic else float("inf")\n',
        "        limit = scaler.get_incr_every_n_steps()\n",
        (
            T
            + "test_an_apex_checkpoint_of_a_long_fixed_scale_run_loads_and_a_dynamic_one_is_checked",
        ),
        "apex's checkpoint of a fixed-scale run past 2000 steps is refused",
    ),
    Mutant(
        "zero-fill-moves-no-version",
        "minitorch_amp/autograd/tensor_torch.py",
        "    data.fill(0)\n    self._version += 1\n",
        "    data.fill(0)\n",
        (T + "test_zero_fills_in_place_and_is_a_write_a_saved_graph_sees",),
        "x.zero_() on a tensor a graph saved: backward silently uses the zeros",
    ),
    Mutant(
        "torch-transpose-form-unexplained",
        "minitorch_amp/autograd/tensor_torch.py",
        "    if more or isinstance(perm, int):\n",
        "    if False:\n",
        (T + "test_pytorchs_transpose_and_sum_forms_name_paddles",),
        "x.transpose(0, 1) fails with 'takes 2 positional arguments', naming no replacement",
    ),
    Mutant(
        "scaler-value-named-by-paddles-name",
        "minitorch_amp/amp/scaler_args.py",
        "            check_attr(key, out[key], shown=name)  # (the constructor checks the rest)\n",
        "            pass\n",
        (T + "test_a_bad_scaler_setting_is_refused_under_the_name_it_was_given[growth_interval=]",),
        "GradScaler(growth_interval=2.0) says 'incr_every_n_steps must be ...'",
    ),
    Mutant(
        "scaler-step-takes-a-closure-silently",
        "minitorch_amp/amp/grad_scaler.py",
        "        if args or kwargs:\n            raise TypeError(_NO_CLOSURE)\n",
        "        if False:\n            raise TypeError(_NO_CLOSURE)\n",
        (T + "test_scaler_update_with_a_scale_and_step_with_a_closure_change_nothing",),
        "scaler.step(opt, closure) ignores the closure",
    ),
    Mutant(
        "optimizer-module-names-no-replacement",
        "minitorch_amp/optimizer/__init__.py",
        '    raise missing("minitorch_amp.optimizer", name, names=globals())\n',
        "    raise AttributeError(name)\n",
        (T + "test_missing_pytorch_names_say_what_to_use",),
        "mt.optimizer.lr_scheduler is a bare AttributeError",
    ),
    Mutant(
        "train-false-trains",
        "minitorch_amp/nn/layer/layers.py",
        "        if mode is not None:\n",
        "        if False:\n",
        (T + "test_train_false_says_eval_and_leaves_the_mode",),
        "model.train(False) puts the model in training mode",
    ),
    Mutant(
        "zero-fill-is-not-recorded",
        "minitorch_amp/autograd/tensor_torch.py",
        "    if self._node is not None or not self.stop_gradient:\n",
        "    if False:\n",
        (T + "test_zero_in_a_recorded_graph_sends_no_gradient_back_and_refuses_a_leaf",),
        "y.zero_() in a graph is a raw write: the gradient still flows through the old y",
    ),
]
