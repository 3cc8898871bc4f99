"""Defects a review of the creation functions found (2026-11-28), each planted back: the tests
written with the fixes must see them."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

T = "tests/test_creation_review_nov28.py::"
CREATION = "minitorch_amp/autograd/creation.py"
INPUT = "minitorch_amp/autograd/tensor_input.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "numpy-returns-the-cpu-array-itself",
        "minitorch_amp/autograd/tensor.py",
        "        return host.copy() if host is self._data else host  # (a GPU download is a copy)\n",
        "        return host\n",
        (T + "test_writing_into_numpy_leaves_the_tensor_and_its_gradient_unchanged",),
        "Tensor.numpy() on the CPU is the tensor's own array: a write changes it behind its version",
    ),
    Mutant(
        "normal-draws-shape-for-a-tensor-mean",
        CREATION,
        "    like = mean if isinstance(mean, Tensor) else std if isinstance(std, Tensor) else None\n",
        "    like = None\n",
        (T + "test_normal_with_tensor_mean_or_std_takes_their_shape_and_refuses_a_negative_std",),
        "normal(Tensor mean) draws `shape` and writes in place: a crash",
    ),
    Mutant(
        "normal-takes-a-negative-std",
        CREATION,
        "    if not isinstance(std, Tensor) and std < 0:\n",
        "    if False:\n",
        (T + "test_normal_with_tensor_mean_or_std_takes_their_shape_and_refuses_a_negative_std",),
        "normal(0, -1) flips the samples instead of refusing the std",
    ),
    Mutant(
        "uniform-rounds-up-to-max",
        CREATION,
        "        xp.minimum(values, _largest_below(max, dt), out=values)\n",
        "        pass\n",
        (
            T + "test_rand_and_uniform_in_16_bit_dtypes_stay_below_max[float16]",
            T + "test_rand_and_uniform_in_16_bit_dtypes_stay_below_max[bfloat16]",
        ),
        "rand/uniform in float16/bfloat16 return max itself (a float32 draw rounded up)",
    ),
    Mutant(
        "uniform-takes-min-above-max",
        CREATION,
        "    if min > max:\n",
        "    if False:\n",
        (T + "test_rand_and_uniform_in_16_bit_dtypes_stay_below_max[float16]",),
        "uniform(min=1, max=0) draws from a reversed range instead of refusing it",
    ),
    Mutant(
        "full-rounds-through-float32",
        CREATION,
        '    value = _as_array(fill_value, dt, _device.parse_device("cpu")).item()\n',
        "    value = fill_value\n",
        (T + "test_full_rounds_once_like_to_tensor_and_overflows_silently",),
        "full/full_like round twice to bfloat16/FP8 and warn on float16 overflow",
    ),
    Mutant(
        "arange-counts-only-python-ints",
        CREATION,
        "    start, end, step = (_bound(v) for v in (start, end, step))\n",
        "",
        (
            T
            + "test_arange_with_integer_tensor_or_numpy_bounds_is_int64_and_a_wrong_step_sign_is_refused",
        ),
        "arange(to_tensor(5)) is float32",
    ),
    Mutant(
        "arange-returns-empty-for-a-wrong-step-sign",
        CREATION,
        "    if (start < end and step < 0) or (start > end and step > 0):\n",
        "    if False:\n",
        (
            T
            + "test_arange_with_integer_tensor_or_numpy_bounds_is_int64_and_a_wrong_step_sign_is_refused",
        ),
        "arange(5, 0) and arange(-3) return empty tensors where Paddle raises",
    ),
    Mutant(
        "uniform-ignores-its-seed",
        CREATION,
        "    rng = _random.generator(xp) if seed == 0 else xp.random.default_rng(int(seed))\n",
        "    rng = _random.generator(xp)\n",
        (T + "test_uniform_takes_paddles_seed_argument_and_place_by_keyword",),
        "uniform(..., seed=5) draws from the global generator: not reproducible",
    ),
    Mutant(
        "to-tensor-wraps-ints-past-int64",
        INPUT,
        '        if array.dtype == np.uint64 and dtype.kind in "iu" and array.size:\n',
        "        if False:\n",
        (T + "test_to_tensor_refuses_python_ints_past_int64",),
        "to_tensor([2**63]) wraps to -2**63 silently",
    ),
    Mutant(
        "to-tensor-of-tensors-goes-through-array",
        INPUT,
        "    elif isinstance(data, (list, tuple)) and _first_leaf_is_tensor(data):\n",
        "    elif False:\n",
        (
            T + "test_to_tensor_of_a_nested_list_of_tensors_keeps_their_dtype[bfloat16]",
            T + "test_to_tensor_of_a_nested_list_of_tensors_keeps_their_dtype[float8_e4m3fn]",
        ),
        "to_tensor of a list of bfloat16/FP8 Tensors crashes (np.asarray asks for numbers)",
    ),
    Mutant(
        "shape-truncates-float-sizes",
        "minitorch_amp/autograd/tensor_args.py",
        "        if type(n) is not int:  # (the common case costs one comparison)\n",
        "        if False:\n",
        (
            "tests/test_creation_review_nov28.py::test_a_shape_of_non_integer_sizes_is_refused_not_truncated",
        ),
        "zeros([2.7]) makes a tensor of shape [2], and zeros([True, 2]) one of shape [1, 2]",
    ),
]
