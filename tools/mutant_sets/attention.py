"""Issue 26: scaled_dot_product_attention, MultiHeadAttention and its caches, the transformer
layers."""

from __future__ import annotations

from mutant_sets import Mutant

SDPA = "minitorch_amp/nn/functional/attention.py"
MHA = "minitorch_amp/nn/layer/attention.py"
TRANSFORMER = "minitorch_amp/nn/layer/transformer.py"
ATTENTION_TESTS = "tests/test_attention.py"
TRANSFORMER_TESTS = "tests/test_transformer.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "attention-scaled-by-head-dim",
        SDPA,
        "return _fn.matmul(q * (head_dim**-0.5) if head_dim else q, k, transpose_y=True)",
        "return _fn.matmul(q * (head_dim**-1.0) if head_dim else q, k, transpose_y=True)",
        (
            f"{ATTENTION_TESTS}::"
            "test_sdpa_is_softmax_of_scaled_scores_times_values_in_paddles_seq_heads_layout",
        ),
        "the attention scores are divided by head_dim instead of sqrt(head_dim)",
    ),
    Mutant(
        "sdpa-reads-pytorchs-layout",
        SDPA,
        "perm = [0, 2, 1, 3] if query.ndim == 4 else [1, 0, 2]",
        "perm = [0, 1, 2, 3] if query.ndim == 4 else [1, 0, 2]",
        (
            f"{ATTENTION_TESTS}::"
            "test_sdpa_is_softmax_of_scaled_scores_times_values_in_paddles_seq_heads_layout",
        ),
        "scaled_dot_product_attention takes [batch, heads, seq, dim] (PyTorch's) for Paddle's",
    ),
    Mutant(
        "sdpa-bool-mask-inverted",
        SDPA,
        'scores = _fn.where(attn_mask, scores, float("-inf"))',
        'scores = _fn.where(attn_mask, float("-inf"), scores)',
        (
            f"{ATTENTION_TESTS}::"
            "test_sdpa_bool_mask_attends_where_true_and_broadcasts_over_batch_and_heads",
        ),
        "a bool attn_mask masks where it is True (PyTorch MHA's polarity, not SDPA's or Paddle's)",
    ),
    Mutant(
        "sdpa-causal-looks-ahead",
        SDPA,
        "return Tensor._wrap(xp.tril(xp.ones((q_len, k_len), dtype=bool)))",
        "return Tensor._wrap(xp.triu(xp.ones((q_len, k_len), dtype=bool)))",
        (
            f"{ATTENTION_TESTS}::"
            "test_sdpa_is_causal_lets_query_i_see_keys_up_to_i_and_combines_with_a_mask",
        ),
        "is_causal lets query i see keys i.. instead of ..i",
    ),
    Mutant(
        "attention-dropout-in-eval",
        SDPA,
        'weights = _dropout(weights, dropout_p, training=training, mode="upscale_in_train")',
        'weights = _dropout(weights, dropout_p, training=True, mode="upscale_in_train")',
        (f"{ATTENTION_TESTS}::test_sdpa_dropout_acts_only_while_training",),
        "attention dropout also drops weights when training=False (or in eval mode)",
    ),
    Mutant(
        "mha-int-mask-polarity",
        MHA,
        "bias = (attn_mask._data.astype(acc) - 1.0) * acc.type(1e9)",
        "bias = attn_mask._data.astype(acc) * acc.type(-1e9)",
        (
            f"{ATTENTION_TESTS}::"
            "test_mha_bool_and_int_masks_mask_false_and_zero_with_minus_1e9_as_paddle_does",
        ),
        "MultiHeadAttention masks the True/1 positions of a bool/int mask instead of False/0",
    ),
    Mutant(
        "mha-cache-prepends-new-keys",
        MHA,
        "k, v = concat([cache.k, k], axis=2), concat([cache.v, v], axis=2)",
        "k, v = concat([k, cache.k], axis=2), concat([v, cache.v], axis=2)",
        (
            f"{ATTENTION_TESTS}::"
            "test_mha_cache_decoding_step_by_step_equals_causal_attention_over_the_sequence",
        ),
        "a decoding Cache puts this call's keys before the earlier ones (masks then miss)",
    ),
    Mutant(
        "mha-static-cache-ignored",
        MHA,
        "if isinstance(cache, self.StaticCache):  # keys and values computed once, beforehand",
        "if False:",
        (
            f"{ATTENTION_TESTS}::"
            "test_mha_static_cache_holds_projected_keys_and_values_and_comes_back_unchanged",
        ),
        "a StaticCache's keys/values are recomputed from key/value (None: the query) instead",
    ),
    Mutant(
        "transformer-normalize-before-ignored",
        TRANSFORMER,
        "return norm(x) if self.normalize_before else x",
        "return x",
        (
            f"{TRANSFORMER_TESTS}::"
            "test_encoder_layer_matches_the_float64_reference_post_and_pre_norm",
        ),
        "normalize_before=True skips the LayerNorm before each sublayer",
    ),
    Mutant(
        "encoder-stack-repeats-the-first-layer",
        TRANSFORMER,
        "[encoder_layer] + [cls(**config) for _ in range(num_layers - 1)]",
        "[encoder_layer] * num_layers",
        (
            f"{TRANSFORMER_TESTS}::"
            "test_encoder_stacks_fresh_layers_built_from_the_first_ones_arguments_then_its_norm",
        ),
        "TransformerEncoder applies its first layer num_layers times (shared weights)",
    ),
    Mutant(
        "square-subsequent-mask-hides-the-diagonal",
        TRANSFORMER,
        "mask = np.triu(np.full((n, n), -np.inf), 1)",
        "mask = np.triu(np.full((n, n), -np.inf), 0)",
        (
            f"{TRANSFORMER_TESTS}::"
            "test_generate_square_subsequent_mask_is_minus_inf_above_the_diagonal",
        ),
        "generate_square_subsequent_mask also masks each position from itself",
    ),
]
