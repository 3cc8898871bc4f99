"""The apex-style facade: ``initialize``, ``scale_loss``, ``master_params``, ``state_dict``.

It is built only on ``auto_cast``, ``decorate`` and ``GradScaler``, so its training runs are
compared bit for bit with the same loop written by hand with those three.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import nn, optimizer
from minitorch_amp.amp import apex as amp
from minitorch_amp.amp.auto_cast import auto_cast
from minitorch_amp.amp.grad_scaler import GradScaler


@pytest.fixture(autouse=True)
def _fresh_registry():
    amp._amp_state.reset()
    yield
    amp._amp_state.reset()


def _model():
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def _twins():
    a, b = _model(), _model()
    b.set_state_dict(a.state_dict())
    return a, b


def _sgd(model, lr=0.1):
    return optimizer.SGD(learning_rate=lr, parameters=model.parameters())


def _loss(model, x, t):
    return ((model(x).astype("float32") - t) ** 2).mean()


def _batches(n=4):
    # small values: at the default scale 2**16 nothing overflows unless a test injects an inf
    return [(mt.randn([4, 8]) * 0.1, mt.randn([4, 4]) * 0.1) for _ in range(n)]


def _params(model):
    return [p.numpy().copy() for p in model.parameters()]


def _assert_bitwise(model_a, model_b):
    for pa, pb in zip(model_a.parameters(), model_b.parameters()):
        assert pa.numpy().tobytes() == pb.numpy().tobytes()


def _inf_into(model):
    model[2].weight.grad._data[0, 0] = np.inf


# ---- initialize ---------------------------------------------------------------------------
def test_everything_needs_initialize_first():
    loss = mt.to_tensor(1.0, stop_gradient=False)
    with pytest.raises(RuntimeError, match=r"amp\.initialize"), amp.scale_loss(loss, None):
        pass
    with pytest.raises(RuntimeError, match="initialize"):
        amp.state_dict()


def test_an_initialize_that_decorate_refuses_leaves_the_previous_one_in_force():
    model = _model()
    opt = _sgd(model)
    amp.initialize(model, opt, opt_level="O1", loss_scale=128.0)

    class NotALayer:  # has a forward: initialize's own check passes, O2's decorate refuses
        def forward(self, x):
            return x

    with pytest.raises(RuntimeError, match=r"paddle\.nn\.Layer"):
        amp.initialize(NotALayer(), _sgd(_model()), opt_level="O2")
    assert amp.state_dict() == {"loss_scaler0": {"loss_scale": 128.0, "unskipped": 0}}
    with amp.scale_loss(model(mt.ones([3, 8])).astype("float32").mean(), opt) as scaled:
        scaled.backward()


@pytest.mark.parametrize("level", ["01", "O3", "o1", 1])
def test_opt_level_is_checked_and_the_error_mentions_the_letter_o(level):
    with pytest.raises(ValueError, match="letter O, not the number zero"):
        amp.initialize(_model(), opt_level=level)


def test_initialize_returns_what_it_was_given_in_the_same_shape():
    m0, m1 = _model(), _model()
    o0, o1 = _sgd(m0), _sgd(m1)
    assert amp.initialize(_model_ := m0, opt_level="O0") is _model_
    models, opts = amp.initialize([m0, m1], [o0, o1], opt_level="O0")
    assert models == [m0, m1] and opts == [o0, o1]
    model, opt = amp.initialize(m0, o0, opt_level="O0")
    assert model is m0 and opt is o0


def test_disabled_changes_nothing_and_scale_loss_yields_the_loss():
    model = _model()
    opt = _sgd(model)
    assert amp.initialize(model, opt, enabled=False, opt_level="O2") == (model, opt)
    assert "forward" not in model.__dict__ and model[0].weight.dtype == "float32"
    loss = _loss(model, *_batches(1)[0])
    with amp.scale_loss(loss, opt) as scaled:
        assert scaled is loss
    assert amp.state_dict() == {}


def test_o0_is_fp32_with_a_static_scale_of_one_and_never_skips():
    model = _model()
    opt = _sgd(model)
    model, opt = amp.initialize(model, opt, opt_level="O0")
    assert "forward" not in model.__dict__
    x, t = _batches(1)[0]
    assert model(x).dtype == "float32"
    with amp.scale_loss(_loss(model, x, t), opt) as scaled:
        scaled.backward()
    _inf_into(model)  # apex O0 checks nothing: the step goes ahead
    opt.step()
    assert np.isinf(model[2].weight.numpy()).any()
    assert amp.state_dict() == {"loss_scaler0": {"loss_scale": 1.0, "unskipped": 0}}


def test_o1_runs_forward_under_auto_cast_and_refuses_a_second_initialize():
    # Without biases the last op is a white matmul: float16 shows the region is on. (With
    # float32 biases the output is float32: Paddle's F.linear adds the bias in a gray add.)
    model = nn.Sequential(
        nn.Linear(8, 16, bias_attr=False), nn.ReLU(), nn.Linear(16, 4, bias_attr=False)
    )
    model, _ = amp.initialize(model, _sgd(model), opt_level="O1")
    out = model(mt.randn([2, 8]))
    assert out.dtype == "float16" and model[0].weight.dtype == "float32"
    with auto_cast(enable=False):  # the wrapper owns its region: an outer one cannot undo it
        assert model(mt.randn([2, 8])).dtype == "float16"
    biased = _model()
    biased, _ = amp.initialize(biased, _sgd(biased), opt_level="O1")
    assert biased(mt.randn([2, 8])).dtype == "float32"
    with pytest.raises(RuntimeError, match=r"already passed through amp\.initialize"):
        amp.initialize(model, opt_level="O1")


def test_o2_decorates_keeps_masters_and_returns_float32_outputs():
    model = _model()
    opt = optimizer.Adam(0.01, parameters=model.parameters())
    with pytest.raises(TypeError, match="opt_level="):
        amp.initialize(model, opt, "O2")  # the third argument is `enabled`, as in apex
    model, opt = amp.initialize(model, opt, opt_level="O2")
    assert all(p.dtype == "float16" for p in model.parameters()) and opt._multi_precision
    x, t = _batches(1)[0]
    assert model(x).dtype == "float32"
    amp.load_state_dict({"loss_scaler0": {"loss_scale": 64.0, "unskipped": 0}})
    with amp.scale_loss(_loss(model, x, t), opt) as scaled:
        scaled.backward()
    opt.step()
    assert len(opt._master_weights) == 4
    masters = {k: v.numpy().copy() for k, v in opt._master_weights.items()}
    before = _params(model)
    with amp.scale_loss(_loss(model, x, t), opt) as scaled:
        scaled.backward()
        _inf_into(model)
    opt.step()  # skipped: fp16 params and fp32 masters untouched
    assert all(np.array_equal(a, p.numpy()) for a, p in zip(before, model.parameters()))
    assert all(np.array_equal(masters[k], v.numpy()) for k, v in opt._master_weights.items())
    assert amp.state_dict()["loss_scaler0"] == {"loss_scale": 32.0, "unskipped": 0}


# ---- scale_loss = auto_cast + GradScaler, bit for bit --------------------------------------
def test_o1_training_equals_auto_cast_plus_grad_scaler_by_hand():
    a, b = _twins()
    opt_a, opt_b = _sgd(a), _sgd(b)
    a, opt_a = amp.initialize(a, opt_a, opt_level="O1")
    scaler = GradScaler(init_loss_scaling=2.0**16)
    for i, (x, t) in enumerate(_batches(5)):
        with amp.scale_loss(_loss(a, x, t), opt_a) as scaled:
            scaled.backward()
            if i == 2:
                _inf_into(a)
        opt_a.step()
        opt_a.clear_grad()
        with auto_cast(level="O1"):
            out = b(x)
        scaler.scale(((out.astype("float32") - t) ** 2).mean()).backward()
        if i == 2:
            _inf_into(b)
        scaler.step(opt_b)
        scaler.update()
        opt_b.clear_grad()
    _assert_bitwise(a, b)
    assert amp.state_dict()["loss_scaler0"] == {
        "loss_scale": scaler.get_loss_scaling(),
        "unskipped": scaler.state_dict()["incr_count"],
    }
    assert scaler.get_loss_scaling() == 2.0**15


@pytest.mark.parametrize("delay_unscale", [False, True])
def test_gradient_accumulation_matches_the_grad_scaler_recipe(delay_unscale):
    a, b = _twins()
    opt_a, opt_b = _sgd(a), _sgd(b)
    a, opt_a = amp.initialize(a, opt_a, opt_level="O1")
    scaler = GradScaler(init_loss_scaling=2.0**16)
    for i, (x, t) in enumerate(_batches(4)):
        last = i % 2 == 1
        with amp.scale_loss(
            _loss(a, x, t) / 2, opt_a, delay_unscale=delay_unscale and not last
        ) as s:
            s.backward()
        with auto_cast(level="O1"):
            loss_b = ((b(x).astype("float32") - t) ** 2).mean() / 2
        scaler.scale(loss_b).backward()
        if last:
            opt_a.step()
            opt_a.clear_grad()
            scaler.step(opt_b)
            scaler.update()
            opt_b.clear_grad()
    _assert_bitwise(a, b)


def test_an_overflow_in_an_earlier_micro_step_still_skips_the_step():
    model = _model()
    model, opt = amp.initialize(model, _sgd(model), opt_level="O1")
    before = _params(model)
    for i, (x, t) in enumerate(_batches(2)):
        with amp.scale_loss(_loss(model, x, t), opt) as scaled:
            scaled.backward()
            if i == 0:
                _inf_into(model)
    assert np.isinf(model[2].weight.grad.numpy()).any()  # the stashed grad came back
    opt.step()
    assert all(np.array_equal(a, p.numpy()) for a, p in zip(before, model.parameters()))
    assert amp.state_dict()["loss_scaler0"] == {"loss_scale": 2.0**15, "unskipped": 1}


def test_float16_grads_that_add_up_past_65504_skip_the_step():
    """Each micro-step's float16 grad (40000) is finite after its unscale; their sum is not
    (apex sums into fp32 master grads, which cannot overflow): the step is skipped."""
    model = nn.Linear(1, 1, bias_attr=False)
    model.weight.set_value(np.ones((1, 1), "float32"))
    opt = _sgd(model, lr=1e-6)
    model, opt = amp.initialize(model, opt, opt_level="O2", loss_scale=1.0)
    x = mt.to_tensor(np.full((1, 1), 40000.0, "float32"))
    for _ in range(2):
        with amp.scale_loss(model(x).astype("float32").sum(), opt) as scaled:
            scaled.backward()
    assert opt._get_auxiliary_var("found_inf").tolist() == [True]
    opt.step()
    assert model.weight.numpy().tolist() == [[1.0]]


def test_an_error_inside_scale_loss_gives_the_accumulated_grads_back():
    model = _model()
    model, opt = amp.initialize(model, _sgd(model), opt_level="O1")
    x, t = _batches(1)[0]
    with amp.scale_loss(_loss(model, x, t), opt) as scaled:
        scaled.backward()
    grads = [p.grad for p in model.parameters()]
    with pytest.raises(KeyError), amp.scale_loss(_loss(model, x, t), opt):
        raise KeyError("user code failed")
    assert [p.grad for p in model.parameters()] == grads


def test_one_scaler_per_loss_each_backing_off_on_its_own_overflows():
    # apex's test_loss_scale_decrease: loss k overflows in the first k iterations.
    model = _model()
    model, opt = amp.initialize(model, _sgd(model), opt_level="O1", num_losses=3)
    before = _params(model)
    for i, (x, t) in enumerate(_batches(3)):
        for k in range(3):
            with amp.scale_loss(_loss(model, x, t), opt, loss_id=k) as scaled:
                scaled.backward()
                if i < k:
                    _inf_into(model)
        opt.step()  # skipped when any of the three overflowed (iterations 0 and 1)
        if i == 1:
            assert all(np.array_equal(a, p.numpy()) for a, p in zip(before, model.parameters()))
        opt.clear_grad()
    assert not all(np.array_equal(a, p.numpy()) for a, p in zip(before, model.parameters()))
    assert amp.state_dict() == {
        f"loss_scaler{k}": {"loss_scale": 2.0**16 / 2**k, "unskipped": 3 - k} for k in range(3)
    }
    with pytest.raises(ValueError, match="loss_id"), amp.scale_loss(_loss(model, x, t), opt, 3):
        pass
    with pytest.raises(ValueError, match="optimizer"), amp.scale_loss(_loss(model, x, t), []):
        pass


def test_master_params_are_the_ones_to_clip_and_their_grads_are_unscaled():
    a, b = _twins()
    opt_a, opt_b = _sgd(a), _sgd(b)
    a, opt_a = amp.initialize(a, opt_a, opt_level="O1", loss_scale=1024.0)
    assert list(amp.master_params(opt_a)) == list(a.parameters())
    x, t = _batches(1)[0]
    with amp.scale_loss(_loss(a, x, t), opt_a) as scaled:
        scaled.backward()
    norm_a = nn.utils.clip_grad_norm_(amp.master_params(opt_a), 0.1)
    scaler = GradScaler(init_loss_scaling=1024.0, use_dynamic_loss_scaling=False)
    with auto_cast(level="O1"):
        out = b(x)
    scaler.scale(((out.astype("float32") - t) ** 2).mean()).backward()
    scaler.unscale_(opt_b)
    norm_b = nn.utils.clip_grad_norm_(b.parameters(), 0.1)
    assert norm_a.item() == norm_b.item()
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert pa.grad.numpy().tobytes() == pb.grad.numpy().tobytes()


# ---- checkpoints ------------------------------------------------------------------------------
def test_state_dict_round_trips_and_bad_dicts_change_nothing():
    model = _model()
    amp.initialize(model, _sgd(model), opt_level="O1", num_losses=2)
    saved = {
        "loss_scaler0": {"loss_scale": 512.0, "unskipped": 7},
        "loss_scaler1": {"loss_scale": 8.0, "unskipped": 0},
    }
    amp.load_state_dict(saved)
    assert amp.state_dict() == saved
    with pytest.raises(RuntimeError, match=r'Unexpected key\(s\) in state_dict: "scaler"'):
        amp.load_state_dict({"loss_scaler0": {"loss_scale": 2.0, "unskipped": 0}, "scaler": {}})
    for bad in ({"loss_scale": -1.0, "unskipped": 0}, {"loss_scale": 2.0}, {"unskipped": 2.5}):
        with pytest.raises(ValueError):
            amp.load_state_dict(
                {"loss_scaler0": {"loss_scale": 2.0, "unskipped": 0}, "loss_scaler1": bad}
            )
    assert amp.state_dict() == saved
    above_the_ceiling = {"loss_scale": 2.0**30, "unskipped": 0}  # max_loss_scale 2**24
    with pytest.raises(ValueError, match="max_loss_scaling"):  # checked before any loads
        amp.load_state_dict(
            {"loss_scaler0": {"loss_scale": 2.0, "unskipped": 1}, "loss_scaler1": above_the_ceiling}
        )
    assert amp.state_dict() == saved
    with pytest.warns(UserWarning, match="3 loss scalers, while 2"):
        amp.load_state_dict({**saved, "loss_scaler2": {"loss_scale": 2.0, "unskipped": 0}})
    assert amp.state_dict() == saved
