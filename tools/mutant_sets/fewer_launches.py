"""Issue 24 part 3, fewer launches: a float32 bias on a 16-bit product in the GEMM epilogue."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

GEMM_TESTS = "tests/test_gemm.py"

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
        "            stored = out_dtype if product_dtype is None else product_dtype",
        "            stored = out_dtype",
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
]
