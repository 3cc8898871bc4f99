"""Defects a review of the learning-rate schedulers found (2026-11-28, night), each planted
back: the tests written with the fixes must see them."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

LR = "minitorch_amp/optimizer/lr/"
T = "tests/test_lr.py::"
P = "tests/test_lr_schedulers_paddle.py::"
SEQ = P + "test_each_sequence_over_three_periods_equals_paddles_formula"

MUTANTS: list[Mutant] = [
    Mutant(
        "lr-negative-rate-accepted",
        LR + "scheduler.py",
        "    if rate < 0:\n",
        "    if False:\n",
        (T + "test_a_negative_learning_rate_is_refused_as_paddle_refuses_it",),
        "a scheduler built with a negative rate drives the optimizer up the loss",
    ),
    Mutant(
        "lr-state-keys-hook-ignored",
        LR + "scheduler.py",
        "        self.state_keys()\n        extra",
        "        self.keys = self._state_keys\n        extra",
        (T + "test_a_subclass_state_keys_hook_saves_and_restores_its_extra_state",),
        "a user's state_keys() is never called: its extra state is lost in a checkpoint",
    ),
    Mutant(
        "lr-extra-state-not-loaded",
        LR + "scheduler.py",
        "                setattr(self, key, state_dict[key])\n",
        "                pass\n",
        (T + "test_extra_entries_of_state_keys_are_loaded_back",),
        "set_state_dict requires the extra keys, then drops them",
    ),
    Mutant(
        "lr-cosine-closed-form-on-step",
        LR + "decay.py",
        "        if epoch == 0:\n            return self.base_lr\n",
        "        if True:\n            return self._get_closed_form_lr()\n",
        (T + "test_cosine_resumes_from_last_lr_as_paddle_does_bit_for_bit",),
        "CosineAnnealingDecay ignores last_lr: a resumed or reloaded run leaves Paddle's curve",
    ),
    Mutant(
        "lr-numpy-int-refused",
        LR + "scheduler.py",
        "    return isinstance(value, numbers.Integral) and not isinstance(value, bool)\n",
        "    return isinstance(value, int) and not isinstance(value, bool)\n",
        (T + "test_numpy_integers_are_accepted_wherever_an_int_is",),
        "np.int64 epochs, milestones and last_epoch are refused",
    ),
    Mutant(
        "lr-one-cycle-message-blames-the-rise",
        LR + "one_cycle.py",
        "                    if start == 0\n",
        "                    if True\n",
        (T + "test_one_cycle_with_phase_pct_one_names_the_empty_fall",),
        "phase_pct=1.0 is refused with advice about phase_pct * total_steps == 1",
    ),
    Mutant(
        "lr-noam-warmup-exponent",
        LR + "formulas.py",
        "        b = self.warmup_steps**-1.5 * self.last_epoch\n",
        "        b = self.warmup_steps**-0.5 * self.last_epoch\n",
        (SEQ + "[noam]",),
        "NoamDecay warms up with the wrong power of warmup_steps",
    ),
    Mutant(
        "lr-piecewise-off-by-one",
        LR + "formulas.py",
        "            if self.last_epoch < self.boundaries[i]:\n",
        "            if self.last_epoch <= self.boundaries[i]:\n",
        (SEQ + "[piecewise]",),
        "PiecewiseDecay switches one epoch late",
    ),
    Mutant(
        "lr-natural-exp-sign",
        LR + "formulas.py",
        "        return self.base_lr * math.exp(-1 * self.gamma * self.last_epoch)\n",
        "        return self.base_lr * math.exp(-1 * self.gamma * (self.last_epoch + 1))\n",
        (SEQ + "[natural_exp]",),
        "NaturalExpDecay is one epoch ahead",
    ),
    Mutant(
        "lr-inverse-time-no-one",
        LR + "formulas.py",
        "        return self.base_lr / (1 + self.gamma * self.last_epoch)\n",
        "        return self.base_lr / (1 + self.gamma * self.last_epoch**2)\n",
        (SEQ + "[inverse_time]",),
        "InverseTimeDecay divides by a square",
    ),
    Mutant(
        "lr-polynomial-cycle-epoch-zero",
        LR + "formulas.py",
        "            tmp_decay_steps = self.decay_steps * div_res\n",
        "            tmp_decay_steps = self.decay_steps * (div_res + 1)\n",
        (SEQ + "[polynomial_cycle]",),
        "PolynomialDecay(cycle=True) decays over one span too many",
    ),
    Mutant(
        "lr-multiplicative-from-base",
        LR + "formulas.py",
        "            cur_lr = cur_lr * self._factor(epoch)\n",
        "            cur_lr = self.base_lr * self._factor(epoch)\n",
        (SEQ + "[multiplicative]",),
        "MultiplicativeDecay applies only the last factor",
    ),
    Mutant(
        "lr-linear-lr-past-the-end",
        LR + "formulas.py",
        "        if self.last_epoch > self.total_steps:\n",
        "        if self.last_epoch > self.total_steps + 3:\n",
        (SEQ + "[linear_lr]",),
        "LinearLR keeps rising past total_steps",
    ),
    Mutant(
        "lr-cyclic-triangular2-scale",
        LR + "cyclic.py",
        "        return 1 / (2.0 ** (x - 1))\n",
        "        return 1 / (2.0**x)\n",
        (SEQ + "[triangular2]",),
        "CyclicLR triangular2 halves the first cycle already",
    ),
    Mutant(
        "lr-warm-restarts-period-not-growing",
        LR + "cyclic.py",
        "                t_cur, t_i = t_cur - t_i, t_i * self.T_mult\n",
        "                t_cur, t_i = t_cur - t_i, t_i\n",
        (SEQ + "[warm_restarts_mult]",),
        "CosineAnnealingWarmRestarts ignores T_mult",
    ),
    Mutant(
        "lr-plateau-ignores-patience",
        LR + "plateau.py",
        "        if self.num_bad_epochs > self.patience:\n",
        "        if self.num_bad_epochs >= self.patience:\n",
        (P + "test_reduce_on_plateau_cuts_after_patience_then_cools_down",),
        "ReduceOnPlateau cuts one bad epoch early",
    ),
    Mutant(
        "lr-plateau-refuses-bfloat16",
        "minitorch_amp/optimizer/lr/plateau.py",
        'array.dtype.kind in "iuf" or is_floating(array.dtype)',
        'array.dtype.kind in "iuf"',
        (P + "test_reduce_on_plateau_takes_a_bfloat16_loss_and_a_paddle_state_with_an_array_best",),
        "ReduceOnPlateau.step(bfloat16 loss) says the loss holds more than one number",
    ),
    Mutant(
        "lr-plateau-state-best-must-be-a-float",
        "minitorch_amp/optimizer/lr/plateau.py",
        "                _metric(best)\n",
        "                float(best) if isinstance(best, numbers.Real) else int('refused')\n",
        (P + "test_reduce_on_plateau_takes_a_bfloat16_loss_and_a_paddle_state_with_an_array_best",),
        "a Paddle state whose best is a NumPy array is refused",
    ),
    Mutant(
        "lr-cyclic-amplitude-from-the-raw-base",
        "minitorch_amp/optimizer/lr/cyclic.py",
        "        self.amplitude = self.max_lr - base\n",
        "        self.amplitude = self.max_lr - base_learning_rate\n",
        (P + "test_cyclic_checks_and_converts_its_base_rate_as_the_others_do",),
        "CyclicLR(np.float32(0.1), ...) gives np.float32 rates",
    ),
    Mutant(
        "lr-state-holds-the-live-tensor",
        "minitorch_amp/optimizer/lr/scheduler.py",
        "        return {key: _snapshot(getattr(self, key)) for key in keys if key in self.__dict__}\n",
        "        return {key: getattr(self, key) for key in keys if key in self.__dict__}\n",
        (P + "test_a_saved_state_is_a_snapshot_of_a_tensor_entry",),
        "a scheduler's saved state follows later writes into its Tensor attribute",
    ),
    Mutant(
        "lr-multiplicative-keeps-its-cache-on-reload",
        "minitorch_amp/optimizer/lr/formulas.py",
        "        self._product = (0, self.base_lr)  # the next step recomputes the whole product\n",
        "",
        (P + "test_multiplicative_decay_recomputes_its_product_after_a_reload",),
        "a reloaded MultiplicativeDecay reuses the product it had cached",
    ),
]
