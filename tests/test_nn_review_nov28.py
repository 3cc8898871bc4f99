"""nn defects a review found (2026-11-28, evening): containers, conv padding, float-only
functions, dropout axes, soft-label cross entropy, pad widths and Paddle's signatures."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import minitorch_amp as mt
import minitorch_amp.nn.functional as F
from minitorch_amp import nn


def test_a_list_of_layers_given_to_sequential_is_refused_with_the_spelling_to_use():
    with pytest.raises(TypeError, match=r"nn\.Sequential\(\*layers\)"):
        nn.Sequential([nn.Linear(2, 3), nn.Linear(3, 4)])
    with pytest.raises(TypeError, match="str name"):
        nn.Sequential((1, nn.ReLU()))
    assert len(nn.Sequential(*[nn.Linear(2, 3), nn.Linear(3, 4)])) == 2


def test_a_refused_extend_update_or_construction_leaves_the_container_unchanged():
    layers = nn.LayerList([nn.Linear(1, 1)])
    with pytest.raises(TypeError, match="holds Layers"):
        layers.extend([nn.Linear(1, 1), "not a layer"])
    assert len(layers) == 1 and len(layers.parameters()) == 2
    heads = nn.LayerDict({"a": nn.ReLU()})
    with pytest.raises(TypeError, match="holds Layers"):
        heads.update([("b", nn.ReLU()), ("c", 5)])
    with pytest.raises(KeyError, match=r"without '\.'"):
        heads.update({"b": nn.ReLU(), "c.d": nn.ReLU()})
    assert list(heads.keys()) == ["a"]
    with pytest.raises(TypeError, match="holds Layers"):
        nn.LayerDict([("b", nn.ReLU()), ("c", 5)])


def test_conv_layers_take_the_channels_last_pair_form_of_padding():
    pairs = [[0, 0], [1, 1], [2, 2], [0, 0]]
    conv = nn.Conv2D(1, 1, 3, padding=pairs, data_format="NHWC")
    x = mt.ones([1, 5, 5, 1])
    expected = F.conv2d(x, conv.weight, conv.bias, padding=pairs, data_format="NHWC")
    np.testing.assert_array_equal(conv(x).numpy(), expected.numpy())
    assert nn.Conv1D(1, 1, 3, padding=[[0, 0], [1, 1], [0, 0]], data_format="NLC")(
        mt.ones([1, 6, 1])
    ).shape == [1, 6, 1]
    with pytest.raises(ValueError, match="batch or channel axis"):
        nn.Conv2D(1, 1, 3, padding=[[0, 0], [0, 0], [1, 1], [1, 1]], data_format="NHWC")


_FLOAT_ONLY = {
    "relu": F.relu,
    "leaky_relu": F.leaky_relu,
    "gelu": F.gelu,
    "silu": F.silu,
    "softmax": F.softmax,
    "log_softmax": F.log_softmax,
    "layer_norm": lambda x: F.layer_norm(x, 4),
    "rms_norm": lambda x: F.rms_norm(x, 4),
    "normalize": F.normalize,
    "batch_norm": lambda x: F.batch_norm(x, mt.zeros([4]), mt.ones([4]), training=True),
    "dropout": lambda x: F.dropout(x, 0.5, training=False),
    "mse_loss": lambda x: F.mse_loss(x, x),
    "cross_entropy": lambda x: F.cross_entropy(x, mt.to_tensor([0, 1])),
    "conv1d": lambda x: F.conv1d(x.reshape([1, 2, 4]), mt.ones([1, 2, 1])),
    "conv2d": lambda x: F.conv2d(x.reshape([1, 2, 2, 2]), mt.ones([1, 2, 1, 1])),
    "avg_pool2d": lambda x: F.avg_pool2d(x.reshape([1, 2, 2, 2]), 2),
    "max_pool2d": lambda x: F.max_pool2d(x.reshape([1, 2, 2, 2]), 2),
    "adaptive_avg_pool2d": lambda x: F.adaptive_avg_pool2d(x.reshape([1, 2, 2, 2]), 1),
    "scaled_dot_product_attention": lambda x: F.scaled_dot_product_attention(
        *[x.reshape([1, 2, 1, 4])] * 3
    ),
}


@pytest.mark.parametrize("name", sorted(_FLOAT_ONLY))
def test_integer_inputs_to_floating_point_functions_are_refused(name):
    x = mt.to_tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
    with pytest.raises(TypeError, match=rf"{name}: got an input of dtype int64.*astype"):
        _FLOAT_ONLY[name](x)


def test_dropout_refuses_an_axis_outside_the_input_before_drawing():
    mt.seed(0)
    with pytest.raises(ValueError, match="out of range for a 3-D input"):
        F.dropout(mt.ones([4, 3, 5]), 0.5, axis=3)
    with pytest.raises(ValueError, match="out of range"):
        nn.Dropout(0.5, axis=7)(mt.ones([4, 3, 5]))
    with pytest.raises(ValueError, match=r"\[0, ndim\)"):
        nn.Dropout(0.5, axis=-1)
    drawn = F.dropout(mt.ones([64]), 0.5).numpy()
    mt.seed(0)
    np.testing.assert_array_equal(drawn, F.dropout(mt.ones([64]), 0.5).numpy())


def _soft_reference(x, label, weight=None):
    """Paddle's soft-label loss in float64: per sample -sum(label * log_softmax(x)), times
    sum(label * weight); 'mean' divides by the sum of those sample weights."""
    z = x - x.max(-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(-1, keepdims=True))
    losses = -(label * log_p).sum(-1, keepdims=True)
    sample_weights = (
        np.ones_like(losses) if weight is None else (label * weight).sum(-1, keepdims=True)
    )
    return losses * sample_weights, (losses * sample_weights).sum() / sample_weights.sum()


def test_cross_entropy_with_soft_labels_follows_paddle_with_and_without_weight():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 4))
    label = rng.random((5, 4))
    label /= label.sum(-1, keepdims=True)
    weight = rng.random(4)
    for w in (None, weight):
        per_sample, mean = _soft_reference(x, label, w)
        args = {"soft_label": True, "weight": None if w is None else mt.to_tensor(w)}
        t = mt.to_tensor(x)
        none = F.cross_entropy(t, mt.to_tensor(label), reduction="none", **args)
        np.testing.assert_allclose(none.numpy(), per_sample, rtol=1e-12)
        loss = nn.CrossEntropyLoss(**args)(t, mt.to_tensor(label))
        np.testing.assert_allclose(loss.item(), mean, rtol=1e-12)


def test_cross_entropy_soft_label_gradient_matches_torch_probability_targets():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x, label = rng.standard_normal((3, 5)), rng.dirichlet(np.ones(5), size=3)
    t = mt.to_tensor(x)
    t.stop_gradient = False
    F.cross_entropy(t, mt.to_tensor(label), soft_label=True).backward()
    tx = torch.tensor(x, requires_grad=True)
    torch.nn.functional.cross_entropy(tx, torch.tensor(label)).backward()
    np.testing.assert_allclose(t.grad.numpy(), tx.grad.numpy(), rtol=1e-10)


def test_soft_labels_with_an_ignore_index_are_refused_at_construction_and_call():
    with pytest.raises(ValueError, match="ignore_index=0 has no meaning"):
        nn.CrossEntropyLoss(soft_label=True, ignore_index=0)
    with pytest.raises(ValueError, match="ignore_index=1 has no meaning"):
        F.cross_entropy(mt.ones([2, 2]), mt.ones([2, 2]) / 2, soft_label=True, ignore_index=1)


def test_cross_entropy_without_softmax_reads_input_as_probabilities():
    p = np.array([[0.2, 0.8, 0.0], [0.5, 0.25, 0.25]])
    hard = F.cross_entropy(mt.to_tensor(p), mt.to_tensor([1, 0]), use_softmax=False, name="ce")
    np.testing.assert_allclose(hard.item(), -(np.log(0.8) + np.log(0.5)) / 2, rtol=1e-12)
    soft = mt.to_tensor([[0.0, 1.0, 0.0], [0.5, 0.5, 0.0]])
    loss = nn.CrossEntropyLoss(soft_label=True, use_softmax=False, reduction="sum")
    expected = -(np.log(0.8) + 0.5 * np.log(0.5) + 0.5 * np.log(0.25))
    np.testing.assert_allclose(loss(mt.to_tensor(p), soft).item(), expected, rtol=1e-12)


def test_pad_layers_refuse_fractional_and_negative_widths_at_construction():
    with pytest.raises(TypeError, match="Pad2D: padding must be a list, tuple or Tensor of ints"):
        nn.Pad2D([1.9, 1, 1, 1])
    with pytest.raises(ValueError, match="Pad1D: padding widths must be >= 0"):
        nn.Pad1D(-1)
    with pytest.raises(ValueError, match=">= 0"):
        nn.Pad3D([1, 1, 1, 1, 0, -2])
    assert nn.Pad2D([1, 0, 2, 0])(mt.ones([1, 1, 2, 2])).shape == [1, 1, 4, 3]


def test_every_public_functional_takes_paddles_name_argument():
    lacking = [n for n in F.__all__ if "name" not in inspect.signature(getattr(F, n)).parameters]
    assert lacking == []
    x = mt.ones([2, 3])
    assert F.relu(x, name="r").shape == [2, 3]
    assert F.mse_loss(x, x, name="m").item() == 0.0
