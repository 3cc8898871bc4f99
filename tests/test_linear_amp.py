"""``Linear`` under AMP is Paddle's ``F.linear``: a white matmul, then a gray bias add.

Paddle (dygraph ``eager_api_linear``) runs ``matmul(x, weight)`` and then ``add(out, bias)``,
each through the AMP rule on its own. The expected dtypes below are the ones Paddle's own
tests assert (test/amp/test_amp_api.py, test_amp_promote.py); the values are a float16
product (float32 sums, one rounding) added to the bias in the add's dtype.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
import minitorch_amp.nn.functional as F
from minitorch_amp import amp, nn, optimizer

F16, F32 = np.dtype("float16"), np.dtype("float32")


def layer(bias=True):
    mt.seed(3)
    return nn.Linear(4, 3, bias_attr=None if bias else False)


def fp16_product(x, w):
    """What the white matmul computes: float16 inputs, float32 sums, rounded once."""
    x16 = np.asarray(x, np.float32).astype(np.float16).astype(np.float32)
    w16 = np.asarray(w, np.float32).astype(np.float16).astype(np.float32)
    return (x16 @ w16).astype(np.float16)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (dict(level="O1"), F32),  # gray add with a float32 bias promotes
        (dict(level="OD"), F32),  # OD: every non-white op runs in float32
        (dict(level="O2"), F32),  # O2 with promotion and float32 parameters
        (dict(level="O2", use_promote=False), F16),  # the add runs in float16 too
        (dict(level="O1", custom_black_list=["matmul_v2"]), F32),
        (dict(level="O1", custom_white_list=["elementwise_add"]), F16),
    ],
)
def test_a_float32_bias_gives_paddles_dtype_at_each_level(kwargs, expected):
    lin, x = layer(), mt.randn([2, 4])
    with amp.auto_cast(**kwargs):
        assert lin(x).dtype == expected


def test_paddles_od_and_o2_promote_cases():
    # test_amp_api.TestAutoCast.test_amp_OD_level: a float16 + float16 add is float32 at OD,
    # and a Linear after it too. test_amp_promote: at O2 the Linear is float32 with promotion
    # on and float16 with it off; its float16 input does not change that.
    lin = layer()
    with amp.auto_cast(level="OD"):
        out = mt.matmul(mt.randn([2, 4]), mt.randn([4, 4]))  # white: float16
        added = out + mt.randn([2, 4]).astype("float16")
        assert (out.dtype, added.dtype, lin(added).dtype) == (F16, F32, F32)
    with amp.auto_cast(level="O2"):
        h = mt.randn([2, 4]).astype("float16") + mt.randn([2, 4]).astype("float16")
        assert h.dtype == F16 and lin(h).dtype == F32
    with amp.auto_cast(level="O2", use_promote=False):
        assert lin(h).dtype == F16


def test_no_bias_or_a_float16_bias_gives_float16():
    x = mt.randn([2, 4])
    with amp.auto_cast():
        assert layer(bias=False)(x).dtype == F16
    model = amp.decorate(layer(), level="O2")  # the bias becomes float16 too
    with amp.auto_cast(level="O2"):
        assert model(x).dtype == F16
    with amp.auto_cast(level="OD"):  # OD runs the add in float32 even for a float16 bias
        assert model(x).dtype == F32


def test_outside_auto_cast_the_add_promotes():
    x, w = mt.randn([2, 4]), mt.randn([4, 3])
    assert F.linear(x, w, mt.zeros([3]).astype("float16")).dtype == F32
    assert F.linear(x.astype("float16"), w.astype("float16"), mt.zeros([3])).dtype == F32
    assert F.linear(x.astype("float16"), w.astype("float16"), mt.zeros([3], "float16")).dtype == F16


def test_values_are_the_float16_product_plus_the_float32_bias_in_float32():
    lin, x = layer(), mt.randn([5, 4])
    lin.bias.set_value(mt.to_tensor([1e-3, 1000.0, -0.3]))
    product = fp16_product(x.numpy(), lin.weight.numpy())
    for level in ("O1", "OD", "O2"):
        with amp.auto_cast(level=level):
            out = lin(x).numpy()
        np.testing.assert_array_equal(out, product.astype(np.float32) + lin.bias.numpy())


def test_a_float16_bias_is_added_to_the_rounded_product():
    model, x = amp.decorate(layer(), level="O2"), mt.randn([5, 4])
    model.bias.set_value(mt.to_tensor([1e-3, 3.0, -0.3]).astype("float16"))
    product = fp16_product(x.numpy(), model.weight.numpy())
    with amp.auto_cast(level="O2"):
        out = model(x).numpy()
    np.testing.assert_array_equal(out, product + model.bias.numpy())  # two float16 roundings


def test_gradients_come_back_in_each_parameters_dtype():
    lin, x = layer(), mt.randn([5, 4])
    with amp.auto_cast():
        out = lin(x)
    g = np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)
    out.backward(mt.to_tensor(g))
    assert lin.weight.grad.dtype == F32 and lin.bias.grad.dtype == F32
    np.testing.assert_allclose(lin.bias.grad.numpy(), g.sum(0), rtol=1e-6)
    # the product's gradient is the add's float32 gradient cast to float16, then a fp16 GEMM
    g16 = g.astype(np.float16).astype(np.float32)
    x16 = x.numpy().astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(
        lin.weight.grad.numpy(), (x16.T @ g16).astype(np.float16).astype(np.float32)
    )


# ---- the loss curve against NumPy's matmul-then-add ---------------------------------------
def reference_curve(x, y, params, steps, lr, bias_in_float16=False):
    """Two Linear layers with a ReLU between, MSE loss, SGD, under O1 done by hand in NumPy.

    Paddle's rule: the matmuls run in float16 (float32 sums, one rounding), the bias add in
    float32, the ReLU in float32 (its input is float32), the loss in float32; gradients of the
    casts come back as casts. ``bias_in_float16`` is the old, wrong rule (the bias cast to
    float16 and added before the one rounding, a float16 output).
    """
    w1, b1, w2, b2 = (p.copy() for p in params)
    f16, f32 = np.float16, np.float32

    def gemm(a, b):  # float16 operands, float32 sums, one rounding
        return (a.astype(f16).astype(f32) @ b.astype(f16).astype(f32)).astype(f16)

    def dense(a, w, b):
        if bias_in_float16:
            exact = a.astype(f16).astype(f32) @ w.astype(f16).astype(f32)
            return (exact + b.astype(f16).astype(f32)).astype(f16).astype(f32)
        return gemm(a, w).astype(f32) + b

    losses = []
    for _ in range(steps):
        h = dense(x, w1, b1)
        r = np.maximum(h, 0).astype(f32)
        out = dense(r, w2, b2)
        diff = out - y
        losses.append(float((diff * diff).sum() / diff.size))
        g_out = (2.0 / diff.size * diff).astype(f32)
        g_out16 = g_out.astype(f16)
        gb2 = g_out.sum(0)
        gw2 = gemm(r.T, g_out16).astype(f32)
        g_r = gemm(g_out16, w2.T).astype(f32)
        g_h = (g_r * (h > 0)).astype(f32)
        gb1 = g_h.sum(0)
        gw1 = gemm(x.T, g_h.astype(f16)).astype(f32)
        w1, b1, w2, b2 = w1 - lr * gw1, b1 - lr * gb1, w2 - lr * gw2, b2 - lr * gb2
    return np.array(losses)


def test_o1_loss_curve_matches_numpy_matmul_then_add():
    mt.seed(11)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 6)).astype(np.float32)
    y = rng.standard_normal((16, 2)).astype(np.float32)
    for p in model.parameters():  # biases that are not round float16 numbers
        if p.ndim == 1:
            p.set_value(mt.to_tensor(rng.standard_normal(p.shape).astype(np.float32) * 0.1))
    params = [p.numpy().copy() for p in model.parameters()]
    opt = optimizer.SGD(learning_rate=0.05, parameters=model.parameters())
    losses = []
    for _ in range(20):
        with amp.auto_cast():
            loss = F.mse_loss(model(mt.to_tensor(x)), mt.to_tensor(y))
        loss.backward()
        opt.step()
        opt.clear_grad()
        losses.append(loss.item())
    expected = reference_curve(x, y, params, 20, 0.05)
    np.testing.assert_allclose(losses, expected, rtol=3e-6)  # float32 summation order only
    # The test can tell: the old rule (bias cast to float16, one rounding) is much farther.
    old = reference_curve(x, y, params, 20, 0.05, bias_in_float16=True)
    assert np.max(np.abs(old - expected) / np.abs(expected)) > 30 * 3e-6


@pytest.mark.parametrize(
    ("kwargs", "f16_bias", "no_bias"),
    [
        (dict(level="O1"), F16, F16),
        (dict(level="OD"), F32, F16),
        (dict(level="O2"), F16, F16),
        (dict(level="O2", use_promote=False), F16, F16),
    ],
)
def test_levels_md_table_for_a_float16_bias_and_no_bias(kwargs, f16_bias, no_bias):
    # docs/levels.md's table, rows two and three (row one is the float32-bias test above)
    x = mt.randn([2, 4])
    half_bias = amp.decorate(layer(), level="O2")  # weight and bias float16
    assert half_bias.bias.dtype == F16
    with amp.auto_cast(**kwargs):
        assert half_bias(x).dtype == f16_bias
        assert layer(bias=False)(x).dtype == no_bias
