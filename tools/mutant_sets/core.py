"""The mutants of issues 18-24: the scaler's skips, the optimizer step, master weights,
Layer.to's memory rule, the loss-scaling kernels, the docs and the tools' own checks."""

from __future__ import annotations

from mutant_sets import Mutant, lines

GRAD_SCALER = "minitorch_amp/amp/grad_scaler.py"
OPTIMIZER = "minitorch_amp/optimizer/optimizer.py"
BUCKET = "minitorch_amp/optimizer/bucket.py"
TENSOR_CONVERT = "minitorch_amp/nn/layer/tensor_convert.py"
LOSS_SCALING = "minitorch_amp/backend/loss_scaling.py"
SKIPS = "tests/test_grad_scaler_skips.py"
MEMORY_THRESHOLD = (
    "tests/test_layer_to_memory.py::"
    "test_the_memory_rule_is_pinned_one_byte_either_side_of_its_threshold"
)
SNIPPET = (
    "tests/test_docs.py::test_every_python_snippet_in_the_docs_runs_and_prints_what_the_page_shows"
)
TOOL_TESTS_IN_CI = (
    "tests/test_needs.py::test_under_ci_each_tool_test_fails_when_its_tool_is_missing"
)


MUTANTS: list[Mutant] = [
    Mutant(
        "scaler-fallback-skip-removed",
        "minitorch_amp/amp/found_inf.py",
        lines("    if bool(_device.asnumpy(found_inf)[0]):", "        return skipped"),
        "",
        (SKIPS,),
        "GradScaler steps an optimizer without _set_auxiliary_var even when found_inf is set",
    ),
    Mutant(
        "scaler-or-over-optimizers",
        GRAD_SCALER,
        "    return functools.reduce(_device.get_array_module(flags[0]).logical_or, "
        "flags[1:], flags[0])",
        "    return flags[-1]",
        (SKIPS,),
        "update() uses the last optimizer's found_inf instead of OR-ing every optimizer's",
    ),
    Mutant(
        "optimizer-step-skip-removed",
        OPTIMIZER,
        lines(
            "            if flag[0]:",
            "                return  # a host flag: reading it is free, so skip before "
            "anything else",
        ),
        "",
        (SKIPS,),
        "Optimizer.step() goes on with a set host flag",
    ),
    Mutant(
        "skip-commit-ignores-the-flag",
        BUCKET,
        "keep = None if found_inf is None else found_inf.reshape(())  # True: overflow",
        "keep = None",
        (SKIPS, "tests/test_fused_optim.py"),
        "the twin's one commit of a step skipped on the device writes the new values anyway",
    ),
    Mutant(
        "master-re-read-from-the-float16-param",
        BUCKET,
        lines(
            '        p = self.master if self.master is not None else self._gather("param", '
            "self.params())",
        ),
        lines(
            '        p = self.master if self.master is not None else self._gather("param", '
            "self.params())",
            "        if self.master is not None:  # the master refreshed from the float16 copy",
            '            np.concatenate(self.params(), axis=None, out=p, casting="same_kind")',
        ),
        ("tests/test_master_weights.py",),
        "the one master-weight update starts from the float16 parameter: small steps vanish",
    ),
    Mutant(
        "optimize-cast-skipped",
        BUCKET,
        lines(
            "                for param, a, b in self._casts:",
            "                    param[...] = rounded[a:b].reshape(param.shape)",
        ),
        lines("                for param, a, b in self._casts:", "                    pass"),
        ("tests/test_master_weights.py",),
        "the master is updated but the float16 parameter is never written from it",
    ),
    Mutant(
        "memory-rule-no-1.2",
        TENSOR_CONVERT,
        "/ 256 + 1) * 256 * 1.2",
        "/ 256 + 1) * 256",
        (MEMORY_THRESHOLD,),
        "Layer.to's memory check drops Paddle's x1.2 safety factor",
    ),
    Mutant(
        "memory-rule-no-256-rounding",
        TENSOR_CONVERT,
        "((numel * _dtypes.convert_dtype(dtype).itemsize) / 256 + 1) * 256 * 1.2",
        "(numel * _dtypes.convert_dtype(dtype).itemsize) * 1.2",
        (MEMORY_THRESHOLD,),
        "Layer.to's memory check drops the 256-byte allocator unit",
    ),
    Mutant(
        "softmax-backward-in-fp16",
        "minitorch_amp/autograd/ops/activation.py",
        lines(
            "        g = _widen(grad)",
            "        gx = xp.subtract(g, _row_sums(g, ctx.axis, y))  # fresh: scaled by y in place",
        ),
        lines(
            "        g, y = grad, y.astype(grad.dtype)",
            "        gx = xp.subtract(g, _row_sums(g, ctx.axis, y))  # fresh: scaled by y in place",
        ),
        ("tests/test_ops_half_backward.py",),
        "softmax's backward computes in float16 instead of float32",
    ),
    Mutant(
        "layer-norm-backward-in-fp16",
        "minitorch_amp/autograd/ops/nn_ops.py",
        lines(
            "        n = xhat.shape[1]",
            "        g = grad.astype(xhat.dtype, copy=False).reshape(xhat.shape)",
        ),
        lines(
            "        n = xhat.shape[1]",
            "        xhat, rstd = xhat.astype(grad.dtype), rstd.astype(grad.dtype)",
            "        g = grad.reshape(xhat.shape)",
        ),
        ("tests/test_ops_half_backward.py",),
        "layer_norm's backward computes in float16 instead of float32",
    ),
    Mutant(
        "amp-cu-unscale-rounds-toward-zero",
        "cuda/amp.cu",
        "__float2half_rn(__half2float(g) * inv)",
        "__float2half_rz(__half2float(g) * inv)",
        ("tests/test_amp_kernel_emulator.py",),
        "amp.cu's float16 unscale rounds toward zero instead of to nearest even",
    ),
    Mutant(
        "amp-cu-inverse-flushes-subnormal-quotients",
        "cuda/amp.cu",
        "*inv_scale = nearest_float(1.0 / exact_double(*scale));",
        "*inv_scale = static_cast<float>(1.0 / exact_double(*scale));",
        ("tests/test_amp_kernel_emulator.py",),
        "amp.cu's inverse_scale writes (float)d, which -ftz flushes to 0 for 1 / 3e38",
    ),
    Mutant(
        "amp-cu-inverse-reads-subnormal-scales-as-0",
        "cuda/amp.cu",
        "*inv_scale = nearest_float(1.0 / exact_double(*scale));",
        "*inv_scale = nearest_float(1.0 / static_cast<double>(*scale));",
        ("tests/test_amp_kernel_emulator.py",),
        "amp.cu's inverse_scale reads (double)scale, which -ftz makes 0 for a subnormal scale",
    ),
    Mutant(
        "amp-cu-subnormals-round-toward-zero",
        "cuda/amp.cu",
        "__double2uint_rn(magnitude * 0x1p149)",
        "__double2uint_rz(magnitude * 0x1p149)",
        ("tests/test_amp_kernel_emulator.py",),
        "amp.cu rounds subnormal float32 results toward zero instead of to nearest even",
    ),
    Mutant(
        "amp-cu-scale-product-in-float",
        "cuda/amp.cu",
        "nan_max(multiply(s, decr_ratio), min_loss_scaling)",
        "nan_max(s * decr_ratio, min_loss_scaling)",
        ("tests/test_amp_kernel_emulator.py",),
        "amp.cu shrinks the scale with a float32 multiply, which -ftz flushes below 2**-126",
    ),
    Mutant(
        "amp-cu-nan-max-compares-in-float",
        "cuda/amp.cu",
        "return (a != a || exact_double(a) >= exact_double(b)) ? a : b;",
        "return (a != a || a >= b) ? a : b;",
        ("tests/test_amp_kernel_emulator.py",),
        "amp.cu floors the scale with a float32 comparison, 0 >= subnormal under -ftz",
    ),
    Mutant(
        "amp-cu-floor-counter-reads-the-old-scale",
        "cuda/amp.cu",
        "overflow && exact_double(next) <= exact_double(min_loss_scaling)",
        "overflow && exact_double(s) <= exact_double(min_loss_scaling)",
        ("tests/test_amp_kernel_emulator.py",),
        "amp.cu's floor counter compares the scale from before the update",
    ),
    Mutant(
        "amp-cu-floor-counter-compares-in-float",
        "cuda/amp.cu",
        "overflow && exact_double(next) <= exact_double(min_loss_scaling)",
        "overflow && next <= min_loss_scaling",
        ("tests/test_amp_kernel_emulator.py",),
        "amp.cu's floor counter compares in float32: any two subnormals are equal under -ftz",
    ),
    Mutant(
        "floor-counter-misses-the-floor-itself",
        "minitorch_amp/backend/scale_update.py",
        "found_inf & (scale <= f32(min_loss_scaling))",
        "found_inf & (scale < f32(min_loss_scaling))",
        ("tests/test_loss_scaling.py",),
        "the floor counter's twin counts only scales below the floor, not at it",
    ),
    Mutant(
        "unscale-by-1.1-over-s",
        LOSS_SCALING,
        "xp.copyto(out, 1.0 / scale.astype(float64)",
        "xp.copyto(out, 1.1 / scale.astype(float64)",
        (SKIPS,),
        "the scaler unscales by 1.1/S: every gradient 10% too large",
    ),
    Mutant(
        "unscale-by-1.1-over-s-in-training",
        LOSS_SCALING,
        "xp.copyto(out, 1.0 / scale.astype(float64)",
        "xp.copyto(out, 1.1 / scale.astype(float64)",
        ("tests/test_simple_net.py::test_amp_modes_train_close_to_fp32",),
        "the same 10% gradient error, seen by the SimpleNet AMP-vs-fp32 comparison alone",
    ),
    Mutant(
        "kernel-defined-only-in-a-comment",
        "cuda/cast.cu",
        'extern "C" __global__ void cast_f16_to_f32(',
        '// cast_f16_to_f32( was its name\nextern "C" __global__ void cast_f16_to_f32_v2(',
        ("tests/test_kernel_sources.py::test_every_registered_kernel_is_defined_in_its_file",),
        "a registered kernel is renamed; its old name survives only in a comment",
    ),
    Mutant(
        "copy-bucket-implicit-upload",
        "tests/test_fused_optim_kernel.py",
        "out[...] = np.asarray(a).view(HostArray)",
        "out[...] = np.asarray(a)",
        ("tests/test_fused_optim_kernel.py::test_the_kernel_equals_the_twin_bit_for_bit",),
        "the emulator tests' placing helper assigns a NumPy array into a device one (CuPy: "
        "TypeError)",
    ),
    Mutant(
        "docs-page-shows-a-stale-loss",
        "docs/index.md",
        "step  50  loss 6.92e-02  scale 131072",
        "step  50  loss 6.95e-02  scale 131072",
        (f"{SNIPPET}[index.md-0]",),
        "index.md shows a loss its code no longer prints (a float loosened only where measured)",
    ),
    Mutant(
        "docs-output-only-in-a-comment",
        "docs/autograd.md",
        lines("print(x.grad.numpy())", "```", "", "```text", "[2. 4. 6.]", "```"),
        lines("print(x.grad.numpy())  # [2. 4. 7.]", "```"),
        (f"{SNIPPET}[autograd.md-0]",),
        "a page shows a snippet's output as a comment beside the print, where nothing checks it",
    ),
    Mutant(
        "gemm-emulator-skips-without-g++-in-ci",
        "tests/test_gemm_emulator.py",
        'compiler = needs.program("g++", "the kernel emulators are built with it")',
        'compiler = __import__("shutil").which("g++") or pytest.skip("g++ is not installed")',
        (TOOL_TESTS_IN_CI,),
        "the GEMM emulators' g++ fixture skips by itself, so CI passes without building them",
    ),
    Mutant(
        "needs-skips-in-ci",
        "tests/needs.py",
        lines("    if in_ci():", "        pytest.fail(")[:-1],
        lines("    if False:", "        pytest.fail(")[:-1],
        ("tests/test_needs.py",),
        "a missing tool skips its test under CI=true too",
    ),
]
