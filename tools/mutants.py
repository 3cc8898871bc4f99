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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTEST = [sys.executable, "-m", "pytest", "-x", "-q", "-rf", "-p", "no:cacheprovider"]
PYTEST += ["--no-header", "-o", "addopts="]  # no doctest collection: only the named tests

sys.path.insert(0, str(ROOT / "tools"))
from mutant_sets import Mutant, all_mutants, lines  # noqa: E402  (tools/ is not a package)

MUTANTS: list[Mutant] = all_mutants()
__all__ = ["MUTANTS", "Mutant", "lines"]


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
