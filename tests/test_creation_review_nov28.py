"""Creation functions as a review (2026-11-28) found them wrong: each test fails before its fix."""

import numpy as np
import pytest

import minitorch_amp as mt


def test_writing_into_numpy_leaves_the_tensor_and_its_gradient_unchanged():
    w = mt.to_tensor([3.0], stop_gradient=False)
    y = (w * w).sum()
    w.numpy()[0] = 100.0
    y.backward()
    assert w.numpy().tolist() == [3.0] and w.grad.numpy().tolist() == [6.0]


def test_normal_with_tensor_mean_or_std_takes_their_shape_and_refuses_a_negative_std():
    mt.seed(0)
    mean = mt.to_tensor([0.0, 1000.0, -1000.0])
    out = mt.normal(mean, 1.0, [7])
    assert out.shape == [3] and np.all(np.abs(out.numpy() - mean.numpy()) < 10)
    assert mt.normal(0.0, mt.to_tensor([[1.0, 2.0]], "float64")).dtype == np.float64
    both = mt.normal(mt.to_tensor([5.0, 6.0]), mt.to_tensor([[0.0], [0.0]]))
    assert both.numpy().tolist() == [5.0, 6.0]
    with pytest.raises(ValueError, match="std must be >= 0"):
        mt.normal(0.0, -1.0, [2])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_rand_and_uniform_in_16_bit_dtypes_stay_below_max(dtype):
    mt.seed(0)
    assert mt.rand([100000], dtype).numpy().astype("float32").max() < 1.0
    u = mt.uniform([100000], dtype, min=-1.0, max=1.0).numpy().astype("float32")
    assert u.max() < 1.0 and u.min() >= -1.0
    with pytest.raises(ValueError, match="must not be greater than max"):
        mt.uniform([2], dtype, min=1.0, max=0.0)


def test_full_rounds_once_like_to_tensor_and_overflows_silently():
    v = 1 + 2**-8 + 2**-30  # bfloat16: 1.0078125 rounded once, 1.0 through float32
    assert mt.full([1], v, "bfloat16").numpy().astype("float64").tolist() == [1.0078125]
    assert mt.full_like(mt.zeros([1], "bfloat16"), v).numpy().astype("float64")[0] == 1.0078125
    w = 1.0625 + 2**-40  # just above an e4m3 midpoint: 1.125, not 1.0
    assert mt.full([1], w, "float8_e4m3fn").numpy().astype("float64").tolist() == [1.125]
    with np.errstate(over="raise"):
        assert np.isinf(mt.full([1], 1e5, "float16").numpy()).all()


def test_arange_with_integer_tensor_or_numpy_bounds_is_int64_and_a_wrong_step_sign_is_refused():
    assert mt.arange(mt.to_tensor([3]), 7).numpy().tolist() == [3, 4, 5, 6]
    assert mt.arange(mt.to_tensor(5)).dtype == np.int64
    assert mt.arange(np.int64(4)).dtype == np.int64
    assert mt.arange(mt.to_tensor(2.0)).dtype == np.float32
    for args in [(5, 0), (-3,), (0, 5, -1)]:
        with pytest.raises(ValueError, match="the step must be"):
            mt.arange(*args)
    assert mt.arange(5, 0, -2).numpy().tolist() == [5, 3, 1] and mt.arange(2, 2).shape == [0]


def test_uniform_takes_paddles_seed_argument_and_place_by_keyword():
    a = mt.uniform([4], "float32", 0.0, 1.0, 5)
    b = mt.uniform([4], "float32", 0.0, 1.0, seed=5, name="u")
    assert a.numpy().tolist() == b.numpy().tolist()
    mt.seed(1)
    first = mt.uniform([4], seed=0).numpy()
    mt.seed(1)
    assert mt.uniform([4], place="cpu").numpy().tolist() == first.tolist()


def test_to_tensor_refuses_python_ints_past_int64():
    for value in ([2**63], 2**64 - 1):
        with pytest.raises(OverflowError, match="past int64's range"):
            mt.to_tensor(value)
    assert mt.to_tensor([2**63 - 1]).numpy().tolist() == [2**63 - 1]
    assert mt.to_tensor([2**63], "float64").numpy().tolist() == [2.0**63]


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float64"])
def test_to_tensor_of_a_nested_list_of_tensors_keeps_their_dtype(dtype):
    t = mt.to_tensor([[mt.to_tensor(1.0, dtype), mt.to_tensor(2.0, dtype)]] * 2)
    assert t.dtype == mt.to_tensor(1.0, dtype).dtype and t.shape == [2, 2]
    assert t.numpy().astype("float64").tolist() == [[1.0, 2.0], [1.0, 2.0]]


@pytest.mark.parametrize(
    "shape",
    [[2.7], "23", [True, 2], 2.0, [mt.to_tensor(2.0)]],
    ids=["float", "str", "bool", "scalar-float", "float-tensor"],
)
def test_a_shape_of_non_integer_sizes_is_refused_not_truncated(shape):
    with pytest.raises(TypeError, match="a shape"):
        mt.zeros(shape)


def test_to_tensor_of_a_numpy_scalar_keeps_its_dtype_as_paddle_does():
    # Paddle: "np.number -> keep dtype"; a Python float takes the default dtype
    got = {str(v.dtype): mt.to_tensor(v).dtype for v in (np.float64(1.5), np.int32(3))}
    assert got == {"float64": np.float64, "int32": np.int32}
    assert mt.to_tensor(np.float16(2.0)).dtype == np.float16
    assert mt.to_tensor(1.5).dtype == np.float32 and mt.to_tensor(3).dtype == np.int64
