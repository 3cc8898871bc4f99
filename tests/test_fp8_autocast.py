"""``amp.fp8_autocast``: Linear and matmul become FP8 GEMMs (emulated exactly on NumPy),
composed with ``auto_cast`` and ``decorate``, seen by the debugging tools."""

from __future__ import annotations

import numpy as np
import pytest
from nan_checker import nan_inf_checker

import minitorch_amp as mt
import minitorch_amp.nn.functional as F
from minitorch_amp import amp, nn
from minitorch_amp.amp import debugging
from minitorch_amp.backend import fp8
from minitorch_amp.backend.dtypes import float8_e4m3fn, float8_e5m2


def emulated_linear(x, w, scale_x, scale_w):
    """The FP8 GEMM written out: scaled saturating E4M3 casts, float32 products, unscaled."""
    xq = fp8.to_fp8(x * np.float32(scale_x), float8_e4m3fn, saturate=True).astype(np.float32)
    wq = fp8.to_fp8(w * np.float32(scale_w), float8_e4m3fn, saturate=True).astype(np.float32)
    return (xq @ wq) * (np.float32(1 / scale_x) * np.float32(1 / scale_w))


def test_linear_is_an_fp8_gemm_with_current_scaling():
    mt.seed(1)
    layer = nn.Linear(8, 4)
    x = mt.randn([5, 8])
    with amp.fp8_autocast(recipe=amp.Float8CurrentScaling()):
        y = layer(x)
    xs, ws = x.numpy(), layer.weight.numpy()
    scale_x, scale_w = 448 / np.abs(xs).max(), 448 / np.abs(ws).max()
    expected = emulated_linear(xs, ws, scale_x, scale_w) + layer.bias.numpy()
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-6, atol=1e-6)
    plain = layer(x).numpy()
    assert 0 < np.abs(y.numpy() - plain).max() < 0.1 * np.abs(plain).max()  # FP8's error


def test_outside_the_region_linear_and_matmul_are_unchanged():
    layer = nn.Linear(3, 2)
    x = mt.randn([4, 3])
    with amp.fp8_autocast(enabled=False):
        assert np.array_equal(layer(x).numpy(), F.linear(x, layer.weight, layer.bias).numpy())
        assert not amp.fp8.is_fp8_enabled()


def test_gradients_flow_through_fp8_gemms_in_e5m2_under_hybrid():
    mt.seed(2)
    layer = nn.Linear(16, 8)
    x = mt.randn([32, 16])
    x.stop_gradient = False
    with amp.fp8_autocast(recipe=amp.DelayedScaling()):
        out = layer(x)
    out.sum().backward()
    meta = amp.fp8_meta(layer.weight)
    assert meta.grad.dtype == float8_e5m2 and meta.input.dtype == float8_e4m3fn
    assert meta.grad.amax_history[-1] == 1.0  # the output gradient of sum() is all ones
    w = layer.weight.numpy()
    np.testing.assert_allclose(x.grad.numpy(), np.ones([32, 8]) @ w.T, rtol=0.07, atol=0.05)
    np.testing.assert_allclose(layer.bias.grad.numpy(), np.full(8, 32.0))
    assert layer.weight.grad.dtype == np.float32


def test_e4m3_format_takes_e4m3_gradients():
    layer = nn.Linear(4, 4)
    with amp.fp8_autocast(recipe=amp.DelayedScaling(fp8_format=amp.Format.E4M3)):
        out = layer(mt.randn([2, 4]))
    out.sum().backward()
    assert amp.fp8_meta(layer.weight).grad.dtype == float8_e4m3fn


def test_outputs_come_in_the_amp_levels_dtype_with_fp32_master_weights():
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = mt.optimizer.SGD(learning_rate=0.1, parameters=model.parameters())
    model, opt = amp.decorate(model, opt, level="O2", dtype="bfloat16")
    before = model[0].weight.numpy().astype(np.float32)
    with amp.auto_cast(level="O2", dtype="bfloat16"), amp.fp8_autocast():
        out = model(mt.randn([4, 8]))
    assert out.dtype == mt.bfloat16 and model[0].weight.dtype == mt.bfloat16
    out.astype("float32").mean().backward()  # no GradScaler: bf16 + FP8 need none
    opt.step()
    assert not np.array_equal(model[0].weight.numpy().astype(np.float32), before)
    assert opt._master_weights  # fp32 masters, as in O2


def test_each_weight_is_cast_to_fp8_once_per_region():
    layer = nn.Linear(4, 4)
    with amp.fp8_autocast():
        layer(mt.randn([2, 4]))
        layer(mt.randn([2, 4]))
    meta = amp.fp8_meta(layer.weight)
    assert np.count_nonzero(meta.weight.amax_history) == 1  # one cast of the weight
    assert np.count_nonzero(meta.input.amax_history) == 2  # the inputs: one each call
    with amp.fp8_autocast():
        layer(mt.randn([2, 4]))
    assert np.count_nonzero(meta.weight.amax_history) == 2  # a new region casts again


def test_a_weight_written_inside_the_region_is_cast_again():
    """An optimizer step (or set_value) inside one region: the next GEMM reads the new
    weight, not the FP8 copy of the old one."""
    mt.seed(0)
    layer = nn.Linear(4, 4)
    opt = mt.optimizer.SGD(0.5, parameters=layer.parameters())
    x = mt.randn([2, 4])
    with amp.fp8_autocast(recipe=amp.Float8CurrentScaling()):
        layer(x).astype("float32").sum().backward()
        opt.step()
        inside = layer(x)
    with amp.fp8_autocast(recipe=amp.Float8CurrentScaling()):
        fresh = layer(x)
    np.testing.assert_array_equal(inside.numpy(), fresh.numpy())
    with amp.fp8_autocast():
        layer(x)
        layer.weight.set_value(np.zeros([4, 4], "float32"))
        zeroed = layer(x)
    np.testing.assert_array_equal(zeroed.numpy(), np.broadcast_to(layer.bias.numpy(), [2, 4]))


def test_matmul_of_two_activations_uses_current_scaling():
    a, b = mt.randn([2, 3, 5]), mt.randn([2, 4, 5])
    a.stop_gradient = b.stop_gradient = False
    with amp.fp8_autocast():
        out = mt.matmul(a, b, transpose_y=True)
        same = a @ b.transpose([0, 2, 1])
    exact = a.numpy() @ b.numpy().transpose(0, 2, 1)
    np.testing.assert_allclose(out.numpy(), exact, rtol=0.15, atol=0.15)
    assert np.array_equal(out.numpy(), same.numpy())
    out.sum().backward()
    assert a.grad.shape == [2, 3, 5] and b.grad.shape == [2, 4, 5]


def test_f_linear_with_a_weight_made_this_step_takes_current_scaling_as_matmul_does():
    """``F.linear(x, w.T)`` (PyTorch's layout, a merged LoRA weight): a delayed state on
    the temporary would start at scale 1 every step and flush small values to zero."""
    mt.seed(0)
    w = mt.randn([8, 16]) * 1e-3  # [out, in]
    w.stop_gradient = False
    x = mt.randn([32, 16]) * 1e-3
    with amp.fp8_autocast(recipe=amp.DelayedScaling(amax_history_len=4)):
        w_t = w.T
        by_linear = F.linear(x, w_t)
        by_matmul = x.matmul(w, transpose_y=True)
    assert amp.fp8_meta(w_t) is None and amp.fp8_meta(w) is None
    np.testing.assert_array_equal(by_linear.numpy(), by_matmul.numpy())
    exact = x.numpy() @ w.numpy().T
    assert np.abs(by_linear.numpy() - exact).max() < 0.1 * np.abs(exact).max()
    by_linear.sum().backward()
    assert w.grad.shape == [8, 16] and np.abs(w.grad.numpy()).max() > 0


@pytest.mark.parametrize("shape", [[1], [2, 3], [1, 3]])
def test_a_bias_that_broadcasts_is_added_after_the_fp8_gemm_as_outside(shape):
    """Only a [out_features] bias is added in the epilogue; another shape that F.linear
    takes outside FP8 is added by the add op, whose gradient has the bias's shape."""
    mt.seed(0)
    w = mt.randn([4, 3])
    w.stop_gradient = False
    b = mt.randn(shape)
    b.stop_gradient = False
    x = mt.randn([2, 4])
    recipe = amp.Float8CurrentScaling()
    with amp.fp8_autocast(recipe=recipe):
        out = F.linear(x, w, b)
        expected = F.linear(x, w) + b
    np.testing.assert_array_equal(out.numpy(), expected.numpy())
    out.sum().backward()
    assert b.grad.shape == shape


@pytest.mark.parametrize("shape", [[5], [2, 3, 1]])
def test_a_bias_that_does_not_broadcast_is_refused_before_any_cast(shape):
    w = mt.randn([4, 3])
    w.stop_gradient = False
    with pytest.raises(ValueError, match=r"give it shape \[3\]"), amp.fp8_autocast():
        F.linear(mt.ones([2, 4]), w, mt.zeros(shape))
    assert amp.fp8_meta(w) is None  # no scaling state attached, no amax recorded


def test_a_product_of_bfloat16_and_float16_activations_promotes_to_float32_as_outside():
    x = mt.randn([2, 16]).astype("bfloat16")
    y = mt.randn([16, 3]).astype("float16")  # an activation, not a weight: current scaling
    x.stop_gradient = False
    with amp.fp8_autocast():
        out = x @ y
    assert out.dtype == (x @ y).dtype == np.float32
    out.sum().backward()
    assert x.grad.dtype == x.dtype


def test_operator_stats_count_fp8_gemms_and_casts(capsys):
    layer = nn.Linear(4, 4)
    with debugging.collect_operator_stats() as stats, amp.fp8_autocast():
        layer(mt.randn([2, 4])).sum().backward()
    counts = stats.counts
    assert counts["fp8_linear"]["fp32"] == 1
    assert counts["cast_to_fp8"]["other"] == 3  # input, weight, output gradient
    assert "fp8_linear" in capsys.readouterr().out


def test_the_tensor_checker_sees_an_overflow_the_saturating_cast_hides(capsys):
    layer = nn.Linear(2, 2)
    recipe = amp.DelayedScaling(amax_history_len=4)
    with amp.fp8_autocast(recipe=recipe):
        layer(mt.ones([1, 2]))  # amax 1 recorded: the next scale is 448
    with nan_inf_checker(), amp.fp8_autocast(recipe=recipe):
        y = layer(mt.to_tensor([[10.0, 1.0]]))  # 10 * 448 is past E4M3's 448
    report = capsys.readouterr().out
    assert "op=cast_to_fp8" in report and "num_nan=1" in report
    assert np.isfinite(y.numpy()).all()  # the GEMM itself saturated: finite


@pytest.mark.parametrize("recipe", [amp.DelayedScaling(amax_history_len=1), None])
def test_the_tensor_checker_sees_the_scale_the_cast_used_even_float32s_largest(capsys, recipe):
    """A tiny amax makes the scale float32's largest (TE's clamp), whose inverse's inverse
    is inf: the checker is shown x * scale, finite here, not x / scale_inv (0 * inf = NaN)."""
    recipe = recipe or amp.Float8CurrentScaling()
    layer = nn.Linear(4, 3)
    tiny = np.zeros((2, 4), "float32")
    tiny[0, 0] = 1e-38
    with amp.fp8_autocast(recipe=recipe):
        layer(mt.to_tensor(tiny))  # the input's next scale: float32's largest
    assert amp.fp8_meta(layer.weight).input.scale.tolist() == [np.finfo(np.float32).max]
    with nan_inf_checker(), amp.fp8_autocast(recipe=recipe):
        y = layer(mt.to_tensor(tiny))
    assert "op=cast_to_fp8" not in capsys.readouterr().out
    assert np.isfinite(y.numpy()).all()


def test_a_delayed_fp8_step_reads_nothing_back_to_the_host():
    layer = nn.Linear(4, 4)
    x = mt.randn([2, 4])
    with amp.fp8_autocast():  # the first step makes the scaling state
        layer(x).sum().backward()
    with mt.device.sync_debug_mode("error"), amp.fp8_autocast():  # a host read would raise
        layer(x).sum().backward()
    assert amp.fp8_meta(layer.weight).input.scale[0] == np.float32(448) / np.abs(x.numpy()).max()


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_enabled_must_be_a_bool(bad):
    with pytest.raises(TypeError, match="enabled must be True or False"):
        amp.fp8_autocast(enabled=bad)


def test_conv2d_runs_its_im2col_gemm_in_fp8():
    mt.seed(3)
    conv = nn.Conv2D(3, 4, 3, padding=1, stride=2)
    x = mt.randn([2, 3, 7, 7])
    with (
        amp.fp8_autocast(recipe=amp.Float8CurrentScaling()),
        debugging.collect_operator_stats() as stats,
    ):
        y = conv(x)
    xs, ws = x.numpy(), conv.weight.numpy()
    sx, sw = np.float32(448 / np.abs(xs).max()), np.float32(448 / np.abs(ws).max())
    xq = fp8.to_fp8(xs * sx, float8_e4m3fn, saturate=True).astype(np.float32)
    wq = fp8.to_fp8(ws * sw, float8_e4m3fn, saturate=True).astype(np.float32)
    plain = F.conv2d(mt.to_tensor(xq), mt.to_tensor(wq), conv.bias * 0, stride=2, padding=1)
    expected = (
        plain.numpy() * (np.float32(1 / sx) * np.float32(1 / sw)) + conv.bias.numpy()[:, None, None]
    )
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-5, atol=1e-5)
    assert stats.counts["fp8_conv2d"]["fp32"] == 1 and "conv2d" not in stats.counts


def test_conv2d_gradients_come_from_fp8_gemms_close_to_float32():
    mt.seed(4)
    conv = nn.Conv2D(2, 3, 3, padding=1)
    x = mt.randn([2, 2, 5, 5])
    x.stop_gradient = False
    conv(x).square().sum().backward()
    exact = x.grad.numpy().copy(), conv.weight.grad.numpy().copy()
    x.clear_grad()
    conv.clear_gradients()
    with amp.fp8_autocast():
        out = conv(x)
    out.square().sum().backward()
    assert amp.fp8_meta(conv.weight).grad.dtype == float8_e5m2
    for got, want in zip((x.grad.numpy(), conv.weight.grad.numpy()), exact):
        assert np.abs(got - want).max() < 0.15 * np.abs(want).max()


def test_a_depthwise_convolution_stays_the_usual_op():
    conv = nn.Conv2D(4, 4, 3, groups=4)
    with amp.fp8_autocast(), debugging.collect_operator_stats() as stats:
        conv(mt.randn([1, 4, 5, 5]))
    assert "depthwise_conv2d" in stats.counts and "fp8_conv2d" not in stats.counts


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_each_fp8_gemm_rounds_to_its_result_dtype_in_the_epilogue(level, monkeypatch):
    # one rounding in the GEMM instead of a float32 product and a cast (on a GPU a launch
    # and a float32 copy fewer per GEMM), the same bits: the epilogue's rounding is astype's
    from minitorch_amp.amp.fp8 import gemm

    asked, plain = [], gemm.fp8_matmul

    def recording(a, b, sa, sb, out_dtype, out=None, bias=None):
        asked.append(np.dtype(out_dtype).name)
        result = plain(a, b, sa, sb, out_dtype, out=out, bias=bias)
        wide = plain(a, b, sa, sb, "float32").astype(out_dtype)
        if bias is not None:  # (O2: the epilogue adds the bfloat16 bias, as an add would)
            wide = wide + bias
        assert np.array_equal(result.view(np.uint8), wide.view(np.uint8))
        return result

    monkeypatch.setattr(gemm, "fp8_matmul", recording)
    mt.seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16))
    opt = mt.optimizer.SGD(learning_rate=0.1, parameters=model.parameters())
    if level == "O2":
        model, opt = amp.decorate(model, opt, level="O2", dtype="bfloat16")
    with amp.auto_cast(level=level, dtype="bfloat16"), amp.fp8_autocast():
        out = model(mt.randn([8, 16]))
    out.astype("float32").mean().backward()
    weight = "bfloat16" if level == "O2" else "float32"  # O1: the fp32 weight's gradient
    # forward: two products; backward: the second layer's dx and dW, the first's dW alone
    assert asked == ["bfloat16", "bfloat16", "bfloat16", weight, weight]


def test_a_float64_input_gets_the_float32_product_widened():
    from minitorch_amp.amp.fp8.gemm import fp8_gemm

    a = fp8.to_fp8(np.float32([[1.5, -2.0], [0.25, 3.0]]), float8_e4m3fn)
    one = np.ones(1, np.float32)
    out = fp8_gemm(a, a, one, one, np.float64)
    assert out.dtype == np.float64
    assert np.array_equal(out, fp8_gemm(a, a, one, one).astype(np.float64))


@pytest.mark.parametrize("kind", ["linear", "conv2d"])
def test_an_input_that_does_not_fit_changes_no_scaling_state(kind):
    """The shapes are checked before the weight is cast: a cast records an amax, rolls the
    history and moves the scale, and a first call would attach a scaling state."""
    mt.seed(0)
    layer = nn.Linear(4, 3) if kind == "linear" else nn.Conv2D(2, 3, 3)
    good, bad = (
        (mt.ones([2, 4]), mt.ones([2, 5]))
        if kind == "linear"
        else (mt.ones([1, 2, 5, 5]), mt.ones([1, 3, 5, 5]))
    )
    recipe = amp.DelayedScaling(amax_history_len=4)
    with pytest.raises(ValueError, match=kind), amp.fp8_autocast(recipe=recipe):
        layer(bad)
    assert amp.fp8_meta(layer.weight) is None  # no state attached by the failed first call
    with amp.fp8_autocast(recipe=recipe):
        layer(good)
    meta = amp.fp8_meta(layer.weight)
    states = (meta.input, meta.weight, meta.grad)
    before = [(s.amax_history.copy(), s.scale.copy()) for s in states]
    with pytest.raises(ValueError, match=kind), amp.fp8_autocast(recipe=recipe):
        layer(bad)
    for s, (history, scale) in zip(states, before):
        np.testing.assert_array_equal(s.amax_history, history)
        np.testing.assert_array_equal(s.scale, scale)
