"""Filling CuPy's kernel cache in parallel makes the loader's compiles cache hits, on a GPU.

CuPy reads ``CUPY_CACHE_DIR`` once, when it is imported, so each check runs in a process of
its own with the cache in a temporary folder. A compile that misses the cache writes a new
file there (named by the hash of everything CuPy compiled); a hit writes nothing. Skipped
without a GPU (tests/test_kernel_warmup.py checks the rest on the CPU).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from minitorch_amp.backend import kernel_warmup

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]
FAST = ["cast.cu", "amp.cu", "reduction.cu", "optim.cu"]  # a second or less each to compile

# Warm the cache with FAST, then compile them as the loader does, then one with an option
# more (which must miss: the check can tell a miss). The cache's files after each step.
SCRIPT = textwrap.dedent(
    """
    import dataclasses, json, os, sys
    from minitorch_amp.backend import device, kernel_warmup, kernels

    folder = os.environ["CUPY_CACHE_DIR"]
    files = json.loads(sys.argv[1])

    def listing():
        names = os.listdir(folder)
        return {name: os.stat(os.path.join(folder, name)).st_mtime_ns for name in names}

    before = listing()  # the device probe's kernel, compiled at import
    kernel_warmup.warm_cache(2, files=files)
    warmed = listing()
    here = device.cupy.cuda.runtime.getDevice()
    for file in files:
        kernels._module(kernels.REGISTRY[file], here)
    loaded = listing()
    changed = dataclasses.replace(
        kernels.REGISTRY[files[0]], options=kernels.REGISTRY[files[0]].options + ("-DWARMUP=1",)
    )
    kernels._module(changed, here)
    print(json.dumps([before, warmed, loaded, listing()]))
    """
)


def run(argv: list[str], cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "CUPY_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )


def test_after_the_warm_up_the_loaders_compiles_are_cache_hits(tmp_path):
    cache = tmp_path / "cupy_cache"
    done = run(["-c", SCRIPT, json.dumps(FAST)], cache)
    assert done.returncode == 0, done.stderr
    before, warmed, loaded, after_a_miss = json.loads(done.stdout.splitlines()[-1])
    assert len(warmed) == len(before) + len(FAST)  # one file per kernel file, by the workers
    assert loaded == warmed  # the loader wrote nothing and rewrote nothing: every one a hit
    assert len(after_a_miss) == len(loaded) + 1  # and a miss would have shown


# A split file: a module, and so a cache file, per kernel; the loader's launches then hit.
# cast.cu split in this process only (its kernels compile in well under a second each; the
# GEMMs, split for real, take seconds each).
SPLIT_SCRIPT = textwrap.dedent(
    """
    import dataclasses, json, os
    from minitorch_amp.backend import kernel_warmup, kernels

    entry = kernels.REGISTRY["cast.cu"] = dataclasses.replace(
        kernels.REGISTRY["cast.cu"], split=True
    )
    folder = os.environ["CUPY_CACHE_DIR"]
    before = set(os.listdir(folder))
    kernel_warmup.warm_cache(4, files=["cast.cu"])
    warmed = set(os.listdir(folder))
    for name in entry.names[:3]:
        kernels.get_function("cast.cu", name)
    hits = set(os.listdir(folder)) == warmed
    print(json.dumps([len(warmed - before), len(entry.names), hits]))
    """
)


def test_a_split_file_is_cached_a_module_per_kernel_and_the_loader_hits_them(tmp_path):
    done = run(["-c", SPLIT_SCRIPT], tmp_path / "cupy_cache")
    assert done.returncode == 0, done.stderr
    new_files, kernel_count, all_hits = json.loads(done.stdout.splitlines()[-1])
    assert new_files == kernel_count > 1
    assert all_hits


def test_the_command_compiles_every_registered_module_into_the_cache():
    """All the modules, a process per core, into the user's cache as the GPU check's device
    stage does (after that stage every one is a hit; on a cold cache this warms the cache for
    the tests after it)."""
    jobs = min(os.cpu_count() or 1, len(kernel_warmup.compile_jobs()))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "minitorch_amp", "--warm-kernel-cache", "-j", str(jobs)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    labels = sorted(job.label for job in kernel_warmup.compile_jobs())
    assert sorted(line.split(" cached in ")[0].strip() for line in lines[:-1]) == labels
    assert all(" cached in " in line for line in lines[:-1])
    files = len({job.file for job in kernel_warmup.compile_jobs()})
    assert lines[-1].startswith(f"CuPy kernel cache: {len(labels)} modules of {files} kernel files")
    assert f", {jobs} at once (the longest: " in lines[-1]
