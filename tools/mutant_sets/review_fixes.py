"""The defects a review of the kept launches, the optimizer step and the graphed step found
(issues 23 and 24's code), each planted back: the tests written with the fixes must see them."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant, lines

GEMM_KEPT = "tests/test_gemm_kept.py"
BIAS_KEPT = "tests/test_bias_grad_kept.py"
MASTERS = "tests/test_reliability_masters.py"
OPTIMIZER = "tests/test_optimizer.py"
ALL_OR_NOTHING = "tests/test_reliability_optimizer.py"
GRAPHED = "tests/test_graphed_step.py"
GRAPHS = "tests/test_graphs.py"
GRAPHED_PY = "minitorch_amp/device/cuda/graphed.py"
FP8_AUTOCAST = "tests/test_fp8_autocast.py"
SCALER = "tests/test_grad_scaler.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "kept-gemm-alpha-sign-ignored",
        "minitorch_amp/backend/gemm_gpu.py",
        "        return x, math.copysign(1.0, x)",
        "        return x, 1.0",
        (GEMM_KEPT,),
        "alpha=-0.0 replays a kept alpha=0.0 (equal, same hash): its zero products lose the sign",
    ),
    Mutant(
        "kept-bias-grad-float-as-passed",
        "minitorch_amp/backend/bias_grad.py",
        "    return convert_dtype(dtype) if dtype is float else dtype",
        "    return dtype",
        (BIAS_KEPT,),
        "bias_dtype=float keyed as passed: after set_default_dtype the old default's kernel runs",
    ),
    Mutant(
        "loaded-masters-stop-following",
        "minitorch_amp/optimizer/state_dict.py",
        lines(
            "        state.master_seen = {",
            "            name: (param._version, weakref.ref(param._data)) for name, (_, param) in masters.items()",
            "        }",
        ),
        lines("        state.master_seen = {}"),
        (MASTERS,),
        "after the optimizer's state is loaded, a set_value is undone by the next step",
    ),
    Mutant(
        "minimize-takes-a-parameter-twice",
        "minitorch_amp/optimizer/optimizer.py",
        "        if len({id(p) for p in params}) != len(params):  # (each would be updated twice)",
        "        if False:",
        (OPTIMIZER,),
        "minimize(parameters=[w, w]) updates w once or twice, by the bucket's size",
    ),
    Mutant(
        "regularizer-runs-during-the-writes",
        "minitorch_amp/optimizer/state.py",
        "        regularized = [bucket.regularized(bucket_grads) for bucket_grads, bucket in taken]",
        "        regularized = [None] * len(taken)",
        (ALL_OR_NOTHING,),
        "a regularizer failing on a later bucket leaves the earlier ones updated",
    ),
    Mutant(
        "graphed-counts-a-raising-warm-up",
        GRAPHED_PY,
        lines(
            "            outputs = self._warm_up(key, variant, leaves, rehearse)",
            "            variant.warm_ups += 1  # (after the call: one that raised has not warmed up)",
        ),
        lines(
            "            variant.warm_ups += 1",
            "            outputs = self._warm_up(key, variant, leaves, rehearse)",
        ),
        (GRAPHED,),
        "a warm-up cut short counts: the capture comes one complete warm-up early",
    ),
    Mutant(
        "graphed-numbers-keyed-by-value",
        GRAPHED_PY,
        "        return (type(value), float(value).hex())",
        "        return (type(value), value)",
        (GRAPHED,),
        "-0.0 replays the 0.0 graph, and a NaN argument is captured anew at every call",
    ),
    Mutant(
        "graphed-captures-inputs-off-the-gpu",
        GRAPHED_PY,
        "            if elsewhere is not None:  # a graph records the current GPU's work, nothing else",
        "            if False:",
        (GRAPHED,),
        "CPU inputs are 'captured' on a GPU: every replay gives the capture's results",
    ),
    Mutant(
        "wrap-cuda-graph-checks-top-level-tensors-only",
        "minitorch_amp/device/cuda/graphs.py",
        "        elif len(inputs) != len(self._inputs) or not all(map(same_argument, inputs, self._inputs)):",
        "        elif any(hasattr(a, '_data') and a is not b for a, b in zip(inputs, self._inputs)):",
        (GRAPHS,),
        "only the tensors are compared: another number is replayed for the captured one",
    ),
    Mutant(
        "fp8-linear-shapes-checked-after-the-cast",
        "minitorch_amp/amp/fp8/autocast.py",
        "        check_linear(x.shape, y.shape, None if bias is None else bias.shape)  # (as above)\n",
        "",
        (FP8_AUTOCAST,),
        "an input that does not fit rolls the weight's history and moves its scale, then raises",
    ),
    Mutant(
        "fp8-conv-shapes-checked-after-the-cast",
        "minitorch_amp/amp/fp8/autocast.py",
        "        check_conv(x.shape, y.shape, **conv)  # before the scaling state records anything\n",
        "",
        (FP8_AUTOCAST,),
        "a convolution's input that does not fit changes the weight's scaling state first",
    ),
    Mutant(
        "scaler-counter-left-past-a-lowered-count",
        "minitorch_amp/amp/scaler_settings.py",
        "            _device.get_array_module(counter).minimum(counter, limit - 1, out=counter)",
        "            pass",
        (SCALER,),
        "a step count lowered below its counter: the scale stops moving, the state dict won't load",
    ),
]
