"""Attention, transformer and norm defects a review found (2026-11-28, night): bool/int masks
in 16-bit dtypes, lengths and shapes that were truncated or reshaped, head_dim 0, and misuse
that ended in an internal error."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
import minitorch_amp.nn.functional as F
from minitorch_amp import amp, nn
from minitorch_amp.nn.layer.attention import convert_attention_mask

KEEP = np.tril(np.ones((4, 4), bool))


# ---- bool and int masks in float16 and bfloat16 ---------------------------------------------


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("mask_dtype", ["bool", "int64"])
def test_a_bool_or_int_mask_keeps_its_positions_at_exactly_zero_in_every_dtype(dtype, mask_dtype):
    bias = convert_attention_mask(mt.to_tensor(KEEP).astype(mask_dtype), dtype)
    got = bias.astype("float32").numpy()
    assert bias.dtype == mt.to_tensor(0.0, dtype=dtype).dtype
    assert (got[KEEP] == 0).all()
    assert (got[~KEEP] <= -9.9e8).all()  # -1e9, rounded: -inf in float16


def test_multihead_attention_with_a_bool_mask_is_finite_under_o1_and_in_float16():
    mt.seed(0)
    x = mt.randn([2, 4, 16])
    mha = nn.MultiHeadAttention(16, 4)
    keep = mt.to_tensor(KEEP)
    want = mha(x, attn_mask=keep).numpy()
    x.stop_gradient = False
    with amp.auto_cast(level="O1"):
        out = mha(x, attn_mask=keep)
    np.testing.assert_allclose(out.numpy(), want, atol=2e-2)
    out.sum().backward()  # the gradients flow past the mask, and are finite
    assert np.isfinite(x.grad.numpy()).all()
    assert np.isfinite(mha.q_proj.weight.grad.numpy()).all()
    mha.to(dtype="float16")
    half = mha(x.detach().astype("float16"), attn_mask=keep.astype("int64"))
    np.testing.assert_allclose(half.astype("float32").numpy(), want, atol=2e-2)


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_a_float16_transformer_with_a_bool_source_mask_gives_finite_outputs(level):
    mt.seed(0)
    model = nn.Transformer(16, 4, 1, 1, 32, dropout=0.0)
    model = amp.decorate(model, level="O2") if level == "O2" else model
    src, tgt = mt.randn([2, 4, 16]), mt.randn([2, 3, 16])
    with amp.auto_cast(level=level):
        out = model(src, tgt, src_mask=mt.to_tensor(KEEP))
    assert np.isfinite(out.astype("float32").numpy()).all()


# ---- generate_square_subsequent_mask ---------------------------------------------------------


@pytest.mark.parametrize("length", [2.7, "3", True, mt.to_tensor(2.9), mt.to_tensor([1, 2])])
def test_a_square_mask_refuses_a_length_that_is_not_one_integer(length):
    with pytest.raises(TypeError, match="length must be an integer"):
        nn.Transformer.generate_square_subsequent_mask(length)


def test_a_square_mask_takes_an_int_or_a_one_element_integer_tensor():
    square = nn.Transformer.generate_square_subsequent_mask
    assert square(np.int64(3)).shape == square(mt.to_tensor([3])).shape == [3, 3]
    assert square(0).shape == [0, 0]


# ---- layer_norm and rms_norm weights and epsilon ---------------------------------------------


@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
def test_a_norm_refuses_a_weight_that_is_neither_normalized_shape_nor_flat(norm):
    x = mt.randn([2, 4, 5])
    with pytest.raises(ValueError, match=r"weight of shape \[5, 4\] does not match"):
        getattr(F, norm)(x, [4, 5], mt.randn([5, 4]))
    for shape in ([4, 5], [20]):  # PyTorch's shape and Paddle's flattened one
        assert getattr(F, norm)(x, [4, 5], mt.ones(shape)).shape == [2, 4, 5]


def test_layer_norm_refuses_a_bias_of_another_shape():
    with pytest.raises(ValueError, match=r"bias of shape \[1, 5\]"):
        F.layer_norm(mt.randn([2, 5]), 5, mt.ones([5]), mt.zeros([1, 5]))


@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
def test_a_norm_refuses_a_negative_epsilon_as_its_layer_does(norm):
    with pytest.raises(ValueError, match="epsilon must be >= 0"):
        getattr(F, norm)(mt.ones([1, 3]), 3, epsilon=-1.0)


# ---- head_dim 0 ------------------------------------------------------------------------------


def test_attention_with_head_dim_zero_averages_the_values_as_pytorch_does():
    q = mt.zeros([1, 3, 1, 0])
    v = mt.to_tensor(np.arange(3.0, dtype="float32").reshape(1, 3, 1, 1))
    out = F.scaled_dot_product_attention(q, q, v)
    np.testing.assert_allclose(out.numpy().ravel(), [1.0, 1.0, 1.0])


# ---- misuse ----------------------------------------------------------------------------------


def test_multihead_attention_names_key_and_value_of_different_lengths():
    mha = nn.MultiHeadAttention(8, 2)
    q = mt.randn([2, 3, 8])
    with pytest.raises(ValueError, match="key and value must have the same length"):
        mha(q, mt.randn([2, 5, 8]), mt.randn([2, 4, 8]))
    with pytest.raises(ValueError, match="missing value is the query"):
        mha(q, mt.randn([2, 5, 8]))
    with pytest.raises(ValueError, match=r"value must be \[batch 2, k_len, 8\]"):
        mha(q, q, mt.randn([1, 3, 8]))


def test_a_static_cache_without_value_is_a_clear_error():
    mha = nn.MultiHeadAttention(8, 2)
    with pytest.raises(TypeError, match="pass value too"):
        mha.gen_cache(mt.randn([2, 5, 8]), type=nn.MultiHeadAttention.StaticCache)


@pytest.mark.parametrize("mask", [[[1, 0, 0], [1, 1, 0], [1, 1, 1]], np.ones((3, 3), bool)])
def test_a_mask_that_is_not_a_tensor_is_refused_by_attention_and_the_layers_alike(mask):
    q = mt.randn([2, 3, 8])
    calls = [
        lambda: nn.MultiHeadAttention(8, 2)(q, attn_mask=mask),
        lambda: nn.TransformerEncoderLayer(8, 2, 16)(q, mask),
        lambda: F.scaled_dot_product_attention(*[q.reshape([2, 3, 2, 4])] * 3, attn_mask=mask),
    ]
    for call in calls:
        with pytest.raises(TypeError, match="attn_mask must be a Tensor or None"):
            call()


@pytest.mark.parametrize("which", ["key", "value"])
def test_attention_refuses_an_integer_key_or_value(which):
    q = mt.randn([2, 3, 2, 4])
    args = {"query": q, "key": q, "value": q, which: mt.ones([2, 3, 2, 4], "int64")}
    with pytest.raises(TypeError, match=rf"dtype int64 \({which}\)"):
        F.scaled_dot_product_attention(**args)


@pytest.mark.parametrize("name", ["linear", "layer_norm", "cross_entropy", "nope"])
def test_a_transformer_layer_accepts_only_activation_functions(name):
    for layer in (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer):
        with pytest.raises(ValueError, match="activation must name an activation function"):
            layer(8, 2, 16, activation=name)
    assert nn.TransformerEncoderLayer(8, 2, 16, activation="gelu")(mt.randn([1, 3, 8])).shape
