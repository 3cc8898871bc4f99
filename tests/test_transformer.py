"""Transformer encoder/decoder layers, their stacks and Transformer: against a float64
reference, PyTorch with copied weights, finite differences; caches, attributes and AMP."""

from __future__ import annotations

import attention_reference as ref
import numpy as np
import pytest
from numeric_grad import numeric_grad

import minitorch_amp as mt
from minitorch_amp import amp, nn, optimizer
from minitorch_amp.amp import debugging

RNG = np.random.default_rng(0)


def t64(a, grad=False):
    return mt.to_tensor(np.asarray(a, np.float64), stop_gradient=not grad)


def causal(n):
    return np.tril(np.ones((n, n), bool))


@pytest.mark.parametrize("normalize_before", [False, True])
def test_encoder_layer_matches_the_float64_reference_post_and_pre_norm(normalize_before):
    mt.set_default_dtype("float64")
    layer = nn.TransformerEncoderLayer(8, 2, 12, dropout=0.0, normalize_before=normalize_before)
    x = RNG.normal(size=(2, 5, 8))
    out = layer(t64(x), src_mask=mt.to_tensor(causal(5)))
    want = ref.encoder_layer(layer, x, bias=(causal(5) - 1.0) * 1e9)
    np.testing.assert_allclose(out.numpy(), want, atol=1e-12)


def test_encoder_layer_gradients_match_float64_finite_differences():
    mt.set_default_dtype("float64")
    layer = nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0, normalize_before=True)
    x, weight = RNG.normal(size=(1, 3, 4)), RNG.normal(size=(1, 3, 4))

    def loss(x):
        return (layer(x, src_mask=mt.to_tensor(causal(3))) * t64(weight)).sum()

    xt = t64(x, grad=True)
    loss(xt).backward()
    (want,) = numeric_grad(lambda a: float(loss(t64(a)).numpy()), [x])
    np.testing.assert_allclose(xt.grad.numpy(), want, rtol=1e-6, atol=1e-8)


def test_encoder_stacks_fresh_layers_built_from_the_first_ones_arguments_then_its_norm():
    mt.set_default_dtype("float64")
    first = nn.TransformerEncoderLayer(8, 2, 12, dropout=0.0, activation="gelu")
    encoder = nn.TransformerEncoder(first, 3, norm=nn.LayerNorm(8))
    assert encoder.layers[0] is first and len(encoder.parameters()) == 3 * 16 + 2
    second = encoder.layers[1]
    assert second.activation is first.activation and second.linear1.weight.shape == [8, 12]
    assert not np.array_equal(second.linear1.weight.numpy(), first.linear1.weight.numpy())
    x = t64(RNG.normal(size=(2, 4, 8)))
    manual = x
    for layer in encoder.layers:
        manual = layer(manual)
    np.testing.assert_allclose(encoder(x).numpy(), encoder.norm(manual).numpy(), atol=1e-12)


def test_decoder_cache_decoding_step_by_step_equals_causal_decoding_of_the_sequence():
    mt.set_default_dtype("float64")
    layer = nn.TransformerDecoderLayer(8, 2, 12, normalize_before=True)
    decoder = nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(8)).eval()
    tgt, memory = t64(RNG.normal(size=(2, 5, 8))), t64(RNG.normal(size=(2, 7, 8)))
    full = decoder(tgt, memory, tgt_mask=nn.Transformer.generate_square_subsequent_mask(5))
    cache = decoder.gen_cache(memory)
    assert len(cache) == 2 and cache[0][1].k.shape == [2, 2, 7, 4]  # (Cache, StaticCache)
    steps = []
    for i in range(5):
        out, cache = decoder(tgt[:, i : i + 1], memory, cache=cache)
        steps.append(out.numpy())
    assert cache[1][0].k.shape == [2, 2, 5, 4]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full.numpy(), atol=1e-12)
    zipped = decoder.gen_cache(memory, do_zip=True)
    assert len(zipped) == 2 and len(zipped[0]) == 2  # [caches, static caches]


def test_encoder_cache_grows_by_each_calls_positions():
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 12), 2).eval()
    x = mt.randn([2, 3, 8])
    cache = encoder.gen_cache(x)
    out, cache = encoder(x, cache=cache)
    out, cache = encoder(x[:, :1], cache=cache)
    assert out.shape == [2, 1, 8] and cache[1].k.shape == [2, 2, 4, 4]


def test_generate_square_subsequent_mask_is_minus_inf_above_the_diagonal():
    mask = nn.Transformer(8, 2, 1, 1, 16).generate_square_subsequent_mask(mt.to_tensor(3))
    want = np.array([[0.0, -np.inf, -np.inf], [0.0, 0.0, -np.inf], [0.0, 0.0, 0.0]])
    assert mask.dtype == mt.float32
    np.testing.assert_array_equal(mask.numpy(), want)


def test_attr_lists_go_to_attention_then_feed_forward_and_named_attrs_get_suffixes():
    layer = nn.TransformerEncoderLayer(8, 2, 12, bias_attr=[False, True])
    assert layer.self_attn.q_proj.bias is None and layer.linear1.bias is not None
    decoder = nn.TransformerDecoderLayer(8, 2, 12, bias_attr=[None, False, None])
    assert decoder.self_attn.out_proj.bias is not None and decoder.cross_attn.k_proj.bias is None
    model = nn.Transformer(8, 2, 1, 1, 12, bias_attr=[True, False])  # [attention, ffn]
    enc, dec = model.encoder.layers[0], model.decoder.layers[0]
    assert enc.linear2.bias is None and dec.linear1.bias is None
    assert dec.cross_attn.q_proj.bias is not None
    named = nn.TransformerEncoderLayer(8, 2, 12, weight_attr=nn.ParamAttr(name="w"))
    assert named.self_attn.q_proj.weight.name == "w_0" and named.linear1.weight.name == "w_1"


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: nn.TransformerEncoderLayer(8, 2, 12, activation="swishy"), "activation"),
        (lambda: nn.TransformerEncoderLayer(8, 2, 12, bias_attr=[None] * 3), "2 items"),
        (lambda: nn.TransformerDecoderLayer(8, 2, 12, weight_attr=[None]), "3 items"),
        (lambda: nn.Transformer(8, 2, 1, 1, 12, weight_attr=[None] * 4), "1, 2 or 3"),
        (lambda: nn.TransformerEncoderLayer(8, 3, 12), "divisible"),
        (lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 12), 0), "num_layers"),
    ],
)
def test_bad_arguments_are_clear_errors(make, words):
    with pytest.raises(ValueError, match=words):
        make()


def test_dropouts_default_to_dropout_and_can_be_set_apart():
    layer = nn.TransformerEncoderLayer(8, 2, 12, dropout=0.2, act_dropout=0.05)
    assert layer.self_attn.dropout == 0.2 and layer.dropout1.p == 0.2 and layer.dropout.p == 0.05
    layer = nn.TransformerDecoderLayer(8, 2, 12, dropout=0.2, attn_dropout=0.0)
    assert layer.cross_attn.dropout == 0.0 and layer.dropout3.p == 0.2


# ---- AMP ----------------------------------------------------------------------------------
def test_encoder_under_o1_runs_products_in_float16_and_softmax_layer_norm_in_float32():
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4, 32), 2)
    mask = nn.Transformer.generate_square_subsequent_mask(6)
    with debugging.collect_operator_stats() as stats, amp.auto_cast():
        out = encoder(mt.randn([2, 6, 16]), src_mask=mask)
    assert out.dtype == mt.float32  # post-norm: the last op is a (black) layer_norm
    assert stats.counts["matmul"]["fp16"] == 4 and stats.counts["matmul"]["fp32"] == 0
    assert stats.counts["softmax"] == {"fp16": 0, "bf16": 0, "fp32": 2, "other": 0}
    assert stats.counts["layer_norm"]["fp32"] == 4


def test_an_encoder_decorated_for_o2_keeps_layer_norm_float32_and_trains():
    mt.seed(0)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0), 2)
    head = nn.Linear(16, 1)
    model = nn.Sequential(encoder, head)
    opt = optimizer.AdamW(learning_rate=3e-3, parameters=model.parameters())
    model, opt = amp.decorate(model, opt, level="O2")
    assert encoder.layers[0].self_attn.q_proj.weight.dtype == mt.float16
    assert encoder.layers[1].norm2.weight.dtype == mt.float32
    scaler = amp.GradScaler(init_loss_scaling=2.0**10)
    x, y = mt.randn([4, 6, 16]), mt.randn([4, 6, 1])
    losses = []
    for _ in range(30):
        with amp.auto_cast(level="O2"):
            loss = nn.functional.mse_loss(model(x).astype("float32"), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.clear_grad()
        losses.append(float(loss))
    assert all(np.isfinite(losses)) and losses[-1] < 0.5 * losses[0]


# ---- PyTorch, with copied weights ---------------------------------------------------------
def _copy(theirs, ours):
    import torch

    with torch.no_grad():
        theirs.copy_(torch.from_numpy(np.ascontiguousarray(ours)))


def copy_linear(theirs, ours):  # PyTorch's Linear weight is [out, in]: ours is [in, out]
    _copy(theirs.weight, ours.weight.numpy().T)
    _copy(theirs.bias, ours.bias.numpy())


def copy_mha(theirs, ours):
    projections = (ours.q_proj, ours.k_proj, ours.v_proj)
    _copy(theirs.in_proj_weight, np.concatenate([p.weight.numpy().T for p in projections]))
    _copy(theirs.in_proj_bias, np.concatenate([p.bias.numpy() for p in projections]))
    copy_linear(theirs.out_proj, ours.out_proj)


def copy_norm(theirs, ours):
    _copy(theirs.weight, ours.weight.numpy())
    _copy(theirs.bias, ours.bias.numpy())


def copy_layer(theirs, ours):
    copy_mha(theirs.self_attn, ours.self_attn)
    if hasattr(ours, "cross_attn"):
        copy_mha(theirs.multihead_attn, ours.cross_attn)
        copy_norm(theirs.norm3, ours.norm3)
    copy_linear(theirs.linear1, ours.linear1)
    copy_linear(theirs.linear2, ours.linear2)
    copy_norm(theirs.norm1, ours.norm1)
    copy_norm(theirs.norm2, ours.norm2)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")  # PyTorch's, for norm_first
@pytest.mark.parametrize("normalize_before, activation", [(False, "relu"), (True, "gelu")])
def test_transformer_matches_pytorch_with_copied_weights(normalize_before, activation):
    torch = pytest.importorskip("torch")
    mt.set_default_dtype("float64")
    ours = nn.Transformer(8, 2, 2, 2, 12, 0.0, activation, normalize_before=normalize_before)
    theirs = torch.nn.Transformer(
        8, 2, 2, 2, 12, 0.0, activation, batch_first=True, norm_first=normalize_before,
        dtype=torch.float64,
    )  # fmt: skip
    for stack in ("encoder", "decoder"):
        mine, other = getattr(ours, stack), getattr(theirs, stack)
        for a, b in zip(other.layers, mine.layers, strict=True):
            copy_layer(a, b)
        copy_norm(other.norm, mine.norm)
    src, tgt = RNG.normal(size=(2, 6, 8)), RNG.normal(size=(2, 4, 8))
    keep = RNG.random((6, 6)) < 0.7
    keep[:, 0] = True
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(4).astype("float64")
    out = ours(t64(src), t64(tgt), src_mask=mt.to_tensor(keep), tgt_mask=tgt_mask)
    want = theirs(  # PyTorch takes the bool mask the other way round: give it the float one
        torch.from_numpy(src), torch.from_numpy(tgt),
        src_mask=torch.from_numpy(np.where(keep, 0.0, -np.inf)),
        tgt_mask=torch.from_numpy(tgt_mask.numpy()),
    )  # fmt: skip
    np.testing.assert_allclose(out.numpy(), want.detach().numpy(), atol=1e-10)
