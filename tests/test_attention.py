"""Scaled dot-product attention and MultiHeadAttention against float64 references, finite
differences and PyTorch; masks, caches for decoding, and AMP's dtypes."""

from __future__ import annotations

import attention_reference as ref
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numeric_grad import numeric_grad

import minitorch_amp as mt
import minitorch_amp.nn.functional as F
from minitorch_amp import amp, nn
from minitorch_amp.amp import debugging

RNG = np.random.default_rng(0)


def t64(a, grad=False):
    return mt.to_tensor(np.asarray(a, np.float64), stop_gradient=not grad)


def qkv(b=2, lq=5, lk=6, h=3, d=4, dv=7):
    return (
        RNG.normal(size=(b, lq, h, d)),
        RNG.normal(size=(b, lk, h, d)),
        RNG.normal(size=(b, lk, h, dv)),
    )


def sdpa(q, k, v, **kw):
    return F.scaled_dot_product_attention(t64(q), t64(k), t64(v), **kw).numpy()


# ---- scaled_dot_product_attention ----------------------------------------------------------
def test_sdpa_is_softmax_of_scaled_scores_times_values_in_paddles_seq_heads_layout():
    q, k, v = qkv()
    out = sdpa(q, k, v)
    assert out.shape == (2, 5, 3, 7)  # [batch, q_len, num_heads, v_dim]
    np.testing.assert_allclose(out, ref.sdpa(q, k, v)[0], rtol=1e-12, atol=1e-12)


def test_sdpa_bool_mask_attends_where_true_and_broadcasts_over_batch_and_heads():
    q, k, v = qkv()
    keep = RNG.random((1, 1, 5, 6)) < 0.6
    keep[..., 0] = True  # every query sees at least one key
    out = sdpa(q, k, v, attn_mask=mt.to_tensor(keep))
    np.testing.assert_allclose(out, ref.sdpa(q, k, v, ref.bias_of(keep))[0], atol=1e-12)


def test_sdpa_float_mask_is_added_to_the_scores():
    q, k, v = qkv()
    bias = RNG.normal(size=(2, 3, 5, 6))
    out = sdpa(q, k, v, attn_mask=t64(bias))
    np.testing.assert_allclose(out, ref.sdpa(q, k, v, bias)[0], atol=1e-12)


def test_sdpa_is_causal_lets_query_i_see_keys_up_to_i_and_combines_with_a_mask():
    q, k, v = qkv(lk=5)
    causal = np.tril(np.ones((5, 5), bool))
    np.testing.assert_allclose(
        sdpa(q, k, v, is_causal=True), ref.sdpa(q, k, v, ref.bias_of(causal))[0], atol=1e-12
    )
    bias = RNG.normal(size=(5, 5))
    out = sdpa(q, k, v, attn_mask=t64(bias), is_causal=True)
    np.testing.assert_allclose(out, ref.sdpa(q, k, v, bias + ref.bias_of(causal))[0], atol=1e-12)


def test_sdpa_takes_3d_inputs_without_the_batch_axis():
    q, k, v = qkv(b=1)
    out = sdpa(q[0], k[0], v[0])
    assert out.shape == (5, 3, 7)
    np.testing.assert_allclose(out, sdpa(q, k, v)[0], atol=1e-12)


@pytest.mark.parametrize("mask", ["none", "bool", "float"])
def test_sdpa_gradients_match_float64_finite_differences(mask):
    q, k, v = qkv(b=1, lq=3, lk=4, h=2, d=3, dv=2)
    keep = np.array([[1, 1, 0, 1], [1, 0, 1, 1], [0, 1, 1, 1]], bool)
    bias = RNG.normal(size=(3, 4))
    weight = RNG.normal(size=(1, 3, 2, 2))

    def loss(q, k, v, bias=None):
        m = {"none": None, "bool": mt.to_tensor(keep), "float": bias}[mask]
        return (F.scaled_dot_product_attention(q, k, v, attn_mask=m) * t64(weight)).sum()

    inputs = [q, k, v] + ([bias] if mask == "float" else [])
    tensors = [t64(a, grad=True) for a in inputs]
    loss(*tensors).backward()
    expected = numeric_grad(lambda *a: float(loss(*map(t64, a)).numpy()), inputs)
    for t, g in zip(tensors, expected, strict=True):
        np.testing.assert_allclose(t.grad.numpy(), g, rtol=1e-6, atol=1e-8)


def test_sdpa_second_derivatives_match_finite_differences_of_its_gradient():
    q, k, v = qkv(b=1, lq=3, lk=3, h=2, d=3, dv=2)
    weight, direction = RNG.normal(size=(1, 3, 2, 2)), RNG.normal(size=q.shape)
    keep = mt.to_tensor(np.tril(np.ones((3, 3), bool)))

    def gradient_along_direction(q_array):
        qt = t64(q_array, grad=True)
        out = F.scaled_dot_product_attention(qt, t64(k), t64(v), attn_mask=keep)
        (g,) = mt.grad((out * t64(weight)).sum(), qt, create_graph=True)
        return (g * t64(direction)).sum(), qt

    value, qt = gradient_along_direction(q)
    value.backward()  # Hessian-vector product
    (want,) = numeric_grad(lambda a: float(gradient_along_direction(a)[0].numpy()), [q])
    np.testing.assert_allclose(qt.grad.numpy(), want, rtol=1e-6, atol=1e-8)


@given(
    b=st.integers(1, 2),
    lq=st.integers(1, 4),
    lk=st.integers(1, 4),
    h=st.integers(1, 3),
    d=st.integers(1, 4),
    mask_axes=st.lists(st.booleans(), min_size=4, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_sdpa_matches_the_reference_for_any_shapes_and_mask_broadcasts(
    b, lq, lk, h, d, mask_axes, seed
):
    rng = np.random.default_rng(seed)
    q, k, v = (
        rng.normal(size=(b, lq, h, d)),
        rng.normal(size=(b, lk, h, d)),
        rng.normal(size=(b, lk, h, 2)),
    )
    full = (b, h, lq, lk)  # a mask keeps or drops each axis of [batch, heads, q_len, k_len]
    keep = rng.random([n if kept else 1 for n, kept in zip(full, mask_axes)]) < 0.7
    keep[..., 0] = True
    out = sdpa(q, k, v, attn_mask=mt.to_tensor(keep))
    np.testing.assert_allclose(out, ref.sdpa(q, k, v, ref.bias_of(keep))[0], atol=1e-12)


def test_sdpa_dropout_acts_only_while_training():
    q, k, v = qkv()
    plain = sdpa(q, k, v)
    np.testing.assert_array_equal(sdpa(q, k, v, dropout_p=0.5, training=False), plain)
    mt.seed(1)
    dropped = sdpa(q, k, v, dropout_p=0.5)
    mt.seed(1)
    assert not np.allclose(dropped, plain)
    np.testing.assert_array_equal(sdpa(q, k, v, dropout_p=0.5), dropped)  # seeded


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda q, k, v: (q, k.transpose([0, 2, 1, 3]), v, {}), ValueError, "transposed"),
        (lambda q, k, v: (q, k, v, {"is_causal": True}), ValueError, "explicit attn_mask"),
        (lambda q, k, v: (q, k, v, {"attn_mask": mt.ones([5, 6], "int64")}), TypeError, "bool"),
        (
            lambda q, k, v: (q, k, v, {"attn_mask": mt.ones([4, 6], "bool")}),
            ValueError,
            "broadcast",
        ),
        (lambda q, k, v: (q, k, v, {"dropout_p": 1.5}), ValueError, "dropout_p"),
        (lambda q, k, v: (q[0], k, v, {}), ValueError, "4-D"),
    ],
)
def test_sdpa_misuse_is_a_clear_error(make, error, words):
    q, k, v, kw = make(*map(t64, qkv()))
    with pytest.raises(error, match=words):
        F.scaled_dot_product_attention(q, k, v, **kw)


def test_sdpa_under_o1_runs_its_matmuls_in_float16_and_its_softmax_in_float32():
    q, k, v = (mt.randn([2, 5, 3, 8]) for _ in range(3))
    with debugging.collect_operator_stats() as stats, amp.auto_cast():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out.dtype == mt.float16
    assert stats.counts["matmul"] == {"fp16": 2, "bf16": 0, "fp32": 0, "other": 0}
    assert stats.counts["softmax"] == {"fp16": 0, "bf16": 0, "fp32": 1, "other": 0}


def test_sdpa_matches_pytorch_after_moving_the_heads_axis():
    torch = pytest.importorskip("torch")
    q, k, v = qkv()
    keep = RNG.random((2, 1, 5, 6)) < 0.7
    keep[..., 0] = True
    tq, tk, tv = (torch.from_numpy(a).transpose(1, 2) for a in (q, k, v))
    want = torch.nn.functional.scaled_dot_product_attention(
        tq,
        tk,
        tv,
        attn_mask=torch.from_numpy(keep),  # PyTorch's SDPA: True attends too
    )
    got = sdpa(q, k, v, attn_mask=mt.to_tensor(keep))
    np.testing.assert_allclose(got, want.transpose(1, 2).numpy(), atol=1e-12)


# ---- MultiHeadAttention --------------------------------------------------------------------
def mha64(*args, **kw):
    mt.set_default_dtype("float64")
    return nn.MultiHeadAttention(*args, **kw)


def test_mha_matches_the_float64_reference_with_its_own_kdim_and_vdim():
    layer = mha64(8, 2, kdim=5, vdim=3, need_weights=True)
    x, key, value = (
        RNG.normal(size=(2, 4, 8)),
        RNG.normal(size=(2, 6, 5)),
        RNG.normal(size=(2, 6, 3)),
    )
    out, weights = layer(t64(x), t64(key), t64(value))
    want_out, want_weights = ref.mha(layer, x, key, value)
    assert weights.shape == [2, 2, 4, 6]
    np.testing.assert_allclose(out.numpy(), want_out, atol=1e-12)
    np.testing.assert_allclose(weights.numpy(), want_weights, atol=1e-12)


def test_mha_without_need_weights_returns_only_the_output():
    out = mha64(8, 2)(t64(RNG.normal(size=(2, 4, 8))))
    assert isinstance(out, mt.Tensor) and out.shape == [2, 4, 8]


def test_mha_bool_and_int_masks_mask_false_and_zero_with_minus_1e9_as_paddle_does():
    layer = mha64(8, 2)
    x = RNG.normal(size=(2, 4, 8))
    keep = RNG.random((2, 1, 4, 4)) < 0.6
    keep[..., 0] = True
    want = ref.mha(layer, x, bias=(keep - 1.0) * 1e9)[0]
    for mask in (mt.to_tensor(keep), mt.to_tensor(keep.astype(np.int64))):
        np.testing.assert_allclose(layer(t64(x), attn_mask=mask).numpy(), want, atol=1e-12)
    bias = np.where(keep, 0.0, -np.inf)  # a float mask is added as it is
    np.testing.assert_allclose(layer(t64(x), attn_mask=t64(bias)).numpy(), want, atol=1e-12)


@pytest.mark.parametrize("shape", [(4, 1, 4, 4), (2, 4)], ids=["batch 4 for batch 2", "2 x 4"])
def test_mha_refuses_a_mask_that_would_widen_its_output(shape):
    """A mask broadcasting past [batch, heads, q_len, k_len] made the scores (and so the
    output) bigger, silently: the full square mask at a decoding step returned 2 queries."""
    layer = mha64(8, 2)
    x = t64(RNG.normal(size=(2, 4, 8)))
    with pytest.raises(ValueError, match="does not broadcast to the attention scores' shape"):
        layer(x, attn_mask=mt.to_tensor(np.ones(shape, bool)))
    step = t64(RNG.normal(size=(2, 1, 8)))  # one new query against 4 keys
    with pytest.raises(ValueError, match=r"\[2, 2, 1, 4\]"):
        layer(step, x, x, attn_mask=mt.to_tensor(np.tril(np.ones((4, 4), bool))))


def test_mha_gradients_match_float64_finite_differences():
    layer = mha64(4, 2, kdim=3, vdim=3)
    x, mem = RNG.normal(size=(1, 3, 4)), RNG.normal(size=(1, 2, 3))
    weight = RNG.normal(size=(1, 3, 4))
    params = [layer.q_proj.weight, layer.k_proj.weight, layer.out_proj.bias]

    def loss(x, mem):
        return (layer(x, mem, mem, attn_mask=mt.to_tensor([[True, False]] * 3)) * t64(weight)).sum()

    xt, mt_ = t64(x, grad=True), t64(mem, grad=True)
    loss(xt, mt_).backward()
    for t, g in zip(
        [xt, mt_], numeric_grad(lambda *a: float(loss(*map(t64, a)).numpy()), [x, mem])
    ):
        np.testing.assert_allclose(t.grad.numpy(), g, rtol=1e-6, atol=1e-8)
    grads = [p.grad.numpy().copy() for p in params]

    def loss_of_params(*values):
        for p, value in zip(params, values, strict=True):
            p.set_value(value)
        return float(loss(t64(x), t64(mem)).numpy())

    expected = numeric_grad(loss_of_params, [p.numpy() for p in params])
    for got, want in zip(grads, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def test_mha_cache_decoding_step_by_step_equals_causal_attention_over_the_sequence():
    layer = mha64(8, 2, need_weights=True).eval()
    x = t64(RNG.normal(size=(2, 5, 8)))
    seen = np.arange(5) != 1  # and a padding mask: nobody attends to position 1
    full, _ = layer(x, attn_mask=mt.to_tensor(np.tril(np.ones((5, 5), bool)) & seen))
    cache = layer.gen_cache(x)
    assert isinstance(cache, nn.MultiHeadAttention.Cache) and cache.k.shape == [2, 2, 0, 4]
    steps = []
    for i in range(5):
        mask = mt.to_tensor(seen[None, : i + 1])
        out, weights, cache = layer(x[:, i : i + 1], attn_mask=mask, cache=cache)
        assert cache.k.shape == [2, 2, i + 1, 4] and weights.shape == [2, 2, 1, i + 1]
        steps.append(out.numpy())
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full.numpy(), atol=1e-12)


def test_mha_leaves_the_cache_it_was_given_as_it_was_so_decoding_can_branch():
    layer = mha64(8, 2).eval()
    x = t64(RNG.normal(size=(1, 3, 8)))
    _, cache = layer(x[:, :2], cache=layer.gen_cache(x))
    before = cache.k.numpy().copy(), cache.v.numpy().copy()
    _, longer = layer(x[:, 2:], cache=cache)
    _, other = layer(x[:, 2:] * 2.0, cache=cache)  # a second branch from the same cache
    assert cache.k.shape == [1, 2, 2, 4] and longer.k.shape == other.k.shape == [1, 2, 3, 4]
    np.testing.assert_array_equal(cache.k.numpy(), before[0])
    np.testing.assert_array_equal(cache.v.numpy(), before[1])
    np.testing.assert_array_equal(other.k.numpy()[:, :, :2], before[0])


def test_mha_static_cache_holds_projected_keys_and_values_and_comes_back_unchanged():
    layer = mha64(8, 2, kdim=6, vdim=6)
    x, memory = t64(RNG.normal(size=(2, 3, 8))), t64(RNG.normal(size=(2, 7, 6)))
    static = layer.gen_cache(memory, memory, type=nn.MultiHeadAttention.StaticCache)
    assert static.k.shape == [2, 2, 7, 4]
    out, same = layer(x, None, None, cache=static)  # key and value are ignored
    assert same is static
    np.testing.assert_allclose(out.numpy(), layer(x, memory, memory).numpy(), atol=1e-12)
    given = layer.gen_cache(static.k, static.v, type=nn.MultiHeadAttention.Cache)
    assert isinstance(given, nn.MultiHeadAttention.Cache) and given.k is static.k


def test_mha_misuse_is_a_clear_error():
    with pytest.raises(ValueError, match="divisible by num_heads"):
        nn.MultiHeadAttention(10, 3)
    layer = nn.MultiHeadAttention(8, 2)
    with pytest.raises(TypeError, match="gen_cache"):
        layer(mt.ones([1, 2, 8]), cache=(mt.ones([1]), mt.ones([1])))
    with pytest.raises(ValueError, match=r"\[batch, q_len, 8\]"):
        layer(mt.ones([1, 2, 4]))


def test_mha_under_o1_runs_products_in_float16_and_softmax_in_float32():
    layer = nn.MultiHeadAttention(8, 2)
    with debugging.collect_operator_stats() as stats, amp.auto_cast():
        out = layer(mt.randn([2, 4, 8]), attn_mask=mt.ones([4, 4], "bool"))
    assert out.dtype == mt.float32  # out_proj adds its float32 bias (gray): float32
    assert stats.counts["matmul"]["fp16"] == 2 and stats.counts["linear"]["fp32"] == 4
    assert stats.counts["softmax"] == {"fp16": 0, "bf16": 0, "fp32": 1, "other": 0}


def test_mha_matches_pytorch_multihead_attention_with_copied_weights():
    torch = pytest.importorskip("torch")
    layer = mha64(8, 2, need_weights=True)
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    with torch.no_grad():  # PyTorch stacks q, k, v as [3 * out, in]: ours are [in, out]
        weights = [p.weight.numpy().T for p in (layer.q_proj, layer.k_proj, layer.v_proj)]
        theirs.in_proj_weight.copy_(torch.from_numpy(np.concatenate(weights)))
        biases = [p.bias.numpy() for p in (layer.q_proj, layer.k_proj, layer.v_proj)]
        theirs.in_proj_bias.copy_(torch.from_numpy(np.concatenate(biases)))
        theirs.out_proj.weight.copy_(torch.from_numpy(layer.out_proj.weight.numpy().T))
        theirs.out_proj.bias.copy_(torch.from_numpy(layer.out_proj.bias.numpy()))
    x, mem = RNG.normal(size=(2, 4, 8)), RNG.normal(size=(2, 6, 8))
    keep = RNG.random((4, 6)) < 0.6
    keep[:, 0] = True
    out, w = layer(t64(x), t64(mem), t64(mem), attn_mask=mt.to_tensor(keep))
    tx, tm = torch.from_numpy(x), torch.from_numpy(mem)
    want, want_w = theirs(  # PyTorch's MHA masks where its bool mask is True: the opposite
        tx, tm, tm, attn_mask=torch.from_numpy(~keep), average_attn_weights=False
    )
    np.testing.assert_allclose(out.numpy(), want.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(w.numpy(), want_w.detach().numpy(), atol=1e-12)
