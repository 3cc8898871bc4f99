"""Issue 28 items 4 and 5: the FP8 cast and GEMM kernels (checked on the emulators against
ml_dtypes and the twins) and the FP8 testing kit."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

CAST = "tests/test_fp8_cast_kernel.py"
GEMM = "tests/test_fp8_gemm.py"
KIT = "tests/test_fp8_kit.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "fp8-cast-ties-round-away",
        "cuda/fp8_cast.cu",
        "const unsigned rounded = (a + (1u << (drop - 1)) - 1 + ((a >> drop) & 1u)) >> drop;",
        "const unsigned rounded = (a + (1u << (drop - 1))) >> drop;",
        (f"{CAST}::test_every_float16_value_casts_like_ml_dtypes",),
        "the float -> FP8 cast rounds halfway cases away from zero, not to the even neighbour",
    ),
    Mutant(
        "fp8-cast-subnormals-truncated",
        "cuda/fp8_cast.cu",
        "bits = (m + (1u << (shift - 1)) - 1 + ((m >> shift) & 1u)) >> shift;",
        "bits = m >> shift;",
        (f"{CAST}::test_every_bfloat16_value_casts_like_ml_dtypes",),
        "values below FP8's smallest normal are truncated instead of rounded to nearest even",
    ),
    Mutant(
        "fp8-cast-never-saturates",
        "cuda/fp8_cast.cu",
        "const unsigned overflow = saturate ? largest : (e5m2 ? 0x7Cu : nan);",
        "const unsigned overflow = e5m2 ? 0x7Cu : nan;",
        (f"{CAST}::test_a_million_random_float32_bit_patterns_cast_like_ml_dtypes",),
        "the scaled cast ignores saturate: overflow gives NaN (E4M3) or inf (E5M2), not +-max",
    ),
    Mutant(
        "fp8-cast-inf-not-saturated",
        "cuda/fp8_cast.cu",
        "if (a == 0x7F800000u) return static_cast<unsigned char>(sign | overflow);",
        "if (a == 0x7F800000u) return static_cast<unsigned char>(sign | (e5m2 ? 0x7Cu : nan));",
        (f"{CAST}::test_every_float16_value_casts_like_ml_dtypes",),
        "a saturating cast passes +-inf through (E5M2 inf, E4M3 NaN) instead of +-max",
    ),
    Mutant(
        "fp8-cast-nan-loses-its-sign",
        "cuda/fp8_cast.cu",
        "if (v != v) return static_cast<unsigned char>(sign_of(x) | (format == 1 ? 0x7Eu : 0x7Fu));",
        "if (v != v) return static_cast<unsigned char>(format == 1 ? 0x7Eu : 0x7Fu);",
        (f"{CAST}::test_every_float16_value_casts_like_ml_dtypes",),
        "a negative NaN becomes FP8's positive NaN (ml_dtypes keeps the sign)",
    ),
    Mutant(
        "fp8-amax-of-the-scaled-tensor",
        "cuda/fp8_cast.cu",
        "const unsigned magnitude = __float_as_uint(v) & 0x7FFFFFFFu;",
        "const unsigned magnitude = __float_as_uint(v * scale) & 0x7FFFFFFFu;",
        (f"{CAST}::test_the_amax_is_of_the_unscaled_input_and_a_nan_anywhere_makes_it_nan",),
        "the amax is reduced over x * scale, not over the unscaled x the recipe needs",
    ),
    Mutant(
        "fp8-amax-stored-not-maxed",
        "cuda/fp8_cast.cu",
        "if (threadIdx.x == 0 && partial[0] != 0) atomicMax(amax, partial[0]);",
        "if (threadIdx.x == 0 && partial[0] != 0) *amax = partial[0];",
        (f"{CAST}::test_a_given_amax_is_folded_into_not_reset",),
        "each block overwrites the amax instead of folding its maximum in with atomicMax",
    ),
    Mutant(
        "fp8-vector-bytes-reversed",
        "cuda/fp8_cast.cu",
        "word |= static_cast<unsigned>(convert(in.v[j], s, format, saturate, mine)) << 8 * j;",
        "word |= static_cast<unsigned>(convert(in.v[j], s, format, saturate, mine)) << 8 * (3 - j);",
        (f"{CAST}::test_every_float16_value_casts_like_ml_dtypes",),
        "the 4-element vector path packs its bytes big-endian: elements land reversed",
    ),
    Mutant(
        "fp8-transpose-not-transposed",
        "cuda/fp8_cast.cu",
        "if (j < left) word |= (tile[4 * group + j][k / 4] >> 8 * (k % 4) & 0xFFu) << 8 * j;",
        "if (j < left) word |= (tile[k][group] >> 8 * j & 0xFFu) << 8 * j;",
        (f"{CAST}::test_cast_transpose_writes_the_cast_and_its_transpose",),
        "cast_transpose reads the staged tile along the wrong axis",
    ),
    Mutant(
        "fp8-transpose-words-reversed",
        "cuda/fp8_cast.cu",
        "if (j < left) word |= (tile[4 * group + j][k / 4] >> 8 * (k % 4) & 0xFFu) << 8 * j;",
        "if (j < left) word |= (tile[4 * group + j][k / 4] >> 8 * (k % 4) & 0xFFu) << 8 * (3 - j);",
        (f"{CAST}::test_cast_transpose_writes_the_cast_and_its_transpose",),
        "cast_transpose packs the 4 rows of a column into its word big-endian",
    ),
    Mutant(
        "fp8-transpose-row-words-into-the-wrong-tile-slot",
        "cuda/fp8_cast.cu",
        "            tile[i][group] = word;",
        "            tile[i][(group + 1) % kGroups] = word;",
        (f"{CAST}::test_cast_transpose_writes_the_cast_and_its_transpose",),
        "cast_transpose stages a row's 4 bytes one word over in the tile",
    ),
    Mutant(
        "fp8-twin-never-saturates",
        "minitorch_amp/backend/fp8_kernels.py",
        "    if saturate:\n        big = FP8_MAX[code]",
        "    if False:\n        big = FP8_MAX[code]",
        (f"{CAST}::test_the_twin_matches_the_kernel_on_edges",),
        "the cast's NumPy twin ignores saturate",
    ),
    Mutant(
        "fp8-gemm-one-scale-only",
        "cuda/gemm_fp8_sm90.cu",
        "const float alpha = __fmul_rn(scale_a[0], scale_b[0]);",
        "const float alpha = scale_a[0];",
        (f"{GEMM}::test_emulated_kernel_equals_the_twin_where_the_sums_are_exact",),
        "the FP8 GEMM's epilogue applies A's inverse scale and forgets B's",
    ),
    Mutant(
        "fp8-gemm-k-coordinate-in-bytes",
        "cuda/gemm_fp8_sm90.cu",
        "const int x = kb * BK;  // in two-byte words: FP8 column 128 kb",
        "const int x = kb * FP8_K_BLOCK;",
        (f"{GEMM}::test_emulated_kernel_equals_the_twin_where_the_sums_are_exact",),
        "the producer gives TMA the K coordinate in FP8 values, but the maps count two-byte words",
    ),
    Mutant(
        "fp8-gemm-map-in-bytes",
        "minitorch_amp/backend/fp8_gemm.py",
        "map_a = _sm90.operand_map(a.view(np.uint8).view(np.float16), True, _sm90.BM)",
        "map_a = _sm90.operand_map(a.view(np.uint8), True, _sm90.BM)",
        (f"{GEMM}::test_the_launcher_feeds_the_kernel_k_major_words_and_device_scales",),
        "the launcher encodes A's tensor map over bytes, not the two-byte words the kernel steps",
    ),
    Mutant(
        "fp8-gemm-dispatch-any-k",
        "minitorch_amp/backend/fp8_gemm.py",
        "    if k < K_MULTIPLE or k % K_MULTIPLE or min(m, n) < 1:\n        return False",
        "    if min(m, n) < 1:\n        return False",
        (f"{GEMM}::test_the_launcher_falls_back_to_the_twin_arithmetic_where_tma_cannot_go",),
        "K not a multiple of 16 goes on to the kernel's checks (an odd K cannot even be viewed "
        "as the two-byte words the tensor maps describe)",
    ),
    Mutant(
        "fp8-kit-e4m3-overflows-at-the-tie",
        "minitorch_amp/testing/fp8.py",
        "        return magnitude > self.OVERFLOW_THRESHOLD",
        "        return magnitude >= self.OVERFLOW_THRESHOLD",
        (f"{KIT}::test_overflows_says_where_a_plain_cast_overflows",),
        "the kit says E4M3's 464 overflows, but the tie rounds to the even 448",
    ),
    Mutant(
        "fp8-kit-strategies-skip-nan-encodings",
        "minitorch_amp/testing/fp8_strategies.py",
        "    specials = (*fmt.NAN_BITS, *fmt.INF_BITS)",
        "    specials = fmt.INF_BITS",
        (f"{KIT}::test_fp8_values_reach_every_landmark_and_every_nan_encoding",),
        "fp8_values no longer draws the NaN encodings first",
    ),
    Mutant(
        "fp8-kit-ulps-ignore-the-sign",
        "minitorch_amp/testing/fp8_assertions.py",
        "        return np.where(bits < 0, -128 - bits, bits)",
        "        return np.abs(bits)",
        (f"{KIT}::test_adjacent_bytes_are_one_ulp_apart_and_zeros_are_the_same_point",),
        "fp8_ulp_distance reads negative bytes as magnitudes: -x and x are 0 ulps apart",
    ),
    Mutant(
        "fp8-recipe-max-algo-is-most-recent",
        "minitorch_amp/amp/fp8/scaling.py",
        'amax = amax_history.max(keepdims=True) if algo == "max" else amax_history[:1].copy()',
        "amax = amax_history[:1].copy()",
        (f"{KIT}::test_a_history_shorter_than_the_spike_period_lets_every_spike_saturate",),
        "amax_compute_algo='max' uses only the latest amax: a long history no longer absorbs spikes",
    ),
    Mutant(
        "fp8-gemm-stage-freed-before-its-wgmma",
        "cuda/gemm_fp8_sm90.cu",
        "            if (previous >= 0 && lane128 == 0) mbar_arrive(empty + 8 * previous);\n            previous = s;",
        "            if (lane128 == 0) mbar_arrive(empty + 8 * s);\n            previous = -1;",
        (f"{GEMM}::test_emulated_kernel_equals_the_twin_where_the_sums_are_exact",),
        "a consumer frees its stage as soon as it has issued the stage's wgmma, before they "
        "have read it: the producer may overwrite operands still being read",
    ),
]
