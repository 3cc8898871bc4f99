"""Issue 24 part 3, fewer launches: a float32 bias on a 16-bit product in the GEMM epilogue,
a Linear layer's bias gradient with its cast in one deterministic kernel, a ReLU's mask left
to that kernel, an O1 weight cast folded into its gradient's copy, a batch of products
(attention's heads) in one GEMM launch, LayerNorm in three kernels, and exact GELU and softmax in one
each way."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

GEMM_TESTS = "tests/test_gemm.py"
BIAS_GRAD_TESTS = "tests/test_bias_grad.py::"
RELU_FOLD_TESTS = "tests/test_relu_fold.py"
CAST_FOLD_TESTS = "tests/test_cast_fold.py"
BATCH_EMULATOR = "tests/test_gemm_emulator.py::test_emulated_batches_are_each_entrys_own_product"
BATCH_TESTS = "tests/test_gemm_batched.py"
LAYER_NORM_TESTS = "tests/test_layer_norm_kernel.py"
GELU_TESTS = "tests/test_gelu_kernel.py"
SOFTMAX_TESTS = "tests/test_softmax_kernel.py"
GLOBAL_NORM_TESTS = "tests/test_global_norm.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "fp16-gemm-ignores-the-product-flag",
        "cuda/gemm_fp16.cu",
        "        if (flags & EPILOGUE_PRODUCT_F16) {  // that a matmul stored before a float32 add",
        "        if (false) {",
        (
            "tests/test_gemm_emulator.py::test_emulated_float32_bias_is_added_to_the_product_stored_in_16_bits",
        ),
        "mma.sync GEMM: a float32 bias is added to the float32 product, not to the float16 one a matmul stores",
    ),
    Mutant(
        "sm90-gemm-rounds-the-product-to-bfloat16",
        "cuda/gemm_sm90.cu",
        "            v = round_to(v, static_cast<const __half*>(nullptr));",
        "            v = round_to(v, static_cast<const __nv_bfloat16*>(nullptr));",
        (
            "tests/test_gemm_sm90.py::test_emulated_float32_bias_is_added_to_the_product_stored_in_16_bits",
        ),
        "Hopper GEMM: the float16 flag rounds the product to bfloat16",
    ),
    Mutant(
        "twin-ignores-product-dtype",
        "minitorch_amp/backend/gemm.py",
        "        stored = out_dtype if product_dtype is None else product_dtype",
        "        stored = out_dtype",
        (GEMM_TESTS,),
        "the NumPy twin (the CPU's O1 Linear) keeps the float32 product before a float32 bias",
    ),
    Mutant(
        "launcher-sends-the-wrong-product-flag",
        "minitorch_amp/backend/gemm.py",
        "            flags |= EPILOGUE_PRODUCT_BF16 if narrow else EPILOGUE_PRODUCT_F16",
        "            flags |= EPILOGUE_PRODUCT_F16 if narrow else EPILOGUE_PRODUCT_BF16",
        (
            "tests/test_gemm_emulator.py::test_emulated_float32_bias_is_added_to_the_product_stored_in_16_bits",
        ),
        "the launcher asks a float16 GEMM to round its product to bfloat16 and the reverse",
    ),
    Mutant(
        "product-dtype-without-bias-accepted",
        "minitorch_amp/backend/gemm.py",
        '    if bias is None:\n        raise ValueError(\n            "product_dtype rounds',
        '    if False:\n        raise ValueError(\n            "product_dtype rounds',
        (GEMM_TESTS,),
        "product_dtype without a bias is silently ignored",
    ),
    Mutant(
        "bias-grad-kernel-ignores-the-relu-mask",
        "cuda/reduction.cu",
        "                if (y != nullptr && !unit_on(y[i])) m = unit_off(m);\n",
        "",
        (
            BIAS_GRAD_TESTS + "test_the_kernel_adds_in_its_stated_order_bit_for_bit",
            BIAS_GRAD_TESTS + "test_edge_values",
        ),
        "bias_grad sums (and casts) the whole gradient where the ReLU unit is off, inf/NaN included",
    ),
    Mutant(
        "bias-grad-kernel-adds-the-rows-bottom-up",
        "cuda/reduction.cu",
        "            for (long long r = group; r < rows; r += kBiasGroups) {",
        "            for (long long r = rows - 1 - group; r >= 0; r -= kBiasGroups) {",
        (BIAS_GRAD_TESTS + "test_the_kernel_adds_in_its_stated_order_bit_for_bit",),
        "bias_grad adds every row once but not in its documented order: other bits than the model (the error bound alone would not see it)",
    ),
    Mutant(
        "linear-backward-skips-the-cast-to-the-product",
        "minitorch_amp/autograd/ops/linalg.py",
        "            g2 = g2 if gp is None else gp",
        "            g2 = g2",
        (
            BIAS_GRAD_TESTS
            + "test_linear_backward_takes_the_bias_gradient_and_the_cast_from_one_bias_grad_call",
        ),
        "Linear.backward feeds its GEMMs the float32 grad of a promoted add instead of the grad rounded to the 16-bit product",
    ),
    Mutant(
        "relu-fold-sums-a-deferred-mask-unapplied",
        "minitorch_amp/autograd/engine.py",
        "                g = relu_fold.plain(previous) + relu_fold.plain(g)",
        "                g = previous + g",
        (RELU_FOLD_TESTS,),
        "a second consumer's gradient is added to a ReLU's deferred (unmasked) one",
    ),
    Mutant(
        "relu-fold-hook-sees-the-deferred-gradient",
        "minitorch_amp/autograd/engine.py",
        "                    grad = relu_fold.plain(grad)  # a hook sees the gradient as it is",
        "",
        (RELU_FOLD_TESTS,),
        "a hook on a Linear's result is handed the ReLU's unmasked gradient",
    ),
    Mutant(
        "relu-fold-hides-gradients-from-the-nan-checker",
        "minitorch_amp/autograd/relu_fold.py",
        '    if capture or hooks.grad_observers or not getattr(node.op, "defers_mask", False):',
        '    if capture or not getattr(node.op, "defers_mask", False):',
        (RELU_FOLD_TESTS,),
        "with the NaN/Inf checker on, the ReLU's gradient is never computed where it could look",
    ),
    Mutant(
        "linear-backward-drops-the-relu-mask",
        "minitorch_amp/autograd/ops/linalg.py",
        "            gb, gp = bias_grad(g2, grad.dtype, cast, relu_out=mask, out=out)",
        "            gb, gp = bias_grad(g2, grad.dtype, cast, relu_out=None, out=out)",
        (RELU_FOLD_TESTS,),
        "the engine skips a ReLU's backward and Linear does not apply its mask",
    ),
    Mutant(
        "cast-pair-second-array-block-index-not-rebased",
        "cuda/cast.cu",
        "        cast_body<float, Dst, false>(src1, dst1, n1, nullptr, blockIdx.x - first1,",
        "        cast_body<float, Dst, false>(src1, dst1, n1, nullptr, blockIdx.x,",
        (
            "tests/test_cast_pair.py::test_any_split_of_the_grid_casts_each_array_as_its_own_grid_would",
            "tests/test_cast_pair.py::test_cast_pair_equals_cast_of_each_bit_for_bit_in_one_launch",
        ),
        "the pair kernel's blocks for the second array keep their grid index: its first "
        "blocks0 * 256 threads' elements are never written",
    ),
    Mutant(
        "cast-pair-split-leaves-the-second-array-no-block",
        "minitorch_amp/backend/cast.py",
        "    blocks0 = min(max(blocks0, 1), _MAX_BLOCKS - 1)",
        "    blocks0 = min(max(blocks0, 1), _MAX_BLOCKS)",
        (
            "tests/test_cast_pair.py::test_the_split_gives_every_block_to_one_array_and_each_array_one_or_more",
            "tests/test_cast_pair.py::test_cast_pair_equals_cast_of_each_bit_for_bit_in_one_launch",
        ),
        "the proportional split rounds a huge first array's share up to the whole grid: a "
        "small second array gets 0 blocks and is never cast",
    ),
    Mutant(
        "auto-cast-pairs-a-cached-weight",
        "minitorch_amp/amp/auto_cast.py",
        "        if t._data.dtype == float32 and not (_is_parameter(t) and _cache_entry(t, dtype)[1]):",
        "        if t._data.dtype == float32:",
        ("tests/test_auto_cast_pairs.py",),
        "a weight whose cast is cached is cast again with the activation (the result unused)",
    ),
    Mutant(
        "cast-op-ignores-a-prepared-result",
        "minitorch_amp/autograd/ops/cast.py",
        "        if prepared is None:\n            return cast(x, dtype)",
        "        if True:\n            return cast(x, dtype)",
        ("tests/test_auto_cast_pairs.py",),
        "the pair's arrays are thrown away and each cast runs again (two more launches)",
    ),
    Mutant(
        "cast-fold-overwrites-a-held-gradient",
        "minitorch_amp/autograd/cast_fold.py",
        "    if leaf is None or leaf._node is not None or leaf._hooks or not leaf._grad_stale:",
        "    if leaf is None or leaf._node is not None or leaf._hooks:",
        (CAST_FOLD_TESTS + "::test_no_fold_where_the_cast_gradient_is_seen_or_added",),
        "a weight's gradient from an earlier backward() is replaced, not added to",
    ),
    Mutant(
        "cast-fold-passes-a-hook-the-16-bit-gradient",
        "minitorch_amp/autograd/cast_fold.py",
        "    if leaf is None or leaf._node is not None or leaf._hooks or not leaf._grad_stale:",
        "    if leaf is None or leaf._node is not None or not leaf._grad_stale:",
        (CAST_FOLD_TESTS + "::test_no_fold_where_the_cast_gradient_is_seen_or_added",),
        "a hook on a float32 weight sees (and returns) its float16 copy's gradient",
    ),
    Mutant(
        "cast-fold-hides-a-cast-from-the-nan-checker",
        "minitorch_amp/autograd/cast_fold.py",
        "    if node.op is not Cast or hooks.grad_observers or node.ctx.source != float32:",
        "    if node.op is not Cast or node.ctx.source != float32:",
        (CAST_FOLD_TESTS + "::test_no_fold_where_the_cast_gradient_is_seen_or_added",),
        "with the NaN/Inf checker on, the casts' backward is skipped and goes unchecked",
    ),
    Mutant(
        "cast-fold-in-paddle-grad",
        "minitorch_amp/autograd/engine.py",
        "                    if node.op is Cast and not (capture or create_graph):",
        "                    if node.op is Cast:",
        (CAST_FOLD_TESTS + "::test_no_fold_where_the_cast_gradient_is_seen_or_added",),
        "paddle.grad and create_graph fold too: their weight gradients come back in float16",
    ),
    Mutant(
        "batched-gemm-writes-every-entry-in-entry-0",
        "cuda/gemm_fp16.cu",
        "    C += entry * stride_c;",
        "",
        (BATCH_EMULATOR,),
        "mma.sync GEMM: every batch entry's product lands on the first entry's output",
    ),
    Mutant(
        "batched-gemm-reads-entry-0s-b",
        "cuda/gemm_fp16.cu",
        "    B += entry * stride_b;",
        "",
        (BATCH_EMULATOR,),
        "mma.sync GEMM: every batch entry multiplies by the first entry's B",
    ),
    Mutant(
        "batched-launch-offsets-a-shared-operand",
        "minitorch_amp/backend/gemm.py",
        "        a2, b2 = (x3[start if stride else 0] for x3, stride in zip((a3, b3), strides))",
        "        a2, b2 = (x3[start] for x3 in (a3, b3))",
        (BATCH_TESTS,),
        "a later chunk of a batch reads its shared (stride 0) operand past its one matrix",
    ),
    Mutant(
        "batched-launch-overfills-the-grid",
        "minitorch_amp/backend/gemm.py",
        "        count = min(MAX_BATCHES, entries - start)",
        "        count = entries - start",
        (BATCH_TESTS,),
        "a batch of more than 65535 entries is one launch, past gridDim.y's limit",
    ),
    Mutant(
        "layer-norm-forward-drops-the-bias",
        "cuda/layer_norm.cu",
        "            if (flags & LN_BIAS) v = __fadd_rn(v, b[i]);",
        "",
        (LAYER_NORM_TESTS,),
        "LayerNorm's kernel never adds the bias",
    ),
    Mutant(
        "layer-norm-tree-without-its-barrier",
        "cuda/layer_norm.cu",
        "        if (t < stride) partial[t] = __fadd_rn(partial[t], partial[t + stride]);\n        __syncthreads();",
        "        if (t < stride) partial[t] = __fadd_rn(partial[t], partial[t + stride]);",
        (LAYER_NORM_TESTS,),
        "a row's sum reads partial sums the other threads have not written yet",
    ),
    Mutant(
        "layer-norm-column-sums-count-rows-twice",
        "cuda/layer_norm.cu",
        "            for (int row = group; row < rows; row += kRowGroups) {",
        "            for (int row = group; row < rows; row += 1) {",
        (LAYER_NORM_TESTS,),
        "the weight's and bias's gradients add rows that other row groups add too",
    ),
    Mutant(
        "layer-norm-launcher-swaps-mean-and-rstd",
        "minitorch_amp/backend/layer_norm.py",
        "    args = (rows, grad, rows if weight is None else weight, mean, rstd, dx)",
        "    args = (rows, grad, rows if weight is None else weight, rstd, mean, dx)",
        (LAYER_NORM_TESTS,),
        "the input's gradient is computed from each row's rstd as its mean and back",
    ),
    Mutant(
        "gelu-backward-drops-the-cdf",
        "cuda/elementwise.cu",
        "        const float slope = __fadd_rn(__fmul_rn(density, v), normal_cdf(v));",
        "        const float slope = __fmul_rn(density, v);",
        (GELU_TESTS,),
        "exact GELU's kernel gradient forgets Phi(x): only x * phi(x)",
    ),
    Mutant(
        "gelu-forward-writes-the-cdf",
        "cuda/elementwise.cu",
        "        store(out + i, __fmul_rn(v, normal_cdf(v)));",
        "        store(out + i, normal_cdf(v));",
        (GELU_TESTS,),
        "exact GELU's kernel returns Phi(x), not x * Phi(x)",
    ),
    Mutant(
        "gelu-launcher-swaps-x-and-grad",
        "minitorch_amp/backend/gelu.py",
        "    _launch(_BACKWARD[x.dtype], (x, grad, out), x.size)",
        "    _launch(_BACKWARD[x.dtype], (grad, x, out), x.size)",
        (GELU_TESTS,),
        "the gradient kernel reads the gradient as the input and back",
    ),
    Mutant(
        "gelu-tanh-approximation-on-the-exact-kernel",
        "minitorch_amp/autograd/ops/activation.py",
        "        if not approximate and _gelu.usable(x):",
        "        if _gelu.usable(x):",
        (GELU_TESTS,),
        "approximate=True runs the exact GELU kernel on a GPU",
    ),
    Mutant(
        "softmax-forward-skips-the-maximum",
        "cuda/softmax.cu",
        "        m = block_reduce(m, partial, Max());",
        "        m = 0.0f;",
        (SOFTMAX_TESTS,),
        "softmax's kernel subtracts 0, not the row's maximum: exp overflows on large scores",
    ),
    Mutant(
        "softmax-backward-sums-g-alone",
        "cuda/softmax.cu",
        "            s = __fadd_rn(s, __fmul_rn(wide(g[start + i]), y[start + i]));",
        "            s = __fadd_rn(s, wide(g[start + i]));",
        (SOFTMAX_TESTS,),
        "softmax's gradient removes sum(g), not sum(g * y)",
    ),
    Mutant(
        "softmax-16-bit-output-rounded-twice",
        "cuda/softmax.cu",
        "            if (out != nullptr) store(out + static_cast<long long>(row) * n + i, yr[i]);",
        "            if (out != nullptr) store(out + static_cast<long long>(row) * n + i, __half2float(__float2half_rn(yr[i])));",
        (SOFTMAX_TESTS,),
        "a bfloat16 softmax's output goes through float16 first (a double rounding, underflow)",
    ),
    Mutant(
        "softmax-kernel-along-another-axis",
        "minitorch_amp/backend/softmax.py",
        "        axis % x.ndim == x.ndim - 1",
        "        True",
        (SOFTMAX_TESTS,),
        "softmax along the first axis runs the last-axis kernel",
    ),
    Mutant(
        "clip-scale-drops-a-nan-norm",
        "cuda/reduction.cu",
        "        const float most = norm != norm ? norm : fmaxf(norm, clip);",
        "        const float most = fmaxf(norm, clip);",
        (GLOBAL_NORM_TESTS,),
        "a NaN gradient gives a NaN norm, and fmaxf turns it into the clip: scale 1, the NaN hidden",
    ),
    Mutant(
        "global-norm-partials-at-the-launch-tile",
        "cuda/reduction.cu",
        "        if (threadIdx.x == 0) partials[start[i] + tile - first[i]] = sum;",
        "        if (threadIdx.x == 0) partials[start[i] + tile] = sum;",
        (GLOBAL_NORM_TESTS,),
        "each gradient's tile sums land at the dtype's tile count, over another gradient's",
    ),
    Mutant(
        "global-norm-search-takes-the-first-empty-gradient",
        "cuda/reduction.cu",
        "        if (first[mid] <= tile) {",
        "        if (first[mid] < tile) {",
        (GLOBAL_NORM_TESTS,),
        "a tile goes to the gradient before its own",
    ),
    Mutant(
        "global-norm-tables-grouped-by-size",
        "minitorch_amp/backend/global_norm.py",
        "        groups.setdefault(g.dtype, []).append(i)",
        "        groups.setdefault(g.size > 4096, []).append(i)",
        (GLOBAL_NORM_TESTS,),
        "one launch reads gradients of two dtypes as one",
    ),
]
