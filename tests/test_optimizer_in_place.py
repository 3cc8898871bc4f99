"""The CPU optimizer step works on each parameter in place: the flat path's bits, no flat copies."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import amp, nn, optimizer
from minitorch_amp.regularizer import L1Decay, L2Decay

pytestmark = pytest.mark.usefixtures("garbage_collected")


def make(name: str, params):
    if name == "sgd":
        return optimizer.SGD(learning_rate=0.1, parameters=params, weight_decay=L2Decay(0.01))
    if name == "momentum":
        return optimizer.Momentum(
            learning_rate=0.1, parameters=params, rescale_grad=0.5, weight_decay=L1Decay(0.02)
        )
    if name == "adam":
        return optimizer.Adam(learning_rate=0.01, parameters=params, weight_decay=0.01)
    return optimizer.AdamW(
        learning_rate=0.01,
        parameters=params,
        weight_decay=0.1,
        apply_decay_param_fun=lambda n: not n.endswith("b_0"),
    )


def three_steps(model, opt, level: str | None, seed: int, before_step=lambda opt: None):
    """Three steps on random ``[8, in]`` batches (``level``: None, or O2 with autocast)."""
    rng = np.random.default_rng(seed)
    features = model[0].weight.shape[0]
    for _ in range(3):
        x = mt.to_tensor(rng.standard_normal((8, features)).astype(np.float32))
        with amp.auto_cast(enable=level is not None, level=level or "O1"):
            loss = model(x).astype("float32").square().mean()
        loss.backward()
        before_step(opt)
        opt.step()
        opt.clear_grad()
    return [p.numpy().copy() for p in model.parameters()]


def train(name: str, in_place: bool, level: str | None):
    mt.seed(3)
    model = nn.Sequential(nn.Linear(300, 260), nn.ReLU(), nn.Linear(260, 3))  # 78k-element weight
    opt = make(name, model.parameters())
    if level == "O2":
        model, opt = amp.decorate(model, opt, level="O2")

    def choose_path(opt):
        plan = opt._state.plan
        for _, bucket in plan.buckets if plan is not None else ():
            bucket.in_place = in_place

    return three_steps(model, opt, level, 0, choose_path), opt


@pytest.mark.parametrize("level", [None, "O2"])
@pytest.mark.parametrize("name", ["sgd", "momentum", "adam", "adamw"])
def test_the_in_place_update_gives_the_flat_paths_bits(name, level):
    ours, opt = train(name, True, level)
    flat, _ = train(name, False, level)
    for a, b in zip(ours, flat):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))
    assert all(bucket.in_place for _, bucket in opt._state.plan.buckets)


def test_an_fp32_step_makes_and_keeps_no_flat_copy_of_the_parameters_and_gradients():
    model = nn.Linear(512, 512)  # 1 MiB of weights
    opt = optimizer.SGD(learning_rate=0.1, parameters=model.parameters())  # no state
    model(mt.ones([4, 512])).sum().backward()
    before = mt.device.memory_allocated()
    mt.device.reset_max_memory_allocated()
    opt.step()  # the first step builds the plan and its buffers
    kept = mt.device.memory_allocated() - before
    peak = mt.device.max_memory_allocated() - before
    assert kept < 512 * 512 * 4 // 2, f"the step keeps {kept} bytes on top of the model"
    assert peak < 512 * 512 * 4 // 2, f"the step allocated {peak} bytes on top of the model"


@pytest.mark.parametrize("level", [None, "O2"])
def test_a_small_bucket_is_one_flat_update_with_the_per_parameter_bits(level, monkeypatch):
    """Below ``IN_PLACE_FROM`` elements a NumPy bucket takes the flat path: one ``_update``
    call for all its parameters (the per-call NumPy overhead is most of a small step), with
    the bits the parameter-by-parameter path gives."""
    from minitorch_amp.optimizer import bucket as bucket_module
    from minitorch_amp.optimizer import bucket_in_place

    def tiny_run(in_place_from, group_below=0):
        monkeypatch.setattr(bucket_module, "IN_PLACE_FROM", in_place_from)
        monkeypatch.setattr(bucket_in_place, "GROUP_BELOW", group_below)
        mt.seed(5)
        model = nn.Sequential(nn.Linear(16, 12), nn.ReLU(), nn.Linear(12, 4))
        opt = optimizer.Adam(learning_rate=0.01, parameters=model.parameters())
        if level == "O2":
            model, opt = amp.decorate(model, opt, level="O2")
        calls = []
        real = opt._update
        monkeypatch.setattr(opt, "_update", lambda *a: calls.append(1) or real(*a))
        params = three_steps(model, opt, level, 1)
        (_, bucket), *more = opt._state.plan.buckets
        assert not more
        return params, calls, bucket.in_place

    in_place_from, group_below = bucket_module.IN_PLACE_FROM, bucket_in_place.GROUP_BELOW
    flat, flat_calls, flat_in_place = tiny_run(in_place_from)
    each, each_calls, each_in_place = tiny_run(0)
    # in place, the small parameters of a run updated together: one call for the four
    grouped, grouped_calls, grouped_in_place = tiny_run(0, group_below)
    assert (flat_in_place, each_in_place, grouped_in_place) == (False, True, True)
    assert (len(flat_calls), len(each_calls), len(grouped_calls)) == (3, 3 * 4, 3)
    for a, b, c in zip(flat, each, grouped):
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))
        np.testing.assert_array_equal(c.view(np.uint8), b.view(np.uint8))


@pytest.mark.parametrize(
    ("build", "copies"),
    [
        (lambda ps: optimizer.SGD(learning_rate=0.1, parameters=ps), False),
        (lambda ps: optimizer.Momentum(learning_rate=0.1, parameters=ps, use_nesterov=True), False),
        (lambda ps: optimizer.Adam(learning_rate=0.01, parameters=ps), False),
        (
            lambda ps: optimizer.SGD(learning_rate=0.1, parameters=ps, weight_decay=L2Decay(0.01)),
            True,
        ),
    ],
    ids=["sgd", "nesterov", "adam", "sgd-l2"],
)
def test_the_in_place_update_reads_an_fp32_gradient_where_it_lies(build, copies, monkeypatch):
    """With nothing to write into it (no rescale, no L2 decay, no regularizer), the in-place
    update hands ``_update`` the float32 gradient itself, not a copy: the flat path's bits,
    and ``.grad`` unchanged by the step. L2 decay adds into the gradient: a copy then."""
    from minitorch_amp.optimizer import bucket_in_place

    sizes = []
    real = bucket_in_place.convert
    monkeypatch.setattr(bucket_in_place, "convert", lambda a, d: sizes.append(a.size) or real(a, d))

    def run(in_place):
        mt.seed(3)
        model = nn.Sequential(nn.Linear(300, 260), nn.ReLU(), nn.Linear(260, 3))  # 78k weight
        opt = build(model.parameters())
        rng = np.random.default_rng(0)
        for _ in range(3):
            x = mt.to_tensor(rng.standard_normal((8, 300)).astype(np.float32))
            model(x).square().mean().backward()
            grads = [p.grad.numpy().copy() for p in model.parameters()]
            for _, bucket in opt._state.plan.buckets if opt._state.plan is not None else ():
                bucket.in_place = in_place
            opt.step()
            for p, g in zip(model.parameters(), grads):
                np.testing.assert_array_equal(p.grad.numpy(), g)  # the step only read it
            opt.clear_grad()
        return [p.numpy().copy() for p in model.parameters()]

    ours = run(True)
    assert any(size >= 10_000 for size in sizes) == copies, sizes  # (blocks of 64 Ki)
    for a, b in zip(ours, run(False)):
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.mark.parametrize("level", [None, "O2"])
def test_small_neighbours_are_updated_together_with_the_flat_paths_bits(level, monkeypatch):
    """In place, consecutive small parameters of a run (a bias, a norm's weight and bias)
    take one ``_update`` call together, with a rescaled gradient and L2 decay written into
    their gathered gradients: the flat path's bits."""

    def run(in_place: bool):
        mt.seed(11)
        model = nn.Sequential(nn.Linear(300, 260), nn.LayerNorm(260), nn.Linear(260, 3))
        opt = optimizer.Momentum(
            learning_rate=0.1, parameters=model.parameters(), rescale_grad=0.5,
            weight_decay=L2Decay(0.01),
        )  # fmt: skip
        if level == "O2":
            model, opt = amp.decorate(model, opt, level="O2")
        calls = []
        real = opt._update
        monkeypatch.setattr(opt, "_update", lambda *a: calls.append(a[0].size) or real(*a))

        def choose_path(opt):
            plan = opt._state.plan
            for _, bucket in plan.buckets if plan is not None else ():
                bucket.in_place = in_place

        return three_steps(model, opt, level, 4, choose_path), calls

    grouped, calls = run(True)
    flat, _ = run(False)
    for a, b in zip(grouped, flat):
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))
    # per step: the 78,000-element weight alone (in two cache-sized blocks), then its bias,
    # the norm's weight and bias and the last Linear's weight and bias in one call (at O2
    # the norm keeps float32 parameters: a bucket of its own, small, on the flat path)
    norm = 0 if level == "O2" else 260 + 260
    assert calls[:3] == [65536, 300 * 260 - 65536, 260 + norm + 260 * 3 + 3]
