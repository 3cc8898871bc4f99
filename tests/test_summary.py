"""``minitorch_amp.summary`` prints Paddle's table and returns Paddle's counts.

The LeNet table is the one in ``paddle.summary``'s docstring, compared token by token with
each row's number (``Conv2D-1``) read as the layer's own (names count layers per process).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import nn
from minitorch_amp.hapi.model_summary import summary_string

PADDLE_LENET_TABLE = """\
---------------------------------------------------------------------------
 Layer (type)       Input Shape          Output Shape         Param #
===========================================================================
   Conv2D-1       [[1, 1, 28, 28]]      [1, 6, 28, 28]          60
    ReLU-1        [[1, 6, 28, 28]]      [1, 6, 28, 28]           0
  MaxPool2D-1     [[1, 6, 28, 28]]      [1, 6, 14, 14]           0
   Conv2D-2       [[1, 6, 14, 14]]     [1, 16, 10, 10]         2,416
    ReLU-2       [[1, 16, 10, 10]]     [1, 16, 10, 10]           0
  MaxPool2D-2    [[1, 16, 10, 10]]      [1, 16, 5, 5]            0
   Linear-1          [[1, 400]]            [1, 120]           48,120
   Linear-2          [[1, 120]]            [1, 84]            10,164
   Linear-3          [[1, 84]]             [1, 10]              850
===========================================================================
Total params: 61,610
Trainable params: 61,610
Non-trainable params: 0
---------------------------------------------------------------------------
Input size (MB): 0.00
Forward/backward pass size (MB): 0.11
Params size (MB): 0.24
Estimated Total Size (MB): 0.35
---------------------------------------------------------------------------
"""


class LeNet(nn.Layer):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2D(1, 6, 3, stride=1, padding=1),
            nn.ReLU(),
            nn.MaxPool2D(2, 2),
            nn.Conv2D(6, 16, 5, stride=1, padding=0),
            nn.ReLU(),
            nn.MaxPool2D(2, 2),
        )
        self.fc = nn.Sequential(nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10))

    def forward(self, inputs):
        return self.fc(mt.flatten(self.features(inputs), 1))


class TwoInputs(nn.Layer):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(3, 2), nn.Linear(5, 2)

    def forward(self, x, y):
        return self.a(x) + self.b(y)


def numbered_in_order(text: str) -> str:
    """``text`` with each layer kind's numbers renumbered 1, 2, ... in order of appearance."""
    seen: dict[str, dict[str, int]] = {}

    def renumber(m):
        kind = seen.setdefault(m[1], {})
        return f"{m[1]}-{kind.setdefault(m[2], len(kind) + 1)}"

    return re.sub(r"\b([A-Z]\w*)-(\d+)\b", renumber, text)


def tokens(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


def test_lenet_table_is_paddles(capsys):
    info = mt.summary(LeNet(), (1, 1, 28, 28))
    printed = capsys.readouterr().out
    assert tokens(numbered_in_order(printed)) == tokens(PADDLE_LENET_TABLE) + [[]]
    assert info == {"total_params": 61610, "trainable_params": 61610}
    assert all(type(v) is int for v in info.values())
    assert all(line == line.rstrip() for line in printed.splitlines())


def test_rows_are_named_by_each_layers_own_number():
    first, second = nn.Linear(2, 2), nn.Linear(2, 2)
    text, _ = summary_string(nn.Sequential(first, second), (1, 2))
    number = int(second.full_name().rsplit("_", 1)[1]) + 1
    assert f"Linear-{number}" in text and f"Linear-{number - 1}" in text


def test_several_inputs_by_sizes_dtypes_or_the_inputs_themselves(capsys):
    net = TwoInputs()
    info = mt.summary(net, [(4, 3), (4, 5)], dtypes=["float32", "float64"])
    assert info == {"total_params": 8 + 12, "trainable_params": 20}
    assert "[[4, 3]]" in capsys.readouterr().out

    class ListInput(TwoInputs):
        def forward(self, inputs):  # Paddle passes `input` as one argument
            return super().forward(inputs["x"], inputs["y"])

    info = mt.summary(ListInput(), input={"x": mt.ones([1, 3]), "y": mt.ones([1, 5])})
    assert info["total_params"] == 20
    assert "Input size (MB)" in capsys.readouterr().out


def test_frozen_parameters_are_non_trainable(capsys):
    net = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))
    net[0].weight.stop_gradient = True
    info = mt.summary(net, (None, 4))  # None: the batch, read as 1
    assert info == {"total_params": 23, "trainable_params": 23 - 12}
    assert "Non-trainable params: 12" in capsys.readouterr().out


def test_a_layer_without_sublayers_is_its_own_row(capsys):
    assert mt.summary(nn.Linear(3, 2), (1, 3))["total_params"] == 8
    rows = [line for line in capsys.readouterr().out.splitlines() if "Linear-" in line]
    assert len(rows) == 1 and rows[0].split()[1:] == ["[[1,", "3]]", "[1,", "2]", "8"]


def test_parameters_of_the_top_layer_with_sublayers_are_not_counted_as_in_paddle():
    class WithOwnParameter(nn.Layer):
        def __init__(self):
            super().__init__()
            self.scale = self.create_parameter([5])
            self.linear = nn.Linear(2, 2)

        def forward(self, x):
            return self.linear(x)

    _, info = summary_string(WithOwnParameter(), (1, 2))
    assert info["total_params"] == 6  # the 5 of `scale` are not in any row


def test_modes_are_restored_and_hooks_removed_even_when_forward_fails():
    class Fails(nn.Layer):
        def __init__(self):
            super().__init__()
            self.drop, self.linear = nn.Dropout(0.5), nn.Linear(2, 2)

        def forward(self, x):
            assert not self.training  # summary runs in eval mode
            self.linear(x)
            raise RuntimeError("boom")

    net = Fails()
    net.drop.eval()
    with pytest.raises(RuntimeError, match="boom"):
        mt.summary(net, (1, 2))
    assert net.training and not net.drop.training and net.linear.training
    assert all(not layer._forward_post_hooks for layer in net.sublayers(include_self=True))
    np.testing.assert_array_equal(net.linear(mt.ones([1, 2])).shape, [1, 2])


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({}, ValueError, r"give input_size .* or input"),
        ({"input_size": (None, -1, 3)}, ValueError, r"2 unknown dims; only the batch dim"),
        ({"input_size": (1, 0)}, ValueError, r"a dim <= 0"),
        ({"input_size": "1, 3"}, TypeError, r"input_size must be a shape tuple"),
        ({"input": 3.0}, ValueError, r"input must be a Tensor"),
    ],
)
def test_bad_arguments_raise_clear_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        mt.summary(nn.Linear(3, 2), **kwargs)


def test_summary_needs_a_layer():
    with pytest.raises(TypeError, match=r"net must be an nn.Layer, got function"):
        mt.summary(lambda x: x, (1, 2))
