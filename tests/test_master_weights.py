"""fp32 master weights (``multi_precision``), optimize-cast, and skipping a step on found_inf.

The specification, as Paddle's fused kernels define it: for a float16 parameter the optimizer
keeps ``master = float32(p16)`` (made at the first update), runs the update in fp32 on the
master with fp32 accumulators, and writes ``p16 = round_to_nearest_even(master)``, which is
one ``'optimizer'`` cast per parameter per update. A true ``found_inf`` makes ``step()`` a
perfect no-op.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import nn
from minitorch_amp.autograd.tensor import Tensor
from minitorch_amp.backend.cast_counter import cast_counts, reset_cast_counts
from minitorch_amp.nn.parameter import Parameter
from minitorch_amp.optimizer import SGD, Adam, AdamW, Momentum

P0 = np.array([[0.5, -1.0, 2.0], [1.5, -0.25, 0.1]])
GRADS = [
    np.array([[0.1, 0.2, -0.3], [0.4, -0.5, 0.6]]),
    np.array([[-0.2, 0.1, 0.05], [0.3, 0.3, -0.1]]),
    np.array([[0.03, -0.07, 0.2], [-0.1, 0.25, 0.0]]),
]
LR = 0.01

OPTIMIZERS = {
    "sgd": lambda ps, mp: SGD(LR, parameters=ps, multi_precision=mp),
    "momentum": lambda ps, mp: Momentum(LR, 0.9, ps, multi_precision=mp),
    "nesterov": lambda ps, mp: Momentum(LR, 0.9, ps, use_nesterov=True, multi_precision=mp),
    "adam": lambda ps, mp: Adam(LR, parameters=ps, multi_precision=mp),
    "adamw": lambda ps, mp: AdamW(LR, parameters=ps, weight_decay=0.1, multi_precision=mp),
}


def half_param(values=P0, name=None) -> Parameter:
    return Parameter(np.array(values, dtype="float16"), name=name)


def set_grad(p, values, dtype=None) -> None:
    p._grad = Tensor._wrap(np.array(values, dtype=dtype or p.dtype))


def reference(kind: str, p, grads):
    """The fp32 master after each step, in float64 (beta powers as float32, as Paddle)."""
    p, out = np.array(p, dtype=np.float64), []
    v, m1, m2 = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    b1p, b2p = np.float32(0.9), np.float32(0.999)
    for g in grads:
        if kind in ("sgd",):
            p = p - LR * g
        elif kind in ("momentum", "nesterov"):
            v = 0.9 * v + g
            p = p - LR * (g + 0.9 * v) if kind == "nesterov" else p - LR * v
        else:
            if kind == "adamw":
                p = p * (1 - LR * 0.1)
            m1 = 0.9 * m1 + 0.1 * g
            m2 = 0.999 * m2 + 0.001 * g * g
            root = np.sqrt(1 - np.float64(b2p))
            p = p - LR * root / (1 - np.float64(b1p)) * m1 / (np.sqrt(m2) + 1e-8 * root)
            b1p, b2p = b1p * np.float32(0.9), b2p * np.float32(0.999)
        out.append(p)
    return out


# ---- the update runs in fp32 on the master, then writes the float16 parameter ---------------
@pytest.mark.parametrize("kind", list(OPTIMIZERS))
def test_master_follows_the_fp32_formula_and_the_param_is_its_rounding(kind):
    p = half_param()
    opt = OPTIMIZERS[kind]([p], True)
    start = P0.astype(np.float16).astype(np.float64)  # the master starts as an exact cast
    expected = reference(kind, start, [g.astype(np.float16).astype(np.float64) for g in GRADS])
    for g, want in zip(GRADS, expected):
        set_grad(p, g)
        opt.step()
        master = opt._master_weights[p.name]
        assert master.dtype == np.float32 and p.dtype == np.float16
        np.testing.assert_allclose(master.numpy(), want, rtol=2e-6, atol=1e-7)
        np.testing.assert_array_equal(p.numpy(), master.numpy().astype(np.float16))
    state = opt.state_dict()
    accs = [v for k, v in state.items() if k != "master_weights"]
    assert accs or kind == "sgd"
    assert all(t.dtype == np.float32 for t in accs)


def test_small_steps_add_up_on_the_master_but_vanish_without_it():
    # At 1.0 float16's spacing is 2**-10; a step of 1e-4 rounds away every time without a
    # master, but 20 of them move the fp32 master (and so the weight) by 2e-3.
    with_master, without = half_param([1.0]), half_param([1.0])
    opt_a = SGD(1e-4, parameters=[with_master], multi_precision=True)
    opt_b = SGD(1e-4, parameters=[without], multi_precision=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(20):
            for p, opt in ((with_master, opt_a), (without, opt_b)):
                set_grad(p, [-1.0])
                opt.step()
    assert without.numpy()[0] == np.float16(1.0)
    np.testing.assert_allclose(opt_a._master_weights[with_master.name].numpy(), [1.002], 1e-6)
    assert with_master.numpy()[0] == np.float16(1.002)


def test_a_float32_grad_of_a_float16_param_is_used_unrounded():
    # What decorate(master_grad=True) hands the optimizer: 1e-4 + 2**-20 is not a float16.
    p = half_param([1.0])
    opt = SGD(1.0, parameters=[p], multi_precision=True)
    g32 = np.float32(1e-4) + np.float32(2**-20)
    set_grad(p, [g32], dtype="float32")
    opt.step()
    assert opt._master_weights[p.name].numpy()[0] == np.float32(1.0) - g32
    assert p.grad.dtype == np.float32  # the grad is left as it was


def test_float32_params_get_no_master_and_identical_updates():
    a, b = Parameter(P0.astype("float32")), Parameter(P0.astype("float32"))
    opt_a, opt_b = Adam(LR, parameters=[a], multi_precision=True), Adam(LR, parameters=[b])
    for g in GRADS:
        set_grad(a, g)
        set_grad(b, g)
        opt_a.step()
        opt_b.step()
    assert opt_a._master_weights == {} and "master_weights" not in opt_a.state_dict()
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_the_master_is_made_lazily_from_the_current_param_and_keyed_by_name():
    p = half_param(name="fc.w_0")
    opt = Momentum(LR, 0.9, [p], multi_precision=True)
    assert opt._master_weights == {}
    p._data[...] = np.float16(3.0)  # e.g. decorate or a checkpoint load after construction
    set_grad(p, np.zeros_like(P0))
    opt.step()
    assert list(opt._master_weights) == ["fc.w_0"]
    np.testing.assert_array_equal(opt._master_weights["fc.w_0"].numpy(), np.full(P0.shape, 3.0))


def test_two_params_with_one_name_are_refused():
    a, b = half_param(name="same"), half_param(name="same")
    opt = SGD(LR, parameters=[a, b], multi_precision=True)
    set_grad(a, GRADS[0])
    set_grad(b, GRADS[0])
    with pytest.raises(ValueError, match="both named 'same'"):
        opt.step()


# ---- optimize-cast: one 'optimizer' cast per parameter per update ----------------------------
def test_one_optimizer_cast_per_param_per_step():
    ps = [half_param(), half_param([[1.0]]), half_param([2.0, 3.0])]
    opt = Adam(LR, parameters=ps, multi_precision=True)
    reset_cast_counts()
    for step in range(1, 4):
        for p in ps:
            set_grad(p, np.ones(p.shape))
        opt.step()
        assert cast_counts()["optimizer"] == 3 * step
    assert cast_counts()["autocast"] == 0 and cast_counts()["weight"] == 0


def test_gradient_accumulation_costs_one_cast_per_param_per_window():
    mt.seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    model.to(dtype="float16")
    opt = Momentum(0.1, 0.9, model.parameters(), multi_precision=True)
    x = mt.randn([5, 3]).astype("float16")
    reset_cast_counts()
    for window in range(1, 3):
        for _ in range(4):  # four micro-batches, one update
            model(x).astype("float32").mean().backward()
        opt.step()
        opt.clear_grad()
        assert cast_counts()["optimizer"] == 4 * window  # 4 params, once per window


def test_no_cast_is_counted_without_master_weights():
    p = half_param()
    opt = SGD(LR, parameters=[p])
    reset_cast_counts()
    set_grad(p, GRADS[0])
    with pytest.warns(UserWarning):
        opt.step()
    assert cast_counts()["optimizer"] == 0


# ---- the warning without multi_precision ---------------------------------------------------
def test_float16_params_without_master_weights_warn_once_per_optimizer():
    p = half_param()
    opt = Adam(LR, parameters=[p])
    set_grad(p, GRADS[0])
    with pytest.warns(UserWarning, match=r"multi_precision=True option of the Adam optimizer"):
        opt.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()  # once per optimizer
    other = SGD(LR, parameters=[p])
    with pytest.warns(UserWarning, match="Accumulating with FP16/BF16 in optimizer"):
        other.step()
    assert opt.state_dict()[f"{p.name}_moment1_0"].dtype == np.float32  # moments still fp32


def test_master_weights_and_float32_params_do_not_warn():
    p, q = half_param(), Parameter(P0.astype("float32"))
    opt = Adam(LR, parameters=[p, q], multi_precision=True)
    set_grad(p, GRADS[0])
    set_grad(q, GRADS[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()


# ---- checkpoints -----------------------------------------------------------------------------
def test_state_dict_holds_float32_master_copies_keyed_by_param_name():
    p = half_param(name="lin.w_0")
    opt = AdamW(LR, parameters=[p], multi_precision=True)
    set_grad(p, GRADS[0])
    opt.step()
    masters = opt.state_dict()["master_weights"]
    assert list(masters) == ["lin.w_0"]
    assert masters["lin.w_0"].dtype == np.float32
    assert masters["lin.w_0"].name == "lin.w_0_fp32_master_0"
    np.testing.assert_array_equal(masters["lin.w_0"].numpy(), opt._master_weights["lin.w_0"])
    masters["lin.w_0"]._data[...] = 0  # a copy: the optimizer's master is untouched
    assert opt._master_weights["lin.w_0"].numpy().any()


@pytest.mark.parametrize("kind", list(OPTIMIZERS))
def test_state_dict_round_trip_resumes_bit_identically(kind, tmp_path):
    a = half_param(name="w")
    opt_a = OPTIMIZERS[kind]([a], True)
    for g in GRADS[:2]:
        set_grad(a, g)
        opt_a.step()
    mt.save(opt_a.state_dict(), str(tmp_path / "opt"))
    b = half_param(name="w")
    b._data[...] = a._data
    opt_b = OPTIMIZERS[kind]([b], True)
    opt_b.set_state_dict(mt.load(str(tmp_path / "opt")))
    for p, opt in ((a, opt_a), (b, opt_b)):
        set_grad(p, GRADS[2])
        opt.step()
    assert a.numpy().tobytes() == b.numpy().tobytes()
    assert (
        opt_a._master_weights["w"].numpy().tobytes() == opt_b._master_weights["w"].numpy().tobytes()
    )


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (np.zeros((3, 2), "float32"), "shape"),
        (np.zeros(P0.shape, "float16"), "float32"),
        ("not a tensor", "not a Tensor"),
    ],
)
def test_a_bad_master_weight_changes_nothing(bad, match):
    p = half_param(name="w")
    opt = Adam(LR, parameters=[p], multi_precision=True)
    set_grad(p, GRADS[0])
    opt.step()
    state = opt.state_dict()
    before = snapshot(opt, [p])
    changed = {k: Tensor._wrap(v._data + 1) for k, v in state.items() if k != "master_weights"}
    with pytest.raises((ValueError, TypeError), match=match):
        opt.set_state_dict({**changed, "master_weights": {"w": bad}})
    assert snapshot(opt, [p]) == before


# ---- found_inf: a skipped step changes nothing ----------------------------------------------
def snapshot(opt, params) -> dict:
    """Every byte an update could change: params, grads, accumulators, masters."""
    out = {}
    for p in params:
        out[f"param:{p.name}"] = (p.dtype.str, p.numpy().tobytes())
        out[f"grad:{p.name}"] = None if p.grad is None else (id(p.grad), p.grad.numpy().tobytes())
    for key, value in opt.state_dict().items():
        if key == "master_weights":
            for name, master in value.items():
                out[f"master:{name}"] = master.numpy().tobytes()
        elif isinstance(value, Tensor):
            out[key] = (value.dtype.str, value.numpy().tobytes())
        else:
            out[key] = value
    return out


FLAGS = {
    "python": lambda: True,
    "array": lambda: np.ones(1, dtype=bool),
    "tensor": lambda: Tensor._wrap(np.array([True])),
}


@pytest.mark.parametrize("flag", list(FLAGS))
@pytest.mark.parametrize("multi_precision", [True, False])
@pytest.mark.parametrize("kind", list(OPTIMIZERS))
def test_found_inf_skips_the_whole_update_bit_identically(kind, multi_precision, flag):
    def fresh():
        ps = [half_param(name="h"), Parameter(P0.astype("float32"), name="f")]
        return ps, OPTIMIZERS[kind](ps, multi_precision)

    ps, opt = fresh()
    ref_ps, ref = fresh()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the float16 warning without multi_precision
        for step, g in enumerate(GRADS):
            for p in ps + ref_ps:
                set_grad(p, g * 100 if step == 1 else g)
            if step == 1:  # an overflowing step, applied to one optimizer and skipped
                before = snapshot(opt, ps)
                opt._set_auxiliary_var("found_inf", FLAGS[flag]())
                opt.step()
                assert snapshot(opt, ps) == before  # incl. grads: same objects, same values
                assert opt._get_auxiliary_var("found_inf") is None  # cleared
                continue
            opt.step()
            ref.step()
    # The run with a skipped step equals the run that never had it, to the last bit.
    assert without_grads(snapshot(opt, ps)) == without_grads(snapshot(ref, ref_ps))


def without_grads(snap: dict) -> dict:
    return {k: v for k, v in snap.items() if not k.startswith("grad:")}


@pytest.mark.parametrize("kind", list(OPTIMIZERS))
def test_a_skipped_first_step_creates_no_state(kind):
    p = half_param()
    opt = OPTIMIZERS[kind]([p], True)
    set_grad(p, GRADS[0])
    opt._set_auxiliary_var("found_inf", np.array([True]))
    opt.step()
    assert opt.state_dict() == {} and opt._master_weights == {} and opt._accumulators == {}
    np.testing.assert_array_equal(p.numpy(), P0.astype(np.float16))


def test_minimize_skips_too_and_still_reports_the_pairs():
    p = half_param()
    opt = Adam(LR, parameters=[p], multi_precision=True)
    set_grad(p, GRADS[0])
    opt.step()
    before = snapshot(opt, [p])
    opt._set_auxiliary_var("found_inf", np.array([True]))
    ops, pairs = opt.minimize(None)
    assert ops == [] and [q for q, _ in pairs] == [p]
    assert snapshot(opt, [p]) == before
    assert opt._get_auxiliary_var("found_inf") is None


def test_a_false_flag_updates_and_is_cleared():
    p, q = half_param(), half_param()
    opt_p = SGD(LR, parameters=[p], multi_precision=True)
    opt_q = SGD(LR, parameters=[q], multi_precision=True)
    set_grad(p, GRADS[0])
    set_grad(q, GRADS[0])
    opt_p._set_auxiliary_var("found_inf", np.zeros(1, dtype=bool))
    opt_p.step()
    opt_q.step()
    assert p.numpy().tobytes() == q.numpy().tobytes() != P0.astype(np.float16).tobytes()
    assert opt_p._get_auxiliary_var("found_inf") is None


def test_the_flag_is_cleared_even_when_the_update_raises():
    a, b = half_param(name="dup"), half_param(name="dup")
    opt = SGD(LR, parameters=[a, b], multi_precision=True)
    set_grad(a, GRADS[0])
    set_grad(b, GRADS[0])
    opt._set_auxiliary_var("found_inf", False)
    with pytest.raises(ValueError):
        opt.step()
    assert opt._get_auxiliary_var("found_inf") is None


def test_other_auxiliary_vars_are_kept():
    opt = SGD(LR, parameters=[half_param()])
    opt._set_auxiliary_var("something", 3)
    opt.step()
    assert opt._get_auxiliary_var("something") == 3
    assert opt._get_auxiliary_var("missing") is None
