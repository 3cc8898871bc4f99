"""PyTorch's AMP code, spelling by spelling: each row of docs/porting.md's "PyTorch's AMP code"
table, with PyTorch's expected result (or the documented difference).

The argument forms of ``autocast`` and ``GradScaler`` themselves are in
test_amp_api_fidelity.py and test_grad_scaler_forms.py; here are the recipes of PyTorch's AMP
examples page (typical step, clipping, several losses and optimizers, accumulation, gradient
penalty, a float32 sub-region), the methods those recipes call, and what is not provided.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import amp, nn

F16, F32 = np.dtype("float16"), np.dtype("float32")


def _net(seed=0):
    mt.seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def _data():
    mt.seed(1)
    return mt.randn([6, 4]), mt.randn([6, 2])


def _values(model):
    return [p.numpy().copy() for p in model.parameters()]


# ---- autocast --------------------------------------------------------------------------------
def test_torch_autocast_spellings_are_one_o1_region():
    a = mt.randn([3, 3])
    for region in (
        mt.autocast("cuda", dtype=mt.float16),
        mt.autocast(device_type="cuda"),
        amp.autocast("cuda"),
        mt.cuda.amp.autocast(),
        mt.device.amp.autocast("gpu"),
    ):
        with region:
            # PyTorch: mm is fp16, exp fp32, add promotes to the widest input
            assert mt.matmul(a, a).dtype == F16 and mt.exp(a).dtype == F32
            assert (mt.matmul(a, a) + a).dtype == F32
        assert not mt.is_autocast_enabled()


def test_float32_sub_region_and_tensor_float_half():
    # PyTorch's amp_examples: autocast(enabled=False) inside, float16 results cast by .float()
    a = mt.randn([2, 2])
    with mt.autocast("cuda"):
        e = mt.matmul(a, a)
        with mt.autocast("cuda", enabled=False):
            assert not mt.is_autocast_enabled()
            f = mt.matmul(a, e.float())
        assert mt.is_autocast_enabled()
    assert (e.dtype, f.dtype) == (F16, F32)
    assert a.float() is a and a.half().dtype == F16 and a.half().float().dtype == F32
    x = mt.to_tensor([1.0, 2.0], stop_gradient=False)
    (x.half() * 3).float().sum().backward()  # recorded casts: the gradient comes back in fp32
    assert x.grad.dtype == F32 and x.grad.numpy().tolist() == [3.0, 3.0]


def test_autocast_on_the_cpu_is_float16_and_bfloat16_is_asked_for():
    a = mt.randn([2, 2])
    with mt.autocast("cpu"):  # PyTorch's CPU autocast would use bfloat16
        assert mt.matmul(a, a).dtype == F16 and mt.get_autocast_cpu_dtype() == F16
    with mt.autocast("cuda", dtype="bfloat16"):  # the CPU emulates bfloat16 (docs/bf16.md)
        assert mt.matmul(a, a).dtype == mt.bfloat16 and mt.get_autocast_dtype() == mt.bfloat16


def test_autocast_queries_take_pytorchs_device_argument():
    assert not mt.is_autocast_enabled("cuda") and mt.get_autocast_dtype("cuda") == F16
    with mt.autocast("cuda"):
        assert mt.is_autocast_enabled("cuda") and mt.is_autocast_enabled("cpu")
        assert mt.get_autocast_gpu_dtype() == mt.get_autocast_dtype("cpu") == F16


# ---- the GradScaler recipes --------------------------------------------------------------
def test_typical_step_with_clipping_after_unscale():
    x, y = _data()
    model = _net()
    opt = mt.optimizer.SGD(model.parameters(), lr=0.1)
    scaler = mt.amp.GradScaler("cuda", init_scale=1024.0)
    before = _values(model)
    with mt.autocast("cuda"):
        loss = nn.functional.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    norm = nn.utils.clip_grad_norm_(model.parameters(), 0.01)
    assert float(norm) > 0.01  # the unscaled norm; the scaled one would be ~1024x larger
    total = np.sqrt(
        sum(float((p.grad.numpy().astype(np.float64) ** 2).sum()) for p in model.parameters())
    )
    assert total == pytest.approx(0.01, rel=1e-4)  # clipped to max_norm: grads were unscaled
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
        scaler.unscale_(opt)
    assert scaler.step(opt) is None  # PyTorch returns opt.step()'s result: None
    scaler.update()
    assert scaler.get_scale() == 1024.0
    assert any(not np.array_equal(b, a) for b, a in zip(before, _values(model)))
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_an_overflowing_step_is_skipped_and_the_scale_backs_off():
    model = _net()
    opt = mt.optimizer.Adam(model.parameters(), lr=0.1)
    scaler = mt.cuda.amp.GradScaler(init_scale=2.0**16, backoff_factor=0.25)
    before = _values(model)
    with np.errstate(all="ignore"):
        with mt.autocast("cuda"):
            loss = model(mt.full([2, 4], 6e4)).sum()  # float16 products overflow
        scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0**14
    assert all(np.array_equal(b, a) for b, a in zip(before, _values(model)))


def test_several_losses_and_optimizers_one_update():
    x, y = _data()
    m0, m1 = _net(0), _net(1)
    o0 = mt.optimizer.SGD(m0.parameters(), lr=0.1)
    o1 = mt.optimizer.SGD(m1.parameters(), lr=0.1)
    scaler = amp.GradScaler(init_scale=256.0)
    with mt.autocast("cuda"):
        out0, out1 = m0(x), m1(x)
        loss0 = nn.functional.mse_loss(out0 + out1, y)
        loss1 = nn.functional.mse_loss(out0 - out1, y)
    scaler.scale(loss0).backward(retain_graph=True)
    scaler.scale(loss1).backward()
    scaler.unscale_(o0)  # PyTorch's example unscales one optimizer to inspect its grads
    scaler.step(o0)
    scaler.step(o1)
    scaler.update()
    # the same two backward passes, scaled by hand: the step used the unscaled sum of both
    r0, r1 = _net(0), _net(1)
    with mt.autocast("cuda"):
        a0, a1 = r0(x), r1(x)
        l0, l1 = nn.functional.mse_loss(a0 + a1, y), nn.functional.mse_loss(a0 - a1, y)
    (l0 * 256.0).backward(retain_graph=True)
    (l1 * 256.0).backward()
    for p, q in zip([*m0.parameters(), *m1.parameters()], [*r0.parameters(), *r1.parameters()]):
        np.testing.assert_allclose(p.numpy(), q.numpy() - 0.1 * q.grad.numpy() / 256.0, rtol=1e-6)


def test_gradient_accumulation_steps_once():
    x, y = _data()
    model = _net()
    opt = mt.optimizer.SGD(model.parameters(), lr=0.1)
    scaler = amp.GradScaler(init_scale=128.0)
    for i in range(2):
        with mt.autocast("cuda"):
            loss = nn.functional.mse_loss(model(x[3 * i : 3 * i + 3]), y[3 * i : 3 * i + 3]) / 2
        scaler.scale(loss).backward()
    grads = [(p.grad.numpy() / 128.0).copy() for p in model.parameters()]
    before = _values(model)
    scaler.step(opt)
    scaler.update()
    for b, g, p in zip(before, grads, model.parameters()):
        np.testing.assert_allclose(p.numpy(), b - 0.1 * g, rtol=1e-5, atol=1e-7)


def test_gradient_penalty_through_grad_with_create_graph():
    x, y = _data()
    model = _net()
    opt = mt.optimizer.SGD(model.parameters(), lr=0.1)
    scaler = amp.GradScaler(init_scale=64.0)
    params = list(model.parameters())
    with mt.autocast("cuda"):
        loss = nn.functional.mse_loss(model(x), y)
    scaled_grads = mt.grad(scaler.scale(loss), params, create_graph=True)
    inv_scale = 1.0 / scaler.get_scale()
    grads = [g * inv_scale for g in scaled_grads]
    plain = mt.grad(loss, params, retain_graph=True)
    for g, p in zip(grads, plain):  # unscaled by hand, as PyTorch's recipe does
        np.testing.assert_allclose(g.numpy(), p.numpy(), rtol=1e-2, atol=1e-4)
    with mt.autocast("cuda"):
        penalty = sum((g.pow(2).sum() for g in grads), mt.to_tensor(0.0)).sqrt()
        loss = loss + penalty
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert all(p.grad is not None and np.isfinite(p.grad.numpy()).all() for p in params)


# ---- the scaler's other methods ----------------------------------------------------------
def test_scaler_state_dict_round_trips_and_loads_pytorchs_keys():
    s0 = amp.GradScaler(init_scale=3.0, growth_factor=4.0, backoff_factor=0.5, growth_interval=2)
    s1 = amp.GradScaler()
    s1.load_state_dict(s0.state_dict())  # PyTorch's test_grad_scaling_state_dict
    assert (s1.get_scale(), s1.get_growth_factor(), s1.get_backoff_factor()) == (3.0, 4.0, 0.5)
    assert s1.get_growth_interval() == 2
    torch_keys = {"scale": 8.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                  "growth_interval": 10, "_growth_tracker": 0}  # fmt: skip
    s1.load_state_dict(torch_keys)  # (tests/test_scaler_state_dicts.py: the details)
    assert (s1.get_scale(), s1.get_growth_interval()) == (8.0, 10)
    assert mt.cuda.amp.GradScaler(init_scale=8.0, growth_interval=10).state_dict() == torch_keys
    assert amp.GradScaler(enabled=False).state_dict() == {}  # PyTorch: {} when disabled
    with pytest.raises(RuntimeError, match="empty"):
        s1.load_state_dict({})


def test_update_with_a_new_scale_and_step_with_a_closure_are_refused():
    scaler = amp.GradScaler(init_scale=8.0)
    with pytest.raises(TypeError):
        scaler.update(1024.0)
    opt = mt.optimizer.SGD(_net().parameters(), lr=0.1)
    with pytest.raises(TypeError):
        scaler.step(opt, lambda: None)
    scaler.set_init_loss_scaling(1024.0)  # the supported way to set the scale
    assert scaler.get_scale() == 1024.0
    t = mt.ones([1])
    for not_a_list in ({"loss": t}, (v for v in [t])):  # PyTorch also scales these
        with pytest.raises(TypeError, match="list/tuple of Tensors"):
            scaler.scale(not_a_list)


def test_growth_tracker_is_the_state_dicts_incr_count():
    model = _net()
    opt = mt.optimizer.SGD(model.parameters(), lr=0.1)
    scaler = amp.GradScaler(init_scale=8.0, growth_interval=3)
    for expected in (1, 2, 0):  # the third clean step grows the scale and resets the count
        with mt.autocast("cuda"):
            loss = model(mt.ones([2, 4])).sum()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        assert scaler.state_dict()["incr_count"] == expected
    assert scaler.get_scale() == 16.0


def test_what_is_not_provided_is_absent():
    for name in ("custom_fwd", "custom_bwd"):
        assert not hasattr(amp, name) and not hasattr(mt.cuda.amp, name)
    for name in ("set_autocast_enabled", "clear_autocast_cache", "half"):
        assert not hasattr(mt, name)
    assert not hasattr(amp.GradScaler(), "_get_growth_tracker")
    assert not hasattr(nn.Linear(2, 2), "half")


def test_layer_half_alternatives():
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1D(2))
    model.float16()  # Paddle: norm layers stay float32
    assert model[0].weight.dtype == F16 and model[1].weight.dtype == F32
    model.to("float16")  # PyTorch's model.half(): every floating tensor
    assert model[1].weight.dtype == F16
    model.float()
    assert all(p.dtype == F32 for p in model.parameters())
