"""Issue 27 item 1: python -m minitorch_amp talks while it works, caches its kernels and aligns its
columns."""

from __future__ import annotations

from mutant_sets import Mutant

ENV_TESTS = "tests/test_environment.py"
CACHE_TESTS = "tests/test_kernel_cache.py"
CLI_TESTS = "tests/test_report_cli.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "report-kernel-lines-not-flushed",
        "minitorch_amp/__main__.py",
        "        print(kernel_line(file, status), flush=True)  # as each one is done\n",
        "        print(kernel_line(file, status))\n",
        (f"{CLI_TESTS}::test_the_header_comes_at_once_and_each_kernel_line_as_it_is_compiled",),
        "the kernel lines sit in stdout's buffer until the end: the report looks hung",
    ),
    Mutant(
        "report-printed-after-the-kernels",
        "minitorch_amp/__main__.py",
        "    print(format_report(info), flush=True)  # at once: the kernels take a while\n"
        "    print()\n",
        "    print()\n",
        (f"{CLI_TESTS}::test_the_header_comes_at_once_and_each_kernel_line_as_it_is_compiled",),
        "the header is not printed before the kernels are compiled",
    ),
    Mutant(
        "report-heading-not-flushed",
        "minitorch_amp/__main__.py",
        "    print(heading, flush=True)\n",
        "    print(heading)\n",
        (f"{CLI_TESTS}::test_the_header_comes_at_once_and_each_kernel_line_as_it_is_compiled",),
        "the kernel section's heading waits in the buffer while the first kernel compiles",
    ),
    Mutant(
        "kernel-column-fixed-at-15",
        "minitorch_amp/utils/environment.py",
        "    width = max([len(file), *map(len, _kernels.REGISTRY)]) + 2\n",
        "    width = 15\n",
        (
            f"{ENV_TESTS}::test_kernel_names_and_statuses_stand_in_two_columns",
            f"{ENV_TESTS}::test_the_page_shows_every_kernel_as_the_report_prints_it",
        ),
        "a 15-column name field: gemm_bf16_sm90.cu runs into its status",
    ),
    Mutant(
        "kernel-cache-never-read",
        "minitorch_amp/utils/kernel_cache.py",
        "            if entry is not None:\n",
        "            if False:\n",
        (
            f"{CACHE_TESTS}::test_a_second_compile_of_the_same_kernel_is_read_from_the_cache",
            f"{CACHE_TESTS}::test_a_second_report_compiles_nothing_and_says_what_a_cold_compile_took",
        ),
        "every run compiles every kernel again (52 s on a quiet 2-core CPU)",
    ),
    Mutant(
        "kernel-cache-key-without-options",
        "minitorch_amp/utils/kernel_cache.py",
        '        "options": list(options),\n',
        "",
        (
            f"{CACHE_TESTS}::test_the_key_changes_with_anything_that_changes_the_compiled_kernel",
            f"{CACHE_TESTS}::test_a_changed_source_or_option_is_compiled_again",
        ),
        "a kernel compiled with other options (-DTILE=...) is served the old PTX",
    ),
    Mutant(
        "kernel-cache-key-without-compiler",
        "minitorch_amp/utils/kernel_cache.py",
        '        "compiler": compiler,\n',
        "",
        (f"{CACHE_TESTS}::test_the_key_changes_with_anything_that_changes_the_compiled_kernel",),
        "after an NVRTC upgrade the old compiler's PTX is reported as this one's",
    ),
    Mutant(
        "kernel-cache-ptx-checksum-not-checked",
        "minitorch_amp/utils/kernel_cache.py",
        '        if entry.get("ptx_sha256") != hashlib.sha256(ptx.encode()).hexdigest():\n',
        "        if False:\n",
        (f"{CACHE_TESTS}::test_a_damaged_entry_is_compiled_again_and_replaced",),
        "an entry whose PTX was altered on disk is trusted",
    ),
    Mutant(
        "kernel-cache-unparsable-entry-crashes",
        "minitorch_amp/utils/kernel_cache.py",
        "        except (OSError, ValueError, RecursionError):",
        "        except OSError:",
        (f"{CACHE_TESTS}::test_a_damaged_entry_is_compiled_again_and_replaced",),
        "a truncated or non-UTF-8 entry raises instead of being compiled again",
    ),
    Mutant(
        "kernel-cache-temporary-file-left",
        "minitorch_amp/utils/kernel_cache.py",
        "                    os.unlink(temporary)\n",
        "                    pass\n",
        (f"{CACHE_TESTS}::test_a_failed_write_leaves_no_entry_and_the_kernel_is_still_reported",),
        "a write that fails halfway leaves its temporary file in the cache folder",
    ),
    Mutant(
        "kernel-cache-warm-line-forgets-the-cold-time",
        "minitorch_amp/utils/kernel_cache.py",
        '                return Compiled(result, entry["seconds"], cached=True)\n',
        "                return Compiled(result, 0.0, cached=True)\n",
        (f"{CACHE_TESTS}::test_a_second_compile_of_the_same_kernel_is_read_from_the_cache",),
        "a warm run no longer says how long a cold compile takes",
    ),
    Mutant(
        "report-no-cache-flag-ignored",
        "minitorch_amp/__main__.py",
        "None if args.no_cache else args.cache_dir",
        "args.cache_dir",
        (f"{CLI_TESTS}::test_no_cache_and_cache_dir_choose_the_cache_the_kernels_use",),
        "--no-cache still reads and writes the kernel cache",
    ),
    Mutant(
        "report-help-without-defaults",
        "minitorch_amp/__main__.py",
        "        formatter_class=argparse.ArgumentDefaultsHelpFormatter,\n",
        "",
        (
            f"{CLI_TESTS}::test_help_lists_every_option_with_its_default",
            f"{ENV_TESTS}::test_the_page_shows_the_options_as_help_prints_them",
        ),
        "--help lists the options without their defaults",
    ),
]
