"""nn.initializer, ParamAttr and parameter creation: formulas, bounds, names, reproducibility.

Spreads are checked against the closed-form standard deviation of each distribution on
40000 draws (relative error of the sample std is about 0.4%, so 3% tolerances cannot flake).
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import nn
from minitorch_amp.nn import initializer as I


def mlp() -> nn.Layer:
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def test_create_parameter_defaults_and_param_attr():
    layer = nn.Layer()
    w = layer.create_parameter([4, 6])
    b = layer.create_parameter([6], is_bias=True)
    assert w.name.startswith(layer.full_name() + ".w_") and not w.stop_gradient
    assert np.abs(w.numpy()).max() <= np.sqrt(6 / 10) and np.all(b.numpy() == 0)
    attr = nn.ParamAttr(
        name="frozen", initializer=I.Constant(2.0), learning_rate=0.5, trainable=False
    )
    p = layer.create_parameter([2], attr=attr)
    assert p.name == "frozen" and p.stop_gradient and p.optimize_attr["learning_rate"] == 0.5
    assert np.all(p.numpy() == 2.0)
    assert layer.create_parameter([2], attr=False) is None


def test_linear_weight_is_in_by_out_xavier_uniform_and_bias_is_zero():
    mt.seed(3)
    fc = nn.Linear(200, 300)
    w = fc.weight.numpy().astype(np.float64)
    bound = np.sqrt(6 / (200 + 300))
    assert fc.weight.shape == [200, 300] and fc.bias.shape == [300]
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert abs(w.mean()) < 0.01 * bound
    np.testing.assert_allclose(w.std(), bound / np.sqrt(3), rtol=0.02)  # std of U[-b, b]
    assert np.all(fc.bias.numpy() == 0)
    x = np.ones([5, 200], np.float32)
    np.testing.assert_allclose(fc(mt.to_tensor(x)).numpy(), x @ w, rtol=1e-4, atol=1e-5)
    assert nn.Linear(2, 3, bias_attr=False).bias is None


def test_seed_makes_two_models_identical():
    mt.seed(42)
    a = mlp()
    mt.seed(42)
    b = mlp()
    for pa, pb in zip(a.parameters(), b.parameters()):
        np.testing.assert_array_equal(pa.numpy(), pb.numpy())
    c = mlp()
    assert not np.array_equal(a[0].weight.numpy(), c[0].weight.numpy())


@pytest.mark.parametrize(
    ("init", "std"),
    [
        (I.Normal(mean=1.0, std=2.0), 2.0),
        (I.XavierNormal(), np.sqrt(2 / (100 + 400))),
        (I.KaimingNormal(), np.sqrt(2 / 100)),
        (I.KaimingUniform(), np.sqrt(6 / 100) / np.sqrt(3)),
        (I.Uniform(-3.0, 1.0), 4 / np.sqrt(12)),
    ],
)
def test_random_initializers_have_the_documented_spread(init, std):
    p = nn.Layer().create_parameter([100, 400], attr=init)
    np.testing.assert_allclose(p.numpy().std(), std, rtol=0.03)


def test_bounded_initializers_stay_in_bounds():
    layer = nn.Layer()
    t = layer.create_parameter([100, 100], attr=I.TruncatedNormal(mean=1.0, std=0.5)).numpy()
    assert t.min() >= 0.0 and t.max() <= 2.0 and abs(t.mean() - 1.0) < 0.02
    # the truncated distribution has std 0.88 * sigma, not sigma
    np.testing.assert_allclose(t.std(), 0.5 * 0.8796, rtol=0.03)
    k = layer.create_parameter([50, 8], attr=I.KaimingUniform()).numpy()
    assert np.abs(k).max() <= np.sqrt(6 / 50)
    u = layer.create_parameter([1000], attr=I.Uniform(2.0, 3.0)).numpy()
    assert u.min() >= 2.0 and u.max() < 3.0


def test_constant_assign_and_refilling_a_parameter_in_place():
    fc = nn.Linear(2, 2, weight_attr=I.Assign(np.array([[1.0, 2.0], [3.0, 4.0]])))
    np.testing.assert_array_equal(fc.weight.numpy(), [[1.0, 2.0], [3.0, 4.0]])
    weight = fc.weight
    I.Constant(0.25)(fc.weight)
    assert fc.weight is weight and np.all(weight.numpy() == 0.25)
    with pytest.raises(ValueError, match="shape"):
        nn.Linear(3, 3, weight_attr=I.Assign(np.zeros([2, 2])))
    assert I.calculate_gain("tanh") == pytest.approx(5 / 3)


def test_float16_parameters_are_drawn_in_float32_and_rounded():
    p = nn.Layer(dtype="float16").create_parameter([64, 64])
    assert p.dtype == mt.float16 and np.abs(p.numpy()).max() <= np.sqrt(6 / 128) + 1e-3


def test_fans_follow_paddle_layouts():
    linear = nn.Layer().create_parameter([30, 10], attr=I.XavierUniform())
    assert np.abs(linear.numpy()).max() <= np.sqrt(6 / 40)
    conv = I.KaimingNormal()._scale([8, 4, 3, 3])  # [out_c, in_c, kh, kw]: fan_in = 4 * 9
    assert conv == pytest.approx(np.sqrt(2 / 36))
    assert I.KaimingNormal(fan_in=2.0)._scale([8, 4]) == pytest.approx(1.0)
    assert I.XavierUniform(fan_in=1, fan_out=2)._limit([8, 4]) == pytest.approx(np.sqrt(2))
    leaky = I.KaimingNormal(negative_slope=0.5, nonlinearity="leaky_relu")._scale([4, 1])
    assert leaky == pytest.approx(np.sqrt(2 / 1.25) / 2)
    with pytest.raises(ValueError, match="unknown nonlinearity"):
        I.KaimingUniform(nonlinearity="swish")


def test_param_attr_forms_and_flags():
    layer = nn.Layer()
    assert layer.create_parameter([2], attr="custom_name").name == "custom_name"
    assert np.all(layer.create_parameter([2], attr=I.Constant(3.0)).numpy() == 3.0)

    def decay(param, grad):
        return grad

    p = layer.create_parameter([2], attr=nn.ParamAttr(need_clip=False, regularizer=decay))
    assert p.need_clip is False and p.regularizer is decay
    assert nn.Parameter(np.zeros(2)).regularizer is None
    with pytest.raises(TypeError, match="initializer"):
        nn.ParamAttr(initializer="normal")
    with pytest.raises(TypeError, match="parameter attribute"):
        layer.create_parameter([2], attr=3)
    with pytest.raises(ValueError, match="negative dimension"):
        layer.create_parameter([2, -1])


def test_frozen_batch_norm_scale_with_weight_attr_false():
    bn = nn.BatchNorm1D(3, weight_attr=False)
    assert bn.weight.stop_gradient and np.all(bn.weight.numpy() == 1.0)
    assert not bn.bias.stop_gradient
