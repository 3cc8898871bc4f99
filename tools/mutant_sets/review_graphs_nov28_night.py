"""Defects a review found (2026-11-28, night: graphs), each planted back: the tests written
with the fixes must see them."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant, lines

GRAPHS_PY = "minitorch_amp/device/cuda/graphs.py"
GRAPHED_PY = "minitorch_amp/device/cuda/graphed.py"
TESTS = "tests/test_graphs_review_nov28_night.py::"

MUTANTS: list[Mutant] = [
    Mutant(
        "graph-second-begin-loses-the-capture",
        GRAPHS_PY,
        lines(
            "        if self._capturing():",
            "            raise GraphError(",
            '                "this graph\'s capture is in progress; capture_end() it before beginning again"',
            "            )",
            "        if _graphs.active() is not None:",
            '            raise GraphError("another CUDA graph\'s capture is in progress; end it first")',
        ),
        "",
        (
            TESTS + "test_a_refused_second_capture_begin_leaves_the_first_capture_to_be_ended",
            TESTS
            + "test_the_graph_context_on_a_graph_being_captured_is_refused_and_the_capture_goes_on",
        ),
        "a second capture_begin() replaces the capture in progress: the process stays capturing",
    ),
    Mutant(
        "graph-reset-forgets-the-capture",
        GRAPHS_PY,
        lines(
            "        if self._capturing():",
            "            raise GraphError(",
            '                "reset() during this graph\'s capture: capture_end() it first (a reset "',
        ),
        lines(
            "        if False:",
            "            raise GraphError(",
            '                "reset() during this graph\'s capture: capture_end() it first (a reset "',
        ),
        (TESTS + "test_reset_during_a_capture_is_refused_and_the_capture_can_still_end",),
        "reset() during a capture forgets it without ending it: every later capture is refused",
    ),
    Mutant(
        "graphed-forward-alone-says-nothing",
        GRAPHED_PY,
        "            if last and forward_only and pending_backward(outputs):",
        "            if False:",
        (
            TESTS
            + "test_a_graphed_forward_whose_outputs_need_a_backward_says_to_graph_the_whole_step",
        ),
        "a graphed forward whose outputs need a backward outside fails at every replay, unexplained",
    ),
    Mutant(
        "graphed-forward-alone-warns-whole-steps",
        GRAPHED_PY,
        "            if last and forward_only and pending_backward(outputs):",
        "            if last and pending_backward(outputs):",
        (
            TESTS
            + "test_a_whole_step_returning_probabilities_with_its_loss_is_not_told_to_graph_it",
            TESTS + "test_simple_net_graphed_with_accumulation_is_not_told_to_graph_the_whole_step",
        ),
        "a whole training step that returns a sum of losses or softmax(logits) is told to graph "
        "the whole step (it ran a backward)",
    ),
    Mutant(
        "engine-counts-no-backward-pass",
        "minitorch_amp/autograd/engine.py",
        "    backward_passes += 1",
        "    pass",
        (
            TESTS
            + "test_a_whole_step_returning_probabilities_with_its_loss_is_not_told_to_graph_it",
        ),
        "graphed cannot tell a whole step from a forward: every step returning a recorded "
        "tensor is told to graph the whole step",
    ),
    Mutant(
        "wrap-cuda-graph-counts-a-raising-warm-up",
        GRAPHS_PY,
        lines(
            "            outputs = self._function(*args, **kwargs)",
            "            self._warmup_left -= 1  # (after the call: one that raised has not warmed up)",
        ),
        lines(
            "            self._warmup_left -= 1",
            "            outputs = self._function(*args, **kwargs)",
        ),
        (TESTS + "test_a_wrapped_function_whose_warm_up_raised_warms_up_again_before_capturing",),
        "after one failed warm-up, wrap_cuda_graph captures a step that never ran eagerly",
    ),
    Mutant(
        "synchronize-refuses-an-int-gpu",
        "minitorch_amp/device/__init__.py",
        "    place = _memory_place(device)  # (checked before the sync debug mode hears of a read)",
        "    place = _device.current_place() if device is None else _device.parse_device(device)",
        (TESTS + "test_synchronize_takes_an_int_gpu_as_paddle_and_pytorch_do",),
        "device.synchronize(0) and device.cuda.synchronize(0) are refused as an unknown device",
    ),
    Mutant(
        "graphed-copies-tensors-that-require-grad",
        GRAPHED_PY,
        "        self.statics = [t if used_as_it_is(t) else zeros_like(t) for t in leaves]",
        "        self.statics = [t if t.persistable else zeros_like(t) for t in leaves]",
        (
            TESTS + "test_the_same_tensor_passed_twice_at_every_call_gets_both_uses_gradients",
            TESTS + "test_a_weight_made_by_hand_is_used_as_it_is",
        ),
        "a Tensor that requires grad and is no Parameter is copied: its gradient never reaches "
        "it, nor what it was computed from",
    ),
    Mutant(
        "graphed-new-grad-input-makes-a-variant-per-call",
        GRAPHED_PY,
        "        if unknown and self._grad_input_is_new(key, args, kwargs, leaves):",
        "        if False:",
        (
            TESTS + "test_new_inputs_that_require_grad_run_eagerly_after_one_warning_that_says_why",
            TESTS + "test_a_new_input_that_requires_grad_is_not_kept_by_the_wrapper",
        ),
        "an input that requires grad and is new at each call makes a variant per call: the "
        "cache churns, holds old batches and blames the signatures",
    ),
    Mutant(
        "graphed-new-grad-input-keeps-the-first-variant",
        GRAPHED_PY,
        "        if variant is not None and variant.graph is None:  # (it holds the earlier tensor)",
        "        if False:",
        (
            TESTS + "test_new_inputs_that_require_grad_run_eagerly_after_one_warning_that_says_why",
            TESTS + "test_a_new_input_that_requires_grad_is_not_kept_by_the_wrapper",
        ),
        "the first call's variant stays, holding the first batch and a cache slot",
    ),
    Mutant(
        "graphed-new-grad-input-drops-a-captured-weights-graph",
        GRAPHED_PY,
        "        if variant is not None and variant.graph is None:  # (it holds the earlier tensor)",
        "        if variant is not None:",
        ("tests/test_graphed_step.py::test_a_tensor_that_requires_grad_is_used_as_it_is",),
        "a second hand-made weight throws away the graph captured for the first one",
    ),
    Mutant(
        "graphed-warm-up-returns-the-static-copies",
        GRAPHED_PY,
        "            return as_eager(outputs, variant.statics, leaves)",
        "            return outputs",
        (
            TESTS
            + "test_a_warm_up_output_that_is_an_argument_is_the_callers_tensor_and_keeps_its_values",
        ),
        "a warm-up output that is (or views) an argument is overwritten by the next call",
    ),
    Mutant(
        "graphed-keyword-order-is-a-signature",
        GRAPHED_PY,
        "        if len(kwargs) > 1:  # f(x=a, y=b) is f(y=b, x=a): one signature, one graph",
        "        if False:",
        (TESTS + "test_keyword_arguments_in_another_order_replay_the_same_graph",),
        "keyword arguments in another order capture a second graph with a second pool",
    ),
    Mutant(
        "graphed-rehearsal-swallows-warnings-on-error",
        GRAPHED_PY,
        lines(
            "        heard: list = []",
            "        try:",
            "            with warnings.catch_warnings(record=True) as heard:",
            '                warnings.simplefilter("always", _sync.SyncWarning)',
            '                with _sync.sync_debug_mode("warn"):',
            "                    outputs = self._eager(variant.args, variant.kwargs)",
            "        finally:  # the step's other warnings go on to the caller's filters, also if it raised",
            "            reads = [w for w in heard if issubclass(w.category, _sync.SyncWarning)]",
            "            for w in heard:",
            "                if w not in reads:",
            "                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)",
        ),
        lines(
            "        with warnings.catch_warnings(record=True) as heard:",
            '            warnings.simplefilter("always", _sync.SyncWarning)',
            '            with _sync.sync_debug_mode("warn"):',
            "                outputs = self._eager(variant.args, variant.kwargs)",
            "        reads = [w for w in heard if issubclass(w.category, _sync.SyncWarning)]",
            "        for w in heard:",
            "            if w not in reads:",
            "                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)",
        ),
        (TESTS + "test_the_rehearsal_passes_on_the_steps_warnings_also_when_the_step_raises",),
        "a rehearsal that raises drops the step's warnings, in the call they explain",
    ),
    Mutant(
        "graph-capture-error-mode-sticks",
        GRAPHS_PY,
        "    cuda_graph._begin(cuda_graph._mode if capture_error_mode is None else capture_error_mode)",
        lines(
            "    if capture_error_mode is not None:",
            "        cuda_graph._mode = capture_error_mode",
            "    cuda_graph.capture_begin()",
        ),
        (
            TESTS + "test_a_refused_capture_leaves_the_graphs_mode_as_it_was",
            TESTS + "test_a_capture_error_mode_applies_to_that_capture_only",
        ),
        "graph(g, capture_error_mode=...) changes g's mode for good, also when it is refused",
    ),
    Mutant(
        "graphed-decorator-factory-takes-bad-counts",
        GRAPHS_PY,
        "    check_counts(warmup, cache_size)  # (here too: a decorator factory refuses at once)",
        "",
        (TESTS + "test_graphed_refuses_a_bad_count_before_it_is_applied",),
        "graphed(warmup=0) as a decorator factory is refused only when applied",
    ),
]
