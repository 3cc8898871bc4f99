"""``amp.decorate``: Paddle's O1/O2 model and optimizer preparation, checked before it acts."""

from __future__ import annotations

import gc
import importlib

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import nn
from minitorch_amp.amp.decorate import decorate
from minitorch_amp.autograd import engine
from minitorch_amp.autograd.tensor import Tensor
from minitorch_amp.optimizer import SGD, Adam, Momentum

# amp.decorate is the function; the module of the same name holds its registry
decorate_module = importlib.import_module("minitorch_amp.amp.decorate")


class Net(nn.Layer):
    """Every kind decorate treats differently, plus an integer buffer."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 6)
        self.ln = nn.LayerNorm(6)
        self.bn = nn.BatchNorm1D(6)
        self.head = nn.Sequential(nn.Linear(6, 3), nn.Tanh(), nn.Linear(3, 2))
        self.emb = nn.Embedding(5, 4)
        self.register_buffer("steps", mt.to_tensor([0], dtype="int64"))

    def forward(self, x):
        return self.head(self.bn(self.ln(self.fc(x))))


@pytest.fixture(autouse=True)
def _no_leaked_master_grad_hooks():
    """Each test starts with no post-backward hook and no master-grad parameter (another
    file's DataParallel or decorate may have left theirs in this process), and leaves the
    process as it found it."""
    hooks, params = list(engine.post_backward_hooks), dict(decorate_module._master_grad_params)
    engine.post_backward_hooks.clear()
    decorate_module._master_grad_params.clear()
    yield
    engine.post_backward_hooks[:] = hooks
    decorate_module._master_grad_params.clear()
    decorate_module._master_grad_params.update(params)


def dtypes(model) -> dict:
    return {k: str(v.dtype) for k, v in model.state_dict(use_hook=False).items()}


def snapshot(model) -> dict:
    return {k: (str(v.dtype), v.numpy().tobytes()) for k, v in model.state_dict().items()}


def train_step(model, opt, x):
    loss = model(x).astype("float32").mean()
    loss.backward()
    opt.step()
    opt.clear_grad()


# ---- O1 --------------------------------------------------------------------------------------
def test_o1_returns_its_inputs_unchanged():
    model, opt = Net(), SGD(0.1, parameters=Net().parameters())
    before = snapshot(model)
    assert decorate(model, level="O1") is model
    out_model, out_opt = decorate(model, opt, level="O1", save_dtype="float64", master_grad=True)
    assert out_model is model and out_opt is opt and not opt._multi_precision
    models = [model]
    assert decorate(models)[0] is model  # level defaults to O1
    assert snapshot(model) == before and engine.post_backward_hooks == []


# ---- O2: which layers become float16 ---------------------------------------------------------
def test_o2_casts_layer_by_layer_and_keeps_norms_in_float32():
    model = Net()
    assert decorate(model, level="O2") is model
    got = dtypes(model)
    for key in ("fc.weight", "fc.bias", "head.0.weight", "head.2.bias", "emb.weight"):
        assert got[key] == "float16", key
    for key in ("ln.weight", "ln.bias", "bn.weight", "bn.bias", "bn._mean", "bn._variance"):
        assert got[key] == "float32", key  # BatchNorm always, LayerNorm for float16
    assert got["steps"] == "int64"  # floating_only
    assert model._dtype == "float16" and model.bn._dtype == "float32"


def test_o2_converts_existing_grads_too():
    model = Net()
    model(mt.randn([3, 4])).mean().backward()
    grad = model.fc.weight.grad
    decorate(model, level="O2")
    assert model.fc.weight.grad is grad and grad.dtype == np.float16
    assert model.ln.weight.grad.dtype == np.float32


def test_an_excluded_instance_keeps_itself_and_its_sublayers_in_float32():
    model = Net()
    decorate(model, level="O2", excluded_layers=model.head)
    got = dtypes(model)
    assert got["head.0.weight"] == got["head.2.bias"] == "float32"
    assert got["fc.weight"] == got["emb.weight"] == "float16"


def test_an_excluded_type_keeps_its_instances_but_not_their_sublayers():
    # Paddle: a type matches layers by isinstance; an instance brings its sublayers along.
    model = Net()
    decorate(model, level="O2", excluded_layers=[nn.Sequential, nn.Embedding])
    got = dtypes(model)
    assert got["head.0.weight"] == "float16"  # a Linear inside the excluded Sequential type
    assert got["emb.weight"] == "float32"
    model = Net()
    decorate(model, level="O2", excluded_layers=[model.head, nn.Linear])
    got = dtypes(model)
    assert got["fc.weight"] == got["head.0.weight"] == "float32"
    assert got["emb.weight"] == "float16"


def test_excluded_by_type_matches_subclasses_and_marks_the_layers():
    class MyLinear(nn.Linear):
        pass

    model = nn.Sequential(MyLinear(2, 2), nn.Linear(2, 2))
    decorate(model, level="O2", excluded_layers=nn.Linear)
    assert model[0].weight.dtype == model[1].weight.dtype == np.float32
    assert model[0]._cast_to_low_precision is False  # Paddle's flag


# ---- O2: optimizers and master weights -------------------------------------------------------
def test_parameters_keep_their_identity_and_the_optimizer_still_updates_them():
    mt.seed(1)
    model = Net()
    opt = Adam(0.01, parameters=model.parameters())
    ids = [id(p) for p in model.parameters()]
    model, opt = decorate(model, opt, level="O2")
    assert opt._multi_precision
    assert [id(p) for p in model.parameters()] == ids == [id(p) for p in opt._parameter_list]
    before = [p.numpy().copy() for p in model.parameters()]
    train_step(model, opt, mt.randn([5, 4]).astype("float16"))
    moved = [(p.numpy() != b).any() for p, b in zip(model.parameters(), before)]
    assert sum(moved) >= 8  # emb gets no grad; the rest move
    assert model.fc.weight.dtype == np.float16
    master = opt._master_weights[model.fc.weight.name]
    np.testing.assert_array_equal(model.fc.weight.numpy(), master.numpy().astype(np.float16))
    assert model.ln.weight.name not in opt._master_weights  # float32 params need none


@pytest.mark.parametrize(
    ("master_weight", "expected"), [(None, True), (True, True), (False, False)]
)
def test_master_weight_sets_multi_precision(master_weight, expected):
    opt = Momentum(0.1, parameters=Net().parameters(), multi_precision=True)
    decorate(Net(), opt, level="O2", master_weight=master_weight)
    assert opt._multi_precision is expected  # Paddle: False turns it off even if it was on


# ---- save_dtype ------------------------------------------------------------------------------
@pytest.mark.parametrize("save_dtype", ["float32", "float64"])
def test_save_dtype_casts_the_state_dict_but_not_the_parameters(save_dtype):
    model = Net()
    weight = model.fc.weight
    decorate(model, level="O2", save_dtype=save_dtype)
    state = model.state_dict()
    assert {str(v.dtype) for k, v in state.items() if k != "steps"} == {save_dtype}
    assert state["steps"].dtype == np.int64
    assert state["fc.weight"] is not weight and state["fc.weight"].name == weight.name
    assert weight.dtype == np.float16 and model.fc.weight is weight
    np.testing.assert_array_equal(state["fc.weight"].numpy(), weight.numpy().astype(save_dtype))
    # Loading it back writes into the float16 parameters themselves.
    state["fc.weight"]._data[...] = 0.5
    model.set_state_dict(state)
    assert model.fc.weight is weight and weight.dtype == np.float16
    assert (weight.numpy() == 0.5).all()


def test_save_dtype_float16_gives_a_half_checkpoint_of_a_mixed_model():
    model = Net()
    decorate(model, level="O2", save_dtype="float16")
    assert model.state_dict()["bn._mean"].dtype == np.float16
    assert model.bn._mean.dtype == np.float32


# ---- master_grad -----------------------------------------------------------------------------
def test_master_grad_gives_float32_grads_that_the_next_step_uses():
    mt.seed(2)
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 1))
    opt = SGD(1.0, parameters=model.parameters())
    model, opt = decorate(model, opt, level="O2", master_grad=True)
    x = mt.randn([6, 4]).astype("float16")
    model(x).astype("float32").mean().backward()
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    assert all(p.grad.dtype == np.float32 for p in model.parameters())
    model(x).astype("float32").mean().backward()  # accumulation adds into the fp32 grad
    for p, g in zip(model.parameters(), grads):
        assert p.grad.dtype == np.float32
        np.testing.assert_allclose(p.grad.numpy(), 2 * g, rtol=1e-3)
    weight = model[0].weight
    start = opt._master_weights.get(weight.name) or weight.numpy().astype(np.float32)
    g32 = weight.grad.numpy()
    opt.step()
    master = opt._master_weights[weight.name].numpy()
    np.testing.assert_array_equal(master, start - np.float32(1.0) * g32)


def test_master_grad_hook_is_installed_once_and_holds_params_weakly():
    first = Net()
    decorate(first, level="O2", master_grad=True)
    second = Net()
    decorate(second, level="O2", master_grad=True)
    hooks = [h for h in engine.post_backward_hooks if h is decorate_module._cast_master_grads]
    assert len(hooks) == 1
    count = len(decorate_module._master_grad_params)
    del first
    gc.collect()
    assert len(decorate_module._master_grad_params) < count
    # Undecorated models keep float16 grads.
    plain = nn.Linear(2, 2).to(dtype="float16")
    plain(mt.ones([1, 2], dtype="float16")).astype("float32").sum().backward()
    assert plain.weight.grad.dtype == np.float16


def test_without_master_grad_grads_stay_float16():
    model = nn.Linear(2, 2)
    decorate(model, level="O2")
    model(mt.ones([1, 2], dtype="float16")).astype("float32").sum().backward()
    assert model.weight.grad.dtype == np.float16


# ---- lists in, lists out -----------------------------------------------------------------------
def test_lists_in_lists_out_single_in_single_out():
    a, b = Net(), Net()
    opt = SGD(0.1, parameters=a.parameters())
    models, opts = decorate([a, b], [opt], level="O2")
    assert isinstance(models, list) and models == [a, b] and opts == [opt]
    assert b.fc.weight.dtype == np.float16
    single_model, single_opt = decorate(Net(), opt, level="O2")
    assert isinstance(single_model, Net) and single_opt is opt
    mixed_models, mixed_opt = decorate([Net()], opt, level="O2")
    assert isinstance(mixed_models, list) and mixed_opt is opt


# ---- validation: every error, and that nothing changed ---------------------------------------
BAD = [
    ({"level": "O3"}, ValueError, "level should be O1 or O2"),
    ({"level": "O2", "dtype": "float32"}, ValueError, "dtype only support float16 or bfloat16"),
    ({"level": "O2", "dtype": "bfloat16", "models": "tuple"}, TypeError, "models must be"),
    ({"level": "O2", "models": "tuple"}, TypeError, "models must be either"),
    ({"level": "O2", "models": "bad item"}, RuntimeError, "models should be paddle.nn.Layer"),
    ({"level": "O2", "optimizers": "bad"}, TypeError, "optimizers must be either"),
    ({"level": "O2", "optimizers": "bad item"}, RuntimeError, "optimizers should be paddle"),
    ({"level": "O2", "save_dtype": "int8"}, ValueError, "save_dtype can only be"),
    ({"level": "O2", "save_dtype": "bfloat15"}, ValueError, "save_dtype can only be"),
    ({"level": "O2", "excluded_layers": ["fc"]}, TypeError, "excluded_layers must be"),
    ({"level": "O2", "excluded_layers": int}, TypeError, "excluded_layers must be"),
]


@pytest.mark.parametrize(("kwargs", "error", "match"), BAD)
def test_bad_arguments_raise_and_change_nothing(kwargs, error, match):
    model = Net()
    opt = SGD(0.1, parameters=model.parameters())
    kwargs = dict(kwargs)
    models = {"tuple": (model,), "bad item": [model, "not a layer"]}.get(
        kwargs.pop("models", None), [model]
    )
    optimizers = {"bad": "sgd", "bad item": [opt, object()]}.get(
        kwargs.pop("optimizers", None), [opt]
    )
    before = snapshot(model)
    with pytest.raises(error, match=match):
        decorate(
            models,
            optimizers,
            master_grad=True,
            save_dtype=kwargs.pop("save_dtype", None),
            **kwargs,
        )
    assert snapshot(model) == before  # dtypes and values: no layer was cast, no hook added
    assert not opt._multi_precision
    assert all(layer._cast_to_low_precision for layer in model.sublayers(include_self=True))
    assert engine.post_backward_hooks == [] and len(decorate_module._master_grad_params) == 0


def test_a_tensor_is_not_a_model():
    with pytest.raises(TypeError, match="models must be either"):
        decorate(Tensor(np.ones(2)), level="O2")


def test_decorate_casts_every_model_or_none_of_them():
    """One conversion for all the models: a failure at the last tensor casts nothing."""
    from all_or_nothing import failing_at, state_of

    from minitorch_amp.backend import memory

    def setup():
        mt.seed(0)
        models = [nn.Linear(64, 64), nn.Linear(64, 64)]
        opt = mt.optimizer.SGD(0.1, parameters=[p for m in models for p in m.parameters()])
        return models, opt

    dry_models, dry_opt = setup()
    with failing_at(10**9, RuntimeError, (memory, "track")) as dry_run:
        decorate(models=dry_models, optimizers=dry_opt, level="O2")
    models, opt = setup()
    before = [state_of(m) for m in models]
    last = failing_at(dry_run.calls, lambda: RuntimeError("injected"), (memory, "track"))
    with last, pytest.raises(RuntimeError, match="injected"):
        decorate(models=models, optimizers=opt, level="O2")
    assert [state_of(m) for m in models] == before  # the first model was not cast either
    assert opt._multi_precision is False
