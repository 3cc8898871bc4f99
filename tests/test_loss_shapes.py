"""Elementwise losses given a label of another shape: Paddle's broadcast, with PyTorch's warning.

``mse_loss(input [4, 1], label [4])`` broadcasts to ``[4, 4]`` and averages 16 differences,
in Paddle as here; almost always the caller meant 4. PyTorch computes the same and warns
("Using a target size ... that is different to the input size ..."). We keep Paddle's
result and warn in the same spirit, naming the shapes and the fix.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import minitorch_amp as mt
import minitorch_amp.nn.functional as F
from minitorch_amp import nn

COLUMN = np.arange(4, dtype=np.float32).reshape(4, 1)  # [4, 1]: a model's one output per row
VECTOR = np.array([0.5, 1.0, 3.0, -2.0], dtype=np.float32)  # [4]: the labels, one per row

LOSSES = {
    "mse_loss": (F.mse_loss, nn.MSELoss, lambda d: d**2),
    "l1_loss": (F.l1_loss, nn.L1Loss, np.abs),
}


@pytest.mark.parametrize("name", LOSSES)
@pytest.mark.parametrize("form", ["functional", "layer"])
def test_a_label_of_another_shape_warns_and_still_broadcasts_as_paddle(name, form):
    function, layer, elementwise = LOSSES[name]
    loss = function if form == "functional" else layer()
    with pytest.warns(UserWarning, match=r"label shape \[4\] differs from input shape \[4, 1\]"):
        got = loss(mt.to_tensor(COLUMN), mt.to_tensor(VECTOR))
    broadcast = elementwise(COLUMN - VECTOR)  # [4, 4], as Paddle computes it
    assert got.shape == []
    np.testing.assert_allclose(got.numpy(), broadcast.mean(), rtol=1e-6)


def test_the_warning_says_what_it_broadcasts_to_and_how_to_match_the_shapes():
    with pytest.warns(UserWarning) as caught:
        F.mse_loss(mt.to_tensor(COLUMN), mt.to_tensor(VECTOR), reduction="none")
    message = str(caught[0].message)
    assert "mse_loss" in message and "[4, 4]" in message
    assert "label.reshape(input.shape)" in message
    assert caught[0].filename == __file__  # it points at the caller's line


@pytest.mark.parametrize("name", LOSSES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_matching_shapes_do_not_warn(name, reduction):
    function = LOSSES[name][0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        function(mt.to_tensor(COLUMN), mt.to_tensor(COLUMN + 1), reduction=reduction)
