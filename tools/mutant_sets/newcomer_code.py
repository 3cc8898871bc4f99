"""Issue 27: Python 3.10's notes, the floor warning at its documented update, --full with explicit
flags."""

from __future__ import annotations

from mutant_sets import Mutant

NOTES_TESTS = "tests/test_python_versions.py"
FLOOR_TESTS = "tests/test_grad_scaler_floor.py"
FLAGS_TESTS = "tests/test_simple_net_flags.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "py310-note-only-in-notes",
        "minitorch_amp/backend/error_notes.py",
        'exc.args = (f"{exc.args[0]}\\n{note}",)',
        "pass",
        (
            f"{NOTES_TESTS}::test_without_the_builtin_a_note_is_kept_in_notes_and_shown_in_the_message",
            f"{NOTES_TESTS}::test_on_python_3_10_a_failed_layer_to_still_says_nothing_was_converted",
        ),
        "on Python 3.10 the all-or-nothing note goes only to __notes__, which 3.10 never prints",
    ),
    Mutant(
        "py310-builtin-add-note-assumed",
        "minitorch_amp/backend/error_notes.py",
        "    if HAS_BUILTIN_ADD_NOTE:\n",
        "    if True:\n",
        (f"{NOTES_TESTS}::test_a_note_shows_in_the_printed_traceback",),
        "add_note calls BaseException.add_note unconditionally (AttributeError on 3.10)",
    ),
    Mutant(
        "floor-warning-checked-every-100-on-the-cpu",
        "minitorch_amp/amp/grad_scaler.py",
        "(on_host or self._n_updates % _FLOOR_CHECK_EVERY == 0)",
        "(self._n_updates % _FLOOR_CHECK_EVERY == 0)",
        (
            f"{FLOOR_TESTS}::"
            "test_from_the_default_scale_a_nan_loss_warns_100_updates_after_reaching_the_floor",
        ),
        "on the CPU the floor warning waits for the next multiple of 100 updates (update 200)",
    ),
    Mutant(
        "simple-net-full-overrides-explicit-sizes",
        "examples/simple_net.py",
        "        if getattr(args, name) is None:\n",
        "        if args.full or getattr(args, name) is None:\n",
        (f"{FLAGS_TESTS}::test_an_explicit_size_flag_wins_over_the_presets",),
        "--full silently replaces --batches/--epochs/--input-size/--batch-size given with it",
    ),
    Mutant(
        "benchmark-full-overrides-explicit-width",
        "benchmarks/simple_net.py",
        "    if args.width is None:\n",
        "    if args.width is None or args.full:\n",
        (f"{FLAGS_TESTS}::test_the_benchmarks_full_keeps_an_explicit_width_and_batch",),
        "benchmarks/simple_net.py --full ignores an explicit --width",
    ),
]
