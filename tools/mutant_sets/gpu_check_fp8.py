"""Issue 24 item 5 and issue 28: the GPU check's kernels stage prints the FP8 GEMM table
(benchmarks/kernels.py --fp8)."""

from __future__ import annotations

from mutant_sets import Mutant

KERNELS = "tests/test_benchmark_kernels.py"
CHECK = "tests/test_gpu_check.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "kernels-fp8-flag-ignored",
        "benchmarks/kernels.py",
        "    if args.fp8:  # NOTE: after the table,",
        "    if False:  # NOTE: after the table,",
        (f"{KERNELS}::test_fp8_prints_the_fp8_gemm_table_after_the_kernel_table",),
        "kernels.py --fp8 prints the kernel table only: the GPU check never times the FP8 GEMM",
    ),
    Mutant(
        "kernels-fp8-before-the-table",
        "benchmarks/kernels.py",
        "        rows = bench_gemm(args.repeat) + bench_cast(args.repeat)",
        "        if args.fp8:\n"
        "            print_fp8_table(args.repeat)\n"
        "        rows = bench_gemm(args.repeat) + bench_cast(args.repeat)",
        (f"{KERNELS}::test_fp8_prints_the_fp8_gemm_table_after_the_kernel_table",),
        "the FP8 GEMM is timed before the kernel table is printed: a kernels stage that times out"
        " there leaves no kernel table (and here it runs twice)",
    ),
    Mutant(
        "kernels-fp8-skipped-silently",
        "benchmarks/kernels.py",
        '        print(f"FP8 GEMM against torch._scaled_mm: skipped: {reason}")\n',
        "",
        (f"{KERNELS}::test_fp8_on_a_gpu_that_cannot_run_it_says_why_in_one_line",),
        "on a GPU that cannot run the FP8 GEMM the check's summary shows no FP8 line and no reason",
    ),
    Mutant(
        "kernels-fp8-own-repeat",
        "benchmarks/kernels.py",
        'fp8_gemm.main(["--repeat", str(repeat)])',
        "fp8_gemm.main([])",
        (f"{KERNELS}::test_fp8_prints_the_fp8_gemm_table_after_the_kernel_table",),
        "the FP8 rows ignore --repeat: the header's 'median of N runs' is wrong for them",
    ),
    Mutant(
        "gpu-check-kernels-without-fp8",
        "benchmarks/gpu_check.sh",
        '    "$py benchmarks/kernels.py --fp8"',
        '    "$py benchmarks/kernels.py"',
        (f"{CHECK}::test_the_stages_run_the_gpu_tests_the_tables_and_the_example",),
        "the GPU check's kernels stage leaves the FP8 GEMM out",
    ),
    Mutant(
        "gpu-check-kernels-budget-not-in-docs",
        "benchmarks/gpu_check.sh",
        "stage kernels 70 benchmarks/kernels.py",
        "stage kernels 65 benchmarks/kernels.py",
        (f"{CHECK}::test_the_docs_list_the_stages_and_budgets_the_script_has",),
        "the kernels stage's budget differs from the one docs/benchmarks.md states",
    ),
]
