"""Defects a review found (session of 2026-11-28, evening), each planted back: the tests
written with the fixes must see them."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant, lines

REVIEW = "tests/test_optimizer_review_nov28.py::"

MUTANTS: list[Mutant] = [
    Mutant(
        "scheduler-load-checks-keys-only",
        "minitorch_amp/optimizer/lr/scheduler.py",
        '        epoch, rate = state_dict["last_epoch"], state_dict["last_lr"]\n',
        '        return  # only the keys checked\n        epoch, rate = state_dict["last_epoch"], state_dict["last_lr"]\n',
        (REVIEW + "test_a_refused_scheduler_state_leaves_the_scheduler_unchanged",),
        "a scheduler load checks only that the keys exist: last_lr=None raises after last_epoch was written",
    ),
    Mutant(
        "warmup-loads-its-scheduler-unchecked",
        "minitorch_amp/optimizer/lr/scheduler.py",
        '            inner._check_state(state_dict[key], f"{where}[{key!r}]", caller)\n',
        "            pass\n",
        (REVIEW + "test_a_refused_nested_state_leaves_the_warmup_and_its_scheduler_unchanged",),
        "LinearWarmup's nested state is not checked: a bad one raises half-way through the load",
    ),
    Mutant(
        "one-cycle-loads-an-epoch-past-its-end",
        "minitorch_amp/optimizer/lr/one_cycle.py",
        "        if epoch > self.total_steps:\n",
        "        if False:\n",
        (REVIEW + "test_one_cycle_refuses_a_state_past_its_total_steps",),
        "OneCycleLR loads a last_epoch past total_steps (its next step raises)",
    ),
    Mutant(
        "optimizer-loads-its-scheduler-unchecked",
        "minitorch_amp/optimizer/state_dict.py",
        '        scheduler._check_state(state_dict["LR_Scheduler"], "LR_Scheduler", caller)\n',
        "        pass\n",
        (REVIEW + "test_a_refused_scheduler_state_leaves_the_optimizer_unchanged",),
        "set_state_dict writes the accumulators, then the scheduler's load raises on a bad field",
    ),
    Mutant(
        "missing-lr-scheduler-loads-silently",
        "minitorch_amp/optimizer/state_dict.py",
        "    has_sched = isinstance(scheduler, LRScheduler)\n",
        '    has_sched = isinstance(scheduler, LRScheduler) and "LR_Scheduler" in state_dict\n',
        (REVIEW + "test_a_scheduled_optimizer_refuses_a_state_dict_without_lr_scheduler",),
        "a scheduled optimizer loads a state dict without 'LR_Scheduler' and keeps its schedule silently",
    ),
    Mutant(
        "momentum-rescales-before-a-non-l2-regularizer",
        "minitorch_amp/optimizer/bucket.py",
        "            out.append(value * record.grad_scale if record.grad_scale != 1.0 else value)\n",
        "            out.append(value + (record.grad_scale - 1.0) * grad.astype(self.wide))\n",
        (REVIEW + "test_momentum_rescales_the_gradient_after_a_non_l2_regularizer",),
        "regularizer(p, g * rescale_grad): L1Decay's term is not scaled by rescale_grad (Paddle scales it)",
    ),
    Mutant(
        "group-lr-multiplies-the-paramattr-lr",
        "minitorch_amp/optimizer/update_rule.py",
        '            ratio = float(group["learning_rate"])\n',
        '            ratio = float(group["learning_rate"]) * ratio\n',
        (REVIEW + "test_a_param_groups_learning_rate_replaces_the_parameters_own",),
        "a param group's learning_rate multiplies a ParamAttr learning rate instead of replacing it",
    ),
    Mutant(
        "group-keeps-the-paramattr-regularizer",
        "minitorch_amp/optimizer/update_rule.py",
        '            regularizer = group["_regularizer"]\n',
        "            pass\n",
        (REVIEW + "test_a_param_groups_weight_decay_replaces_the_parameters_regularizer",),
        "a ParamAttr regularizer wins over the param group's weight_decay",
    ),
    Mutant(
        "adamw-group-replaces-the-paramattr-regularizer",
        "minitorch_amp/optimizer/adamw.py",
        "    _group_sets_regularizer = False\n",
        "    _group_sets_regularizer = True\n",
        (REVIEW + "test_adamw_keeps_a_parameters_regularizer_inside_a_group",),
        "AdamW's param group drops a ParamAttr regularizer (Paddle's AdamW keeps it)",
    ),
    Mutant(
        "group-ignores-a-later-paramattr-change",
        "minitorch_amp/optimizer/update_rule.py",
        "        if ratio == (1.0 if ratio_then is None else ratio_then):\n",
        "        if True:\n",
        (REVIEW + "test_a_setting_changed_on_the_parameter_after_the_group_took_it_wins",),
        "a learning rate set on a grouped parameter after construction is ignored (Paddle uses it)",
    ),
    Mutant(
        "optimizer-accepts-an-integer-parameter",
        "minitorch_amp/optimizer/optimizer.py",
        "            check_floating(p, type(self).__name__)\n",
        "            pass\n",
        (REVIEW + "test_an_integer_parameter_is_refused_at_construction_naming_it",),
        "an int64 parameter is accepted when the optimizer is made",
    ),
    Mutant(
        "minimize-steps-an-integer-parameter",
        "minitorch_amp/optimizer/update_rule.py",
        "        check_floating(param, type(self).__name__)  # (a minimize(parameters=...) extra)\n",
        "        pass\n",
        (REVIEW + "test_minimize_refuses_an_integer_parameter_before_any_write",),
        "minimize(parameters=[float, int]) updates the float one, then fails on the int one",
    ),
    Mutant(
        "global-norm-clip-ignores-auto-skip-clip",
        "minitorch_amp/nn/clip.py",
        '        if self.__dict__.get("auto_skip_clip"):  # (a clip pickled before it had the flag)\n',
        "        if False:\n",
        (REVIEW + "test_clip_by_global_norm_takes_paddles_auto_skip_clip",),
        "auto_skip_clip=True scales gradients below clip_norm too (by 1.0, new tensors)",
    ),
    Mutant(
        "adamw-negative-decay-is-a-type-error",
        "minitorch_amp/optimizer/adamw.py",
        lines("        if not coeff >= 0:  # (NaN too)", "            raise ValueError("),
        lines("        if not coeff >= 0:  # (NaN too)", "            raise TypeError("),
        (REVIEW + "test_adamw_refuses_a_negative_weight_decay_with_a_value_error",),
        "AdamW(weight_decay=-0.1) raises TypeError, not ValueError",
    ),
    Mutant(
        "step-ignores-a-closure",
        "minitorch_amp/optimizer/optimizer.py",
        "        if closure is not None:\n",
        "        if False:\n",
        (REVIEW + "test_step_with_a_closure_says_to_call_it_first_and_updates_nothing",),
        "step(closure) updates without calling the closure",
    ),
]
