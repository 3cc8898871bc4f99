"""Issue 26's GPT step speed (GELU's float32 normal CDF, the heap that keeps temporaries) and
issue 24's CPU step: the optimizer's small buckets and NumPy's float16 conversions."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

CDF_TESTS = "tests/test_normal_cdf.py"
GELU_C_TESTS = "tests/test_host_gelu.py"  # the NumPy path held to the C one, bit for bit
HEAP_TESTS = "tests/test_host_memory.py"
IN_PLACE = "tests/test_optimizer_in_place.py"
FLOAT16 = "tests/test_float16_rounding.py"
CAST = "minitorch_amp/backend/cast.py"
HOST_FLOAT16 = "minitorch_amp/backend/host_float16.py"
FLOAT16_C = "csrc/float16.c"
POW2 = "tests/test_pow2_scale.py"
QUIET = "tests/test_quiet_twins.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "normal-cdf-tail-cancels",
        "minitorch_amp/backend/special.py",
        "            y[tail] = np.where(xt > 0, np.float32(1.0) - g, g)",
        "            y[tail] = np.float32(0.5) + np.copysign(np.float32(0.5) - g, xt)",
        (CDF_TESTS, GELU_C_TESTS),
        "Phi(-|x|) is computed as 1/2 - (1/2 - g): thousands of ULPs lost where GELU is tiny",
    ),
    Mutant(
        "normal-cdf-body-past-its-fit",
        "minitorch_amp/backend/special.py",
        "_CDF_SPLIT_SQUARED = np.float32(1.5 * 1.5)",
        "_CDF_SPLIT_SQUARED = np.float32(2.5 * 2.5)",
        (CDF_TESTS,),
        "the body polynomial runs to |x| = 2.5, past the range it was fitted on",
    ),
    Mutant(
        "normal-cdf-tail-clip-too-low",
        "minitorch_amp/backend/special.py",
        "_CDF_CLIP = np.float32(14.5)",
        "_CDF_CLIP = np.float32(4.5)",
        (CDF_TESTS,),
        "|x| is clipped at 4.5 in the tail: Phi(-6) comes out as Phi(-4.5)",
    ),
    Mutant(
        "heap-setting-inverted",
        "minitorch_amp/backend/host_memory.py",
        '    if setting == "system" or not sys.platform.startswith("linux"):',
        '    if setting == "heap" or not sys.platform.startswith("linux"):',
        (HEAP_TESTS,),
        "the default leaves glibc alone and 'system' tunes it: temporaries fault in every step",
    ),
    Mutant(
        "heap-trim-threshold-left-low",
        "minitorch_amp/backend/host_memory.py",
        "TRIM_THRESHOLD = 256 << 20",
        "TRIM_THRESHOLD = 128 << 10",
        (HEAP_TESTS,),
        "freed heap memory above 128 KiB is returned, so the next step faults it in again",
    ),
    Mutant(
        "in-place-update-skips-rescale-grad",
        "minitorch_amp/optimizer/bucket_in_place.py",
        "            if record.grad_scale != 1.0:\n                gs *= record.grad_scale\n            if record.l2:\n                gs += record.l2 * ps\n            elif whole:",
        "            if record.l2:\n                gs += record.l2 * ps\n            elif whole:",
        (IN_PLACE,),
        "the in-place CPU update forgets Momentum's rescale_grad",
    ),
    Mutant(
        "in-place-update-forgets-the-optimize-cast",
        "minitorch_amp/optimizer/bucket_in_place.py",
        "                record.data[...] = convert(p, self.ptype).reshape(record.data.shape)",
        "                pass",
        (IN_PLACE,),
        "O2's float16 parameters are never written from their updated masters",
    ),
    Mutant(
        "cpu-update-keeps-flat-copies",
        "minitorch_amp/optimizer/bucket.py",
        "            self.xp is np\n            and self.total >= IN_PLACE_FROM\n",
        "            False\n            and self.total >= IN_PLACE_FROM\n",
        (IN_PLACE,),
        "the CPU step keeps flat copies of every parameter and gradient (fp32 SimpleNet at width 4096: 808 MiB, not 424)",
    ),
    Mutant(
        "grouped-update-skips-rescale-grad",
        "minitorch_amp/optimizer/bucket_in_place.py",
        "        if record.grad_scale != 1.0:\n            g *= record.grad_scale\n",
        "",
        (IN_PLACE + "::test_small_neighbours_are_updated_together_with_the_flat_paths_bits",),
        "small neighbours updated together forget Momentum's rescale_grad",
    ),
    Mutant(
        "grouped-update-writes-back-from-the-run-start",
        "minitorch_amp/optimizer/bucket_in_place.py",
        "                start = self.offsets[k] - a\n",
        "                start = 0\n",
        (IN_PLACE + "::test_small_neighbours_are_updated_together_with_the_flat_paths_bits",),
        "each small neighbour is written from the first one's segment",
    ),
    Mutant(
        "small-neighbours-updated-one-by-one",
        "minitorch_amp/optimizer/bucket_in_place.py",
        "                if j - i >= 2:\n",
        "                if False:\n",
        (IN_PLACE + "::test_a_small_bucket_is_one_flat_update_with_the_per_parameter_bits",),
        "a large bucket's small parameters take one _update call each (160 of 1024 elements: Adam 9.7 ms, not 3.9)",
    ),
    Mutant(
        "cpu-small-bucket-per-parameter",
        "minitorch_amp/optimizer/bucket.py",
        "IN_PLACE_FROM = 1 << 16",
        "IN_PLACE_FROM = 0",
        (IN_PLACE,),
        "a small NumPy bucket is updated parameter by parameter: one _update call per parameter, ~15 NumPy calls each",
    ),
    Mutant(
        "optimizer-runs-left-interleaved",
        "minitorch_amp/optimizer/state.py",
        "                    items = _runs_together(items)\n",
        "",
        ("tests/test_optimizer_runs.py",),
        "AdamW decaying only its 2-D weights updates in 48 runs, one per parameter",
    ),
    Mutant(
        "float16-select-without-the-sign-spread",
        HOST_FLOAT16,
        "    small >>= np.int32(31)\n",
        "",
        (FLOAT16,),
        "the lane select masks with (a - 2**-14's bits) itself, not its spread sign: normal and subnormal bits mixed",
    ),
    Mutant(
        "float16-subnormal-lane-off-by-a-unit",
        HOST_FLOAT16,
        "    sub -= np.uint32(0x3F000000)",
        "    sub -= np.uint32(0x3EFFFFFF)",
        (FLOAT16,),
        "every float16 subnormal (and the smallest normals) one unit too large",
    ),
    Mutant(
        "float16-sample-blind-below-a-tenth",
        HOST_FLOAT16,
        "    return int(np.count_nonzero(magnitude < np.uint32(0x387FFFFF))) >= 4",
        "    return int(np.count_nonzero(magnitude < np.uint32(0x387FFFFF))) >= 26",
        (FLOAT16,),
        "the sample takes the integer path only when a tenth of the values are slow in NumPy (at 3% they cost 2x already)",
    ),
    Mutant(
        "float16-widening-only-when-sampled-slow",
        CAST,
        "        if x.dtype == float16 and np.dtype(dtype) == float32:\n",
        "        if x.dtype == float16 and np.dtype(dtype) == float32 and not np.isfinite(x).all():\n",
        (FLOAT16,),
        "large float16 arrays widen through NumPy's per-element loop (7x slower on subnormals), not the table",
    ),
    Mutant(
        "float16-c-ties-away-from-zero",
        FLOAT16_C,
        "    q += (rest > half) | ((rest == half) & q);",
        "    q += rest >= half;",
        (FLOAT16,),
        "the C file rounds a subnormal tie away from zero, not to even",
    ),
    Mutant(
        "float16-c-nan-payload-may-vanish",
        FLOAT16_C,
        "    payload |= payload == 0u;\n",
        "",
        (FLOAT16,),
        "a NaN whose payload lies in the 13 dropped bits becomes inf in the C file",
    ),
    Mutant(
        "float16-c-never-loaded",
        HOST_FLOAT16,
        '    return host_c.load("float16")',
        "    return None",
        ("tests/test_host_float16.py",),
        "the compiled file is never used: every float16 conversion on NumPy's slow loop",
    ),
    Mutant(
        "gelu-c-horner-fused-into-one-statement-order",
        "csrc/gelu.c",
        "                float t = y[i] + c;\n                y[i] = t * s[i];",
        "                y[i] = y[i] * s[i] + c;",
        (GELU_C_TESTS,),
        "the C body evaluates Horner's rule in another order: not the NumPy passes' bits",
    ),
    Mutant(
        "gelu-c-tail-everywhere",
        "csrc/gelu.c",
        "in_tail = -(uint32_t)(x[i] * x[i] >= split);",
        "in_tail = ~0u;",
        (GELU_C_TESTS,),
        "tail_finish overwrites the body's values too",
    ),
    Mutant(
        "gelu-c-never-used-backward",
        "minitorch_amp/autograd/ops/activation.py",
        '        return host_c.load("gelu")',
        "        return None",
        (GELU_C_TESTS,),
        "GELU's backward never takes the compiled loop",
    ),
    Mutant(
        "host-scale-update-grows-into-inf",
        "minitorch_amp/backend/loss_scaling.py",
        "            if np.isfinite(grown):\n                s = grown\n",
        "            s = grown\n",
        ("tests/test_loss_scaling.py",),
        "the CPU's scale update grows a scale near float32's top into inf",
    ),
    Mutant(
        "host-scale-update-counters-unwrapped",
        "minitorch_amp/backend/loss_scaling.py",
        "    return (n + 2**31) % 2**32 - 2**31",
        "    return n",
        ("tests/test_loss_scaling.py",),
        "the CPU's step counters pass 2**31 - 1 where NumPy's (and the kernel's) int32 wrap",
    ),
    Mutant(
        "softmax-row-max-reduced-row-by-row",
        "minitorch_amp/autograd/ops/activation.py",
        "_TREE_ROWS_UP_TO = 64",
        "_TREE_ROWS_UP_TO = 0",
        ("tests/test_ops.py",),
        "attention's softmax takes NumPy's per-row fmax.reduce over its rows of 64 again (2.3x slower)",
    ),
    Mutant(
        "softmax-row-max-drops-an-odd-column",
        "minitorch_amp/autograd/ops/activation.py",
        "        if n % 2:\n            np.fmax(head[..., :1], a[..., 2 * half :], out=head[..., :1])\n",
        "",
        ("tests/test_ops.py",),
        "an odd row length's last column never enters the maximum",
    ),
    Mutant(
        "gelu-product-of-the-wrong-arrays",
        "minitorch_amp/backend/special.py",
        "            np.multiply(flat[block], out[block], out=product[block])",
        "            np.multiply(out[block], out[block], out=product[block])",
        ("tests/test_normal_cdf.py", GELU_C_TESTS),
        "exact GELU's block-wise product is Phi(x)^2, not x Phi(x)",
    ),
    Mutant(
        "gelu-tail-scan-skipped-for-every-block",
        "minitorch_amp/backend/special.py",
        "    if not top < _CDF_SPLIT_SQUARED:  # a tail element, or a NaN\n",
        "    if False:\n",
        ("tests/test_normal_cdf.py",),
        "GELU's CDF never evaluates its tail: |x| >= 1.5 gets the body's polynomial",
    ),
    Mutant(
        "in-place-update-adds-l2-into-the-grad",
        "minitorch_amp/optimizer/bucket_in_place.py",
        "        read_only = read_only and not whole\n",
        "        read_only = g.dtype == self.wide and not whole\n",
        ("tests/test_optimizer_in_place.py",),
        "the in-place update hands _update the gradient itself under L2 decay or a rescale, "
        "which then write into .grad",
    ),
    Mutant(
        "bf16-tensors-drawn-through-float32",
        "minitorch_amp/testing/strategies.py",
        '    if getattr(value, "dtype", None) == bfloat16:\n',
        "    if False:\n",
        ("tests/test_bf16_kit.py",),
        "tensors(bfloat16) widens a drawn bfloat16 and narrows it back: a signalling NaN comes "
        "out quieted, with an 'invalid value' warning",
    ),
    Mutant(
        "pow2-unscale-lanes-swapped",
        "minitorch_amp/backend/pow2_scale.py",
        "        below >>= 15",
        "        below = ~(below >> 15)",
        (POW2,),
        "the bits path of the CPU unscale takes each value's other lane: normal results from "
        "the subnormal rounding, subnormal ones from the lowered exponent",
    ),
    Mutant(
        "pow2-unscale-rounds-at-the-wrong-step",
        "minitorch_amp/backend/pow2_scale.py",
        "    wide += np.float32(0.5)",
        "    wide += np.float32(1.0)",
        (POW2,),
        "a result below the smallest normal is rounded to 2**-23, not float16's 2**-24",
    ),
    Mutant(
        "pow2-unscale-on-any-scale",
        "minitorch_amp/backend/pow2_scale.py",
        "    if bits & 0x7FFFFF or not 127 - MAX_K <= exponent <= 126:",
        "    if not 127 - MAX_K <= exponent <= 126:",
        (POW2,),
        "an inverse scale that is not a power of two (1/1000) is taken for the power below it",
    ),
    Mutant(
        "plain-cast-drops-found-inf",
        "minitorch_amp/backend/cast.py",
        "    elif found_inf is None and x.__class__ is np.ndarray and (x.dtype, dtype) in _PLAIN:",
        "    elif x.__class__ is np.ndarray and (x.dtype, dtype) in _PLAIN:",
        ("tests/test_cast_kernel.py",),
        "a NumPy float16 <-> float32 cast takes the plain path with a found_inf flag too: an "
        "overflow to inf is never flagged",
    ),
    Mutant(
        "gemm-twin-warns-on-overflow",
        "minitorch_amp/backend/gemm.py",
        '@np.errstate(over="ignore", invalid="ignore")\ndef twin(',
        "def twin(",
        (QUIET,),
        "the CPU's float16 GEMM warns when a product overflows to inf, the value the loss "
        "scaler looks for",
    ),
    Mutant(
        "bias-grad-twin-warns",
        "minitorch_amp/backend/bias_grad.py",
        '@np.errstate(over="ignore", invalid="ignore")  # (as a decorator: half the cost of a with)\n',
        "",
        (QUIET,),
        "the CPU's bias gradient warns about an inf gradient or a masked inf, values on purpose",
    ),
]
