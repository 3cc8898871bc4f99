"""Conv1D / Conv2D and F.conv1d / F.conv2d: Paddle's shapes, defaults, padding forms and AMP.

The op itself (forward against float64 loops, backward against finite differences, every
padding / stride / dilation / groups combination) is checked by the catalogue in test_ops.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from op_cases_conv import ref_conv

import minitorch_amp as mt
import minitorch_amp.nn.functional as F
from minitorch_amp import amp, nn


def _ops_in_graph(out) -> set[str]:
    names, stack = set(), [out._node]
    while stack:
        node = stack.pop()
        if node is not None:
            names.add(node.op.name)
            stack.extend(t._node for t in node.inputs if t is not None)
    return names


# ---- layers: parameters and defaults -------------------------------------------------------------
def test_conv2d_parameters_have_paddles_shapes_and_initialisation():
    mt.seed(0)
    conv = nn.Conv2D(16, 32, 3, groups=2)
    assert conv.weight.shape == [32, 8, 3, 3] and conv.bias.shape == [32]
    # Paddle: Normal(0, sqrt(2 / (kh * kw * in_channels))), groups not counted; zero bias
    std = math.sqrt(2.0 / (9 * 16))
    assert abs(conv.weight.numpy().std() / std - 1) < 0.05
    assert abs(conv.weight.numpy().mean()) < 0.1 * std
    assert not conv.bias.numpy().any()
    assert nn.Conv2D(1, 2, 3, bias_attr=False).bias is None
    assert list(conv.state_dict()) == ["weight", "bias"]


def test_conv1d_parameters_and_output_length():
    conv = nn.Conv1D(3, 5, 4, stride=2, padding=1, dilation=1)
    assert conv.weight.shape == [5, 3, 4]
    # (L + 2 - (4 - 1 + 1)) // 2 + 1 = (11 - 4) // 2 + 1 = 4
    assert conv(mt.ones([2, 3, 9])).shape == [2, 5, 4]


def test_repr_lists_what_differs_from_the_defaults_as_paddle_does():
    assert repr(nn.Conv2D(3, 8, 3)) == "Conv2D(3, 8, kernel_size=[3, 3], data_format=NCHW)"
    text = repr(nn.Conv2D(4, 8, [3, 1], stride=2, padding=1, dilation=2, groups=2))
    assert text == (
        "Conv2D(4, 8, kernel_size=[3, 1], stride=[2, 2], padding=1, dilation=[2, 2], "
        "groups=2, data_format=NCHW)"
    )


# ---- padding forms -------------------------------------------------------------------------------
@pytest.fixture
def images():
    rng = np.random.default_rng(0)
    return rng.standard_normal((2, 3, 7, 6)), rng.standard_normal((4, 3, 3, 2))


@pytest.mark.parametrize(
    "padding, explicit",
    [
        (1, [1, 1, 1, 1]),
        ([1, 2], [1, 1, 2, 2]),
        ((2, 0, 1, 3), [2, 0, 1, 3]),
        ([[0, 0], [0, 0], [2, 0], [1, 3]], [2, 0, 1, 3]),
        ("valid", [0, 0, 0, 0]),
        ("VALID", [0, 0, 0, 0]),
    ],
)
def test_every_paddle_padding_form_means_the_same_explicit_pads(images, padding, explicit):
    x, w = images
    out = F.conv2d(mt.to_tensor(x), mt.to_tensor(w), padding=padding)
    expected = ref_conv(x, w, stride=[1, 1], padding=explicit, dilation=[1, 1], groups=1)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("stride", [1, 2, 3])
def test_same_padding_gives_ceil_size_over_stride_with_the_extra_pad_at_the_end(images, stride):
    x, w = images  # H=7, W=6; kernel 3x2
    out = F.conv2d(mt.to_tensor(x), mt.to_tensor(w), stride=stride, padding="same")
    assert out.shape == [2, 4, math.ceil(7 / stride), math.ceil(6 / stride)]
    pads = []
    for size, k in ((7, 3), (6, 2)):
        total = max((math.ceil(size / stride) - 1) * stride + k - size, 0)
        pads += [total // 2, total - total // 2]
    expected = ref_conv(x, w, stride=[stride] * 2, padding=pads, dilation=[1, 1], groups=1)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12, atol=1e-12)


def test_same_padding_ignores_dilation_as_paddle_does(images):
    x, w = mt.to_tensor(images[0]), mt.to_tensor(images[1])
    dilated = F.conv2d(x, w, padding="same", dilation=2)
    np.testing.assert_array_equal(dilated.numpy(), F.conv2d(x, w, padding="same").numpy())


def test_nhwc_is_nchw_with_the_channels_moved(images):
    x, w = images
    b = mt.to_tensor([0.5, -1.0, 2.0, 0.0], dtype="float64")
    nchw = F.conv2d(mt.to_tensor(x), mt.to_tensor(w), b, padding=1, stride=2)
    nhwc = F.conv2d(
        mt.to_tensor(x.transpose(0, 2, 3, 1)), mt.to_tensor(w), b, padding=1, stride=2,
        data_format="NHWC",
    )  # fmt: skip
    np.testing.assert_allclose(nhwc.numpy().transpose(0, 3, 1, 2), nchw.numpy(), rtol=1e-12)


def test_conv1d_is_conv2d_of_height_one_in_both_layouts():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 4, 9)), rng.standard_normal((6, 2, 3))
    out = F.conv1d(mt.to_tensor(x), mt.to_tensor(w), padding=[2, 1], stride=2, groups=2)
    expected = ref_conv(
        x[:, :, None], w[:, :, None], stride=[1, 2], padding=[0, 0, 2, 1], dilation=[1, 1],
        groups=2,
    )[:, :, 0]  # fmt: skip
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12, atol=1e-12)
    nlc = F.conv1d(mt.to_tensor(x.transpose(0, 2, 1)), mt.to_tensor(w), padding="same", groups=2,
                   data_format="NLC")  # fmt: skip
    ncl = F.conv1d(mt.to_tensor(x), mt.to_tensor(w), padding="same", groups=2)
    assert ncl.shape == [2, 6, 9]
    np.testing.assert_allclose(nlc.numpy().transpose(0, 2, 1), ncl.numpy(), rtol=1e-12)


@pytest.mark.parametrize(
    "mode, numpy_mode", [("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap")]
)
def test_padding_modes_pad_like_numpy_then_convolve(mode, numpy_mode):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 2, 5, 4))
    conv = nn.Conv2D(2, 3, 3, padding=[2, 1], padding_mode=mode).to(dtype="float64")
    padded = np.pad(x, ((0, 0), (0, 0), (2, 2), (1, 1)), mode=numpy_mode)
    w, b = conv.weight.numpy(), conv.bias.numpy()
    expected = ref_conv(padded, w, b, stride=[1, 1], padding=[0] * 4, dilation=[1, 1], groups=1)
    xt = mt.to_tensor(x, stop_gradient=False)
    out = conv(xt)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12, atol=1e-12)
    # every tap reads an element of x (padding copies included), so the gradients of
    # sum(out) add up to (number of outputs per channel) * sum(weight)
    out.sum().backward()
    assert out.shape == [1, 3, 7, 4]
    assert xt.grad.numpy().sum() == pytest.approx(7 * 4 * w.sum(), rel=1e-12)


def test_bad_arguments_say_what_is_wrong_and_build_nothing():
    x = mt.ones([1, 4, 5, 5])
    with pytest.raises(ValueError, match=r"groups=3 must divide the input channels \(4\)"):
        F.conv2d(x, mt.ones([6, 1, 3, 3]), groups=3)
    with pytest.raises(ValueError, match=r"4 channels.*expects 2"):
        F.conv2d(x, mt.ones([2, 1, 3, 3]), groups=2)
    with pytest.raises(ValueError, match="unknown padding 'full'"):
        F.conv2d(x, mt.ones([2, 4, 3, 3]), padding="full")
    with pytest.raises(ValueError, match="pads the batch or channel axis"):
        F.conv2d(x, mt.ones([2, 4, 3, 3]), padding=[[0, 0], [1, 1], [1, 1], [1, 1]])
    with pytest.raises(ValueError, match=r"output would be -1x-1"):
        F.conv2d(x, mt.ones([2, 4, 7, 7]))
    with pytest.raises(ValueError, match="stride must be positive"):
        F.conv2d(x, mt.ones([2, 4, 3, 3]), stride=0)
    with pytest.raises(ValueError, match="data_format must be 'NCHW' or 'NHWC'"):
        F.conv2d(x, mt.ones([2, 4, 3, 3]), data_format="NCL")
    with pytest.raises(ValueError, match="x must be 4-D"):
        F.conv2d(mt.ones([4, 5, 5]), mt.ones([2, 4, 3, 3]))
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2D(4, 2, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="needs an int padding"):
        nn.Conv2D(4, 2, 3, padding="same", padding_mode="reflect")
    with pytest.raises(ValueError, match="in_channels must be a positive integer"):
        nn.Conv1D(0, 2, 3)


# ---- which op runs, and AMP ----------------------------------------------------------------------
def test_depthwise_convolutions_run_paddles_depthwise_op():
    x = mt.ones([1, 4, 5, 5])
    x.stop_gradient = False
    assert "depthwise_conv2d" in _ops_in_graph(nn.Conv2D(4, 8, 3, groups=4)(x))
    assert "conv2d" in _ops_in_graph(nn.Conv2D(4, 8, 3, groups=2)(x))
    assert "conv2d" in _ops_in_graph(nn.Conv2D(1, 8, 3)(x[:, :1]))  # one channel: not depthwise


def test_o1_conv_runs_in_float16_and_a_float32_bias_promotes_the_output():
    # Paddle: conv2d is white, the bias add is gray (promotes to the float32 bias)
    x = mt.randn([2, 3, 6, 6])
    with amp.auto_cast(level="O1"):
        with_bias = nn.Conv2D(3, 4, 3)(x)
        without = nn.Conv2D(3, 4, 3, bias_attr=False)(x)
        depthwise = nn.Conv2D(3, 6, 3, groups=3, bias_attr=False)(x)
    assert with_bias.dtype == mt.float32 and without.dtype == mt.float16
    assert depthwise.dtype == mt.float32  # gray with float32 input and weight
    with amp.auto_cast(level="O1", custom_white_list=["depthwise_conv2d"]):
        assert nn.Conv2D(3, 6, 3, groups=3, bias_attr=False)(x).dtype == mt.float16
    with amp.auto_cast(level="O1", custom_black_list=["conv2d"]):
        assert nn.Conv2D(3, 4, 3, bias_attr=False)(x).dtype == mt.float32


def test_o2_decorated_conv_is_float16_end_to_end_and_its_grads_too():
    model = nn.Sequential(nn.Conv2D(3, 4, 3, padding=1), nn.BatchNorm2D(4), nn.ReLU())
    opt = mt.optimizer.Adam(parameters=model.parameters())
    model, opt = amp.decorate(model, opt, level="O2")
    assert model[0].weight.dtype == mt.float16 and model[1].weight.dtype == mt.float32
    with amp.auto_cast(level="O2"):
        out = model(mt.randn([2, 3, 5, 5]))
    assert out.dtype == mt.float16
    out.astype("float32").mean().backward()
    assert model[0].weight.grad.dtype == mt.float16 and model[0].bias.grad.dtype == mt.float16
    assert model[1].weight.grad.dtype == mt.float32


# ---- float16 numerics: the GEMM's, rounded once --------------------------------------------------
def test_float16_conv_accumulates_in_float32():
    # 40 channels x 8 x 8 taps of 1 * 1 = 2560: a float16 running sum would stop at 2048
    out = F.conv2d(mt.ones([1, 40, 8, 8], "float16"), mt.ones([1, 40, 8, 8], "float16"))
    assert out.dtype == mt.float16 and out.item() == 2560.0


def test_float16_input_gradient_sums_the_windows_before_rounding():
    # Each window tap carries 1 + 2**-11 (two output channels: 1 and 2**-11), which float16
    # would round to 1.0. The centre pixel is read by all 9 taps of a 3x3 kernel: its
    # gradient is 9 * (1 + 2**-11) = 9.0044, rounded once to float16: 9.0078125 (9.0 if each
    # tap had been rounded first).
    w = np.zeros((2, 1, 3, 3), np.float16)
    w[0], w[1] = 1.0, 2.0**-11
    x = mt.to_tensor(np.zeros((1, 1, 5, 5)), dtype="float16", stop_gradient=False)
    F.conv2d(x, mt.to_tensor(w), padding=1).sum().backward()
    assert x.grad.dtype == mt.float16 and x.grad.numpy()[0, 0, 2, 2] == np.float16(9.0078125)


def test_float16_forward_and_backward_stay_close_to_float64():
    rng = np.random.default_rng(3)
    x, w = rng.uniform(-1, 1, (2, 6, 9, 9)), rng.uniform(-1, 1, (8, 3, 3, 3))
    grads = {}
    for dtype in ("float16", "float64"):
        xt = mt.to_tensor(x, dtype=dtype, stop_gradient=False)
        wt = mt.to_tensor(w, dtype=dtype, stop_gradient=False)
        out = F.conv2d(xt, wt, padding=1, stride=2, groups=2)
        out.backward(grad_tensor=mt.to_tensor(np.ones(out.shape), dtype=dtype))
        grads[dtype] = [
            a.astype(np.float64) for a in (out.numpy(), xt.grad.numpy(), wt.grad.numpy())
        ]
    for low, high in zip(grads["float16"], grads["float64"]):
        np.testing.assert_allclose(low, high, rtol=5e-3, atol=5e-3 * np.abs(high).max())


# ---- GPU == CPU ----------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize(
    "fn",
    [
        lambda x, w: F.conv2d(x, w, stride=2, padding=1),
        lambda x, w: F.conv2d(x[:, :2], w[:4, :1], groups=2, dilation=2, padding="same"),
        lambda x, w: F.max_pool2d(F.conv2d(x, w), 3, 2, 1, ceil_mode=True),
        lambda x, w: F.avg_pool2d(F.conv2d(x, w), 2, exclusive=False),
        lambda x, w: F.adaptive_avg_pool2d(F.conv2d(x, w), 3),
    ],
    ids=["conv", "grouped", "max_pool", "avg_pool", "adaptive"],
)
def test_gpu_matches_cpu(fn, dtype):
    rng = np.random.default_rng(4)
    arrays = [rng.uniform(-1, 1, (4, 6, 11, 9)), rng.uniform(-1, 1, (8, 6, 3, 3))]
    results = []
    for place in ("cpu", "gpu:0"):
        x, w = (mt.to_tensor(a, dtype=dtype, place=place, stop_gradient=False) for a in arrays)
        out = fn(x, w)
        out.astype("float32").sum().backward()
        results.append([t.numpy().astype(np.float64) for t in (out, x.grad, w.grad)])
    tol = {"rtol": 1e-2, "atol": 1e-2} if dtype == "float16" else {"rtol": 1e-5, "atol": 1e-5}
    for cpu, gpu in zip(*results):
        np.testing.assert_allclose(gpu, cpu, **tol)
