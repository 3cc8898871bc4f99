"""Pooling, batch norm 2-D/3-D, Flatten, l1_loss, expand and mm, as Paddle defines them.

Forward against float64 loops and backward against finite differences for pool2d and expand
are in the catalogue (test_ops.py); these are the Paddle-specific rules around them.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
import minitorch_amp.nn.functional as F
from minitorch_amp import amp, nn


# ---- pooling -------------------------------------------------------------------------------------
def test_pool_stride_defaults_to_the_kernel_and_ceil_mode_follows_paddles_formula():
    x = mt.ones([1, 1, 5, 5])
    assert nn.MaxPool2D(2)(x).shape == [1, 1, 2, 2]  # (5 - 2) // 2 + 1
    assert nn.MaxPool2D(2, ceil_mode=True)(x).shape == [1, 1, 3, 3]  # (5 - 2 + 1) // 2 + 1
    assert nn.AvgPool2D(3, stride=2, padding=1)(x).shape == [1, 1, 3, 3]
    assert nn.MaxPool2D(3, stride=2, padding="same")(x).shape == [1, 1, 3, 3]  # ceil(5 / 2)
    assert nn.AvgPool2D(2, padding="valid")(x).shape == [1, 1, 2, 2]


def test_max_pool_padding_never_wins_and_the_first_maximum_gets_the_gradient():
    x = mt.to_tensor([[[[-5.0, -1.0], [-1.0, -3.0]]]], stop_gradient=False)
    out = F.max_pool2d(x, 2, stride=1, padding=1)  # windows full of -inf padding elsewhere
    np.testing.assert_array_equal(out.numpy()[0, 0], [[-5, -1, -1], [-1, -1, -1], [-1, -1, -3]])
    F.max_pool2d(x, 2).sum().backward()  # the tie -1, -1: the first in row-major order wins
    np.testing.assert_array_equal(x.grad.numpy()[0, 0], [[0.0, 1.0], [0.0, 0.0]])


def test_avg_pool_exclusive_counts_only_input_elements():
    x = mt.to_tensor(np.arange(1.0, 10.0).reshape(1, 1, 3, 3))
    corner = {
        "exclusive": F.avg_pool2d(x, 3, stride=1, padding=1).numpy()[0, 0, 0, 0],
        "inclusive": F.avg_pool2d(x, 3, stride=1, padding=1, exclusive=False).numpy()[0, 0, 0, 0],
        "divisor": F.avg_pool2d(x, 3, stride=1, padding=1, divisor_override=2).numpy()[0, 0, 0, 0],
    }
    assert corner == {"exclusive": 3.0, "inclusive": 12.0 / 9, "divisor": 6.0}  # 1+2+4+5 = 12


def test_adaptive_avg_pool_bins_overlap_like_paddles():
    x = mt.to_tensor(np.arange(5.0).reshape(1, 1, 1, 5))
    # 5 -> 3 bins: [0, 2), [1, 4), [3, 5)
    np.testing.assert_allclose(F.adaptive_avg_pool2d(x, [1, 3]).numpy()[0, 0, 0], [0.5, 2.0, 3.5])
    assert F.adaptive_avg_pool2d(mt.ones([2, 3, 4, 6]), [None, 2]).shape == [2, 3, 4, 2]
    assert nn.AdaptiveAvgPool2D(1, data_format="NHWC")(mt.ones([2, 4, 6, 3])).shape == [2, 1, 1, 3]


def test_pools_in_nhwc_equal_nchw_with_the_channels_moved():
    x = np.random.default_rng(0).standard_normal((2, 3, 6, 5))
    for pool in (F.max_pool2d, F.avg_pool2d):
        nchw = pool(mt.to_tensor(x), 3, 2, 1).numpy()
        nhwc = pool(mt.to_tensor(x.transpose(0, 2, 3, 1)), 3, 2, 1, data_format="NHWC").numpy()
        np.testing.assert_allclose(nhwc.transpose(0, 3, 1, 2), nchw, rtol=1e-12)


def test_pooling_follows_its_input_under_amp_and_sums_in_float32():
    with amp.auto_cast(level="O1"):
        assert F.max_pool2d(mt.ones([1, 1, 4, 4]), 2).dtype == mt.float32  # gray
        half = mt.ones([1, 1, 4, 4], "float16")
        assert F.avg_pool2d(half, 2).dtype == mt.float16
    ones = mt.ones([1, 1, 64, 64], "float16")  # a float16 running sum stops at 2048 of 4096
    assert F.adaptive_avg_pool2d(ones, 1).item() == F.avg_pool2d(ones, 64).item() == 1.0


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: nn.MaxPool2D(2, return_mask=True), "return_mask=True"),
        (lambda: nn.MaxPool2D(2, padding="same", ceil_mode=True), "ceil_mode must be False"),
        (lambda: nn.AvgPool2D(0), "kernel_size must be positive"),
        (lambda: nn.AvgPool2D(2, divisor_override=0), "divisor_override must be positive"),
        (lambda: nn.AdaptiveAvgPool2D([1, 2, 3]), "output_size must be an int or a list"),
        (lambda: F.max_pool2d(mt.ones([2, 4, 4]), 2), "x must be 4-D"),
        (lambda: F.avg_pool2d(mt.ones([1, 1, 2, 2]), 3), "output would be 0x0"),
    ],
)
def test_pooling_rejects_bad_arguments(call, message):
    with pytest.raises((ValueError, NotImplementedError), match=message):
        call()


# ---- batch norm ----------------------------------------------------------------------------------
def test_batch_norm_2d_statistics_are_over_n_h_w_with_paddles_momentum():
    x = np.random.default_rng(0).normal(2.0, 3.0, (4, 3, 5, 5))
    bn = nn.BatchNorm2D(3)
    out = bn(mt.to_tensor(x, dtype="float32")).numpy()
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))  # the biased variance
    np.testing.assert_allclose(bn._mean.numpy(), 0.1 * mean, rtol=1e-5)
    np.testing.assert_allclose(bn._variance.numpy(), 0.9 + 0.1 * var, rtol=1e-5)
    expected = (x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    bn.eval()  # inference: the running statistics, which it leaves alone
    running = bn._mean.numpy().copy()
    inferred = bn(mt.to_tensor(x, dtype="float32")).numpy()
    rm, rv = running[None, :, None, None], bn._variance.numpy()[None, :, None, None]
    np.testing.assert_allclose(inferred, (x - rm) / np.sqrt(rv + 1e-5), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(bn._mean.numpy(), running)


def test_batch_norm_3d_and_channels_last_formats():
    x = np.random.default_rng(1).standard_normal((2, 4, 3, 3, 2))
    ncdhw = nn.BatchNorm3D(4)(mt.to_tensor(x)).numpy()
    ndhwc = nn.BatchNorm3D(4, data_format="NDHWC")(mt.to_tensor(x.transpose(0, 2, 3, 4, 1)))
    np.testing.assert_allclose(ndhwc.numpy().transpose(0, 4, 1, 2, 3), ncdhw, atol=1e-5)
    nhwc = nn.BatchNorm2D(4, data_format="NHWC")(mt.to_tensor(x[..., 0].transpose(0, 2, 3, 1)))
    nchw = nn.BatchNorm2D(4)(mt.to_tensor(x[..., 0]))
    np.testing.assert_allclose(nhwc.numpy().transpose(0, 3, 1, 2), nchw.numpy(), atol=1e-5)


def test_batch_norm_layers_keep_paddles_state_names_and_stay_float32_under_o2():
    model = nn.Sequential(nn.Conv2D(1, 2, 1), nn.BatchNorm2D(2), nn.BatchNorm(2), nn.Flatten())
    assert [k for k in model.state_dict() if k.startswith("1.")] == [
        "1.weight", "1.bias", "1._mean", "1._variance",
    ]  # fmt: skip
    model = amp.decorate(model, level="O2")
    assert model[0].weight.dtype == mt.float16
    assert {model[i].weight.dtype for i in (1, 2)} == {mt.float32}
    assert {model[i]._mean.dtype for i in (1, 2)} == {mt.float32}
    with amp.auto_cast(level="O2"):
        out = model(mt.ones([2, 1, 3, 3]))
    assert out.dtype == mt.float16 and out.shape == [2, 18]  # Flatten: start_axis=1


def test_batch_norm_rejects_the_wrong_rank_and_channels_without_touching_statistics():
    bn = nn.BatchNorm2D(3)
    with pytest.raises(ValueError, match=r"BatchNorm2D expects a 4-D input, got shape \[2, 3\]"):
        bn(mt.ones([2, 3]))
    with pytest.raises(ValueError, match=r"BatchNorm2D\(3\) got 4 channels"):
        bn(mt.ones([2, 4, 2, 2]))
    with pytest.raises(ValueError, match="data_format must be one of 'NCDHW', 'NDHWC'"):
        nn.BatchNorm3D(3, data_format="NCHW")
    assert not bn._mean.numpy().any() and (bn._variance.numpy() == 1).all()


def test_paddle_batch_norm_layer_act_global_and_trainable_statistics():
    x = mt.to_tensor(np.random.default_rng(2).normal(1.0, 2.0, (8, 3, 2, 2)), dtype="float32")
    bn = nn.BatchNorm(3, act="relu", moving_mean_name="bn_mean")
    assert bn._mean.name == "bn_mean" and float(bn(x).numpy().min()) == 0.0
    frozen = nn.BatchNorm(3, use_global_stats=True)  # always the running statistics
    np.testing.assert_allclose(frozen(x).numpy(), x.numpy() / np.sqrt(1 + 1e-5), rtol=1e-6)
    assert not frozen._mean.numpy().any()
    trainable = nn.BatchNorm(3, trainable_statistics=True).eval()  # batch statistics in eval
    trainable(x)
    assert trainable._mean.numpy().any()
    plain = nn.BatchNorm(3).eval()
    plain(x)
    assert not plain._mean.numpy().any()
    assert nn.BatchNorm(3, dtype="float16").weight.dtype == mt.float32  # Paddle keeps float32
    with pytest.raises(ValueError, match="act must be None or one of"):
        nn.BatchNorm(3, act="swish")


# ---- Flatten, l1_loss, expand, mm ----------------------------------------------------------------
def test_flatten_layer_keeps_the_batch_axis_the_function_does_not():
    x = mt.ones([2, 3, 4, 5])
    assert nn.Flatten()(x).shape == [2, 60]
    assert nn.Flatten(1, 2)(x).shape == [2, 12, 5]
    assert mt.flatten(x).shape == [120]


def test_l1_loss_reductions_gradient_and_amp():
    x = mt.to_tensor([1.0, -2.0, 0.5, 0.0], stop_gradient=False)
    y = mt.to_tensor([0.0, 0.0, 1.0, 0.0])
    assert F.l1_loss(x, y).item() == 0.875  # (1 + 2 + 0.5 + 0) / 4
    assert F.l1_loss(x, y, reduction="sum").item() == 3.5
    np.testing.assert_array_equal(F.l1_loss(x, y, reduction="none").numpy(), [1, 2, 0.5, 0])
    F.l1_loss(x, y).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.25, -0.25, -0.25, 0.0])  # sign / n
    with amp.auto_cast(level="O1"):  # subtract and abs follow float16, mean is black
        assert F.l1_loss(x.astype("float16"), y.astype("float16")).dtype == mt.float32
    with pytest.raises(ValueError, match="reduction"):
        nn.L1Loss(reduction="avg")


def test_expand_as_and_broadcast_to_sum_the_gradient_back():
    x = mt.to_tensor([[1.0], [2.0]], stop_gradient=False)
    out = mt.expand_as(x, mt.zeros([3, 2, 4]))
    assert out.shape == [3, 2, 4]
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[12.0], [12.0]])
    assert mt.broadcast_to(x, [2, 5]).shape == mt.expand(x, [-1, 5]).shape == [2, 5]
    with pytest.raises(ValueError, match=r"\[2, 1\] cannot be expanded to \[3, 4\]"):
        mt.expand(x, [3, 4])
    with pytest.raises(ValueError, match="-1 in shape"):
        mt.expand(x, [-1, 2, 3])


def test_mm_is_matmul_and_white_under_amp():
    a, b = mt.to_tensor([[1.0, 2.0]]), mt.to_tensor([[3.0], [4.0]])
    assert mt.mm(a, b).item() == 11.0
    with amp.auto_cast(level="O1"):
        assert mt.mm(a, b).dtype == mt.float16
