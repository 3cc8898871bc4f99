"""``F.pad`` and ``nn.Pad1D/2D/3D``: Paddle's argument orders (its documented examples), its
modes against PyTorch, the errors for widths that cannot work, and the ops AMP sees.

The op catalogue (``pad``, ``pad3d`` in op_catalogue.py) checks forward and backward against
NumPy on generated shapes; this file checks what a catalogue row cannot say.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
import minitorch_amp.nn.functional as F
from minitorch_amp import amp, nn
from minitorch_amp.amp import debugging

X5 = np.array([[[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]]])  # Paddle's example input, [1, 1, 1, 2, 3]
ROW = np.array([[[1.0, 2.0, 3.0]]])  # [1, 1, 3]


def pad(x, *args, **kwargs) -> np.ndarray:
    return F.pad(mt.to_tensor(x), *args, **kwargs).numpy()


# ---- Paddle's orders ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, kwargs, expected",
    [
        # two widths per axis, first axis first (pad_from_left_axis=True, the default)
        ([0, 0, 0, 0, 0, 0, 1, 1, 0, 0], {}, [[[[[0, 0, 0], [1, 2, 3], [4, 5, 6], [0, 0, 0]]]]]),
        # ... and from the last axis with pad_from_left_axis=False: axis 1 gets (1, 1)
        (
            [0, 0, 0, 0, 0, 0, 1, 1, 0, 0],
            {"pad_from_left_axis": False},
            [[[[[0, 0, 0], [0, 0, 0]]], [[[1, 2, 3], [4, 5, 6]]], [[[0, 0, 0], [0, 0, 0]]]]],
        ),
        # fewer widths: from the last axis
        ([1, 0, 0, 1], {}, [[[[[0, 1, 2, 3], [0, 4, 5, 6], [0, 0, 0, 0]]]]]),
        # 2 * (ndim - 2) widths: the spatial form [left, right, top, bottom, front, back]
        (
            [2, 2, 1, 1, 0, 0],
            {},
            [[[[[0] * 7, [0, 0, 1, 2, 3, 0, 0], [0, 0, 4, 5, 6, 0, 0], [0] * 7]]]],
        ),
        (
            [2, 2, 1, 1, 0, 0],
            {"mode": "reflect"},
            [[[[[6, 5, 4, 5, 6, 5, 4], [3, 2, 1, 2, 3, 2, 1]] * 2]]],
        ),
        (
            [2, 2, 1, 1, 0, 0],
            {"mode": "replicate"},
            [[[[[1, 1, 1, 2, 3, 3, 3]] * 2 + [[4, 4, 4, 5, 6, 6, 6]] * 2]]],
        ),
        (
            [2, 2, 1, 1, 0, 0],
            {"mode": "circular"},
            [[[[[5, 6, 4, 5, 6, 4, 5], [2, 3, 1, 2, 3, 1, 2]] * 2]]],
        ),
    ],
)
def test_pad_gives_the_outputs_paddle_documents(args, kwargs, expected):
    np.testing.assert_array_equal(pad(X5, args, **kwargs), np.array(expected, dtype=float))


def test_pad_examples_from_paddles_docstring():
    ones_around = [[[1.0, 1.0, 1.0, 2.0, 3.0, 1.0, 1.0, 1.0]]]
    np.testing.assert_array_equal(
        pad(ROW, [0, 0, 0, 0, 2, 3], value=1, data_format="NCL"), ones_around
    )
    np.testing.assert_array_equal(pad(ROW, [2, 3], value=1, data_format="NCL"), ones_around)
    grid = np.arange(1.0, 7.0).reshape(1, 1, 2, 3)
    wrapped = [[6, 4, 5, 6, 4, 5], [3, 1, 2, 3, 1, 2]] * 2
    np.testing.assert_array_equal(pad(grid, [1, 2, 1, 1], value=1, mode="circular"), [[wrapped]])
    first_axis_first = [[[0, 0, 0], [0, 0, 0]], [[1, 2, 3], [0, 0, 0]]]
    np.testing.assert_array_equal(pad(ROW, [1, 0, 0, 1, 0, 0]), first_axis_first)
    last_axis_first = [[[0, 1, 2, 3], [0, 0, 0, 0]]]
    np.testing.assert_array_equal(
        pad(ROW, [1, 0, 0, 1, 0, 0], pad_from_left_axis=False), last_axis_first
    )
    np.testing.assert_array_equal(pad(ROW, [1, 0, 0, 1]), last_axis_first)


def test_an_odd_number_of_constant_widths_gets_a_zero_after_it():
    x = np.ones((2, 2))
    np.testing.assert_array_equal(pad(x, [1, 2, 3]), np.pad(x, [(3, 0), (1, 2)]))


def test_channels_last_pads_the_spatial_axes_not_the_channels():
    x = np.random.default_rng(0).uniform(size=(1, 2, 3, 4))  # N, H, W, C
    got = pad(x, [1, 2, 0, 1], mode="replicate", data_format="NHWC")
    np.testing.assert_array_equal(got, np.pad(x, [(0, 0), (0, 1), (1, 2), (0, 0)], mode="edge"))


def test_circular_padding_wraps_more_than_once_as_paddle_does():
    got = pad(ROW, [4, 5], mode="circular")
    np.testing.assert_array_equal(got, np.pad(ROW, [(0, 0), (0, 0), (4, 5)], mode="wrap"))


def test_pad_given_as_a_tensor_is_the_spatial_form():
    grid = np.arange(6.0).reshape(1, 1, 2, 3)
    got = pad(grid, mt.to_tensor([1, 0, 0, 1]))
    np.testing.assert_array_equal(got, np.pad(grid, [(0, 0), (0, 0), (0, 1), (1, 0)]))


def test_constant_padding_keeps_integer_dtypes():
    out = F.pad(mt.to_tensor([[1, 2]]), [1, 1], value=7)
    assert out.dtype == mt.int64
    np.testing.assert_array_equal(out.numpy(), [[7, 1, 2, 7]])


# ---- against PyTorch -----------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape, widths", [((2, 3, 5), [2, 1]), ((1, 2, 3, 4), [1, 3, 2, 0]),
                                           ((1, 1, 3, 2, 4), [0, 3, 1, 1, 2, 1])])  # fmt: skip
def test_modes_match_pytorch_forward_and_backward(mode, shape, widths):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x, upstream = rng.standard_normal(shape), rng.standard_normal
    t = mt.to_tensor(x)
    t.stop_gradient = False
    out = F.pad(t, widths, mode=mode, value=0.5)
    g = upstream(out.shape)
    out.backward(mt.to_tensor(g))
    tx = torch.from_numpy(x).requires_grad_()
    kwargs = {"value": 0.5} if mode == "constant" else {}
    want = torch.nn.functional.pad(tx, widths, mode=mode, **kwargs)
    want.backward(torch.from_numpy(g))
    np.testing.assert_allclose(out.numpy(), want.detach().numpy(), rtol=0, atol=0)
    np.testing.assert_allclose(t.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_two_widths_per_axis_match_pytorch_with_pad_from_left_axis_false():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(2).standard_normal((2, 3, 4))
    widths = [1, 0, 2, 1, 0, 3]
    want = torch.nn.functional.pad(torch.from_numpy(x), widths).numpy()
    np.testing.assert_array_equal(pad(x, widths, pad_from_left_axis=False), want)
    assert pad(x, widths).shape != want.shape  # Paddle's default reads them first axis first


# ---- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: pad(ROW, [1, 1], mode="edge"), ValueError, r"mode must be one of .*'edge'"),
        (lambda: pad(ROW, [1] * 8), ValueError, r"8 widths for a 3-D input; give at most .*6"),
        (
            lambda: pad(ROW, [3, 0], mode="reflect"),
            ValueError,
            r"reflect padding \(3, 0\) on "
            r"axis 2 must be smaller than the axis's size 3",
        ),
        (
            lambda: pad(np.ones((2, 3)), [1, 1], mode="reflect"),
            ValueError,
            r"spatial axes of a 3-D, 4-D or 5-D input.*2-D input of shape \[2, 3\]",
        ),
        (
            lambda: pad(ROW, [1, 1, 1, 1], mode="replicate"),
            ValueError,
            r"'replicate' on a 3-D input takes 2 widths \[pad_left, pad_right\], got 4",
        ),
        (lambda: pad(ROW, [-1, 0]), ValueError, r"widths must be >= 0"),
        (lambda: pad(ROW, [1.5, 0]), TypeError, r"list, tuple or Tensor of ints"),
        (lambda: pad(ROW, 1), TypeError, r"list, tuple or Tensor of ints"),
        (
            lambda: pad(ROW, [1, 1], mode="circular", data_format="NHWC"),
            ValueError,
            r"data_format for a 3-D input must be one of \('NCL', 'NLC'\)",
        ),
        (
            lambda: pad(np.ones((1, 1, 0)), [1, 0], mode="circular"),
            ValueError,
            r"cannot pad axis 2 of size 0",
        ),
    ],
)
def test_widths_that_cannot_work_raise_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_pytorchs_refusal_of_wide_reflection_is_paddles_too():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        torch.nn.functional.pad(torch.from_numpy(ROW), [3, 0], mode="reflect")
    with pytest.raises(ValueError, match="must be smaller"):
        pad(ROW, [3, 0], mode="reflect")


# ---- ops recorded, AMP -------------------------------------------------------------------------
def test_paddle_records_pad_for_any_rank_and_pad3d_for_the_spatial_form():
    x = mt.ones([1, 1, 2, 3])
    with debugging.collect_operator_stats() as stats:
        F.pad(x, [1, 1, 0, 0, 0, 0, 0, 0])
        F.pad(x, [1, 1, 0, 0])
        F.pad(x, [1, 1, 0, 0], mode="reflect")
    assert stats.counts["pad"]["fp32"] == 1
    assert stats.counts["pad3d"]["fp32"] == 2


def test_pad_follows_its_input_under_auto_cast():
    x = mt.ones([1, 2, 3], dtype="float16")
    with amp.auto_cast(level="O1"):
        assert F.pad(x, [1, 1], mode="reflect").dtype == mt.float16
        assert F.pad(x, [1, 1], value=0.1).dtype == mt.float16


# ---- layers ------------------------------------------------------------------------------------
def test_pad_layers_call_f_pad_with_their_widths():
    x = mt.to_tensor(np.arange(24.0).reshape(1, 2, 3, 4))
    layer = nn.Pad2D([1, 0, 2, 1], mode="reflect")
    np.testing.assert_array_equal(layer(x).numpy(), F.pad(x, [1, 0, 2, 1], mode="reflect").numpy())
    assert nn.Pad1D(2)(mt.ones([1, 1, 3])).shape == [1, 1, 7]
    assert nn.Pad3D(1, value=2.0)(mt.ones([1, 1, 1, 1, 1])).numpy().sum() == 2.0 * 26 + 1
    channels_last = nn.Pad2D([1, 1, 0, 0], mode="replicate", data_format="NHWC")
    assert channels_last(mt.ones([1, 2, 3, 4])).shape == [1, 2, 5, 4]
    assert repr(nn.Pad1D([1, 2])) == (
        "Pad1D(padding=[1, 2], mode=constant, value=0.0, data_format=NCL)"
    )


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: nn.Pad2D([1, 2]), r"Pad2D: padding must be an int or 4 widths"),
        (lambda: nn.Pad1D(1, mode="wrap"), r"Pad1D: mode must be one of"),
        (lambda: nn.Pad3D(1, data_format="NCHW"), r"Pad3D: data_format must be one of"),
    ],
)
def test_pad_layers_check_their_arguments_when_built(make, message):
    with pytest.raises(ValueError, match=message):
        make()
