"""The model properties of minitorch_amp.testing (issue 29): a search finds the smallest input
scale that overflows, names the first op and shows float32's; the differential property names
the first layer past its bound. Deterministic: derandomized searches, no example database."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import settings

import minitorch_amp as mt
from minitorch_amp import nn
from minitorch_amp.autograd.dispatch import hooks
from minitorch_amp.testing import (
    AmpDivergenceError,
    AmpNotFiniteError,
    assert_close_to_fp32,
    assert_finite_under_amp,
    bf16,
    check_close_to_fp32,
    check_finite_under_amp,
    fp16,
    log_uniform_tensors,
    scaled_batches,
)

SEARCH = settings(max_examples=200, derandomize=True, database=None, deadline=None)
IN, OUT, BATCH = 4, 3, 2


def ones_linear() -> nn.Linear:
    """``y = x @ ones + 0``: for ``x = s * ones`` every output is ``IN * s``."""
    layer = nn.Linear(IN, OUT)
    layer.weight.set_value(np.ones((IN, OUT), "float32"))
    layer.bias.set_value(np.zeros(OUT, "float32"))
    return layer


THRESHOLD = {"float16": fp16.OVERFLOW_THRESHOLD, "bfloat16": bf16.OVERFLOW_THRESHOLD}
LOSS_SCALE = {"float16": 2.0**15, "bfloat16": 2.0**115}
HIGH = {"float16": 2.0**24, "bfloat16": 2.0**130}


def zero_mean(y):
    """The gradient of ``y.mean()`` with the value 0, so that the scaled loss stays finite
    (in bfloat16, whose range is float32's, ``mean * S`` would overflow first)."""
    return (y - y.detach()).mean()


def smallest_overflowing_scale(dtype: str, backward: bool) -> float:
    """By hand. Forward: the GEMM's sum ``IN * s`` rounds to inf at the threshold. Backward
    with a mean loss times ``S``: ``dL/dy = S / (BATCH * OUT)``, so the weight gradient
    ``sum over the batch of x * dL/dy = s * S / OUT`` reaches it first, at ``OUT * T / S``."""
    t = THRESHOLD[dtype]
    return OUT * t / LOSS_SCALE[dtype] if backward else t / IN


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("level", ["O1", "O2"])
@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_the_search_lands_within_10_percent_of_the_hand_computed_threshold_and_names_the_op(
    dtype, level, backward
):
    batch = mt.ones([BATCH, IN])
    with pytest.raises(AmpNotFiniteError) as info:
        assert_finite_under_amp(
            ones_linear(),
            scaled_batches(batch, low=2.0**-8, high=HIGH[dtype]),
            level=level,
            dtype=dtype,
            backward=backward,
            loss_scale=LOSS_SCALE[dtype] if backward else None,
            loss_fn=zero_mean,
            settings=SEARCH,
        )
    report = info.value.report
    found = float(np.abs(report.example[0]).max())
    threshold = smallest_overflowing_scale(dtype, backward)
    assert threshold / 1.1 <= found <= 1.1 * threshold, (found, threshold)
    assert report.examples_run <= 200
    assert report.op.op == ("linear_grad" if backward else "linear")
    assert report.op.occurrence == 0 and report.fp32.op == report.op.op
    shape = "[4, 3]" if backward else "[2, 3]"  # the weight's gradient; the output
    assert report.op.output.startswith(report.op.dtype + shape)
    assert report.fp32.output.startswith("fp32" + shape)  # the same result of the same op
    assert "inf" in report.op.output
    if dtype == "float16":  # float32 holds what float16 cannot (bfloat16's range is its own)
        assert "inf" not in report.fp32.output
    assert report.level == level and report.dtype == dtype


def test_the_report_shows_the_ops_input_ranges_output_dtype_and_the_fp32_values():
    x = mt.full([BATCH, IN], 20000.0)
    with pytest.raises(AmpNotFiniteError) as info:
        check_finite_under_amp(ones_linear(), x, level="O2")
    op, fp32 = info.value.report.op, info.value.report.fp32
    assert op.inputs == (
        "fp16[2, 4] in [2e+04, 2e+04]",
        "fp16[4, 3] in [1, 1]",
        "fp16[3] in [0, 0]",
    )
    assert op.dtype == "fp16" and op.output == "fp16[2, 3] (no finite value), 6 inf"
    assert fp32.inputs[0] == "fp32[2, 4] in [2e+04, 2e+04]"
    assert fp32.output == "fp32[2, 3] in [8e+04, 8e+04]" and fp32.dtype == "fp32"
    text = str(info.value)
    assert "the first inf/NaN came from\nop 'linear' (application #0, forward)" in text
    assert "the float32 run, same op" in text


def test_the_first_op_that_overflows_is_named_not_a_later_one():
    model = nn.Sequential(ones_linear(), nn.Linear(OUT, OUT))  # both end up inf
    with pytest.raises(AmpNotFiniteError) as info:
        check_finite_under_amp(model, mt.full([BATCH, IN], 20000.0), backward=True)
    assert (info.value.report.op.op, info.value.report.op.occurrence) == ("linear", 0)


def test_a_cast_that_overflows_has_no_float32_counterpart():
    # the linear casts its float32 input to float16 first: 70000 overflows in that cast
    with pytest.raises(AmpNotFiniteError) as info:
        check_finite_under_amp(ones_linear(), mt.full([BATCH, IN], 70000.0), level="O2")
    assert info.value.report.op.op == "cast" and info.value.report.fp32 is None
    assert "no such op (a cast AMP inserted)" in str(info.value)


def test_finite_inputs_pass_and_the_model_is_left_unchanged():
    model = ones_linear()
    weight = model.weight.numpy().copy()
    assert_finite_under_amp(
        model,
        log_uniform_tensors((BATCH, IN), low_exp=-10, high_exp=4),
        level="O2",
        backward=True,
        loss_scale=2.0**10,
        settings=settings(SEARCH, max_examples=20),
    )
    assert model.weight.dtype == mt.float32 and np.array_equal(model.weight.numpy(), weight)
    assert model.weight.grad is None
    assert hooks.observers == () and hooks.grad_observers == ()  # the watchers are gone


def test_a_step_function_can_stand_for_the_model():
    w = mt.ones([IN, OUT])
    with pytest.raises(AmpNotFiniteError) as info:
        check_finite_under_amp(lambda x: mt.matmul(x, w), mt.full([BATCH, IN], 20000.0))
    report = info.value.report
    assert report.op.op == "matmul" and report.fp32.output == "fp32[2, 3] in [8e+04, 8e+04]"


# ---- the differential property -------------------------------------------------------------
class MatmulLinear(nn.Layer):
    """A Linear written as ``matmul + bias``: with ``'linear'`` black-listed, the one layer
    AMP still runs in the 16-bit dtype (``matmul`` is white)."""

    def __init__(self, n: int):
        super().__init__()
        self.inner = nn.Linear(n, n)

    def forward(self, x):
        return mt.matmul(x, self.inner.weight) + self.inner.bias


class MLP(nn.Layer):
    def __init__(self, n: int = 16):
        super().__init__()
        self.fc1, self.fc2, self.fc3, self.fc4 = (
            nn.Linear(n, n),
            nn.Linear(n, n),
            MatmulLinear(n),
            nn.Linear(n, n),
        )
        self.act = nn.ReLU()

    def forward(self, x):
        return self.fc4(self.act(self.fc3(self.act(self.fc2(self.act(self.fc1(x)))))))


INPUTS = log_uniform_tensors((4, 16), low_exp=-3, high_exp=3)
ONLY_FC3 = {"custom_black_list": ["linear"]}  # fc1, fc2, fc4 stay float32


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_differential_property_names_the_first_layer_past_an_unmeetable_bound(dtype):
    with pytest.raises(AmpDivergenceError) as info:
        assert_close_to_fp32(
            MLP(),
            INPUTS,
            dtype=dtype,
            rtol=1e-7,
            settings=settings(SEARCH, max_examples=5),
            **ONLY_FC3,
        )
    report = info.value.report
    assert report.layer == "fc3" and report.error > 1e-7 and report.bound == 1e-7
    assert report.layers_checked[:4] == ("fc1", "act", "fc2", "act#2")
    assert report.layers_checked[-1] == "MLP"  # the model itself finishes last


def test_a_zero_ulp_bound_fails_the_16_bit_layer_and_no_float32_one():
    x = mt.randn([4, 16])
    with pytest.raises(AmpDivergenceError) as info:
        check_close_to_fp32(MLP(), x, ulps=0, **ONLY_FC3)
    assert info.value.report.layer == "fc3"
    check_close_to_fp32(MLP(), x, rtol={"fc3": 1e-2, "fc3.inner": 1e-2}, ulps=None, **ONLY_FC3)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("level", ["O1", "O2"])
def test_an_mlp_under_amp_stays_within_the_default_per_dtype_bound(dtype, level):
    assert_close_to_fp32(
        MLP(), INPUTS, level=level, dtype=dtype, settings=settings(SEARCH, max_examples=10)
    )


def test_an_overflowing_layer_diverges_without_bound():
    with pytest.raises(AmpDivergenceError) as info:
        check_close_to_fp32(ones_linear(), mt.full([BATCH, IN], 20000.0), rtol=1e3)
    assert info.value.report.error == np.inf


# ---- what bad input gets -------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(level="O3"), ValueError, "level must be one of O1, O2, OD"),
        (dict(dtype="float64"), ValueError, "dtype must be 'float16', 'bfloat16' or 'float8'"),
        (dict(inputs=[mt.ones([2, 4])]), TypeError, "must be a Hypothesis strategy.*sampled_from"),
        (dict(settings={"max_examples": 5}), TypeError, "settings must be a hypothesis.settings"),
        (dict(loss_scale=-1.0), ValueError, r"loss_scale must be positive and finite"),
        (dict(loss_scale="2**15"), TypeError, r"loss_scale must be a number such as 2\.0\*\*15"),
    ],
)
def test_bad_arguments_say_what_to_pass(kwargs, error, match):
    args = {"inputs": scaled_batches(mt.ones([2, 4])), **kwargs}
    with pytest.raises(error, match=match):
        assert_finite_under_amp(ones_linear(), **args)


def test_a_strategy_that_draws_something_else_than_tensors_says_what_it_must_draw():
    with pytest.raises(TypeError, match="must draw a Tensor, a NumPy array, or a tuple"):
        check_finite_under_amp(ones_linear(), [[1.0, 2.0, 3.0, 4.0]])


def test_the_differential_property_needs_a_layer():
    with pytest.raises(TypeError, match=r"needs an nn\.Layer"):
        check_close_to_fp32(lambda x: x, mt.ones([2]))


def test_observers_see_what_each_op_read_and_nothing_is_kept_after():
    seen = []

    def observe(op, out):
        seen.append((op.name, tuple(getattr(a, "shape", a) for a in hooks.inputs)))

    def observe_grads(op, grads):
        seen.append((op.name + "_grad", tuple(a.shape for a in hooks.inputs)))

    x = mt.ones([2, 3])
    x.stop_gradient = False
    hooks.observers, hooks.grad_observers = (observe,), (observe_grads,)
    try:
        loss = (x * 2.0).sum()
        assert hooks.inputs == ()  # the forward's arrays are not kept after its observers
        loss.backward()
    finally:
        hooks.observers = hooks.grad_observers = ()
    assert seen == [
        ("multiply", ((2, 3), 2.0)),
        ("sum", ((2, 3),)),
        ("sum_grad", ((),)),
        ("multiply_grad", ((2, 3),)),
    ]
    assert hooks.inputs == ()
