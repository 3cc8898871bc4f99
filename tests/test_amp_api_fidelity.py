"""Paddle's AMP API as Paddle's own tests use it, and PyTorch's autocast spellings.

Each test names the Paddle test (test/amp/...) or PyTorch behaviour whose expectation it
states: the op lists' shape, the optimizer ops in operator statistics, device checks,
the tensor checker's backward ops and step window, the autocast queries and autocast.
"""

from __future__ import annotations

import numpy as np
import pytest
from nan_checker import nan_inf_checker

import minitorch_amp as mt
from minitorch_amp import amp, nn, optimizer
from minitorch_amp.amp import debugging
from minitorch_amp.autograd import engine

F16, F32 = np.dtype("float16"), np.dtype("float32")


# ---- white_list() / black_list(): {dtype: {level: set}} (test_amp_list.py) -----------------
def test_lists_have_paddles_shape_and_contents():
    white, black = amp.white_list(), amp.black_list()
    assert set(white) == set(black) == {"float16", "bfloat16"}
    assert all(set(white[d]) == set(black[d]) == {"OD", "O1", "O2"} for d in white)
    interp = ["linear_interp_v2", "nearest_interp_v2", "bilinear_interp_v2", "bicubic_interp_v2"]
    assert set(interp + ["trilinear_interp_v2"]) <= black["float16"]["O2"]
    assert set(interp) <= black["float16"]["O1"] and black["float16"]["OD"] == set()
    assert {"matmul_v2", "conv2d", "matmul", "linear"} <= white["float16"]["O1"]
    assert "log" not in white["float16"]["O1"] and "elementwise_add" not in white["float16"]["O1"]
    assert {"log", "exp", "softmax", "reduce_mean"} <= black["float16"]["O1"]
    assert "exp" not in black["float16"]["O2"]
    # current Paddle: BF16_WHITE_LIST = WHITE_LIST, BF16_BLACK_LIST = FP16_BLACK_LIST
    assert white["bfloat16"]["O1"] == white["float16"]["O1"] - {"fused_attention"} - {
        "fused_feedforward",
        "fake_quantize_dequantize_abs_max",
        "fake_quantize_dequantize_moving_average_abs_max",
    }
    assert black["bfloat16"] == black["float16"]
    white["float16"]["O1"].add("exp")  # a copy: changing it changes nothing
    assert "exp" not in amp.white_list()["float16"]["O1"]


def test_lists_agree_with_the_op_table_on_every_paddle_name_we_map():
    from minitorch_amp.amp.op_lists import PADDLE_NAMES

    white, black = amp.white_list()["float16"]["O1"], amp.black_list()["float16"]["O1"]
    for paddle_name, ours in PADDLE_NAMES.items():
        if paddle_name in white or paddle_name in black:
            assert (paddle_name in white) == (ours in white), paddle_name
            assert (paddle_name in black) == (ours in black), paddle_name


def test_amp_state_reports_paddles_full_lists_with_the_custom_names_moved():
    # Paddle's test_imperative_auto_mixed_precision (custom_op_list): inside amp_guard,
    # tracer._get_amp_op_list() is white_list()/black_list() with the custom names moved.
    base_white = amp.white_list()["float16"]["O1"]
    base_black = amp.black_list()["float16"]["O1"]
    x = mt.rand([2, 2])
    with amp.auto_cast(custom_white_list=["log"], custom_black_list=["conv2d"]):
        state = amp.amp_state()
        assert set(state.white) == (base_white | {"log"}) - {"conv2d"}
        assert set(state.black) == (base_black - {"log"}) | {"conv2d"}
        assert mt.log(x).dtype == F16  # and the ops here follow them
    # names Paddle lists that are no op here are reported too, and custom names as given
    with amp.auto_cast(level="O2", custom_white_list=["elementwise_add"]):
        state = amp.amp_state()
        assert set(state.black) == amp.black_list()["float16"]["O2"]
        assert {"bilinear_interp_v2", "lookup_table_v2", "scatter"} <= state.black
        assert "elementwise_add" in state.white and "add" not in state.white
        assert (x + x).dtype == F16  # elementwise_add is our add
    with amp.auto_cast(dtype="bfloat16"):
        state = amp.amp_state()
        assert set(state.white) == amp.white_list()["bfloat16"]["O1"]
        assert set(state.black) == amp.black_list()["bfloat16"]["O1"]
    with amp.auto_cast(level="OD"):
        assert amp.amp_state().black == frozenset()


def test_an_op_without_a_float16_kernel_in_paddle_runs_in_float32_under_o1_and_o2():
    # Paddle's test_imperative_auto_mixed_precision (amp_guard_upsupported_fp16_op):
    # "expand_as_v2 has no fp16 kernel", so AMP runs it in float32 whatever the lists say.
    conv = nn.Conv2D(3, 2, 3, bias_attr=False)
    data = mt.rand([2, 3, 6, 6])
    with amp.auto_cast(True):
        out_fp16 = conv(data)
        out_fp32 = mt.expand_as(out_fp16, out_fp16)
    with amp.auto_cast(True, level="O2"):
        out_purefp16_fp16 = conv(data)
        out_purefp16_fp32 = mt.expand_as(out_purefp16_fp16, out_purefp16_fp16)
    assert (out_fp16.dtype, out_fp32.dtype) == (F16, F32)
    assert (out_purefp16_fp16.dtype, out_purefp16_fp32.dtype) == (F16, F32)
    h = mt.ones([2, 1]).astype("float16")
    for region in (
        amp.auto_cast(level="O2", use_promote=False),  # every non-black op in float16 ...
        amp.auto_cast(custom_white_list=["expand_as_v2"]),  # ... or listed white
        amp.auto_cast(dtype="bfloat16"),  # no bfloat16 kernel either
    ):
        with region:
            assert mt.expand_as(h, mt.zeros([2, 3])).dtype == F32
            assert mt.expand(h, [2, 3]).dtype != F32  # expand_v2 has low-precision kernels
    # the gradient comes back in the input's dtype, through the recorded cast
    x = mt.ones([2, 1]).astype("float16")
    x.stop_gradient = False
    with amp.auto_cast():
        y = mt.expand_as(x, mt.zeros([2, 3]))
    y.sum().backward()
    assert x.grad.dtype == F16 and x.grad.numpy().tolist() == [[3.0], [3.0]]


def test_custom_white_elementwise_add_as_in_paddles_test():
    with amp.auto_cast(custom_white_list={"elementwise_add"}):
        out1 = mt.rand([2, 3]) + mt.rand([2, 3])
        out2 = out1.mean()
        out3 = mt.log(out2)
    assert (out1.dtype, out2.dtype, out3.dtype) == (F16, F32, F32)
    with amp.auto_cast(custom_black_list=["bilinear_interp_v2"]):  # a Paddle op we lack: no-op
        assert mt.matmul(mt.ones([2, 2]), mt.ones([2, 2])).dtype == F16


# ---- operator statistics with master_grad (test_amp_master_grad.py) ---------------------
class _SimpleNet(nn.Layer):
    def __init__(self, input_size, output_size):
        super().__init__()
        self.linear = nn.Linear(input_size, output_size)

    def forward(self, x):
        return self.linear(x)


@pytest.fixture()
def own_backward_hooks(monkeypatch):
    """master_grad registers a post-backward hook for good: give it a list of its own."""
    monkeypatch.setattr(engine, "post_backward_hooks", list(engine.post_backward_hooks))


def _run_master_grad(total_steps, accumulate_batches_num, model, opt):
    model, opt = amp.decorate(model, optimizers=opt, level="O2", master_grad=True)
    scaler = amp.GradScaler()
    rng = np.random.default_rng(0)
    debugging.enable_operator_stats_collection()
    for i in range(total_steps):
        x = rng.random((2, 2)).astype("float32")
        label = rng.random((2, 4)).astype("float32")
        with amp.auto_cast(level="O2"):
            out = model(mt.to_tensor(x))
            loss = nn.functional.l1_loss(out, mt.to_tensor(label))
        scaled = scaler.scale(loss)
        scaled.backward()
        fp32_grads = [model.linear.weight.grad, model.linear.bias.grad]
        if (i + 1) % accumulate_batches_num == 0:
            scaler.step(opt)
            scaler.update()
            opt.clear_grad()
    return fp32_grads, debugging.disable_operator_stats_collection()


def test_master_grad_casts_count_as_in_paddles_operator_statistics(own_backward_hooks):
    total_steps, accumulate_batches_num = 4, 2
    model = _SimpleNet(2, 4)
    opt = optimizer.Adam(parameters=model.parameters())
    fp32_grads, op_list = _run_master_grad(total_steps, accumulate_batches_num, model, opt)
    assert all(g.dtype == F32 for g in fp32_grads)
    # Paddle's matmul_v2 row is our linear (one op, see porting.md)
    assert op_list["linear"]["fp16"] == total_steps
    assert op_list["adam_"]["fp16"] == 2 * (total_steps / accumulate_batches_num)
    # "two additional casts are called when constructing master grad": casts count by their
    # source dtype, so the float16 ones are: the output to float32 for l1_loss (one a step),
    # the grads to float32 after the first backward of each accumulation (two parameters,
    # twice), and the fp32 master weights made from the float16 parameters (two, once).
    assert op_list["cast"]["fp16"] == total_steps * 2 + 2


def test_master_grad_with_momentum_and_l1_decay_gives_fp32_grads(own_backward_hooks):
    model = _SimpleNet(2, 4)
    opt = optimizer.Momentum(
        parameters=model.parameters(), weight_decay=mt.regularizer.L1Decay(0.0001)
    )
    fp32_grads, _ = _run_master_grad(4, 1, model, opt)
    assert all(g.dtype == F32 for g in fp32_grads)


# ---- operator statistics count the optimizer's update (test_amp_promote.py) --------------
@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda ps: optimizer.AdamW(learning_rate=0.01, parameters=ps), "adamw_"),
        (lambda ps: optimizer.Adam(learning_rate=0.01, parameters=ps), "adam_"),
        (lambda ps: optimizer.SGD(learning_rate=0.01, parameters=ps), "sgd_"),
        (lambda ps: optimizer.Momentum(learning_rate=0.01, parameters=ps), "momentum_"),
    ],
)
def test_operator_stats_count_the_update_once_per_parameter_in_its_dtype(make, name):
    mt.seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    model, opt = amp.decorate(model, make(model.parameters()), level="O2")
    scaler = amp.GradScaler(init_loss_scaling=8.0)
    amp.debugging.enable_operator_stats_collection()
    with amp.auto_cast(level="O2"):
        loss = model(mt.randn([3, 4])).mean()
    scaled = scaler.scale(loss)
    scaled.backward()
    scaler.minimize(opt, scaled)
    counts = amp.debugging.disable_operator_stats_collection()
    # Paddle's O2 test: {"adamw_": 4} float16 calls for 4 decorated parameters
    assert counts[name] == {"fp16": 4, "bf16": 0, "fp32": 0, "other": 0}
    assert counts["check_finite_and_unscale"]["fp16"] == 1
    with debugging.collect_operator_stats() as stats:  # float32 parameters: fp32 calls
        fp32_model = nn.Linear(4, 2)
        opt32 = make(fp32_model.parameters())
        fp32_model(mt.randn([3, 4])).mean().backward()
        opt32.step()
    assert stats.counts[name]["fp32"] == 2 and "check_finite_and_unscale" not in stats.counts


# ---- is_float16_supported rejects unknown devices (test_amp_api / Paddle's place check) ----
@pytest.mark.parametrize("device", ["xxx", 111, "gpu:x", "npu"])
def test_unknown_devices_raise_value_error(device):
    with pytest.raises(ValueError, match="unknown device"):
        amp.is_float16_supported(device)
    with pytest.raises(ValueError, match="unknown device"):
        amp.is_bfloat16_supported(device)


def test_known_devices_answer():
    assert amp.is_float16_supported() and amp.is_float16_supported("cpu")
    assert amp.is_float16_supported(mt.Place("cpu"))
    assert amp.is_bfloat16_supported("cpu")  # emulated with ml_dtypes (docs/bf16.md)
    if not mt.is_compiled_with_cuda():  # Paddle: a GPU it cannot use is a ValueError too
        with pytest.raises(ValueError, match="cannot use 'gpu'"):
            amp.is_float16_supported("gpu")
        with pytest.raises(ValueError, match="cannot use 'gpu'"):
            amp.is_bfloat16_supported("gpu")


# ---- the tensor checker sees backward ops; its step window stops (test_tensor_checker.py) --
def _pow_then_divide():
    x = mt.to_tensor([1.0, 0.0, 0.0], stop_gradient=False)
    y = mt.to_tensor([0.0, 0.0, 1.0])
    try:
        with np.errstate(all="ignore"):
            res = mt.pow(x, y)
            res.sum().backward()
            mt.divide(y, x)
    except RuntimeError as e:
        return int(str(e).split("num_nan=")[1].split(",")[0])
    return 0


def test_checker_checks_elementwise_pow_grad_and_stops_at_the_window_end(capsys):
    config = debugging.TensorCheckerConfig(
        enable=True,
        debug_mode=debugging.DebugMode.CHECK_NAN_INF_AND_ABORT,
        checked_op_list=["elementwise_pow_grad"],
        skipped_op_list=["elementwise_div"],
        debug_step=[0, 3],
    )
    debugging.TensorCheckerConfig.current_step_id = 0
    try:
        for iter_id in range(5):
            debugging.enable_tensor_checker(config)
            if iter_id <= 2:
                assert debugging.TensorCheckerConfig.current_step_id == iter_id + 1
                assert _pow_then_divide() == 1  # d/dx of x**y at x=0, y=0: 0 * inf = nan
            else:
                assert debugging.TensorCheckerConfig.current_step_id == 3  # stays at the end
                assert _pow_then_divide() == 0
            debugging.disable_tensor_checker()
    finally:
        debugging.disable_tensor_checker()
        debugging.TensorCheckerConfig.current_step_id = 0
    assert "op=pow_grad" in capsys.readouterr().out


def test_checker_op_names_are_checked():
    with pytest.raises(ValueError, match="unknown op 'elementwise_pow_gard'"):
        debugging.TensorCheckerConfig(True, checked_op_list=["elementwise_pow_gard"])
    config = debugging.TensorCheckerConfig(True, checked_op_list=["pow_grad", "elementwise_add"])
    assert config.checked_op_list == {"pow_grad", "add"}


def test_window_that_starts_above_the_counter_is_not_entered_paddles_rule():
    config = debugging.TensorCheckerConfig(True, debug_step=[2, 4])
    debugging.TensorCheckerConfig.current_step_id = 0
    try:
        assert not config.update_and_check_step_id()
        assert debugging.TensorCheckerConfig.current_step_id == 0
        debugging.TensorCheckerConfig.current_step_id = 2
        assert config.update_and_check_step_id() and config.update_and_check_step_id()
        assert not config.update_and_check_step_id()
        assert debugging.TensorCheckerConfig.current_step_id == 4
    finally:
        debugging.TensorCheckerConfig.current_step_id = 0


# ---- get_autocast_dtype / is_autocast_enabled (test_get_autocast_dtype, test_is_autocast_) --
@pytest.mark.parametrize("device", [None, "cpu", "gpu:0", "cuda"])
def test_autocast_queries_follow_the_region(device):
    def dtypes():
        return {
            mt.get_autocast_dtype(device),
            mt.get_autocast_gpu_dtype(),
            amp.get_autocast_dtype(device),
            amp.get_autocast_gpu_dtype(),
            amp.get_autocast_cpu_dtype(),
            amp.get_autocast_cpu_dtype(device),
        }

    assert dtypes() == {F16}  # the default, outside any region; equal to the string too
    assert all(d == "float16" and d == mt.float16 for d in dtypes())
    assert not mt.is_autocast_enabled(device) and not amp.is_autocast_enabled(device)
    with amp.auto_cast(True):
        assert mt.is_autocast_enabled(device) and amp.is_autocast_enabled(device)
        assert dtypes() == {F16}
        with amp.auto_cast(False):
            assert not mt.is_autocast_enabled(device)
        assert mt.is_autocast_enabled(device)
    assert not mt.is_autocast_enabled(device)
    with pytest.raises(ValueError, match="unknown device"):
        mt.get_autocast_dtype("xxx")


# ---- PyTorch's autocast ---------------------------------------------------------------------
def test_autocast_is_o1_as_a_context_and_a_decorator():
    a = mt.randn([2, 3])
    with mt.autocast("cuda"):
        assert mt.matmul(a, a.T).dtype == F16 and mt.exp(a).dtype == F32
        assert (a + a).dtype == F32  # gray: follows its float32 inputs (O1)
        assert amp.amp_state().level == "O1"
    with amp.autocast(device_type="cpu", dtype=mt.float16, enabled=False):
        assert mt.matmul(a, a.T).dtype == F32

    @amp.autocast("cuda")
    def product(x):
        return mt.matmul(x, x.T)

    assert product(a).dtype == F16 and not mt.is_autocast_enabled()


def test_autocast_refuses_arguments_in_the_wrong_slot():
    with pytest.raises(ValueError, match="device_type"):
        amp.autocast("xpu")
    with pytest.raises(ValueError, match="device_type"):
        amp.autocast(True)  # PyTorch's first argument is the device type
    with pytest.raises(TypeError, match="enabled must be True or False"):
        mt.cuda.amp.autocast("cuda")  # torch.cuda.amp.autocast's first argument is enabled
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        amp.autocast("cuda", dtype="float32")
    with pytest.raises(TypeError, match="cache_enabled"):
        amp.autocast("cuda", cache_enabled="no")


def test_autocast_takes_any_floating_dtype_when_disabled_and_turns_a_cpu_float32_region_off():
    # PyTorch: a disabled region accepts any dtype (torch.autocast("cpu", dtype=torch.float32,
    # enabled=False), a common way to write "no autocast here"); an enabled CPU region whose
    # dtype is not float16/bfloat16 warns and runs without autocast.
    a = mt.randn([2, 3])
    with amp.autocast("cuda"):
        for device, dtype in (("cpu", mt.float32), ("cuda", "float32"), ("cpu", "float64")):
            with amp.autocast(device, dtype=dtype, enabled=False):
                assert mt.matmul(a, a.T).dtype == F32 and not mt.is_autocast_enabled()
            assert mt.is_autocast_enabled()  # the outer region is back
        with mt.cuda.amp.autocast(enabled=False, dtype=mt.float32):
            assert amp.amp_state() is None
    unsupported = "In CPU autocast, but the target dtype is not supported"
    with pytest.warns(UserWarning, match=unsupported), amp.autocast("cpu", dtype=mt.float32):
        assert mt.matmul(a, a.T).dtype == F32 and not mt.is_autocast_enabled()
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        amp.autocast("cpu", dtype="int8", enabled=False)  # no floating dtype at all


def test_cache_enabled_false_casts_each_use():
    model = nn.Linear(4, 4, bias_attr=False)
    x = mt.randn([2, 4])
    amp.reset_cast_counts()
    with amp.autocast("cuda"):
        model(x)
        model(x)
    assert amp.cast_counts()["weight"] == 1 and amp.cast_counts()["cache_hit"] == 1
    amp.reset_cast_counts()
    with amp.autocast("cuda", cache_enabled=False):
        model(x)
        model(x)
    assert amp.cast_counts()["weight"] == 2 and amp.cast_counts()["cache_hit"] == 0
    amp.reset_cast_counts()


def test_cuda_amp_autocast_and_namespaces():
    from minitorch_amp.cuda.amp import GradScaler, autocast

    assert amp.GradScaler is mt.device.amp.GradScaler  # PyTorch's spelling: PyTorch's keys
    assert issubclass(GradScaler, amp.GradScaler) and "growth_factor" in GradScaler().state_dict()
    with autocast():
        assert mt.matmul(mt.ones([2, 2]), mt.ones([2, 2])).dtype == F16
    with autocast(enabled=False):
        assert not mt.is_autocast_enabled()


# ---- rows of porting.md's AMP-surface table ---------------------------------------------
def test_operator_stats_show_a_linear_as_one_row_in_its_output_dtype():
    model = nn.Linear(4, 2)
    with debugging.collect_operator_stats() as stats, amp.auto_cast():
        model(mt.randn([3, 4]))
    # Paddle shows a matmul_v2 (fp16) row and an elementwise_add (fp32) row; ours is one op
    assert stats.counts["linear"] == {"fp16": 0, "bf16": 0, "fp32": 1, "other": 0}
    assert "matmul" not in stats.counts and "add" not in stats.counts
    assert stats.counts["cast"]["fp32"] == 2  # x and the weight, cast from float32


def test_a_step_skipped_on_the_host_counts_no_update():
    model = nn.Linear(4, 2)
    opt = optimizer.Adam(learning_rate=0.1, parameters=model.parameters())
    scaler = amp.GradScaler(init_loss_scaling=2.0**16)
    with debugging.collect_operator_stats() as stats:
        with np.errstate(all="ignore"):
            with amp.auto_cast():
                loss = model(mt.full([2, 4], 6e4)).sum()  # float16 product overflows
            scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    assert "adam_" not in stats.counts and stats.counts["check_finite_and_unscale"]["fp32"] == 1


class _NanBackward(mt.autograd.PyLayer):
    @staticmethod
    def forward(ctx, a):
        return a * 2.0

    @staticmethod
    def backward(ctx, grad):
        return grad * float("nan")


def test_checker_sees_gradients_of_create_graph_and_of_a_py_layer(capsys):
    x = mt.to_tensor([0.0, 1.0], stop_gradient=False)
    debugging.enable_tensor_checker(
        debugging.TensorCheckerConfig(True, checked_op_list=["elementwise_pow_grad"])
    )
    try:
        with np.errstate(all="ignore"), pytest.raises(RuntimeError, match="op=pow_grad"):
            mt.grad(mt.pow(x, mt.to_tensor([0.0, 2.0])).sum(), [x], create_graph=True)
    finally:
        debugging.disable_tensor_checker()
    with nan_inf_checker():
        _NanBackward.apply(x).sum().backward()
    assert "op=py_layer_grad" in capsys.readouterr().out


def test_check_layer_numerics_checks_the_forward_only():
    class Root(nn.Layer):
        @debugging.check_layer_numerics
        def forward(self, x):
            return mt.sqrt(x)

    x = mt.to_tensor([0.0, 4.0], stop_gradient=False)
    out = Root()(x)  # sqrt(0) = 0 is finite; its gradient 1 / (2 * 0) is not
    with np.errstate(all="ignore"):
        out.sum().backward()  # Paddle's decorator would report the backward's inf
    assert np.isinf(x.grad.numpy()[0])


def test_namespaces_hold_the_documented_names():
    assert sorted(mt.cuda.__all__) == ["amp", "device_count", "is_available"] and sorted(
        mt.cuda.amp.__all__
    ) == [
        "GradScaler",
        "autocast",
    ]
    assert sorted(mt.device.amp.__all__) == ["GradScaler", "auto_cast", "autocast"]
    assert mt.device.amp.auto_cast is amp.auto_cast and mt.device.amp.autocast is amp.autocast
