"""Issue 26's GPT step speed: GELU's float32 normal CDF and the heap that keeps temporaries."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

CDF_TESTS = "tests/test_normal_cdf.py"
HEAP_TESTS = "tests/test_host_memory.py"
IN_PLACE = "tests/test_optimizer_in_place.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "normal-cdf-tail-cancels",
        "minitorch_amp/backend/special.py",
        "            y[tail] = np.where(xt > 0, np.float32(1.0) - g, g)",
        "            y[tail] = np.float32(0.5) + np.copysign(np.float32(0.5) - g, xt)",
        (CDF_TESTS,),
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
        "minitorch_amp/optimizer/bucket.py",
        "                if record.grad_scale != 1.0:\n                    gs *= record.grad_scale\n                if record.l2:\n                    gs += record.l2 * ps\n                elif whole:",
        "                if record.l2:\n                    gs += record.l2 * ps\n                elif whole:",
        (IN_PLACE,),
        "the in-place CPU update forgets Momentum's rescale_grad",
    ),
    Mutant(
        "in-place-update-forgets-the-optimize-cast",
        "minitorch_amp/optimizer/bucket.py",
        "                    record.data[...] = convert(p, self.ptype).reshape(record.data.shape)",
        "                    pass",
        (IN_PLACE,),
        "O2's float16 parameters are never written from their updated masters",
    ),
    Mutant(
        "cpu-update-keeps-flat-copies",
        "minitorch_amp/optimizer/bucket.py",
        "        self.in_place = self.xp is np and (",
        "        self.in_place = False and (",
        (IN_PLACE,),
        "the CPU step keeps flat copies of every parameter and gradient (fp32 SimpleNet at width 4096: 808 MiB, not 424)",
    ),
    Mutant(
        "optimizer-runs-left-interleaved",
        "minitorch_amp/optimizer/state.py",
        "                    items = _runs_together(items)\n",
        "",
        ("tests/test_optimizer_runs.py",),
        "AdamW decaying only its 2-D weights updates in 48 runs, one per parameter",
    ),
]
