"""Filling CuPy's on-disk kernel cache with every raw kernel, many processes at once.

The loader (:mod:`.kernels`) compiles a module of a ``cuda/*.cu`` file with NVRTC the first
time one of its kernels is launched in a process: serially, in every process, until CuPy's
on-disk cache (``~/.cupy/kernel_cache``, moved by CuPy's ``CUPY_CACHE_DIR``) holds it. A
module is a whole file, or one kernel of a ``split`` file (the GEMMs: each instantiation
takes seconds). The first run on an H200 spent the budgets of four stages of
``benchmarks/gpu_check.sh`` that way; so did a later one, when each Hopper GEMM file was
still one module of 18 instantiations and took over 70 s to compile on 16 busy cores.

:func:`warm_cache` compiles every module of every registered file at once, in processes of
their own, with exactly what the loader's ``_module`` hands CuPy (the same source, options
and name expressions, on a device of the same kind), so that each later compile of the
loader finds its cubin in CuPy's cache. ``python -m minitorch_amp --warm-kernel-cache
[-j N]`` runs it, a line per module as it is done, then the total.

NOTE: the processes are started with ``spawn``: this process has initialised CUDA (the
device probe at import compiles a kernel), and a forked copy of a CUDA context is unusable.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

from . import device as _device
from . import kernels as _kernels

# Every backend module that registers a kernel file at import (tests/test_kernel_warmup.py
# checks the list against the sources): importing them all completes kernels.REGISTRY.
LAUNCHERS = (
    "bias_grad",
    "cast",
    "cross_entropy",
    "device",
    "fp8_gemm",
    "fp8_kernels",
    "fp8_scale",
    "fused_optim",
    "gelu",
    "gemm_gpu",
    "gemm_bf16_sm90",
    "gemm_sm90",
    "global_norm",
    "layer_norm",
    "loss_scaling",
    "primitives",
    "softmax",
    "squared_error",
)


@dataclass(frozen=True)
class CompileJob:
    """What the loader's ``_module`` passes to ``cupy.RawModule`` for one module of a file.

    The options stay a tuple: CuPy's cache key holds their ``repr``, so a list would miss.
    ``kernel`` is the one kernel of a split file's module, None for a whole file.
    """

    file: str
    source: str
    options: tuple[str, ...]
    names: tuple[str, ...]
    kernel: str | None = None

    @property
    def label(self) -> str:
        """The file, and the kernel for one module of a split file."""
        return self.file if self.kernel is None else f"{self.file} {self.kernel}"


def _job(entry: _kernels.KernelFile, unit: str | None) -> CompileJob:
    source, names = entry.unit(unit)
    return CompileJob(entry.file, source, entry.loader_options(), names, unit)


def compile_jobs(files: Iterable[str] | None = None) -> list[CompileJob]:
    """One job per module of each registered kernel file (or of each of ``files``), every
    launcher imported first: the split files' modules first, then the largest source first
    (the longest compiles start while there are more jobs than processes).

    Raises:
        ValueError: a name in ``files`` is not a registered kernel file.
    """
    for name in LAUNCHERS:
        importlib.import_module(f".{name}", __package__)
    registry = _kernels.REGISTRY
    wanted = list(registry) if files is None else list(files)
    unknown = [file for file in wanted if file not in registry]
    if unknown:
        raise ValueError(f"no kernel file {unknown}; the registered ones are {list(registry)}")
    jobs = [
        _job(entry, unit) for entry in (registry[file] for file in wanted) for unit in entry.units()
    ]
    return sorted(jobs, key=lambda job: (job.kernel is not None, len(job.source)), reverse=True)


def _compile(job: CompileJob, device_id: int) -> tuple[str, float, str | None]:
    """In a worker: compile ``job`` as ``_module`` does, on device ``device_id``; its label,
    the seconds it took, and the error's first line or None. Never raises: CuPy's compile
    errors do not survive the trip back through pickle."""
    start = time.perf_counter()
    try:
        cupy = _device.cupy
        if cupy is None:
            raise RuntimeError(f"the worker process found no GPU: {_device.cpu_reason}")
        with cupy.cuda.Device(device_id):
            module = cupy.RawModule(
                code=job.source, options=job.options, name_expressions=job.names
            )
            module.compile()
    except Exception as exc:
        lines = str(exc).strip().splitlines() or ["no message"]
        return job.label, time.perf_counter() - start, f"{type(exc).__name__}: {lines[0]}"
    return job.label, time.perf_counter() - start, None


def warm_cache(
    jobs: int | None = None,
    *,
    device_id: int | None = None,
    files: Iterable[str] | None = None,
    progress: Callable[[str, float, str | None], None] | None = None,
) -> dict[str, float]:
    """Compile every module of every registered kernel file into CuPy's on-disk cache,
    ``jobs`` modules at once.

    Args:
        jobs: how many processes compile (default: one per CPU core); never more than modules.
        device_id: the GPU whose kind the kernels are compiled for (default: the current one).
            CuPy's cache key holds the device's compute capability.
        files: only these registered files (default: all of them).
        progress: called as ``progress(label, seconds, error)`` as each module is done
            (``label``: :attr:`CompileJob.label`; ``error`` is None, or the first line of what
            went wrong).

    Returns:
        ``{label: seconds}`` for every module, in the order they were done. A module already
        in the cache takes well under a second (CuPy loads it instead of compiling).

    Raises:
        RuntimeError: there is no GPU (CuPy is not installed, or finds none), or a module did
            not compile (every other module is compiled and cached all the same).
        ValueError: ``jobs`` is less than 1, or ``files`` names an unregistered file.
    """
    if jobs is not None and jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    if _device.cupy is None:
        reason = _device.cpu_reason or "MINITORCH_AMP_DEVICE=cpu chose the CPU"
        raise RuntimeError(
            f"no GPU to compile CuPy's kernels for: {reason}. CuPy's kernel cache is only "
            "filled on a machine with an NVIDIA GPU"
        )
    work = compile_jobs(files)
    if not work:
        return {}
    if device_id is None:
        device_id = int(_device.cupy.cuda.runtime.getDevice())
    processes = min(jobs or os.cpu_count() or 1, len(work))
    done: dict[str, float] = {}
    failed: list[str] = []
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=processes, mp_context=spawn) as pool:
        futures = [pool.submit(_compile, job, device_id) for job in work]
        for future in as_completed(futures):
            label, seconds, error = future.result()
            done[label] = seconds
            if error is not None:
                failed.append(f"{label}: {error}")
            if progress is not None:
                progress(label, seconds, error)
    if failed:
        raise RuntimeError("kernel modules that did not compile: " + "; ".join(failed))
    return done
