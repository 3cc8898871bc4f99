"""auto_cast: the dtype every op runs in, at every level, checked op by op.

The expected dtypes are written out here by hand from Paddle's rule, independently of the
implementation; outputs must also be bit-equal to running the op outside AMP on inputs cast
by hand.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import amp
from minitorch_amp.nn import functional as F

F16, F32 = np.dtype("float16"), np.dtype("float32")
rng = np.random.default_rng(0)


def t(shape, dtype="float32", low=-1.0, high=1.0):
    return mt.to_tensor(rng.uniform(low, high, shape).astype(dtype))


# name -> (the call, the shapes of its floating tensor inputs)
CASES = {
    # white
    "matmul": (lambda a, b: mt.matmul(a, b), [(3, 4), (4, 5)]),
    "linear": (lambda a, b: F.linear(a, b), [(3, 4), (4, 5)]),
    # black (O1)
    "exp": (lambda a: mt.exp(a), [(3, 4)]),
    "sum": (lambda a: mt.sum(a), [(3, 4)]),
    "mean": (lambda a: mt.mean(a), [(3, 4)]),
    "softmax": (lambda a: F.softmax(a), [(3, 4)]),
    "log_softmax": (lambda a: F.log_softmax(a), [(3, 4)]),
    "square": (lambda a: mt.square(a), [(3, 4)]),
    "mse_loss": (lambda a, b: F.mse_loss(a, b), [(3, 4), (3, 4)]),
    # gray
    "add": (lambda a, b: a + b, [(3, 4), (4,)]),
    "multiply": (lambda a, b: a * b, [(3, 4), (3, 4)]),
    "relu": (lambda a: F.relu(a), [(3, 4)]),
    "tanh": (lambda a: mt.tanh(a), [(3, 4)]),
    "reshape": (lambda a: a.reshape([4, 3]), [(3, 4)]),
    "concat": (lambda a, b: mt.concat([a, b]), [(3, 4), (2, 4)]),
    "max": (lambda a: mt.max(a, axis=1), [(3, 4)]),
}
WHITE = {"matmul", "linear"}
BLACK_O1 = {"exp", "sum", "mean", "softmax", "log_softmax", "square", "mse_loss"}
GRAY = {"add", "multiply", "relu", "tanh", "reshape", "concat", "max"}


def expected_dtype(name, level, input_dtypes, use_promote=True):
    """Paddle's rule, written independently of minitorch_amp.amp."""
    if level == "O0":
        return None  # no AMP: the op's own NumPy promotion
    if level == "O2" and not use_promote:
        return F16  # none of these is extra-black (embedding is)
    if name in WHITE:
        return F16
    if level == "OD":
        return F32
    if level == "O1" and name in BLACK_O1:
        return F32
    return F32 if F32 in input_dtypes else F16


INPUT_DTYPES = [("float32",), ("float16",), ("float16", "float32"), ("float16", "float16")]


def _cases():
    for name, (_, shapes) in CASES.items():
        for dtypes in INPUT_DTYPES:
            if len(dtypes) != len(shapes):
                continue
            for level, promote in [("O1", True), ("O2", True), ("O2", False), ("OD", True)]:
                yield pytest.param(
                    name, dtypes, level, promote, id=f"{name}-{level}-{promote}-{'+'.join(dtypes)}"
                )


@pytest.mark.parametrize(("name", "dtypes", "level", "promote"), list(_cases()))
def test_op_runs_in_the_dtype_of_paddles_rule_and_matches_hand_casting(
    name, dtypes, level, promote
):
    fn, shapes = CASES[name]
    inputs = [t(s, d) for s, d in zip(shapes, dtypes)]
    want = expected_dtype(name, level, [np.dtype(d) for d in dtypes], promote)
    with amp.auto_cast(level=level, use_promote=promote):
        out = fn(*inputs)
    assert out.dtype == want, f"{name} at {level}: {out.dtype} != {want}"
    by_hand = fn(*[x.astype(want) for x in inputs])  # AMP off, inputs cast by hand
    assert by_hand.dtype == want
    np.testing.assert_array_equal(out.numpy(), by_hand.numpy())


def test_o0_and_enable_false_change_nothing():
    a, b = t((2, 3)), t((3, 2), "float16")
    for ctx in (amp.auto_cast(level="O0"), amp.auto_cast(enable=False)):
        with ctx:
            assert mt.matmul(a, b).dtype == F32  # NumPy promotion, no AMP
            assert amp.amp_state() is None


def test_norm_ops_cast_only_x():
    x = t((4, 6), "float16")
    w, b = mt.ones([6]), mt.zeros([6])
    mean, var = mt.zeros([6]), mt.ones([6])
    with amp.auto_cast(level="O2"):
        out = F.batch_norm(x, mean, var, w, b, training=True)
        ln = F.layer_norm(x, 6, w, b)
    assert out.dtype == F16  # gray: looks at x only, so fp16 although scale/bias are fp32
    assert mean.dtype == F32 and w.dtype == F32  # running stats and params untouched
    assert ln.dtype == F16  # O2: layer_norm is not black, x is fp16
    with amp.auto_cast(level="O1"):
        assert F.layer_norm(x, 6, w, b).dtype == F32  # O1: black


def test_embedding_is_float32_at_o1_and_o2_but_not_with_use_promote_false_black():
    ids = mt.to_tensor([[0, 2], [1, 1]])
    weight = t((3, 4), "float16")
    for level in ("O1", "O2"):
        with amp.auto_cast(level=level):
            assert F.embedding(ids, weight).dtype == F32
    with amp.auto_cast(level="O2", use_promote=False):
        assert F.embedding(ids, weight).dtype == F32  # extra-black stays black


def test_integer_bool_and_float64_inputs_are_never_cast():
    ids = mt.to_tensor([1, 2, 3])
    d = t((3,), "float64")
    with amp.auto_cast(level="O2", use_promote=False):
        assert (ids + ids).dtype == np.dtype("int64")
        assert (d * 2.0).dtype == np.dtype("float64")
        assert mt.where(ids > 1, t((3,)), t((3,))).dtype == F16
        assert (t((3,)) > 0).dtype == np.dtype("bool")


def test_custom_lists_move_ops_between_lists_and_accept_paddle_names():
    a, b = t((2, 3)), t((3, 2))
    with amp.auto_cast(custom_black_list=["matmul_v2"], custom_white_list=["exp"]):
        assert mt.matmul(a, b).dtype == F32
        assert mt.exp(a).dtype == F16
        # Paddle's F.linear is a matmul (then an add): black-listing matmul_v2 keeps it fp32
        assert F.linear(a, b).dtype == F32
    with amp.auto_cast(custom_black_list=["fused_gemm_epilogue"]):  # our linear's Paddle name
        assert F.linear(a, b).dtype == F32
        assert mt.matmul(a, b).dtype == F16


def test_custom_list_errors_are_clear_and_leave_amp_off():
    with pytest.raises(ValueError, match="overlap"):
        amp.auto_cast(custom_white_list=["exp"], custom_black_list=["exp"])
    with pytest.raises(ValueError, match=r"unknown op 'conv9d'.*known ops are: .*matmul"):
        amp.auto_cast(custom_white_list=["conv9d"])
    with pytest.raises(ValueError, match="level should be O0, OD, O1 or O2"):
        amp.auto_cast(level="O3")
    with pytest.raises(ValueError, match="dtype"):
        amp.auto_cast(dtype="float8")
    assert amp.amp_state() is None


def test_level_and_dtype_are_case_insensitive():
    with amp.auto_cast(level="o1", dtype="FLOAT16"):
        assert amp.amp_state().level == "O1"


def test_nesting_replaces_then_restores_the_whole_state():
    a, b = t((2, 3)), t((3, 2))
    with amp.auto_cast(custom_black_list=["matmul"]):
        assert mt.matmul(a, b).dtype == F32
        with amp.auto_cast(level="O2", use_promote=False):  # lists from defaults, not inherited
            assert mt.matmul(a, b).dtype == F16
            assert mt.exp(a).dtype == F16
            with amp.auto_cast(enable=False):
                assert mt.matmul(a, b).dtype == F32
                assert amp.amp_state() is None
            assert amp.amp_state().level == "O2"
        assert mt.matmul(a, b).dtype == F32
        assert amp.amp_state().black >= {"matmul", "exp"}
    assert amp.amp_state() is None


def test_state_is_restored_after_an_exception():
    with pytest.raises(RuntimeError), amp.auto_cast():
        raise RuntimeError("boom")
    assert amp.amp_state() is None


def test_decorator_form():
    @amp.auto_cast(level="O2", use_promote=False)
    def f(a):
        return mt.exp(a)

    assert f(t((2,))).dtype == F16
    assert amp.amp_state() is None


def test_gradients_come_back_in_the_dtype_of_each_input():
    w = mt.to_tensor(rng.standard_normal((3, 4)).astype("float32"), stop_gradient=False)
    h = mt.to_tensor(rng.standard_normal((2, 3)).astype("float16"), stop_gradient=False)
    with amp.auto_cast():
        loss = mt.matmul(h, w).astype("float32").mean()
    loss.backward()
    assert w.grad.dtype == F32 and h.grad.dtype == F16
    # the same numbers as doing the fp16 matmul by hand
    w2 = mt.to_tensor(w.numpy(), stop_gradient=False)
    h2 = mt.to_tensor(h.numpy(), stop_gradient=False)
    mt.matmul(h2, w2.astype("float16")).astype("float32").mean().backward()
    np.testing.assert_array_equal(w.grad.numpy(), w2.grad.numpy())
    np.testing.assert_array_equal(h.grad.numpy(), h2.grad.numpy())


def test_listing_functions_follow_the_op_table():
    from minitorch_amp.amp import op_lists

    # Paddle's white list names conv2d and einsum too
    assert op_lists.white_ops("O1") == {"matmul", "linear", "conv2d", "einsum"}
    black = op_lists.black_ops("O1")
    assert {"exp", "log", "softmax", "cross_entropy", "embedding", "layer_norm"} <= black
    assert op_lists.black_ops("O2") == {"embedding"}
    assert op_lists.black_ops("OD") == frozenset()
    assert "add" in amp.gray_list() and "matmul" not in amp.gray_list()


def test_the_lists_are_read_once_per_op_and_setting_not_per_call():
    """A region entered every step shares its state with the last one of the same settings,
    so each op's white/black/gray decision is made once; other lists get their own."""
    from minitorch_amp.autograd import dispatch

    x = mt.randn([2, 2])
    with amp.auto_cast(level="O1"):
        x.matmul(x)
        first = dispatch.autocast_state.get()
    with amp.auto_cast(level="O1"):
        assert dispatch.autocast_state.get() is first
    assert first.lists[("matmul",)] == "white"
    with amp.auto_cast(level="O1", custom_black_list={"matmul"}):
        other = dispatch.autocast_state.get()
        assert other is not first and x.matmul(x).dtype == mt.float32
    assert other.lists[("matmul",)] == "black" and first.lists[("matmul",)] == "white"
