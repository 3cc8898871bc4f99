"""PyTorch spellings that work, with PyTorch's meaning, and the misuses that are refused."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import nn, optimizer


def _model():
    mt.seed(0)
    return nn.Linear(3, 2)


def _step(opt, model):
    model(mt.ones([4, 3])).sum().backward()
    opt.step()
    return [p.numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize(
    "torch_form, paddle_form",
    [
        (
            lambda ps: optimizer.SGD(ps, lr=0.1, weight_decay=0.01),
            lambda ps: optimizer.SGD(learning_rate=0.1, parameters=ps, weight_decay=0.01),
        ),
        (
            lambda ps: optimizer.SGD(ps, 0.1),
            lambda ps: optimizer.SGD(0.1, ps),
        ),
        (
            lambda ps: optimizer.Adam(ps, lr=0.01, betas=(0.8, 0.9), eps=1e-6),
            lambda ps: optimizer.Adam(0.01, 0.8, 0.9, 1e-6, ps),
        ),
        (
            lambda ps: optimizer.AdamW(params=ps, lr=0.01, weight_decay=0.1, amsgrad=False),
            lambda ps: optimizer.AdamW(learning_rate=0.01, parameters=ps, weight_decay=0.1),
        ),
        (
            lambda ps: optimizer.Momentum(ps, lr=0.1, momentum=0.8, nesterov=True),
            lambda ps: optimizer.Momentum(0.1, 0.8, ps, use_nesterov=True),
        ),
    ],
)
def test_pytorch_constructor_forms_make_the_same_optimizer(torch_form, paddle_form):
    a, b = _model(), _model()
    got = _step(torch_form(a.parameters()), a)
    want = _step(paddle_form(b.parameters()), b)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda ps: optimizer.Adam(ps, lr=0.1, learning_rate=0.2), "twice"),
        (lambda ps: optimizer.Adam(0.1, parameters=ps, lr=0.2), "multiple values"),
        (lambda ps: optimizer.Adam(ps, parameters=ps), "twice"),
        (lambda ps: optimizer.Adam(0.1, ps), "positionally as 'beta1'"),
        (lambda ps: optimizer.Adam(ps, 0.1, (0.9, 0.99)), "by keyword"),
        (lambda ps: optimizer.SGD(ps, lr=0.1, momentum=0.9), "optimizer.Momentum"),
        (lambda ps: optimizer.SGD(ps, lr=0.1, nesterov=True), "optimizer.Momentum"),
        (lambda ps: optimizer.Adam(ps, amsgrad=True), "amsgrad"),
        (lambda ps: optimizer.SGD(ps, betas=(0.9, 0.9)), "betas"),
        (lambda ps: optimizer.Adam(ps, betas=0.9), "pair"),
        (lambda ps: optimizer.SGD(ps[0], lr=0.1), "single Tensor"),
        (lambda ps: optimizer.SGD([{"params": ps, "lr": 0.1}]), "unknown param-group key"),
    ],
)
def test_ambiguous_or_mixed_forms_are_refused(make, match):
    with pytest.raises((TypeError, ValueError), match=match):
        make(_model().parameters())


def test_zero_grad_sets_to_none_by_default_like_pytorch():
    model = _model()
    opt = optimizer.SGD(model.parameters(), lr=0.1)
    model(mt.ones([1, 3])).sum().backward()
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    model(mt.ones([1, 3])).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert all(float(np.abs(p.grad.numpy()).sum()) == 0 for p in model.parameters())
    model(mt.ones([1, 3])).sum().backward()
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_optimizer_load_state_dict_is_set_state_dict():
    model = _model()
    opt = optimizer.Adam(model.parameters(), lr=0.1)
    _step(opt, model)
    fresh = optimizer.Adam(model.parameters(), lr=0.1)
    fresh.load_state_dict(opt.state_dict())
    for key, value in opt.state_dict().items():
        np.testing.assert_array_equal(fresh.state_dict()[key].numpy(), value.numpy())
    with pytest.raises(TypeError, match="PyTorch optimizer state dict"):
        fresh.load_state_dict({"state": {}, "param_groups": []})


def test_layer_load_state_dict_strict_like_pytorch_but_all_or_nothing():
    src, dst = nn.Linear(2, 2), nn.Linear(2, 2)
    before = dst.weight.numpy().copy()
    result = dst.load_state_dict(src.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    np.testing.assert_array_equal(dst.weight.numpy(), src.weight.numpy())
    other = nn.Linear(2, 2)
    before = other.weight.numpy().copy()
    with pytest.raises(RuntimeError, match=r"Missing key\(s\).*'bias'.*Unexpected.*'extra'"):
        other.load_state_dict({"weight": src.weight, "extra": np.ones(1)})
    np.testing.assert_array_equal(other.weight.numpy(), before)  # nothing was loaded
    missing, unexpected = other.load_state_dict(
        {"weight": src.weight, "extra": np.ones(1)}, strict=False
    )
    assert missing == ["bias"] and unexpected == ["extra"]
    np.testing.assert_array_equal(other.weight.numpy(), src.weight.numpy())


@pytest.mark.parametrize("strict", [True, False])
def test_load_state_dict_refuses_a_key_holding_none_as_pytorch_does(strict):
    """The key is there, so strict loading passed and skipped it silently; PyTorch says a
    tensor was expected. (Paddle's set_state_dict takes None for absent: listed missing.)"""
    src, dst = nn.Linear(2, 2), nn.Linear(2, 2)
    before = [p.numpy().copy() for p in dst.parameters()]
    with pytest.raises(RuntimeError, match=r"\['bias'\] hold None.*Nothing was loaded"):
        dst.load_state_dict({"weight": src.weight, "bias": None}, strict=strict)
    for p, b in zip(dst.parameters(), before):
        np.testing.assert_array_equal(p.numpy(), b)
    with pytest.warns(UserWarning, match=r"no value for \['bias'\]"):  # Paddle's: missing
        assert dst.set_state_dict({"weight": src.weight, "bias": None}) == (["bias"], [])


def test_top_level_aliases_paddle_code_uses():
    assert mt.CPUPlace() == mt.Place("cpu") and mt.CPUPlace() == "cpu"
    assert mt.CUDAPlace(1) == mt.Place("gpu", 1) and repr(mt.CUDAPlace(0)) == "Place(gpu:0)"
    with pytest.raises(TypeError):
        mt.CUDAPlace(-1)
    assert mt.ParamAttr is nn.ParamAttr
    assert mt.DataParallel is mt.distributed.DataParallel
    assert mt.grad is mt.autograd.grad
