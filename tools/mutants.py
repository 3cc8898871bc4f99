"""Deliberate bugs (mutants), and a runner that checks the test suite catches every one.

Each mutant is one search/replace in one file: a bug a reviewer would plant to see whether the
tests can fail (issue 18 lists the ones that once survived). The runner copies the work tree
(tracked and untracked files, so uncommitted edits are tested too) into a scratch folder, runs
the mutants' tests there once unchanged (they must pass, or a "killed" would mean nothing),
then for each mutant applies it, runs its tests, and puts the file back. A mutant whose tests
still pass has *survived*: the suite cannot see that bug.

Usage (from the repository root):

    python tools/mutants.py                 # every mutant; exit 0 only when all are killed
    python tools/mutants.py --list          # names, files and the bug each one plants
    python tools/mutants.py scaler-or-over-optimizers memory-rule-no-1.2   # only these
    python tools/mutants.py --show NAME     # the mutant as a diff
    python tools/mutants.py --keep          # keep the scratch copy and say where it is

Exit status: 0 every mutant killed; 1 one survived; 2 a mutant no longer applies (its search
text is not in the file exactly once), its tests fail without it, or pytest could not run.
"""

from __future__ import annotations

import argparse
import difflib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTEST = [sys.executable, "-m", "pytest", "-x", "-q", "-rf", "-p", "no:cacheprovider"]
PYTEST += ["--no-header", "-o", "addopts="]  # no doctest collection: only the named tests


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # relative to the repository root
    search: str  # must occur exactly once in the file
    replace: str
    tests: tuple[str, ...]  # pytest node ids or files that must fail
    bug: str  # what the mutant does, in one line


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


def lines(*text: str) -> str:
    """Source lines, each ending in a newline (keeps long search texts readable)."""
    return "".join(f"{line}\n" for line in text)


MUTANTS: list[Mutant] = [
    Mutant(
        "scaler-fallback-skip-removed",
        GRAD_SCALER,
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
        lines("        y = ctx.out", "        g = _widen(grad)"),
        lines("        y = ctx.out.astype(grad.dtype)", "        g = grad"),
        ("tests/test_ops_half_backward.py",),
        "softmax's backward computes in float16 instead of float32",
    ),
    Mutant(
        "layer-norm-backward-in-fp16",
        "minitorch_amp/autograd/ops/nn_ops.py",
        lines(
            "        xhat, axes = ctx.xhat, ctx.axes",
            "        g = grad.astype(xhat.dtype, copy=False)",
            "        lead = tuple(range(g.ndim - len(axes)))",
        ),
        lines(
            "        xhat, axes = ctx.xhat.astype(grad.dtype), ctx.axes",
            "        g = grad",
            "        lead = tuple(range(g.ndim - len(axes)))",
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
        LOSS_SCALING,
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


# ---- the runner ------------------------------------------------------------------------------
def scratch_copy() -> Path:
    """The work tree's tracked and untracked (not ignored) files, copied into a temp folder."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    dest = Path(tempfile.mkdtemp(prefix="minitorch-mutants-"))
    for name in filter(None, (n.decode() for n in listed)):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def run_tests(copy: Path, tests, timeout: int) -> tuple[str, str, float]:
    """('passed' | 'failed' | 'error', what failed or why, seconds) of pytest on ``tests``."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    start = time.perf_counter()
    try:
        out = subprocess.run(
            [*PYTEST, *tests], cwd=copy, capture_output=True, text=True, env=env, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return "error", f"timed out after {timeout} s", time.perf_counter() - start
    took = time.perf_counter() - start
    lines = (out.stdout + out.stderr).splitlines()
    if out.returncode == 0:
        return "passed", "", took
    failed = [line.removeprefix("FAILED ") for line in lines if line.startswith("FAILED ")]
    if out.returncode == 1 and failed:
        return "failed", failed[0][:150], took
    return "error", f"pytest exit {out.returncode}: " + " | ".join(lines[-3:])[:300], took


def apply(copy: Path, mutant: Mutant) -> str:
    """Plant ``mutant`` in ``copy``; return the file's original text."""
    path = copy / mutant.path
    text = path.read_text()
    count = text.count(mutant.search)
    if count != 1:
        raise LookupError(f"{mutant.name}: the search text occurs {count} times in {mutant.path}")
    path.write_text(text.replace(mutant.search, mutant.replace))
    return text


def check_imports_the_copy(copy: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import minitorch_amp; print(minitorch_amp.__file__)"],
        cwd=copy,
        capture_output=True,
        text=True,
        check=True,
    )
    if not Path(out.stdout.strip()).resolve().is_relative_to(copy.resolve()):
        raise RuntimeError(f"the scratch copy imports {out.stdout.strip()}, not its own package")


def diff(mutant: Mutant) -> str:
    text = (ROOT / mutant.path).read_text()
    mutated = text.replace(mutant.search, mutant.replace, 1)
    return "".join(
        difflib.unified_diff(
            text.splitlines(True), mutated.splitlines(True), f"a/{mutant.path}", f"b/{mutant.path}"
        )
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="run only these mutants (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--show", metavar="NAME", help="print one mutant as a diff and exit")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copy")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per pytest run")
    args = parser.parse_args(argv)
    by_name = {m.name: m for m in MUTANTS}
    unknown = [n for n in [*args.names, args.show] if n and n not in by_name]
    if unknown:
        parser.error(f"unknown mutant(s) {unknown}; --list shows the names")
    if args.list:
        for m in MUTANTS:
            print(f"{m.name:36} {m.path}\n{'':36} {m.bug}")
        return 0
    if args.show:
        print(diff(by_name[args.show]), end="")
        return 0
    chosen = [by_name[n] for n in args.names] if args.names else MUTANTS

    copy = scratch_copy()
    print(f"scratch copy: {copy}", flush=True)
    try:
        check_imports_the_copy(copy)
        tests = list(dict.fromkeys(t for m in chosen for t in m.tests))
        outcome, detail, took = run_tests(copy, tests, args.timeout)
        print(f"baseline (unmutated): {outcome} in {took:.0f} s {detail}", flush=True)
        if outcome != "passed":
            return 2
        survivors, errors = [], []
        for m in chosen:
            try:
                original = apply(copy, m)
            except LookupError as exc:
                print(f"ERROR    {exc}", flush=True)
                errors.append(m.name)
                continue
            try:
                outcome, detail, took = run_tests(copy, m.tests, args.timeout)
            finally:
                (copy / m.path).write_text(original)
            verdict = {"failed": "killed", "passed": "SURVIVED", "error": "ERROR"}[outcome]
            print(f"{verdict:8} {m.name:36} {took:5.0f} s  {detail}", flush=True)
            if outcome == "passed":
                survivors.append(m.name)
            elif outcome == "error":
                errors.append(m.name)
        killed = len(chosen) - len(survivors) - len(errors)
        print(f"\n{killed} of {len(chosen)} mutants killed; survivors: {survivors or 'none'}")
        if errors:
            print(f"not run to a verdict (see ERROR above): {errors}")
        return 2 if errors else 1 if survivors else 0
    finally:
        if args.keep:
            print(f"kept: {copy}")
        else:
            shutil.rmtree(copy, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
