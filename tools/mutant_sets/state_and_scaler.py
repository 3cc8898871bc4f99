"""Issue 25: narrowing state-dict loads, the per-thread sync debug mode, scaler state dicts in both
forms, wrapping a graph twice, batch norm re-estimation."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant, lines

STATE_DICT = "minitorch_amp/nn/layer/state_dict.py"
SYNC = "minitorch_amp/backend/sync.py"
SCALER_SETTINGS = "minitorch_amp/amp/scaler_settings.py"
SCALER_RULES = "minitorch_amp/amp/scaler_rules.py"
SYNC_THREADS = "tests/test_sync_debug_threads.py"
SCALER_DICTS = "tests/test_scaler_state_dicts.py"
BN_SKIPS = "tests/test_batch_norm_skipped_steps.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "narrowing-load-overflow-unchecked",
        STATE_DICT,
        "        _check_in_range(name, moved, staged, target)\n",
        "",
        ("tests/test_narrowing_loads.py",),
        "set_state_dict writes inf for a finite value beyond a narrower float (1e5 into float16)",
    ),
    Mutant(
        "narrowing-load-refuses-source-inf",
        STATE_DICT,
        "    overflowed = xp.isinf(staged) & xp.isfinite(source)\n",
        "    overflowed = xp.isinf(staged)\n",
        ("tests/test_narrowing_loads.py::test_an_inf_or_nan_already_in_the_source_loads_as_it_is",),
        "a narrowing load refuses an inf the checkpoint already held",
    ),
    Mutant(
        "sync-mode-global-again",
        SYNC,
        '_mode = contextvars.ContextVar("minitorch_amp_sync_debug_mode", default=0)\n',
        lines(
            "class _ProcessWide:  # one mode for every thread, as PyTorch's",
            "    value = 0",
            "",
            "    def get(self):",
            "        return _ProcessWide.value",
            "",
            "    def set(self, mode):",
            "        _ProcessWide.value = mode",
            "",
            "",
            "_mode = _ProcessWide()",
        ),
        (
            f"{SYNC_THREADS}::test_overlapping_blocks_in_two_threads_each_restore_their_own_mode",
            f"{SYNC_THREADS}::test_a_thread_in_error_mode_does_not_fail_another_threads_reads",
        ),
        "the sync debug mode is one process-wide global: one thread's 'error' fails all reads",
    ),
    Mutant(
        "sync-mode-accepts-floats",
        SYNC,
        "    elif isinstance(debug_mode, numbers.Integral) and not isinstance(debug_mode, bool):\n",
        "    elif not isinstance(debug_mode, bool):\n",
        (
            f"{SYNC_THREADS}::"
            "test_a_mode_that_is_not_a_name_or_the_ints_0_1_2_is_refused_and_the_mode_kept",
        ),
        "set_sync_debug_mode(2.0) (and numpy bools) accepted as a mode",
    ),
    Mutant(
        "scaler-load-scale-coerced",
        SCALER_SETTINGS,
        '            "scale": self._loaded_scale,\n',
        '            "scale": lambda v: self._checked_scale(float(np.asarray(v, "float64").flat[0])),\n',
        (
            f"{SCALER_DICTS}::"
            "test_a_scale_that_is_not_a_number_is_refused_as_the_constructor_refuses_it",
        ),
        "GradScaler.load_state_dict turns scale='1024' or True into a number (as before issue 25)",
    ),
    Mutant(
        "scaler-load-flag-coerced",
        SCALER_SETTINGS,
        '            "use_dynamic_loss_scaling": check_flag,\n',
        '            "use_dynamic_loss_scaling": bool,\n',
        (f"{SCALER_DICTS}::test_every_field_is_checked_and_a_bad_one_loads_nothing",),
        "GradScaler.load_state_dict takes use_dynamic_loss_scaling=1 or 'True' as a flag",
    ),
    Mutant(
        "scaler-load-writes-while-checking",
        SCALER_SETTINGS,
        "                new[key] = rule(values[key])\n",
        lines(
            "                new[key] = rule(values[key])",
            '                if key == "scale":  # written before the other values are checked',
            "                    self._scale._data[...] = new[key]",
        ),
        (f"{SCALER_DICTS}::test_every_field_is_checked_and_a_bad_one_loads_nothing",),
        "GradScaler.load_state_dict writes the scale before checking the rest (not all or none)",
    ),
    Mutant(
        "scaler-torch-keys-not-read",
        SCALER_RULES,
        "    torch_form = any(key in state_dict for key in TORCH_KEYS[1:])\n",
        "    torch_form = False\n",
        (f"{SCALER_DICTS}::test_paddles_scaler_loads_a_pytorch_state_dict",),
        "a PyTorch scaler state dict (growth_factor, _growth_tracker, ...) cannot be loaded",
    ),
    Mutant(
        "scaler-torch-spelling-saves-paddle-keys",
        "minitorch_amp/amp/torch_grad_scaler.py",
        '    _state_dict_form = "torch"\n',
        '    _state_dict_form = "paddle"\n',
        (f"{SCALER_DICTS}::test_the_pytorch_spelled_scaler_saves_pytorchs_keys",),
        "cuda.amp.GradScaler (PyTorch's spelling) saves Paddle's keys",
    ),
    Mutant(
        "wrap-cuda-graph-twice-nests",
        "minitorch_amp/device/cuda/graphs.py",
        "    return function._function\n",
        "    return function\n",
        (
            "tests/test_graphs.py::"
            "test_wrapping_twice_replaces_the_first_wrapping_with_a_warning_never_nests",
        ),
        "wrap_cuda_graph of a wrapped layer or function nests the wrappers",
    ),
    Mutant(
        "reestimate-bn-keeps-poisoned-statistics",
        "minitorch_amp/nn/layer/norm_statistics.py",
        "                norm._mean._data[...], norm._variance._data[...] = 0.0, 1.0\n",
        "",
        (f"{BN_SKIPS}::test_reestimating_recomputes_the_statistics_as_the_mean_over_the_batches",),
        "reestimate_batch_norm does not reset the statistics: 0 * inf keeps them NaN",
    ),
    Mutant(
        "reestimate-bn-failure-not-rolled-back",
        "minitorch_amp/nn/layer/norm_statistics.py",
        "            norm._mean._data[...] = mean\n",
        "            pass\n",
        (f"{BN_SKIPS}::test_a_failing_batch_leaves_the_statistics_as_they_were",),
        "a batch that fails half-way through reestimate_batch_norm leaves the statistics reset",
    ),
]
