"""The AMP debugging tools' defects a review found (2026-11-28, evening), each stated as the
behaviour the tools now have."""

from __future__ import annotations

import pytest

import minitorch_amp as mt
from minitorch_amp import nn
from minitorch_amp.amp import debugging
from minitorch_amp.autograd.dispatch import hooks


@pytest.fixture(autouse=True)
def _checker_off():
    yield
    debugging.disable_tensor_checker()


def test_the_checker_sees_bfloat16_nan_and_inf_as_it_sees_float16():
    x = mt.to_tensor([1.0, 0.0]).astype("bfloat16")
    debugging.enable_tensor_checker(debugging.TensorCheckerConfig(True))  # abort mode
    with pytest.raises(RuntimeError, match=r"op=divide, tensor=, dtype=bf16"):
        x / x  # 0 / 0: NaN
    debugging.disable_tensor_checker()

    class Identity(nn.Layer):
        @debugging.check_layer_numerics
        def forward(self, x):
            return x * 1.0

    with pytest.raises(RuntimeError, match=r"tensor=input, dtype=bf16"):
        Identity()(mt.to_tensor([float("inf")]).astype("bfloat16"))


def test_a_checker_enabled_inside_a_checked_forward_stays_on_and_whole(capsys):
    class Net(nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        @debugging.check_layer_numerics
        def forward(self, x):
            config = debugging.TensorCheckerConfig(True, debugging.DebugMode.CHECK_ALL)
            debugging.enable_tensor_checker(config)
            return self.fc(x)

    out = Net()(mt.ones([1, 2]))
    assert len(hooks.observers) == 1 and len(hooks.grad_observers) == 1
    capsys.readouterr()
    out.sum().backward()  # was: AttributeError in the checker, its config gone
    assert "op=linear_grad" in capsys.readouterr().out


def test_operator_stats_count_an_op_with_an_integer_result_in_its_inputs_dtype():
    x = mt.to_tensor([[0.1, 0.9], [0.7, 0.2]]).astype("float16")
    with debugging.collect_operator_stats() as stats:
        mt.argmax(x, axis=1)
        mt.topk(x, 1)
        mt.sum(x.astype("float32"))
    assert stats.counts["argmax"] == {"fp16": 1, "bf16": 0, "fp32": 0, "other": 0}
    assert stats.counts["topk"]["fp16"] == 1 and stats.counts["sum"]["fp32"] == 1
