"""Issue 25: the DataLoader goes on after a bad sample, sampler lengths and draws, pooling padding,
bfloat16 promotion in the joining ops."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant, lines

IO_DATA = "minitorch_amp/io/data.py"
IO_LOADER = "minitorch_amp/io/dataloader.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "batch-len-plus-one-when-divisible",
        IO_DATA,
        "        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)",
        "        return n // self.batch_size if self.drop_last else n // self.batch_size + 1",
        ("tests/test_samplers.py::test_len_is_the_number_of_batches_yielded",),
        "BatchSampler (and so DataLoader) len() counts one batch too many when n divides evenly",
    ),
    Mutant(
        "random-sampler-never-draws-the-last-index",
        IO_DATA,
        "            return iter(rng.integers(0, n, size=self.num_samples).tolist())",
        "            return iter(rng.integers(0, n - 1, size=self.num_samples).tolist())",
        (
            "tests/test_samplers.py::test_draws_with_replacement_reach_every_index_uniformly",
            "tests/test_samplers.py::"
            "test_draws_with_replacement_and_the_default_num_samples_reach_every_index",
        ),
        "RandomSampler(replacement=True) draws from 0 .. n-2: the last sample is never seen",
    ),
]

POOLING = "minitorch_amp/nn/functional/pooling.py"
POOL_LAYERS = "minitorch_amp/nn/layer/pooling.py"
COMBINE = "minitorch_amp/autograd/ops/combine.py"
POOL_PADDING = (
    "tests/test_pool_padding.py::"
    "test_padding_over_half_the_kernel_is_refused_naming_padding_kernel_and_rule"
)
JOIN_BF16 = "tests/test_bf16_fp16_promotion.py::test_joining_bfloat16_promotes_like_add"

MUTANTS += [
    Mutant(
        "pool-padding-check-removed",
        POOLING,
        "    check_pool_padding(pads, kernel, padding, kernel_size, fn)\n",
        "",
        (POOL_PADDING,),
        "max_pool2d/avg_pool2d accept padding > kernel // 2: a -inf border or nan, silently",
    ),
    Mutant(
        "pool-layer-padding-checked-only-in-forward",
        POOL_LAYERS,
        "    check_pool_padding(pads, kernel, padding, kernel_size, layer)\n",
        "",
        (POOL_PADDING,),
        "MaxPool2D/AvgPool2D build with a too-wide padding and fail only at the first forward",
    ),
    Mutant(
        "pool-padding-limit-is-the-kernel",
        POOLING,
        "            if pad > kernel[i] // 2:",
        "            if pad >= kernel[i]:",
        (POOL_PADDING,),
        "pooling allows padding up to kernel - 1 per side, not PyTorch's kernel // 2",
    ),
    Mutant(
        "dataloader-epoch-ends-on-error",
        IO_LOADER,
        lines("    def __iter__(self) -> _Epoch:", "        return _Epoch(self)"),
        lines("    def __iter__(self):", "        yield from _Epoch(self)"),
        (
            "tests/test_dataloader_errors.py::"
            "test_a_failing_sample_fails_its_batch_and_the_epoch_goes_on",
        ),
        "the epoch is a generator again: after one __getitem__ error next() is StopIteration",
    ),
    Mutant(
        "dataloader-error-without-the-index",
        IO_LOADER,
        "        raise _sample_error(error, index) from error",
        "        raise",
        (
            "tests/test_dataloader_errors.py::"
            "test_the_error_keeps_the_datasets_exception_type_and_the_cause",
        ),
        "a failing sample's error does not say which dataset index failed",
    ),
    Mutant(
        "dataloader-stop-iteration-rebuilt-as-itself",
        IO_LOADER,
        "    if not isinstance(error, StopIteration):",
        "    if True:",
        (
            "tests/test_dataloader_errors.py::"
            "test_a_stop_iteration_from_getitem_does_not_end_the_epoch_silently",
        ),
        "a StopIteration from __getitem__ is re-raised as one and ends the epoch silently",
    ),
    Mutant(
        "dataloader-batch-size-python-int-only",
        IO_DATA,
        "    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))",
        "    return isinstance(value, int) and not isinstance(value, bool)",
        (
            "tests/test_dataloader_errors.py::"
            "test_batch_size_may_be_any_integer_including_numpy_integers",
        ),
        "DataLoader(batch_size=np.int64(2)) is refused",
    ),
    Mutant(
        "collate-dict-keys-unchecked",
        IO_DATA,
        "        _check_same_keys(batch)\n",
        "",
        (
            "tests/test_dataloader_errors.py::test_collating_dicts_with_different_keys_names_the_keys",
        ),
        "dicts with different keys in one batch give a raw KeyError (or drop the extra keys)",
    ),
    Mutant(
        "collate-int64-range-unchecked",
        IO_DATA,
        "            if not _INT64.min <= v <= _INT64.max:",
        "            if False:",
        (
            "tests/test_dataloader_errors.py::"
            "test_collating_an_integer_beyond_int64_names_the_value",
        ),
        "collating 2**70 gives NumPy's raw error, not one naming the value",
    ),
    Mutant(
        "bf16-fp16-concat-promotion-removed",
        COMBINE,
        "        return get_array_module(*xs).concatenate(_one_dtype(xs), axis=axis)",
        "        return get_array_module(*xs).concatenate(xs, axis=axis)",
        (JOIN_BF16,),
        "concat of bfloat16 and float16 raises NumPy's raw DTypePromotionError",
    ),
    Mutant(
        "bf16-fp16-where-promotion-removed",
        COMBINE,
        "            x, y = _one_dtype((x, y))",
        "            pass",
        (JOIN_BF16,),
        "where of bfloat16 and float16 raises NumPy's raw DTypePromotionError",
    ),
]

MUTANTS += [
    Mutant(
        "where-bf16-and-python-float-is-float64",
        COMBINE,
        "        if out.dtype == float64 and _bfloat16_with_a_python_float(x, y):",
        "        if False:",
        (
            "tests/test_bf16_fp16_promotion.py::"
            "test_where_of_bfloat16_and_a_python_float_stays_bfloat16",
        ),
        "where(c, bf16, 0.5) is float64: a Python float is not weak next to bfloat16",
    ),
]

# Issue 26: the io forms Paddle's own tests use
IO_PADDLE_FORMS = "tests/test_io_paddle_forms.py"

MUTANTS += [
    Mutant(
        "random-sampler-ignores-num-samples",
        IO_DATA,
        "return iter(rng.permutation(n)[: self.num_samples].tolist())",
        "return iter(rng.permutation(n).tolist())",
        (
            f"{IO_PADDLE_FORMS}::"
            "test_num_samples_without_replacement_draws_that_many_distinct_indices",
        ),
        "RandomSampler(num_samples=k, replacement=False) yields all n indices while len() says k",
    ),
    Mutant(
        "random-sampler-no-size-check",
        IO_DATA,
        "if not self.replacement and self.num_samples > n:",
        "if False:",
        (
            f"{IO_PADDLE_FORMS}::"
            "test_num_samples_above_the_length_without_replacement_is_refused_with_both_numbers",
        ),
        "RandomSampler(num_samples > len, replacement=False) is accepted, yields fewer than len()",
    ),
    Mutant(
        "batch-sampler-no-pytorch-positional-order",
        IO_DATA,
        "if is_integer(sampler):  # PyTorch's order: BatchSampler(sampler, batch_size, drop_last)",
        "if False:",
        (
            f"{IO_PADDLE_FORMS}::"
            "test_batch_sampler_takes_pytorchs_positional_sampler_batch_size_drop_last",
        ),
        "BatchSampler(sampler, 32, False) (Paddle's TorchPositionalArg test) raises",
    ),
    Mutant(
        "batch-sampler-batches-a-sampler-as-a-dataset",
        IO_DATA,
        "elif isinstance(dataset, Sampler) and sampler is None:",
        "elif False:",
        (
            f"{IO_PADDLE_FORMS}::"
            "test_a_sampler_given_first_with_keywords_is_used_as_the_sampler_not_as_a_dataset",
        ),
        "BatchSampler(sampler, batch_size=8) batches range(len(sampler)), losing its order",
    ),
    Mutant(
        "dataloader-not-callable",
        IO_LOADER,
        "    def __call__(self) -> _Epoch:",
        "    def _call(self) -> _Epoch:",
        (f"{IO_PADDLE_FORMS}::test_calling_a_dataloader_starts_an_epoch_as_iter_does",),
        "loader() raises TypeError instead of starting an epoch (Paddle's examples call it)",
    ),
    Mutant(
        "dataloader-refuses-places",
        IO_LOADER,
        "        _check_places(places)\n",
        lines(
            "        if places is not None:",
            '            raise ValueError("DataLoader: places is a static-graph argument")',
        ),
        (
            f"{IO_PADDLE_FORMS}::"
            "test_places_is_accepted_and_ignored_batches_land_on_the_current_device",
        ),
        "DataLoader(..., places=CUDAPlace(0)) from a Paddle script raises instead of ignoring it",
    ),
]
