"""AMP in bfloat16: Paddle's bf16 op lists, auto_cast, decorate, master weights, the scaler.

Each expectation is Paddle's (``python/paddle/amp/amp_lists.py``, ``auto_cast.py``,
``grad_scaler.py``); see ``docs/levels.md`` for where bfloat16 differs from float16.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from dist_training import masters_of, params_of

import minitorch_amp as mt
from minitorch_amp import amp, nn, optimizer
from minitorch_amp import distributed as dist
from minitorch_amp.amp import debugging, op_lists
from minitorch_amp.amp.op_lists import black_list, black_ops, white_list, white_ops
from minitorch_amp.autograd import engine
from minitorch_amp.backend import comm as _comm
from minitorch_amp.backend import device as _device
from minitorch_amp.distributed.sharding import ShardedOptimizer, group_sharded_parallel
from minitorch_amp.nn.param_attr import ParamAttr

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
decorate_module = importlib.import_module("minitorch_amp.amp.decorate")


# ---- the op lists -------------------------------------------------------------------------
# Current Paddle: BF16_WHITE_LIST = WHITE_LIST (FP16_WHITE_LIST without the fp16-only fused
# and fake-quantize ops), BF16_BLACK_LIST = FP16_BLACK_LIST. (Before Paddle 2.6 bfloat16 had
# {conv2d, einsum, matmul_v2} and nothing black; this project followed that until issue 26.)
def test_bf16_white_list_is_paddles_white_list_without_the_fp16_only_ops():
    assert {"conv2d", "einsum", "matmul_v2", "flash_attn"} <= op_lists.PADDLE_BF16_WHITE
    fp16_only = {
        "fake_quantize_dequantize_abs_max",
        "fake_quantize_dequantize_moving_average_abs_max",
        "fused_attention",
        "fused_feedforward",
    }
    bf16_white = op_lists.PADDLE_BF16_WHITE
    assert bf16_white == op_lists.PADDLE_FP16_WHITE - fp16_only
    for level in ("OD", "O1", "O2"):
        assert white_ops(level, "bfloat16") == {"matmul", "conv2d", "linear", "einsum"}
        assert white_ops(level, "bfloat16") == white_ops(level, "float16")
        assert white_list()["bfloat16"][level] >= op_lists.PADDLE_BF16_WHITE | {"linear"}
    assert white_ops("O0", "bfloat16") == set()
    with pytest.raises(ValueError, match="'float16' and 'bfloat16'"):
        white_ops("O1", "float32")


def test_bf16_black_list_is_float16s_at_o1_and_the_extra_black_ops_at_o2():
    o1 = black_ops("O1", "bfloat16")
    assert {"exp", "log", "softmax", "layer_norm", "sum", "mean", "cross_entropy"} <= o1
    assert o1 == black_ops("O1", "float16")
    assert black_ops("O2", "bfloat16") == {"embedding"} == black_ops("O2", "float16")
    assert black_ops("OD", "bfloat16") == set()
    # Paddle's own names: its FP16_BLACK_LIST and the extra-black lookup_table_v2
    for level in ("O1", "O2", "OD"):
        assert black_list()["bfloat16"][level] == black_list()["float16"][level]
    assert {"softmax", "reduce_sum", "lookup_table_v2"} <= black_list()["bfloat16"]["O1"]


def test_o1_runs_white_ops_in_bf16_and_black_ops_in_float32():
    x, w = mt.randn([2, 3]), mt.randn([3, 4])
    with amp.auto_cast(dtype="bfloat16"):
        y = mt.matmul(x, w)  # white
        s = y.sum()  # black, as in float16
        p = nn.functional.softmax(y)  # black
        g = y * 2.0  # gray: follows its bfloat16 input
        emb = nn.functional.embedding(mt.to_tensor([0, 1]), w.astype("bfloat16"))  # extra-black
    assert y.dtype == mt.bfloat16 and g.dtype == mt.bfloat16
    assert s.dtype == p.dtype == emb.dtype == mt.float32
    with amp.auto_cast(level="O2", dtype="bfloat16"):  # O2: only the extra-black ops
        assert mt.matmul(x, w).sum().dtype == mt.bfloat16


def test_od_runs_only_white_ops_in_bf16():
    x = mt.randn([2, 2])
    with amp.auto_cast(level="OD", dtype="bfloat16"):
        y = mt.matmul(x, x)
        z = y + y
    assert y.dtype == mt.bfloat16 and z.dtype == mt.float32


def test_o2_without_promotion_runs_every_non_black_op_in_bf16():
    x = mt.randn([2, 2])
    with amp.auto_cast(level="O2", dtype="bfloat16", use_promote=False):
        assert (x + x).dtype == mt.bfloat16
        assert x.exp().dtype == mt.bfloat16
    with amp.auto_cast(level="O2", dtype="bfloat16"):
        assert (x + x).dtype == mt.float32  # with promotion: float32 inputs stay float32


def test_custom_lists_apply_to_the_bf16_defaults():
    x = mt.randn([2, 2])
    with amp.auto_cast(dtype="bfloat16", custom_black_list=["matmul_v2"]):
        assert mt.matmul(x, x).dtype == mt.float32
    with amp.auto_cast(dtype="bfloat16", custom_white_list=["exp"]):
        assert x.exp().dtype == mt.bfloat16
    with pytest.raises(ValueError, match="overlap"):
        amp.auto_cast(dtype="bfloat16", custom_white_list=["exp"], custom_black_list=["exp"])


def test_fp32_parameters_get_fp32_gradients_under_bf16_o1():
    layer = nn.Linear(3, 2)
    with amp.auto_cast(dtype="bfloat16"):
        out = layer(mt.randn([4, 3]))
    out.astype("float32").sum().backward()
    assert layer.weight.grad.dtype == mt.float32 and layer.bias.grad.dtype == mt.float32


def test_an_outer_float16_region_and_an_inner_bf16_one_restore_each_other():
    x = mt.randn([2, 2])
    with amp.auto_cast(dtype="float16"):
        with amp.auto_cast(dtype="bfloat16"):
            assert mt.matmul(x, x).dtype == mt.bfloat16
        assert mt.matmul(x, x).dtype == mt.float16


# ---- devices --------------------------------------------------------------------------------
def test_the_cpu_emulates_bfloat16():
    assert amp.is_bfloat16_supported() is True
    assert amp.is_bfloat16_supported("cpu") is True


class _FakeDevice:
    def __init__(self, capability: str):
        self.compute_capability = capability


class _FakeCupy:
    def __init__(self, version: str, capability: str):
        self.__version__ = version
        self.cuda = type("cuda", (), {"Device": lambda _, i: _FakeDevice(capability)})()


@pytest.mark.parametrize(
    ("version", "capability", "reason"),
    [
        ("14.0.0", "80", None),
        ("14.1.0", "90", None),
        ("14.0.0", "75", "compute capability 7.5; bfloat16 needs 8.0"),
        ("13.6.0", "90", "CuPy 13.6.0 has no bfloat16 dtype"),
    ],
)
def test_a_gpu_needs_ampere_and_cupy_14(monkeypatch, version, capability, reason):
    monkeypatch.setattr(_device, "cupy", _FakeCupy(version, capability))
    got = _device.bfloat16_unsupported(_device.Place("gpu", 0))
    assert got is None if reason is None else reason in got


def test_auto_cast_warns_and_turns_off_where_bf16_cannot_run(monkeypatch):
    monkeypatch.setattr(_device, "bfloat16_unsupported", lambda place: "old GPU")
    assert not amp.is_bfloat16_supported()
    x = mt.randn([2, 2])
    with pytest.warns(UserWarning, match="makes no effect here: old GPU"):
        region = amp.auto_cast(dtype="bfloat16")
    with region:
        assert mt.matmul(x, x).dtype == mt.float32


# ---- decorate, Layer.bfloat16, master weights ---------------------------------------------
def _net():
    return nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4), nn.BatchNorm1D(4), nn.Linear(4, 2))


def test_decorate_bf16_casts_layer_norm_but_keeps_batch_norm_float32():
    model, opt = _net(), None
    opt = optimizer.Adam(parameters=model.parameters())
    model, opt = amp.decorate(model, opt, level="O2", dtype="bfloat16")
    dtypes = [str(layer.weight.dtype) for layer in model]
    # Paddle's need_keep_fp32: batch norm always, layer norm only for float16
    assert dtypes == ["bfloat16", "bfloat16", "float32", "bfloat16"]
    assert opt._multi_precision is True
    fp16 = amp.decorate(_net(), level="O2", dtype="float16")
    assert [str(layer.weight.dtype) for layer in fp16] == [
        "float16", "float32", "float32", "float16"
    ]  # fmt: skip


def test_decorate_bf16_excluded_layers_and_save_dtype():
    model = _net()
    model = amp.decorate(model, level="O2", dtype="bfloat16", excluded_layers=[model[3]])
    assert model[3].weight.dtype == mt.float32
    saved = amp.decorate(_net(), level="O2", save_dtype="bfloat16").state_dict()
    assert {str(v.dtype) for k, v in saved.items() if "_mean" not in k} == {"bfloat16"}


def test_layer_bfloat16_keeps_batch_norm_by_default():
    model = _net().bfloat16()
    assert [str(layer.weight.dtype) for layer in model] == [
        "bfloat16", "bfloat16", "float32", "bfloat16"
    ]  # fmt: skip
    everything = _net().bfloat16(excluded_layers=[])
    assert {str(p.dtype) for p in everything.parameters()} == {"bfloat16"}


@pytest.mark.parametrize("kind", ["sgd", "momentum", "adam", "adamw"])
def test_master_weights_are_fp32_and_the_param_is_their_bf16_rounding(kind):
    make = {
        "sgd": lambda ps: optimizer.SGD(0.1, parameters=ps),
        "momentum": lambda ps: optimizer.Momentum(0.1, parameters=ps),
        "adam": lambda ps: optimizer.Adam(0.01, parameters=ps),
        "adamw": lambda ps: optimizer.AdamW(0.01, parameters=ps),
    }[kind]
    mt.seed(0)
    model = nn.Linear(4, 3)
    opt = make(model.parameters())
    model, opt = amp.decorate(model, opt, level="O2", dtype="bfloat16")
    for _ in range(3):
        with amp.auto_cast(level="O2", dtype="bfloat16"):
            loss = model(mt.randn([8, 4])).astype("float32").square().mean()
        loss.backward()
        opt.step()
        opt.clear_grad()
    masters = opt._master_weights
    assert len(masters) == 2
    for p in model.parameters():
        master = masters[p.name]
        assert master.dtype == mt.float32 and p.dtype == mt.bfloat16
        # optimize-cast: the bf16 weight is the master rounded to nearest even
        np.testing.assert_array_equal(
            p.numpy().view(np.uint16), master.numpy().astype(p.numpy().dtype).view(np.uint16)
        )
    for state in opt._accumulators.values():
        assert all(a.dtype in (mt.float32,) for a in state.values())
    assert "master_weights" in opt.state_dict()


def test_small_updates_add_up_on_the_master_but_vanish_in_bf16():
    # bfloat16's spacing at 1.0 is 2**-7: a step of 1e-3 is below half of it
    for multi_precision, expected in ((True, 1.01), (False, 1.0)):
        w = nn.Parameter(np.ones(1, "float32").astype(mt.bfloat16))
        opt = optimizer.SGD(1e-3, parameters=[w], multi_precision=multi_precision)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the no-master warning, for the second run
            for _ in range(10):
                w.grad = np.array([-1.0], dtype="float32").astype(mt.bfloat16)
                opt.step()
        assert abs(float(w.numpy()[0]) - expected) < 2**-8, (multi_precision, w.numpy())


def test_master_grad_makes_bf16_grads_float32(monkeypatch):
    # the hook is process-wide: restore the engine's list and the registry afterwards
    monkeypatch.setattr(engine, "post_backward_hooks", list(engine.post_backward_hooks))
    monkeypatch.setattr(
        decorate_module, "_master_grad_params", type(decorate_module._master_grad_params)()
    )
    model = amp.decorate(nn.Linear(3, 2), level="O2", dtype="bfloat16", master_grad=True)
    with amp.auto_cast(level="O2", dtype="bfloat16"):
        out = model(mt.randn([2, 3]))
    out.astype("float32").sum().backward()
    assert model.weight.grad.dtype == mt.float32


# ---- GradScaler -----------------------------------------------------------------------------
def _scaled_step(scaler, dtype):
    model = nn.Linear(3, 1)
    opt = optimizer.SGD(0.1, parameters=model.parameters())
    with amp.auto_cast(dtype=dtype):
        loss = model(mt.randn([4, 3])).astype("float32").mean()
    scaled = scaler.scale(loss)
    scaled.backward()
    scaler.step(opt)
    scaler.update()
    return loss, scaled


def test_dynamic_scaling_turns_itself_off_after_a_bf16_auto_cast():
    scaler = amp.GradScaler(init_loss_scaling=1024.0)
    with pytest.warns(UserWarning, match="not recommended to use dynamic loss scaling"):
        loss, scaled = _scaled_step(scaler, "bfloat16")
    assert scaled is loss  # Paddle: the loss itself, unscaled
    assert not scaler.is_enable() and not scaler.is_use_dynamic_loss_scaling()
    assert scaler.get_init_loss_scaling() == 1.0
    # it stays off, also after a float16 region (Paddle never turns it back on)
    _scaled_step(scaler, "float16")
    assert not scaler.is_enable()


def test_static_scaling_is_kept_in_bf16_and_float16_scalers_stay_on():
    static = amp.GradScaler(init_loss_scaling=8.0, use_dynamic_loss_scaling=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss, scaled = _scaled_step(static, "bfloat16")
    assert static.is_enable() and float(scaled) == 8.0 * float(loss)
    fp16 = amp.GradScaler(init_loss_scaling=8.0)
    loss, scaled = _scaled_step(fp16, "float16")  # the last region was float16: scaling on
    assert fp16.is_enable() and float(scaled) == 8.0 * float(loss)


# ---- sharding -------------------------------------------------------------------------------
def _bf16_build(seed=0):
    mt.seed(seed)
    layers = []
    for i, (a, b) in enumerate([(8, 16), (16, 4)]):
        attr = dict(
            weight_attr=ParamAttr(name=f"fc{i}.w_0"), bias_attr=ParamAttr(name=f"fc{i}.b_0")
        )
        layers.append(nn.Linear(a, b, **attr))
    model = nn.Sequential(*layers)
    opt = optimizer.Adam(0.01, parameters=model.parameters(), weight_decay=0.05)
    return amp.decorate(model, opt, level="O2", dtype="bfloat16")


def _bf16_train(model, opt, steps=3):
    rng = np.random.default_rng(7)
    for _ in range(steps):
        x = mt.to_tensor(rng.standard_normal((8, 8)).astype("float32"))
        y = mt.to_tensor(rng.standard_normal((8, 4)).astype("float32"))
        with amp.auto_cast(level="O2", dtype="bfloat16"):
            out = model(x)
        ((out.astype("float32") - y) ** 2).mean().backward()
        opt.step()
        opt.clear_grad()


@pytest.fixture
def world_of_one(monkeypatch):
    # sharding registers a post-backward hook: it goes into a copy, dropped afterwards
    monkeypatch.setattr(engine, "post_backward_hooks", list(engine.post_backward_hooks))
    for key in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMIX_SIZE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv(_comm.BACKEND_ENV, raising=False)
    _comm.shutdown()
    yield
    _comm.shutdown()


@pytest.mark.parametrize("level", ["os", "os_g"])
def test_sharded_bf16_training_in_a_world_of_one_is_plain_training(world_of_one, level):
    dist.init_parallel_env()
    params, masters = {}, {}
    for sharded in (False, True):
        model, opt = _bf16_build()
        if sharded:
            model, opt, _ = group_sharded_parallel(model, opt, level)
        _bf16_train(model, opt)
        params[sharded], masters[sharded] = params_of(model), masters_of(opt)
    assert all(p.dtype == mt.bfloat16 for p in model.parameters())
    for name in params[False]:
        np.testing.assert_array_equal(params[True][name], params[False][name])
        np.testing.assert_array_equal(masters[True][name], masters[False][name])


def test_a_bf16_shard_keeps_master_weights_only_for_its_parameters(world_of_one):
    model, opt = _bf16_build()
    _bf16_train(model, opt, steps=1)
    full = opt.state_dict()
    _, opt2 = _bf16_build()
    sharded = ShardedOptimizer(opt2, _comm.Comm(1, 2, timeout=1.0))
    sharded.set_state_dict(full)
    mine = {p.name for p in sharded._parameter_list}
    assert 0 < len(mine) < 4 and set(masters_of(sharded)) == mine
    assert all(m.dtype == np.float32 for m in masters_of(sharded).values())


# ---- SimpleNet --------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["O1", "O2"])
def test_simple_net_trains_in_bf16_within_a_few_percent_of_fp32(mode):
    import simple_net

    sizes = dict(input_size=64, batch_size=16, batches=8, epochs=5, learning_rate=1e-2)
    quiet = {"log": lambda *_: None}
    fp32 = simple_net.train(**sizes, mode="fp32", **quiet)
    with debugging.collect_operator_stats() as stats:
        bf16 = simple_net.train(**sizes, mode=mode, dtype="bfloat16", **quiet)
    assert bf16[-1] < bf16[0]  # it learns
    assert abs(bf16[-1] - fp32[-1]) / fp32[-1] < 0.03
    # and it really ran its products in bfloat16: at O2 each Linear runs whole in bfloat16;
    # at O1 a float32 bias is added after the bfloat16 product (Paddle's matmul, then add),
    # so the layer counts as float32, and its input and weight are cast from float32 to
    # bfloat16 per step (a cast counts by its source dtype), and in backward the weight's
    # bfloat16 gradient is cast back
    if mode == "O2":
        assert stats.counts["linear"]["bf16"] >= 3 * 8 * 5
    else:
        assert stats.counts["cast"]["fp32"] >= 2 * 3 * 8 * 5
        assert stats.counts["cast"]["bf16"] >= 3 * 8 * 5
