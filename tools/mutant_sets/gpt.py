"""Issue 26: the GPT example, its benchmark and parity with PyTorch, the Linear and Dropout speed-
ups."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

MUTANTS: list[Mutant] = [
    Mutant(
        "gpt-decays-every-parameter",
        "examples/gpt.py",
        "        apply_decay_param_fun=lambda name: name in decay,",
        "        apply_decay_param_fun=lambda name: True,",
        ("tests/test_gpt_example.py::test_weight_decay_shrinks_the_2d_weights_only",),
        "the GPT example's AdamW decays biases and LayerNorm weights too, not only 2-D weights",
    ),
    Mutant(
        "gpt-top-k-ignored",
        "examples/gpt.py",
        '                logits = mt.masked_fill(logits, logits < kth, float("-inf"))',
        '                logits = mt.masked_fill(logits, logits < kth - 1e9, float("-inf"))',
        (
            "tests/test_gpt_example.py::test_generate_samples_only_among_the_top_k",
            "tests/test_gpt_example.py::test_generate_with_top_k_1_is_greedy_and_keeps_the_prompt",
        ),
        "generate() samples from every token whatever top_k says",
    ),
    Mutant(
        "gpt-generate-stays-in-eval-mode",
        "examples/gpt.py",
        "        if was_training:\n            self.train()\n        return tokens",
        "        return tokens",
        ("tests/test_gpt_example.py::test_generate_with_top_k_1_is_greedy_and_keeps_the_prompt",),
        "generate() leaves the model in eval mode, so training after a sample runs without dropout",
    ),
    Mutant(
        "gpt-step-out-proj-copied-untransposed",
        "benchmarks/gpt_torch.py",
        "            b.self_attn.out_proj.weight.copy_(t(attn.out_proj.weight, True))",
        "            b.self_attn.out_proj.weight.copy_(t(attn.out_proj.weight))",
        ("tests/test_gpt_parity.py::test_the_fp32_loss_tracks_pytorch_within_1e_5_over_40_steps",),
        "the PyTorch twin gets a square [in, out] weight as [out, in]: a different model, no error",
    ),
    Mutant(
        "linear-3d-output-rows-reordered",
        "minitorch_amp/autograd/ops/linalg.py",
        "            return out.reshape(*x.shape[:-1], weight.shape[1])",
        "            return out.reshape(*x.shape[:-1][::-1], weight.shape[1])",
        ("tests/test_ops.py::test_forward_matches_float64_numpy", "tests/test_transformer.py"),
        "Linear on a [b, s, in] input returns [s, b, out] rows from its one 2-D GEMM",
    ),
    Mutant(
        "dropout-backward-passes-any-scalar-factor",
        "minitorch_amp/autograd/ops/nn_ops.py",
        "        if isinstance(ctx.factor, float) and ctx.factor == 1.0:  # p = 0: nothing was dropped",
        "        if isinstance(ctx.factor, float):  # p = 0: nothing was dropped",
        ("tests/test_ops.py::test_backward_matches_finite_differences",),
        "downscale_in_infer dropout at inference passes its gradient unscaled (should be * (1 - p))",
    ),
]
