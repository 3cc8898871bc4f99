"""Pooling refuses padding wider than half the kernel (PyTorch's rule), in both forms.

With more padding a window can hold nothing but padding: max pooling returned a border of
-inf and average pooling 0 / 0 = nan, silently (and under a GradScaler that nan skips every
step). Each side of each axis may pad at most ``kernel_size // 2``; ``'same'`` and ``'valid'``
are unchanged (``'same'`` never pads more than that).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitorch_amp as mt
import minitorch_amp.nn.functional as F
from minitorch_amp import nn

POOLS = {"max": (F.max_pool2d, nn.MaxPool2D), "avg": (F.avg_pool2d, nn.AvgPool2D)}


@pytest.mark.parametrize("kind", sorted(POOLS))
@pytest.mark.parametrize(
    "kernel, padding, detail",
    [
        (2, 2, r"axis H pads 2 before, more than 2 // 2 = 1"),
        (3, 2, r"axis H pads 2 before, more than 3 // 2 = 1"),
        ([3, 2], [1, 2], r"axis W pads 2 before, more than 2 // 2 = 1"),
        (4, [0, 3, 0, 0], r"axis H pads 3 after, more than 4 // 2 = 2"),
        (2, [[0, 0], [0, 0], [1, 1], [0, 2]], r"axis W pads 2 after, more than 2 // 2 = 1"),
    ],
)
def test_padding_over_half_the_kernel_is_refused_naming_padding_kernel_and_rule(
    kind, kernel, padding, detail
):
    function, layer = POOLS[kind]
    name = f"{kind}_pool2d"
    x = mt.ones([1, 1, 6, 6])
    expected = rf"{name}: padding .* with kernel_size {re.escape(str(kernel))}"
    with pytest.raises(ValueError, match=expected) as caught:
        function(x, kernel, stride=1, padding=padding)
    message = str(caught.value)
    assert "at most kernel_size // 2" in message and "-inf or nan" in message
    with pytest.raises(ValueError, match=detail):
        function(x, kernel, stride=1, padding=padding)
    with pytest.raises(ValueError, match=rf"{layer.__name__}: padding .* {detail}"):
        layer(kernel, stride=1, padding=padding)  # at construction, before any forward


def test_channels_last_padding_pairs_are_checked_on_the_spatial_axes():
    x = mt.ones([1, 6, 6, 1])
    with pytest.raises(ValueError, match="axis H pads 2 before"):
        F.max_pool2d(x, 2, padding=[[0, 0], [2, 0], [0, 0], [0, 0]], data_format="NHWC")
    with pytest.raises(ValueError, match="axis W pads 2 after"):
        nn.AvgPool2D(2, padding=[[0, 0], [0, 0], [0, 2], [0, 0]], data_format="NHWC")


@pytest.mark.parametrize("kind", sorted(POOLS))
@pytest.mark.parametrize("padding", ["same", "SAME", "valid", "VALID"])
def test_the_same_and_valid_paddings_are_unchanged(kind, padding):
    function, layer = POOLS[kind]
    x = mt.to_tensor(np.arange(25.0, dtype=np.float32).reshape(1, 1, 5, 5))
    out = function(x, 4, stride=1, padding=padding)
    assert out.shape == ([1, 1, 5, 5] if padding.lower() == "same" else [1, 1, 2, 2])
    assert np.isfinite(out.numpy()).all()
    np.testing.assert_array_equal(layer(4, stride=1, padding=padding)(x).numpy(), out.numpy())


@given(
    kernel=st.integers(1, 5),
    stride=st.integers(1, 4),
    size=st.integers(1, 9),
    pads=st.lists(st.integers(0, 2), min_size=2, max_size=2),
    kind=st.sampled_from(sorted(POOLS)),
)
def test_padding_up_to_half_the_kernel_is_accepted_and_every_output_is_finite(
    kernel, stride, size, pads, kind
):
    pads = [min(p, kernel // 2) for p in pads]  # before, after: both within the rule
    size = max(size, kernel - sum(pads))  # one whole window fits
    x = mt.to_tensor(np.random.default_rng(0).uniform(-3, 3, (1, 2, size, size)), dtype="float32")
    function, layer = POOLS[kind]
    padding = [pads[0], pads[1], pads[1], pads[0]]
    out = function(x, kernel, stride=stride, padding=padding)
    assert np.isfinite(out.numpy()).all(), (kernel, stride, size, padding)
    np.testing.assert_array_equal(layer(kernel, stride, padding)(x).numpy(), out.numpy())


def test_the_largest_allowed_padding_pools_real_elements_at_the_border():
    x = mt.to_tensor([[[[-5.0, -1.0], [-2.0, -3.0]]]])
    np.testing.assert_array_equal(F.max_pool2d(x, 3, stride=1, padding=1).numpy(), -1.0)
    np.testing.assert_array_equal(F.avg_pool2d(x, 3, stride=1, padding=1).numpy(), -2.75)
