"""Every op, driven by the catalogue: forward against float64 NumPy, backward against finite
differences, on generated shapes (broadcasting, size 1, size 0) and non-contiguous inputs.

Plus the specifics a catalogue row cannot say: dropout's statistics, batch norm's running
statistics, casts returning gradients in the source dtype, and errors that name the shapes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numeric_grad import numeric_grad
from op_catalogue import CATALOGUE, NOT_DIFFERENTIABLE, Entry

import minitorch_amp as mt
import minitorch_amp.nn.functional as F
from minitorch_amp.autograd import OP_TABLE, Tensor

DTYPES = ["float16", "bfloat16", "float32", "float64"]
DIFFERENTIABLE = [e for e in CATALOGUE if e.differentiable]
SEEDS = st.integers(0, 2**32 - 1)
# Finite differences cost two forwards per input element: fewer examples than the profile.
FEWER = settings(max_examples=max(10, settings.default.max_examples // 2))


def _ids(entry: Entry) -> str:
    return entry.name


def _draw_case(entry: Entry, data):
    spec = data.draw(entry.spec, label="spec")
    return entry.make(np.random.default_rng(data.draw(SEEDS, label="seed")), spec)


def _leaves(arrays) -> list[Tensor]:
    leaves = []
    for a in arrays:
        t = Tensor._wrap(a)
        t.stop_gradient = False
        leaves.append(t)
    return leaves


def _recorded_ops(out: Tensor) -> set[str]:
    """Names of the ops in the graph that produced ``out``."""
    names, stack, seen = set(), [out._node], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names.add(node.op.name)
        stack.extend(t._node for t in node.inputs if t is not None)
    return names


# ---- coverage ------------------------------------------------------------------------------------
def test_every_op_in_the_table_is_in_the_catalogue():
    covered = {name for entry in CATALOGUE for name in entry.ops}
    missing = set(OP_TABLE) - covered
    assert not missing, f"add catalogue entries (tests/op_catalogue.py) for: {sorted(missing)}"
    assert covered <= set(OP_TABLE), covered - set(OP_TABLE)
    checked_forward_only = {n for e in CATALOGUE if not e.differentiable for n in e.ops}
    assert checked_forward_only == set(NOT_DIFFERENTIABLE)


@pytest.mark.parametrize("entry", DIFFERENTIABLE, ids=_ids)
@settings(max_examples=5)
@given(data=st.data())
def test_entry_exercises_the_ops_it_claims(entry, data):
    case = _draw_case(entry, data)
    out = entry.fn(*_leaves(case.inputs), **case.attrs)
    assert set(entry.ops) <= _recorded_ops(out), f"{entry.name} did not run {entry.ops}"


# ---- forward -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("entry", CATALOGUE, ids=_ids)
@given(data=st.data())
def test_forward_matches_float64_numpy(entry, dtype, data):
    case = _draw_case(entry, data)
    rounded = [a.astype(dtype) for a in case.inputs]
    out = entry.fn(*[mt.to_tensor(a) for a in rounded], **case.attrs)
    expected = np.asarray(entry.ref(*[a.astype(np.float64) for a in rounded], **case.attrs))
    assert out.dtype == (entry.out_dtype or dtype)
    assert out.shape == list(expected.shape)
    rtol, atol = entry.tol[dtype]
    np.testing.assert_allclose(out.numpy().astype(np.float64), expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize("entry", [e for e in CATALOGUE if e.broadcasts], ids=_ids)
def test_broadcasting_ops_name_both_shapes_when_they_do_not_broadcast(entry):
    shapes = [(1,)] * (entry.broadcasts - 2) + [(2, 3), (4,)]
    case = entry.make(np.random.default_rng(0), shapes)
    with pytest.raises(ValueError, match=r"\[2, 3\].*\[4\]"):
        entry.fn(*[mt.to_tensor(a) for a in case.inputs], **case.attrs)


# ---- backward ------------------------------------------------------------------------------------
def _check_backward(entry: Entry, case, arrays):
    """Backward through ``arrays`` (float64, any layout) against finite differences."""
    leaves = _leaves(arrays)
    out = entry.fn(*leaves, **case.attrs)
    upstream = np.random.default_rng(0).standard_normal(out.shape)
    out.backward(grad_tensor=upstream)

    def loss(*xs):
        with mt.no_grad():
            value = entry.fn(*[Tensor._wrap(x) for x in xs], **case.attrs)
        return float(np.sum(value.numpy() * upstream))

    expected = numeric_grad(loss, case.inputs)
    # central differences lose |loss| * 2**-52 / 1e-6 to rounding: a large loss (masked_fill
    # with -1e4) widens the absolute tolerance by that much, four times over
    atol = 1e-6 + 4 * abs(loss(*case.inputs)) * np.finfo(np.float64).eps / 1e-6
    for i, (leaf, want) in enumerate(zip(leaves, expected)):
        assert leaf.grad is not None, f"input {i} got no gradient"
        assert leaf.grad.dtype == mt.float64 and leaf.grad.shape == list(want.shape)
        np.testing.assert_allclose(leaf.grad.numpy(), want, rtol=1e-5, atol=atol)
    return out, leaves


@pytest.mark.parametrize("entry", DIFFERENTIABLE, ids=_ids)
@FEWER
@given(data=st.data())
def test_backward_matches_finite_differences(entry, data):
    case = _draw_case(entry, data)
    _check_backward(entry, case, case.inputs)


def _non_contiguous(a: np.ndarray, how: int) -> np.ndarray:
    """The same values in a strided view (how=0) or in column-major order (how=1)."""
    if how == 1 and a.ndim >= 2:
        return np.asfortranarray(a)
    holder = np.zeros((*a.shape, 2))
    holder[..., 1] = a
    return holder[..., 1]


@pytest.mark.parametrize("entry", DIFFERENTIABLE, ids=_ids)
@FEWER
@given(data=st.data(), how=st.integers(0, 1))
def test_non_contiguous_inputs_give_the_same_results(entry, data, how):
    case = _draw_case(entry, data)
    strided = [_non_contiguous(a, how) for a in case.inputs]
    out, _ = _check_backward(entry, case, strided)
    plain = entry.fn(*_leaves(case.inputs), **case.attrs)
    np.testing.assert_allclose(out.numpy(), plain.numpy(), rtol=1e-12, atol=1e-12)
    assert all(np.array_equal(a, s) for a, s in zip(case.inputs, strided)), "input modified"


def test_numeric_grad_sees_every_element_of_non_contiguous_input():
    x = np.arange(6.0).reshape(2, 3).T  # column-major: reshape(-1) of it would be a copy
    (grad,) = numeric_grad(lambda a: float(np.sum(a**2 * np.arange(6).reshape(3, 2))), [x])
    np.testing.assert_allclose(grad, 2 * x * np.arange(6).reshape(3, 2), atol=1e-6)


# ---- numerics of float16 -------------------------------------------------------------------------
def test_float16_softmax_and_cross_entropy_do_not_overflow():
    x = mt.to_tensor([[60000.0, 0.0, -60000.0]], dtype="float16")
    np.testing.assert_array_equal(F.softmax(x).numpy(), np.array([[1, 0, 0]], np.float16))
    loss = F.cross_entropy(x, mt.to_tensor([1]))  # log-softmax in float32: 60000 exactly
    assert loss.dtype == mt.float16 and loss.item() == 60000.0
    small = mt.to_tensor([[12.0, 0.0]], dtype="float16")  # exp(12) overflows float16
    np.testing.assert_allclose(
        F.log_softmax(small).numpy(), [[-6.1e-6, -12.0]], atol=1e-3, rtol=1e-3
    )


def test_float16_layer_norm_statistics_are_float32():
    # float16 sums of 4096 values near 1000 would lose the variance entirely.
    base = np.full((1, 4096), 1000.0) + np.tile([-1.0, 1.0], 2048)
    out = F.layer_norm(mt.to_tensor(base, dtype="float16"), 4096)
    np.testing.assert_allclose(out.numpy()[0, :4], [-1, 1, -1, 1], atol=2e-3)


def test_cast_gradient_comes_back_in_the_source_dtype():
    x = mt.to_tensor([1.0, 2.0, 3.0], dtype="float32", stop_gradient=False)
    y = x.astype("float16")
    (y * 2).sum().backward()
    assert x.grad.dtype == mt.float32
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


def test_gelu_erf_is_float64_accurate():
    xs = np.linspace(-6, 6, 1001)
    expected = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in xs])
    np.testing.assert_allclose(F.gelu(mt.to_tensor(xs)).numpy(), expected, rtol=1e-14, atol=1e-15)


# ---- dropout -------------------------------------------------------------------------------------
def test_dropout_drops_a_fraction_p_and_keeps_the_mean():
    x = mt.ones([200, 500])
    y = F.dropout(x, p=0.3).numpy()
    assert abs((y == 0).mean() - 0.3) < 0.01
    assert set(np.unique(y)) == {0.0, np.float32(1 / 0.7)}
    assert abs(y.mean() - 1.0) < 0.02


def test_dropout_backward_is_the_mask_scaling():
    x = mt.randn([50, 40])
    x.stop_gradient = False
    y = F.dropout(x, p=0.5)
    y.sum().backward()
    kept = y.numpy() != 0
    np.testing.assert_array_equal(x.grad.numpy(), kept * np.float32(2.0))


def test_dropout_is_reproducible_with_a_seed_and_differs_without():
    mt.seed(3)
    a = F.dropout(mt.ones([64]), p=0.5).numpy()
    b = F.dropout(mt.ones([64]), p=0.5).numpy()
    mt.seed(3)
    np.testing.assert_array_equal(F.dropout(mt.ones([64]), p=0.5).numpy(), a)
    assert not np.array_equal(a, b)


def test_dropout_inference_modes():
    x = mt.to_tensor([1.0, 2.0])
    assert F.dropout(x, p=0.4, training=False) is x
    out = F.dropout(x, p=0.4, training=False, mode="downscale_in_infer")
    np.testing.assert_allclose(out.numpy(), [0.6, 1.2], rtol=1e-6)


def test_dropout_with_p_zero_returns_its_input_and_draws_no_mask():
    # Paddle's fast return: no op recorded, the generator untouched (the GPT step's dropout=0)
    x = mt.ones([3])
    x.stop_gradient = False
    mt.seed(5)
    assert F.dropout(x, p=0.0) is x
    assert F.dropout(x, p=0) is x
    drawn_after = F.dropout(mt.ones([64]), p=0.5).numpy()
    mt.seed(5)
    np.testing.assert_array_equal(F.dropout(mt.ones([64]), p=0.5).numpy(), drawn_after)


def test_dropout_axis_shares_the_mask_along_other_axes():
    y = F.dropout(mt.ones([6, 100]), p=0.5, axis=0).numpy()
    assert all(len(set(row)) == 1 for row in y)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"p": 1.5}, "in \\[0, 1\\]"),
        ({"p": -0.2}, "in \\[0, 1\\]"),
        ({"mode": "bogus"}, "mode must be"),
    ],
)
@pytest.mark.parametrize("training", [True, False])
def test_dropout_rejects_bad_arguments(kwargs, message, training):
    """In inference too, as Paddle checks p first: a bad p must not hide until training."""
    with pytest.raises(ValueError, match=message):
        F.dropout(mt.ones([2]), training=training, **kwargs)


# ---- batch norm running statistics ---------------------------------------------------------------
def test_batch_norm_training_updates_running_statistics_like_paddle():
    x = np.random.default_rng(0).normal(3.0, 2.0, (8, 3, 5))
    mean, var = mt.zeros([3], "float64"), mt.ones([3], "float64")
    F.batch_norm(mt.to_tensor(x), mean, var, training=True, momentum=0.9)
    batch_mean, batch_var = x.mean(axis=(0, 2)), x.var(axis=(0, 2))  # biased, as Paddle
    np.testing.assert_allclose(mean.numpy(), 0.1 * batch_mean, rtol=1e-12)
    np.testing.assert_allclose(var.numpy(), 0.9 + 0.1 * batch_var, rtol=1e-12)
    F.batch_norm(mt.to_tensor(x), mean, var, training=False)  # inference leaves them alone
    np.testing.assert_allclose(mean.numpy(), 0.1 * batch_mean, rtol=1e-12)


def test_batch_norm_float16_input_keeps_float32_statistics():
    mean, var = mt.zeros([2]), mt.ones([2])
    x = mt.to_tensor([[1.0, 2.0], [3.0, 6.0]], dtype="float16")
    y = F.batch_norm(x, mean, var, training=True)
    assert y.dtype == mt.float16 and mean.dtype == mt.float32
    np.testing.assert_allclose(mean.numpy(), [0.2, 0.4], rtol=1e-6)


def test_batch_norm_bad_input_leaves_running_statistics_untouched():
    mean, var = mt.zeros([3]), mt.ones([3])
    with pytest.raises(ValueError, match=r"\[4\].*3 channels.*\[2, 3\]"):
        F.batch_norm(mt.ones([2, 3]), mean, var, weight=mt.ones([4]), training=True)
    np.testing.assert_array_equal(mean.numpy(), np.zeros(3))
    np.testing.assert_array_equal(var.numpy(), np.ones(3))


# ---- errors name what was wrong ------------------------------------------------------------------
@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: mt.concat([mt.ones([2, 3]), mt.ones([3, 3])], axis=1), r"\[2, 3\], \[3, 3\]"),
        (lambda: mt.stack([mt.ones([2]), mt.ones([3])]), r"\[2\], \[3\]"),
        (lambda: mt.where(mt.ones([2]) > 0, mt.ones([3]), 0.0), r"\[2\].*\[3\]"),
        (lambda: F.softmax(mt.ones([2, 3]), axis=2), "axis 2"),
        (lambda: F.layer_norm(mt.ones([2, 3]), [4]), r"\[2, 3\].*\[4\]"),
        (lambda: F.embedding(mt.to_tensor([0, 5]), mt.ones([5, 2])), r"\[2\].*\[5, 2\]"),
        (lambda: F.mse_loss(mt.ones([2]), mt.ones([3])), r"\[2\] and \[3\]"),
        (
            lambda: F.cross_entropy(mt.ones([4, 3]), mt.to_tensor([0, 1, 3, 2])),
            r"label value 3.*\[0, 3\).*\[4\].*\[4, 3\]",
        ),
        (
            lambda: F.cross_entropy(mt.ones([4, 3]), mt.to_tensor([0, 1])),
            r"\[2\].*\[4, 3\]",
        ),
        (lambda: F.cross_entropy(mt.ones([2, 3]), mt.to_tensor([0, 1]), reduction="avg"), "avg"),
        (lambda: F.mse_loss(mt.ones([2]), mt.ones([2]), reduction="total"), "total"),
    ],
)
def test_bad_input_raises_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_cross_entropy_rejects_float_hard_labels_and_integer_soft_labels():
    with pytest.raises(TypeError, match="integer class indices"):
        F.cross_entropy(mt.ones([2, 3]), mt.ones([2]))
    with pytest.raises(TypeError, match="soft_label=True needs float label"):
        F.cross_entropy(mt.ones([2, 3]), mt.to_tensor([[0, 1, 0], [1, 0, 0]]), soft_label=True)


def test_cross_entropy_mean_with_weights_divides_by_the_kept_weight():
    logits = mt.to_tensor(np.log([[0.5, 0.5], [0.25, 0.75], [0.9, 0.1]]))
    label = mt.to_tensor([[1], [0], [-100]])
    weight = mt.to_tensor([2.0, 3.0], dtype="float64")
    loss = F.cross_entropy(logits, label, weight=weight)
    expected = (3.0 * -np.log(0.5) + 2.0 * -np.log(0.25)) / 5.0
    assert loss.shape == [] and abs(loss.item() - expected) < 1e-12
    none = F.cross_entropy(logits, label, weight=weight, reduction="none")
    assert none.shape == [3, 1] and none.numpy()[2, 0] == 0.0


def test_cross_entropy_with_every_label_ignored_is_zero_with_zero_gradient():
    logits = mt.ones([2, 3], "float64")
    logits.stop_gradient = False
    loss = F.cross_entropy(logits, mt.to_tensor([-100, -100]))
    loss.backward()
    assert loss.item() == 0.0 and not logits.grad.numpy().any()


def test_embedding_padding_row_gets_zero_output_and_no_gradient():
    w = mt.to_tensor(np.arange(8.0).reshape(4, 2), stop_gradient=False)
    out = F.embedding(mt.to_tensor([[1, 3, 1, 0]]), w, padding_idx=-1)
    np.testing.assert_array_equal(out.numpy()[0, 1], [0.0, 0.0])
    out.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy()[:, 0], [1.0, 2.0, 0.0, 0.0])


@pytest.mark.parametrize("length", [1, 2, 7, 33, 64])
def test_softmax_row_max_by_halves_is_numpy_fmax_reduce(length, monkeypatch):
    """Attention's short rows take the halving tree (``activation._row_fmax``): the same
    maxima as ``np.fmax.reduce``, NaN skipped, all-NaN and all -inf rows included."""
    from minitorch_amp.autograd.ops import activation

    rng = np.random.default_rng(length)
    x = rng.standard_normal((4096 // length + 2, 3, length)).astype(np.float32)
    x[0] = np.nan
    x[1] = -np.inf
    x.reshape(-1)[::11] = np.nan
    x.reshape(-1)[::13] = np.inf
    reduced = []
    real = np.fmax.reduce
    monkeypatch.setattr(activation.np, "fmax", _FmaxWatch(np.fmax, reduced))
    got = activation._row_fmax(x, -1)
    monkeypatch.undo()
    assert not reduced  # the tree, not the reduction
    np.testing.assert_array_equal(got, real(x, axis=-1, keepdims=True))


class _FmaxWatch:
    """``np.fmax`` that notes each ``reduce`` call."""

    def __init__(self, fmax, calls):
        self.fmax, self.calls = fmax, calls

    def __call__(self, *args, **kwargs):
        return self.fmax(*args, **kwargs)

    def reduce(self, *args, **kwargs):
        self.calls.append(args)
        return self.fmax.reduce(*args, **kwargs)
