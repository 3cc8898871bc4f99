"""Defects a review found (2026-11-28, night: transformer), each planted back: the tests written
with the fixes must see them."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

T = "tests/test_transformer_review_nov28_night.py::"
MHA = "minitorch_amp/nn/layer/attention.py"
SDPA = "minitorch_amp/nn/functional/attention.py"
LAYERS = "minitorch_amp/nn/layer/transformer.py"
NORM = "minitorch_amp/nn/functional/norm.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "mask-bias-computed-in-float16",
        MHA,
        "        acc = _dtypes.accumulation_dtype(dtype)\n",
        "        acc = dtype\n",
        (
            T + "test_a_bool_or_int_mask_keeps_its_positions_at_exactly_zero_in_every_dtype",
            T + "test_multihead_attention_with_a_bool_mask_is_finite_under_o1_and_in_float16",
            T + "test_a_float16_transformer_with_a_bool_source_mask_gives_finite_outputs",
        ),
        "(mask - 1) * 1e9 in float16: 1e9 is inf, kept positions 0 * inf = NaN, all-NaN outputs",
    ),
    Mutant(
        "square-mask-truncates-its-length",
        LAYERS,
        "        n = _check_size(what, \"length\", length, allow_zero=True)  # no 2.7, '3' or True\n",
        "        n = int(length)\n",
        (T + "test_a_square_mask_refuses_a_length_that_is_not_one_integer",),
        "generate_square_subsequent_mask(2.7) is [2, 2], ('3') is [3, 3], (True) is [1, 1]",
    ),
    Mutant(
        "norm-weight-of-any-shape-is-reshaped",
        NORM,
        "        if t is not None and tuple(t.shape) not in (shape, flat):\n",
        "        if t is not None and t.size != flat[0]:\n",
        (
            T + "test_a_norm_refuses_a_weight_that_is_neither_normalized_shape_nor_flat",
            T + "test_layer_norm_refuses_a_bias_of_another_shape",
        ),
        "a transposed [5, 4] weight for normalized_shape [4, 5] is reshaped, silently",
    ),
    Mutant(
        "norm-takes-a-negative-epsilon",
        NORM,
        "    if epsilon < 0:\n",
        "    if False:\n",
        (T + "test_a_norm_refuses_a_negative_epsilon_as_its_layer_does",),
        "F.rms_norm(ones, 3, epsilon=-1.0) gives inf where nn.RMSNorm refuses the epsilon",
    ),
    Mutant(
        "head-dim-zero-divides-by-zero",
        SDPA,
        "    return _fn.matmul(q * (head_dim**-0.5) if head_dim else q, k, transpose_y=True)\n",
        "    return _fn.matmul(q * (head_dim**-0.5), k, transpose_y=True)\n",
        (T + "test_attention_with_head_dim_zero_averages_the_values_as_pytorch_does",),
        "scaled_dot_product_attention with head_dim 0: ZeroDivisionError",
    ),
    Mutant(
        "mha-key-and-value-lengths-unchecked",
        MHA,
        "        if key.shape[1] != value.shape[1]:\n",
        "        if False:\n",
        (T + "test_multihead_attention_names_key_and_value_of_different_lengths",),
        "key of 5 positions and value of 4: a raw matmul shape error",
    ),
    Mutant(
        "static-cache-without-value-unchecked",
        MHA,
        "            if value is None:\n                raise TypeError(\n",
        "            if False:\n                raise TypeError(\n",
        (T + "test_a_static_cache_without_value_is_a_clear_error",),
        "gen_cache(key, type=StaticCache) without value: AttributeError on None",
    ),
    Mutant(
        "mha-takes-a-mask-that-is-not-a-tensor",
        MHA,
        "    _attention._check_mask_type(attn_mask)\n",
        "",
        (T + "test_a_mask_that_is_not_a_tensor_is_refused_by_attention_and_the_layers_alike",),
        "a nested-list mask: AttributeError; a NumPy mask accepted by MHA, refused by F.sdpa",
    ),
    Mutant(
        "sdpa-checks-only-the-query-dtype",
        SDPA,
        '    for name, t in (("query", query), ("key", key), ("value", value)):\n        if t.dtype.kind',
        '    for name, t in (("query", query),):\n        if t.dtype.kind',
        (T + "test_attention_refuses_an_integer_key_or_value",),
        "an int64 key or value is promoted instead of refused as an int64 query is",
    ),
    Mutant(
        "any-nn-functional-name-is-an-activation",
        "minitorch_amp/nn/layer/transformer_args.py",
        "_ACTIVATIONS = tuple(n for n in F.__all__ if getattr(F, n).__module__ == F.activation.__name__)\n",
        "_ACTIVATIONS = tuple(F.__all__)\n",
        (T + "test_a_transformer_layer_accepts_only_activation_functions",),
        "activation='linear' or 'layer_norm' is built and fails at the first forward",
    ),
]
