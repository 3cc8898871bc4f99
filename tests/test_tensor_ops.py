"""The issue-26 tensor ops beyond what a catalogue row says: Paddle's semantics where they
differ from PyTorch's, ties and stability, split's one-node gradient, AMP categories, the
Tensor methods, and the errors for bad input.

Forward against float64 NumPy and backward against finite differences are in the catalogue
(tests/op_cases_tensor.py, run by test_ops.py); multinomial's statistics are in
test_multinomial.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import amp
from minitorch_amp.autograd import OP_TABLE, Tensor, functions_index, tensor_methods


def _leaf(values, dtype="float64"):
    return mt.to_tensor(np.asarray(values, dtype=np.float64), dtype=dtype, stop_gradient=False)


# ---- Paddle's semantics --------------------------------------------------------------------------
def test_paddle_gather_takes_whole_slices_along_the_axis_not_torch_gather():
    x = mt.to_tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    out = mt.gather(x, mt.to_tensor([2, 0, 2]), axis=1)
    np.testing.assert_array_equal(out.numpy(), [[3, 1, 3], [6, 4, 6]])
    assert mt.gather(x, mt.to_tensor([1])).shape == [1, 3]  # axis defaults to 0


def test_gather_with_a_0d_index_drops_the_axis_and_index_select_needs_1d():
    x = mt.to_tensor([[1.0, 2.0], [3.0, 4.0]])
    out = mt.gather(x, mt.to_tensor(1), axis=0)
    assert out.shape == [2]
    np.testing.assert_array_equal(out.numpy(), [3, 4])
    with pytest.raises(ValueError, match="1-D"):
        mt.index_select(x, mt.to_tensor(1))


def test_take_along_axis_without_broadcast_is_torch_gather():
    x = mt.to_tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    index = mt.to_tensor([[2, 0]])  # smaller than x in axis 0: reads its first row only
    out = mt.take_along_axis(x, index, axis=1, broadcast=False)
    np.testing.assert_array_equal(out.numpy(), [[3, 1]])
    wide = mt.take_along_axis(x, index, axis=1)  # Paddle's default broadcasts index's rows
    np.testing.assert_array_equal(wide.numpy(), [[3, 1], [6, 4]])


def test_sort_returns_the_values_only_and_argsort_the_positions():
    x = mt.to_tensor([[3.0, 1.0, 2.0]])
    out = mt.sort(x, descending=True)
    assert isinstance(out, Tensor)
    np.testing.assert_array_equal(out.numpy(), [[3, 2, 1]])
    assert mt.argsort(x).dtype == mt.int64


def test_sorts_are_stable_ascending_and_descending():
    x = mt.to_tensor([2.0, 1.0, 2.0, 1.0, 2.0])
    np.testing.assert_array_equal(mt.argsort(x).numpy(), [1, 3, 0, 2, 4])
    np.testing.assert_array_equal(mt.argsort(x, descending=True).numpy(), [0, 2, 4, 1, 3])


def test_topk_takes_the_first_of_equal_values_and_returns_int64_positions():
    values, indices = mt.topk(mt.to_tensor([1.0, 3.0, 3.0, 2.0]), k=2)
    np.testing.assert_array_equal(values.numpy(), [3, 3])
    np.testing.assert_array_equal(indices.numpy(), [1, 2])
    assert indices.dtype == mt.int64 and indices.stop_gradient
    _, smallest = mt.topk(mt.to_tensor([[5, 1, 4, 1]]), k=3, largest=False)
    np.testing.assert_array_equal(smallest.numpy(), [[1, 3, 2]])


def test_topk_takes_k_as_a_one_element_tensor_and_axis_none_as_the_last():
    x = mt.to_tensor([[1.0, 9.0, 5.0], [7.0, 2.0, 8.0]])
    values, _ = x.topk(mt.to_tensor([2]))
    np.testing.assert_array_equal(values.numpy(), [[9, 5], [8, 7]])


def test_topk_gradient_reaches_only_the_picked_entries():
    x = _leaf([[0.5, 2.0, 1.0], [3.0, -1.0, 0.0]])
    values, _ = mt.topk(x, k=1, axis=0)
    (values * mt.to_tensor([[1.0, 2.0, 3.0]], dtype="float64")).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 2, 3], [1, 0, 0]])


def test_repeated_indices_add_their_gradients():
    x = _leaf([[1.0, 2.0, 3.0]])
    picks = [
        mt.index_select(x, mt.to_tensor([2, 0, 2]), axis=1),
        mt.gather(x, mt.to_tensor([0, 0]), axis=0),
        mt.take_along_axis(x, mt.to_tensor([[1, 1, 1]]), axis=1),
    ]
    sum(p.sum() for p in picks).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1 + 2, 2 + 3, 2 + 2]])


def test_split_takes_one_minus_one_section_for_the_rest():
    a, b, c = mt.split(mt.ones([2, 7]), [2, -1, 1], axis=-1)
    assert (a.shape, b.shape, c.shape) == ([2, 2], [2, 4], [2, 1])


def test_chunk_needs_equal_chunks_as_in_paddle():
    assert [p.shape for p in mt.chunk(mt.ones([6, 2]), 3)] == [[2, 2]] * 3
    with pytest.raises(ValueError, match="4 chunks do not divide axis 0 of size 6"):
        mt.chunk(mt.ones([6, 2]), 4)


def test_unbind_removes_the_axis():
    pieces = mt.unbind(mt.to_tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), axis=1)
    assert len(pieces) == 2 and pieces[1].shape == [3]
    np.testing.assert_array_equal(pieces[1].numpy(), [2, 4, 6])


def test_cumsum_flattens_without_an_axis_and_casts_with_dtype():
    x = mt.to_tensor([[1, 2], [3, 4]])
    out = mt.cumsum(x)
    assert out.dtype == mt.int64
    np.testing.assert_array_equal(out.numpy(), [1, 3, 6, 10])
    floats = mt.cumsum(x, axis=0, dtype="float32")
    assert floats.dtype == mt.float32
    np.testing.assert_array_equal(floats.numpy(), [[1, 2], [4, 6]])


def test_float16_cumsum_accumulates_in_float32():
    # Adding 1 to 2048 in float16 rounds back to 2048: a float16 running sum stalls there.
    out = mt.cumsum(mt.ones([3000], dtype="float16"))
    assert out.dtype == mt.float16 and out.numpy()[-1] == 3000


def test_float16_rsqrt_is_rounded_once_from_float32():
    x = np.linspace(0.01, 100.0, 4001).astype(np.float16)
    got = mt.rsqrt(mt.to_tensor(x)).numpy()
    want = (1.0 / np.sqrt(x.astype(np.float64))).astype(np.float16)  # correctly rounded
    assert np.mean(got == want) > 0.999


def test_clone_is_a_copy_that_stays_in_the_graph():
    x = _leaf([1.0, 2.0])
    y = x.clone()
    y.data[0] = 10.0  # the copy's memory is its own
    assert x.numpy()[0] == 1.0
    (y * 3.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_empty_has_the_shape_and_the_default_dtype():
    assert mt.empty([2, 3]).shape == [2, 3] and mt.empty([2]).dtype == mt.float32
    assert mt.empty([1], dtype="int64").dtype == mt.int64
    like = mt.empty_like(mt.ones([4], dtype="float16"))
    assert like.shape == [4] and like.dtype == mt.float16


def test_masked_fill_broadcasts_the_mask_and_gives_a_tensor_value_its_gradient():
    x = _leaf(np.zeros((2, 3)))
    value = _leaf(2.0)
    mask = mt.to_tensor([[True, False, True]])
    out = mt.masked_fill(x, mask, value)
    np.testing.assert_array_equal(out.numpy(), [[2, 0, 2], [2, 0, 2]])
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1, 0], [0, 1, 0]])
    assert value.grad.item() == 4.0


def test_tril_and_triu_apply_to_the_last_two_axes_of_a_batch():
    x = mt.ones([2, 3, 3])
    np.testing.assert_array_equal(mt.tril(x, -1).numpy()[1], np.tril(np.ones((3, 3)), -1))
    np.testing.assert_array_equal(mt.triu(x, 1).sum().item(), 6.0)


# ---- split: one op, one gradient --------------------------------------------------------------
def test_split_is_one_recorded_op_and_unused_pieces_get_zero_gradient():
    x = _leaf(np.arange(6.0))
    a, b, c = mt.split(x, 3)
    # one joint, as Paddle's one split op
    assert a._node.inputs[0] is b._node.inputs[0] is c._node.inputs[0]
    (b * 2.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0, 0, 2, 2, 0, 0])


def test_split_pieces_take_hooks_and_a_retained_graph():
    x = _leaf(np.ones(4))
    a, b = mt.split(x, 2)
    b.register_hook(lambda g: g * 10.0)
    loss = a.sum() + b.sum()
    loss.backward(retain_graph=True)
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2, 2, 20, 20])


def test_split_without_grad_records_nothing():
    x = _leaf(np.ones(4))
    with mt.no_grad():
        pieces = mt.split(x, 2)
    assert all(p.stop_gradient and p._node is None for p in pieces)


# ---- AMP: Paddle's lists -------------------------------------------------------------------------
def test_amp_categories_follow_paddles_lists():
    assert OP_TABLE["einsum"].amp == "white"  # FP16_WHITE_LIST names einsum
    assert OP_TABLE["cumsum"].amp == OP_TABLE["rsqrt"].amp == "black"
    # bmm, tril, split, topk, gather, ... are on no list: they follow their inputs
    for name in ("bmm", "tril", "triu", "masked_fill", "split", "unbind", "gather",
                 "index_select", "take_along_axis", "assign"):  # fmt: skip
        assert OP_TABLE[name].amp == "gray", name


def test_under_o1_einsum_runs_in_float16_bmm_follows_its_inputs_cumsum_stays_float32():
    a, b = mt.ones([2, 3, 4]), mt.ones([2, 4, 5])
    with amp.auto_cast(level="O1"):
        assert mt.einsum("bij,bjk->bik", a, b).dtype == mt.float16
        assert mt.bmm(a, b).dtype == mt.float32  # PyTorch's autocast would give float16
        assert mt.bmm(a.astype("float16"), b.astype("float16")).dtype == mt.float16
        assert mt.cumsum(a.astype("float16"), axis=1).dtype == mt.float32
        assert mt.rsqrt(a.astype("float16")).dtype == mt.float32
        values, indices = mt.topk(a.astype("float16"), 2)
        assert values.dtype == mt.float16 and indices.dtype == mt.int64


# ---- Tensor methods ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(tensor_methods.METHODS))
def test_each_listed_function_is_a_tensor_method(name):
    assert getattr(Tensor, name) is tensor_methods.METHODS[name], (
        f"Tensor.{name} is not the function tensor_methods lists (tensor.py defines its own?)"
    )


def test_methods_take_the_tensor_as_their_first_argument():
    x = mt.to_tensor([[3.0, 1.0], [2.0, 4.0]])
    np.testing.assert_array_equal(x.cumsum(axis=1).numpy(), [[3, 4], [2, 6]])
    np.testing.assert_array_equal(x.index_select(mt.to_tensor([1]), axis=1).numpy(), [[1], [4]])
    assert [p.shape for p in x.split(2, axis=1)] == [[2, 1], [2, 1]]
    assert x.bmm is not None and functions_index.clone is Tensor.clone


# ---- errors say what to do -----------------------------------------------------------------------
X = mt.ones([2, 6])


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: mt.split(X, 4, axis=1), ValueError, "4 equal sections do not fit axis 1 of"),
        (lambda: mt.split(X, [2, -1, -1], axis=1), ValueError, "one -1"),
        (lambda: mt.split(X, [2, 3], axis=1), ValueError, r"add up to 5.*size 6"),
        (lambda: mt.split(X, [4, 3, -1], axis=1), ValueError, r"add up to 7"),
        (lambda: mt.split(X, 2, axis=2), ValueError, r"axis 2 is out of range.*-2 to 1"),
        (lambda: mt.split(mt.to_tensor(1.0), 1), ValueError, "0-D"),
        (lambda: mt.unbind(X, axis=-3), ValueError, "axis -3 is out of range"),
        (lambda: mt.topk(X, 7), ValueError, r"k = 7 is out of range for axis 1 of size 6"),
        (lambda: mt.topk(X, 2, axis=3), ValueError, "axis 3 is out of range"),
        (lambda: mt.argsort(X, axis=2), ValueError, "axis 2 is out of range"),
        (lambda: mt.gather(X, mt.to_tensor([0.0])), TypeError, "int32 or int64"),
        (lambda: mt.gather(X, [0, 1]), TypeError, "integer Tensor"),
        (lambda: mt.gather(X, mt.to_tensor([[0]])), ValueError, "0-D or 1-D"),
        (lambda: mt.index_select(X, mt.to_tensor([0, 6]), axis=1), IndexError, r"\[0, 6\)"),
        (lambda: mt.index_select(X, mt.to_tensor([-1])), IndexError, "from -1 to -1"),
        (
            lambda: mt.take_along_axis(X, mt.to_tensor([0]), axis=0),
            ValueError,
            "as many dimensions",
        ),
        (lambda: mt.masked_fill(X, X > 0, mt.ones([2])), ValueError, "one element"),
        (lambda: mt.masked_fill(X, mt.ones([6]), 0.0), TypeError, "must be a bool tensor"),
        (lambda: mt.tril(mt.ones([3])), ValueError, "at least 2 dimensions"),
        (lambda: mt.bmm(X, X), ValueError, "two 3-D tensors"),
        (lambda: mt.bmm(mt.ones([2, 3, 4]), mt.ones([3, 4, 5])), ValueError, "batch"),
        (lambda: mt.cumsum(X, axis=2), ValueError, "axis 2 is out of range"),
    ],
)
def test_bad_input_raises_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize(
    "equation, shapes, error, message",
    [
        ("ij,jk->ik", [(2, 3)], ValueError, "names 2 operands but 1"),
        ("ij->ik", [(2, 3)], ValueError, "output letter 'k' is in no operand"),
        ("ij->ii", [(2, 2)], ValueError, "names a letter twice"),
        ("ii->i", [(2, 2)], NotImplementedError, "repeated within one operand"),
        ("ij,jk->ik", [(2, 3), (4, 5)], ValueError, "'j' is 3 in one operand and 4"),
        ("ijk->i", [(2, 3)], ValueError, "does not fit an operand of shape"),
        ("...ij->ij", [(5, 2, 3)], ValueError, "name them in the output"),
        ("i2->i", [(2, 3)], ValueError, "not a letter"),
        ("i->i->i", [(2,)], ValueError, "more than one '->'"),
    ],
)
def test_einsum_rejects_equations_that_do_not_fit(equation, shapes, error, message):
    with pytest.raises(error, match=message):
        mt.einsum(equation, *[mt.ones(s) for s in shapes])


def test_einsum_without_an_output_puts_broadcast_dims_first_then_letters_alphabetically():
    x = mt.to_tensor(np.arange(24.0).reshape(2, 3, 4))
    assert mt.einsum("...ba", x).shape == [2, 4, 3]
    np.testing.assert_array_equal(mt.einsum("...ba", x).numpy(), np.swapaxes(x.numpy(), 1, 2))


def test_bad_input_leaves_the_graph_and_the_inputs_untouched():
    x = _leaf(np.arange(6.0))
    with pytest.raises(ValueError):
        mt.split(x, [4, 4])
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0))
    assert x.grad is None and x._node is None
