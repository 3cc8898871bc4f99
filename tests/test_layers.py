"""nn.Layer and the built-in layers: registration, names, state dicts, modes, hooks, training.

Expected values are computed by hand with NumPy in float64; tests read as the specification.
"""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import nn
from minitorch_amp.nn import functional as F
from minitorch_amp.nn import initializer as I


class MLP(nn.Layer):
    def __init__(self, n_in=3, n_hidden=4, n_out=2):
        super().__init__()
        self.linear1 = nn.Linear(n_in, n_hidden)
        self.linear2 = nn.Linear(n_hidden, n_out)

    def forward(self, x):
        return self.linear2(nn.functional.relu(self.linear1(x)))


class WithBuffers(nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.bn = nn.BatchNorm1D(2)
        self.register_buffer("steps", mt.zeros([1]))
        self.register_buffer("cache", mt.zeros([3]), persistable=False)


def values(layer: nn.Layer) -> dict:
    return {k: v.numpy().copy() for k, v in layer.state_dict().items()}


# ---- registration and names ------------------------------------------------------------------
def test_parameters_sublayers_and_buffers_are_registered_by_assignment():
    model = WithBuffers()
    assert [n for n, _ in model.named_sublayers()] == ["fc", "bn"]
    assert [n for n, _ in model.named_parameters()] == [
        "fc.weight",
        "fc.bias",
        "bn.weight",
        "bn.bias",
    ]
    assert [n for n, _ in model.named_buffers()] == ["steps", "cache", "bn._mean", "bn._variance"]
    assert model.fc.weight is model._sub_layers["fc"]._parameters["weight"]
    assert list(model.children()) == [model.fc, model.bn]
    assert model.sublayers(include_self=True)[0] is model


def test_nested_layers_get_dotted_structured_names():
    outer = nn.Sequential(("block", MLP()), ("head", nn.Linear(2, 1)))
    assert [n for n, _ in outer.named_sublayers()] == [
        "block",
        "block.linear1",
        "block.linear2",
        "head",
    ]
    names = [n for n, _ in outer.named_parameters(prefix="model")]
    assert names[0] == "model.block.linear1.weight" and names[-1] == "model.head.bias"
    assert list(outer.state_dict())[:2] == ["block.linear1.weight", "block.linear1.bias"]
    assert len(outer.parameters(include_sublayers=False)) == 0


def test_parameter_names_are_paddle_style_unique_names():
    a, b = nn.Linear(2, 3), nn.Linear(2, 3)
    assert re.fullmatch(r"linear_\d+", a.full_name())
    assert a.full_name() != b.full_name()
    assert a.weight.name == a.full_name() + ".w_0"
    assert a.bias.name == a.full_name() + ".b_0"
    assert re.fullmatch(r"batch_norm1d_\d+", nn.BatchNorm1D(2).full_name())
    assert nn.Layer(name_scope="block").full_name().startswith("block_")


def test_parameters_order_is_stable_and_shared_parameters_are_listed_once():
    model = MLP()
    first = [id(p) for p in model.parameters()]
    assert first == [id(p) for p in model.parameters()]
    assert first == [id(model.linear1.weight), id(model.linear1.bias)] + [
        id(model.linear2.weight),
        id(model.linear2.bias),
    ]
    shared = nn.Sequential(model.linear1, model.linear1)
    assert len(shared.parameters()) == 2


def test_setattr_none_tensor_and_delattr():
    model = MLP()
    model.linear1.bias = None  # keeps the slot, drops the parameter
    assert "bias" in model.linear1._parameters and model.linear1.bias is None
    assert [n for n, _ in model.named_parameters()][:2] == ["linear1.weight", "linear2.weight"]
    with pytest.raises(TypeError, match="holds a Parameter"):
        model.linear1.weight = mt.ones([3, 4])  # a plain Tensor cannot replace a parameter
    model.extra = mt.ones([2])  # a new plain Tensor: a non-persistable buffer
    assert "extra" in dict(model.named_buffers()) and "extra" not in model.state_dict()
    del model.extra
    assert not hasattr(model, "extra")
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = model.nothing


def test_add_parameter_and_register_buffer_validate_names():
    layer = nn.Layer()
    p = layer.create_parameter([2, 3])
    assert layer.add_parameter("w", p) is layer.w
    with pytest.raises(KeyError, match=r"'\.'"):
        layer.add_parameter("a.b", p)
    with pytest.raises(TypeError, match="needs a Parameter"):
        layer.add_parameter("x", mt.ones([1]))
    with pytest.raises(KeyError, match="already has"):
        layer.register_buffer("w", mt.ones([1]))


# ---- state dict --------------------------------------------------------------------------------
def test_state_dict_keys_are_structured_and_exclude_non_persistable_buffers():
    model = WithBuffers()
    assert list(model.state_dict()) == [
        "steps",
        "fc.weight",
        "fc.bias",
        "bn.weight",
        "bn.bias",
        "bn._mean",
        "bn._variance",
    ]
    assert model.state_dict()["fc.weight"] is model.fc.weight  # the tensors themselves


def test_set_state_dict_round_trip_keeps_identity_and_copies_values():
    mt.seed(1)
    source = MLP()
    mt.seed(2)
    target = MLP()
    ids = [id(p) for p in target.parameters()]
    saved = {k: v.numpy() for k, v in source.state_dict().items()}  # arrays work too
    missing, unexpected = target.set_state_dict(saved)
    assert (missing, unexpected) == ([], [])
    assert ids == [id(p) for p in target.parameters()]
    for key, value in target.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), saved[key])
    target.linear1.weight._data[0, 0] = 123.0  # a copy, not shared storage
    assert source.linear1.weight.numpy()[0, 0] != 123.0


def test_set_state_dict_by_unique_names():
    source, target = MLP(), MLP()
    by_name = {p.name: p for p in source.parameters()}
    renamed = dict(zip([p.name for p in target.parameters()], by_name.values()))
    assert target.set_state_dict(renamed, use_structured_name=False) == ([], [])
    np.testing.assert_array_equal(target.linear2.bias.numpy(), source.linear2.bias.numpy())


def test_set_state_dict_shape_mismatch_raises_and_changes_nothing():
    model = MLP()
    before = values(model)
    bad = {k: np.full(v.shape, 7.0, np.float32) for k, v in before.items()}
    bad["linear2.weight"] = np.zeros([2, 4], np.float32)  # expected [4, 2]
    with pytest.raises(ValueError, match=r"'linear2.weight'.*\[2, 4\].*\[4, 2\]"):
        model.set_state_dict(bad)
    for key, value in values(model).items():
        np.testing.assert_array_equal(value, before[key])


def test_set_state_dict_reports_missing_and_unexpected_keys():
    model = MLP()
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    del state["linear1.bias"]
    state["linear3.weight"] = np.zeros([1])
    with pytest.warns(UserWarning, match="linear1.bias"):
        missing, unexpected = model.load_dict(state)
    assert missing == ["linear1.bias"] and unexpected == ["linear3.weight"]


def test_set_state_dict_loads_buffers_and_casts_to_the_target_dtype():
    model = WithBuffers()
    state = {k: v.numpy().astype(np.float64) + 1 for k, v in model.state_dict().items()}
    model.set_state_dict(state)
    assert model.bn._mean.dtype == mt.float32
    np.testing.assert_array_equal(model.bn._variance.numpy(), [2.0, 2.0])


# ---- modes, dropout, batch norm ----------------------------------------------------------------
def test_train_and_eval_set_training_recursively():
    model = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(0.5)))
    assert model.eval() is model
    assert all(not layer.training for layer in model.sublayers(include_self=True))
    model.train()
    assert all(layer.training for layer in model.sublayers(include_self=True))


def test_dropout_drops_about_p_and_upscales_in_training_and_is_identity_in_eval():
    drop = nn.Dropout(p=0.3)
    x = mt.ones([200, 100])
    y = drop(x).numpy()
    dropped = np.mean(y == 0)
    assert abs(dropped - 0.3) < 0.02  # 20000 draws: std of the rate is 0.003
    np.testing.assert_allclose(y[y != 0], 1 / 0.7, rtol=1e-6)
    drop.eval()
    np.testing.assert_array_equal(drop(x).numpy(), x.numpy())


def test_batch_norm_1d_uses_batch_stats_and_updates_running_stats_with_momentum():
    rng = np.random.default_rng(0)
    x1 = rng.normal(2.0, 3.0, size=(8, 3)).astype(np.float32)
    x2 = rng.normal(-1.0, 0.5, size=(8, 3)).astype(np.float32)
    bn = nn.BatchNorm1D(3)  # momentum 0.9, epsilon 1e-5, weight 1, bias 0
    mean, var = np.zeros(3), np.ones(3)
    for x in (x1, x2):
        y = bn(mt.to_tensor(x)).numpy()
        xd = x.astype(np.float64)
        batch_mean, batch_var = xd.mean(0), xd.var(0)  # biased variance (divide by N)
        np.testing.assert_allclose(y, (xd - batch_mean) / np.sqrt(batch_var + 1e-5), atol=1e-5)
        mean = 0.9 * mean + 0.1 * batch_mean
        var = 0.9 * var + 0.1 * batch_var
        np.testing.assert_allclose(bn._mean.numpy(), mean, rtol=1e-5)
        np.testing.assert_allclose(bn._variance.numpy(), var, rtol=1e-5)
    bn.eval()
    y = bn(mt.to_tensor(x1)).numpy()
    np.testing.assert_allclose(y, (x1 - mean) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bn._mean.numpy(), mean, rtol=1e-5)  # eval does not update


def test_batch_norm_1d_3d_input_and_channels_last():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 2, 5)).astype(np.float32)
    ncl = nn.BatchNorm1D(2)(mt.to_tensor(x)).numpy()
    mean, var = x.mean((0, 2), keepdims=True), x.var((0, 2), keepdims=True)
    np.testing.assert_allclose(ncl, (x - mean) / np.sqrt(var + 1e-5), atol=1e-5)
    nlc = nn.BatchNorm1D(2, data_format="NLC")(mt.to_tensor(x.transpose(0, 2, 1))).numpy()
    np.testing.assert_allclose(nlc, ncl.transpose(0, 2, 1), atol=1e-6)
    with pytest.raises(ValueError, match="got 2 channels"):
        nn.BatchNorm1D(3)(mt.to_tensor(x))


# ---- hooks and calling ---------------------------------------------------------------------------
def test_forward_pre_and_post_hooks_modify_and_can_be_removed():
    fc = nn.Linear(2, 2, weight_attr=I.Constant(1.0))
    x = mt.ones([1, 2])
    calls = []
    pre = fc.register_forward_pre_hook(lambda layer, inputs: (inputs[0] * 2,))
    post = fc.register_forward_post_hook(lambda layer, inputs, out: out + 1)
    seen = fc.register_forward_post_hook(lambda layer, inputs, out: calls.append(out.numpy()))
    np.testing.assert_array_equal(fc(x).numpy(), [[5.0, 5.0]])  # (2 + 2) + 1
    np.testing.assert_array_equal(calls[-1], [[5.0, 5.0]])  # hooks run in order
    pre.remove()
    np.testing.assert_array_equal(fc(x).numpy(), [[3.0, 3.0]])
    post.remove()
    seen.remove()
    np.testing.assert_array_equal(fc(x).numpy(), [[2.0, 2.0]])
    assert len(calls) == 2


def test_clear_gradients_zeroes_trainable_grads():
    model = MLP()
    model(mt.ones([2, 3])).sum().backward()
    model.clear_gradients()
    assert all(np.all(p.grad.numpy() == 0) for p in model.parameters())
    model.clear_gradients(set_to_zero=False)
    assert all(p.grad is None for p in model.parameters())


# ---- containers -------------------------------------------------------------------------------
def test_sequential_positional_and_named():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    assert len(model) == 3 and isinstance(model[-1], nn.Linear)
    assert [type(m).__name__ for m in model] == ["Linear", "ReLU", "Linear"]
    assert isinstance(model[1:], nn.Sequential) and len(model[1:]) == 2
    assert list(model.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    x = mt.ones([5, 3])
    manual = model[2](model[1](model[0](x)))
    np.testing.assert_array_equal(model(x).numpy(), manual.numpy())
    named = nn.Sequential(("encoder", nn.Linear(2, 2)), ("act", nn.Tanh()))
    assert named["encoder"] is named.encoder is named[0]
    assert list(named.state_dict()) == ["encoder.weight", "encoder.bias"]
    with pytest.raises(IndexError):
        model[3]
    with pytest.raises(TypeError, match="holds Layers"):
        nn.Sequential(nn.ReLU(), "relu")


def test_layer_list_append_extend_insert_delete_and_index():
    a, b, c, d = (nn.Linear(2, 2) for _ in range(4))
    layers = nn.LayerList([a, b])
    layers.append(d)
    layers.insert(2, c)
    assert list(layers) == [a, b, c, d] and len(layers) == 4 and layers[-1] is d
    layers.extend([nn.ReLU()])
    del layers[0]
    assert list(layers)[:3] == [b, c, d]
    assert list(layers.state_dict())[:2] == ["0.weight", "0.bias"]  # renumbered
    assert len(layers.parameters()) == 6
    assert list(layers[1:3]) == [c, d]


def test_layer_dict():
    heads = nn.LayerDict({"cls": nn.Linear(4, 2)})
    heads["reg"] = nn.Linear(4, 1)
    assert list(heads) == ["cls", "reg"] and "reg" in heads and len(heads) == 2
    assert list(heads.state_dict())[-1] == "reg.bias"
    heads.pop("cls")
    assert list(heads.keys()) == ["reg"]


# ---- other layers -------------------------------------------------------------------------------
def test_embedding_padding_row_is_zero_and_lookup_matches():
    emb = nn.Embedding(6, 3, padding_idx=-1)
    assert emb._padding_idx == 5 and np.all(emb.weight.numpy()[5] == 0)
    ids = np.array([[1, 5], [0, 2]])
    np.testing.assert_array_equal(emb(mt.to_tensor(ids)).numpy(), emb.weight.numpy()[ids])


def test_layer_norm_matches_numpy():
    x = np.random.default_rng(2).normal(size=(3, 5)).astype(np.float32)
    ln = nn.LayerNorm(5, weight_attr=I.Constant(2.0), bias_attr=I.Constant(0.5))
    expected = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(ln(mt.to_tensor(x)).numpy(), 2 * expected + 0.5, atol=1e-5)


def test_activations_flatten_identity_and_losses():
    x = np.array([[-1.0, 0.5, 2.0]], np.float32)
    t = mt.to_tensor(x)
    np.testing.assert_allclose(nn.ReLU()(t).numpy(), np.maximum(x, 0))
    np.testing.assert_allclose(nn.Sigmoid()(t).numpy(), 1 / (1 + np.exp(-x)), rtol=1e-6)
    np.testing.assert_allclose(nn.Tanh()(t).numpy(), np.tanh(x), rtol=1e-6)
    softmax = np.exp(x) / np.exp(x).sum(-1, keepdims=True)
    np.testing.assert_allclose(nn.Softmax()(t).numpy(), softmax, rtol=1e-6)
    np.testing.assert_allclose(nn.LogSoftmax()(t).numpy(), np.log(softmax), rtol=1e-5)
    gelu = nn.GELU()(t).numpy()
    np.testing.assert_allclose(gelu, [[-0.15865525, 0.34573123, 1.95449974]], rtol=1e-5)
    assert nn.Flatten()(mt.ones([2, 3, 4])).shape == [2, 12]
    assert nn.Identity(7, k=1)(t) is t
    label = np.array([[0.0, 1.0, 1.0]], np.float32)
    mse = nn.MSELoss(reduction="sum")(t, mt.to_tensor(label))
    assert float(mse) == pytest.approx(((x - label) ** 2).sum())
    ce = nn.CrossEntropyLoss()(t, mt.to_tensor([2]))
    assert float(ce) == pytest.approx(-np.log(softmax[0, 2]), rel=1e-5)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: nn.Linear(-1, 2), "in_features must be a positive integer, got -1"),
        (lambda: nn.Linear(2.5, 2), "in_features must be an integer"),
        (lambda: nn.Dropout(1.5), r"p .* \[0, 1\], got 1.5"),
        (lambda: nn.Dropout(0.5, mode="drop"), "mode must be"),
        (lambda: nn.MSELoss(reduction="avg"), "reduction must be 'mean', 'sum' or 'none'"),
        (lambda: nn.CrossEntropyLoss(reduction="max"), "reduction must be"),
        (lambda: nn.Embedding(4, 2, padding_idx=4), r"padding_idx must be in \[-4, 4\)"),
        (lambda: nn.BatchNorm1D(2, data_format="NHWC"), "data_format"),
        (lambda: nn.BatchNorm1D(0), "num_features must be a positive integer"),
        (lambda: nn.LayerNorm(4, epsilon=0), "epsilon must be positive"),
    ],
)
def test_bad_constructor_arguments_fail_with_clear_messages(make, message):
    with pytest.raises((ValueError, TypeError), match=message):
        make()


def test_repr_is_nested_like_paddle():
    model = nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.ReLU(), nn.Dropout(0.1)))
    assert repr(model) == (
        "Sequential(\n"
        "  (0): Linear(in_features=2, out_features=3, dtype=float32)\n"
        "  (1): Sequential(\n"
        "    (0): ReLU()\n"
        "    (1): Dropout(p=0.1, axis=None, mode=upscale_in_train)\n"
        "  )\n"
        ")"
    )


def test_deepcopy_gives_an_independent_model():
    model = MLP()
    clone = copy.deepcopy(model)
    assert [n for n, _ in clone.named_parameters()] == [n for n, _ in model.named_parameters()]
    clone.linear1.weight._data[...] = 0
    assert np.any(model.linear1.weight.numpy() != 0)


# ---- training -----------------------------------------------------------------------------------
def test_a_two_layer_mlp_trained_with_plain_sgd_reduces_the_loss():
    mt.seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 3)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]]) + 0.3).astype(np.float32)
    model = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1))
    loss_fn, lr = nn.MSELoss(), 0.05
    losses = []
    for _ in range(30):
        loss = loss_fn(model(mt.to_tensor(x)), mt.to_tensor(y))
        loss.backward()
        for p in model.parameters():
            p._data -= lr * p.grad._data
        model.clear_gradients()
        losses.append(float(loss))
    assert losses[-1] < 0.3 * losses[0]


@pytest.mark.parametrize("dtype", ["int32", "int64"])  # (the tensor dtypes of ids)
def test_embedding_refuses_each_id_outside_its_rows(dtype):
    """One comparison of the ids read as unsigned finds both sides: negative ids (the
    most negative too) and ids at or past the row count; the edges 0 and rows - 1 pass."""
    weight = mt.to_tensor(np.arange(8, dtype="float32").reshape(4, 2))
    ok = F.embedding(mt.to_tensor(np.array([0, 3], dtype)), weight)
    np.testing.assert_array_equal(ok.numpy(), [[0, 1], [6, 7]])
    info = np.iinfo(dtype)
    bad = [4, info.max] + ([-1, info.min] if info.min < 0 else [])
    for value in bad:
        ids = mt.to_tensor(np.array([1, value], dtype))
        with pytest.raises(ValueError, match=rf"id {value} of ids .* is out of range"):
            F.embedding(ids, weight)
