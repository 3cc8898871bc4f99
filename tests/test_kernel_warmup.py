"""Filling CuPy's kernel cache in parallel (backend/kernel_warmup.py), without a GPU.

What each worker compiles must be exactly what the loader's ``_module`` compiles, or the
loader's later compile misses CuPy's cache: both are recorded here through a stand-in for
CuPy and compared. The pool runs on threads here; the GPU test
(tests/test_kernel_warmup_gpu.py) runs the real processes and counts CuPy's cache files.
"""

from __future__ import annotations

import contextlib
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest

from minitorch_amp import __main__ as cli
from minitorch_amp.backend import device, kernel_warmup, kernels

ROOT = Path(__file__).resolve().parents[1]


class FakeCupy:
    """Records each ``RawModule(...).compile()``: its keyword arguments and the device."""

    def __init__(self, failing: str | None = None):
        self.compiled: list[tuple[dict, int]] = []
        self.failing = failing  # a file whose compile raises, as NVRTC's errors do
        self.current = 0
        self.cuda = SimpleNamespace(
            Device=self._device, runtime=SimpleNamespace(getDevice=lambda: 0)
        )

    @contextlib.contextmanager
    def _device(self, index: int):
        previous, self.current = self.current, index
        try:
            yield
        finally:
            self.current = previous

    def RawModule(self, **kwargs):  # CuPy's spelling
        fake = self

        class Module:
            def compile(self):
                source = kwargs["code"]
                if fake.failing and source == kernels.REGISTRY[fake.failing].source():
                    raise CompileError("nvrtc: error: identifier 'x' is undefined", source)
                fake.compiled.append((kwargs, fake.current))

            def get_function(self, name):
                assert name in kwargs["name_expressions"]
                return ("kernel", name)

        return Module()


class CompileError(Exception):
    """Like CuPy's CompileException: its constructor takes more than the message."""

    def __init__(self, message, source):
        super().__init__(message)
        self.source = source


@pytest.fixture
def fake_gpu(monkeypatch):
    """A GPU as far as kernel_warmup can tell, its pool on threads (no CUDA, no processes)."""
    fake = FakeCupy()
    monkeypatch.setattr(device, "cupy", fake)
    pools = []

    def pool(max_workers, mp_context):
        pools.append((max_workers, mp_context.get_start_method()))
        return ThreadPoolExecutor(max_workers)

    monkeypatch.setattr(kernel_warmup, "ProcessPoolExecutor", pool)
    fake.pools = pools
    return fake


def modules() -> list[tuple[str, str | None]]:
    """(file, kernel) of every module the loader compiles: kernel None for a whole file."""
    return [(entry.file, unit) for entry in kernels.REGISTRY.values() for unit in entry.units()]


def launch_everything(monkeypatch, fake) -> None:
    """Every registered kernel looked up through the loader, as launches would, on ``fake``."""
    monkeypatch.setattr(device, "cupy", fake)
    monkeypatch.setattr(kernels, "_functions", {})
    kernels._module.cache_clear()
    try:
        for entry in list(kernels.REGISTRY.values()):
            for name in entry.names:
                kernels.get_function(entry.file, name)
    finally:
        kernels._module.cache_clear()  # no fake module left for a later test


def test_each_job_compiles_exactly_what_the_loader_compiles_for_its_module(monkeypatch):
    jobs = kernel_warmup.compile_jobs()
    loader, worker = FakeCupy(), FakeCupy()
    launch_everything(monkeypatch, loader)  # what the launches compile
    monkeypatch.setattr(device, "cupy", worker)
    for job in jobs:
        assert kernel_warmup._compile(job, 0)[2] is None

    def described(compiled):  # the same source, options, names and device
        return sorted((k["code"], k["options"], k["name_expressions"], d) for k, d in compiled)

    assert described(worker.compiled) == described(loader.compiled)
    assert len(worker.compiled) == len(jobs) == len(modules())
    for kwargs, _ in worker.compiled:  # CuPy's key holds repr(options): a list would miss
        assert type(kwargs["options"]) is tuple and type(kwargs["name_expressions"]) is tuple


def test_the_jobs_cover_every_kernel_file_of_cuda_split_gemms_first_then_largest_first():
    jobs = kernel_warmup.compile_jobs()
    assert {job.file for job in jobs} == {path.name for path in (ROOT / "cuda").glob("*.cu")}
    order = [(job.kernel is not None, len(job.source)) for job in jobs]
    assert order == sorted(order, reverse=True)
    hopper = [job for job in jobs if job.file == "gemm_sm90.cu"]
    assert all("-arch=sm_90a" in job.options for job in hopper)  # a one-architecture file
    # each GEMM instantiation is a module of its own: a source (CuPy's cache key) of its own
    names = kernels.REGISTRY["gemm_sm90.cu"].names
    assert sorted(job.names for job in hopper) == sorted((name,) for name in names)
    assert len({job.source for job in hopper}) == len(hopper)
    assert all(job.source.startswith(kernels.REGISTRY["gemm_sm90.cu"].source()) for job in hopper)
    split = {job.file for job in jobs if job.kernel is not None}
    assert split == {"gemm_fp16.cu", "gemm_sm90.cu", "gemm_bf16_sm90.cu", "gemm_fp8_sm90.cu"}


def test_the_launcher_list_names_every_backend_module_that_registers_a_kernel_file():
    """Importing them completes the registry whoever imported what before."""
    registering = set()
    for path in (ROOT / "minitorch_amp" / "backend").glob("*.py"):
        if re.search(r"^\w+ = (kernels\.)?register\(", path.read_text(), re.MULTILINE):
            registering.add(path.stem)
    assert registering == set(kernel_warmup.LAUNCHERS)


def test_warming_compiles_every_module_once_in_spawned_processes(fake_gpu):
    said = []
    done = kernel_warmup.warm_cache(4, progress=lambda *line: said.append(line))
    labels = [file if unit is None else f"{file} {unit}" for file, unit in modules()]
    assert sorted(done) == sorted(labels)
    assert fake_gpu.pools == [(4, "spawn")]  # never fork: this process has a CUDA context
    assert sorted(kwargs["code"] for kwargs, _ in fake_gpu.compiled) == sorted(
        kernels.REGISTRY[file].unit(unit)[0] for file, unit in modules()
    )
    assert [(label, error) for label, _, error in said] == [(label, None) for label in done]


def test_no_more_processes_than_modules(fake_gpu):
    kernel_warmup.warm_cache(64, files=["cast.cu", "amp.cu"])
    assert fake_gpu.pools == [(2, "spawn")]
    assert len(fake_gpu.compiled) == 2


def test_a_file_that_fails_is_named_after_every_other_file_is_cached(fake_gpu):
    fake_gpu.failing = "amp.cu"
    said = []
    with pytest.raises(RuntimeError, match=r"did not compile: amp\.cu: CompileError: nvrtc: "):
        kernel_warmup.warm_cache(2, progress=lambda *line: said.append(line))
    assert len(fake_gpu.compiled) == len(modules()) - 1
    errors = [(file, error) for file, _, error in said if error]
    assert errors == [("amp.cu", "CompileError: nvrtc: error: identifier 'x' is undefined")]


def test_the_workers_are_spawned_processes_that_take_their_jobs_by_pickle(monkeypatch):
    """Real processes, told by the environment they inherit to use the CPU: each gets its
    job, finds no GPU of its own and says so, and the parent names both files."""
    monkeypatch.setenv("MINITORCH_AMP_DEVICE", "cpu")
    monkeypatch.setattr(device, "cupy", FakeCupy())  # the parent believes it has a GPU
    said = []
    with pytest.raises(RuntimeError, match=r"did not compile: .*worker process found no GPU"):
        kernel_warmup.warm_cache(
            2, files=["probe.cu", "cast.cu"], progress=lambda *line: said.append(line)
        )
    assert sorted(file for file, _, _ in said) == ["cast.cu", "probe.cu"]
    assert all(error.startswith("RuntimeError: the worker process found") for *_, error in said)


def test_without_a_gpu_it_says_so_and_starts_nothing(monkeypatch):
    monkeypatch.setattr(device, "cupy", None)
    monkeypatch.setattr(device, "cpu_reason", "CuPy is not installed (No module named 'cupy')")
    monkeypatch.setattr(kernel_warmup, "ProcessPoolExecutor", None)  # would fail if called
    with pytest.raises(RuntimeError, match=r"no GPU to compile .*CuPy is not installed"):
        kernel_warmup.warm_cache()


def test_bad_arguments_are_refused_before_anything_starts(fake_gpu):
    with pytest.raises(ValueError, match="jobs must be at least 1, got 0"):
        kernel_warmup.warm_cache(0)
    with pytest.raises(ValueError, match=r"no kernel file \['gemm\.cu'\]; the registered"):
        kernel_warmup.warm_cache(2, files=["cast.cu", "gemm.cu"])
    assert fake_gpu.pools == [] and fake_gpu.compiled == []


# ---- python -m minitorch_amp --warm-kernel-cache [-j N] --------------------------------------
def test_the_command_line_takes_a_number_of_processes_with_the_warm_up_only(capsys):
    assert cli.parse_args(["--warm-kernel-cache", "-j", "3"]).jobs == 3
    assert cli.parse_args(["--warm-kernel-cache"]).jobs is None
    for argv, error in [
        (["-j", "3"], "-j/--jobs goes with --warm-kernel-cache"),
        (["--warm-kernel-cache", "-j", "0"], "from 1, got '0'"),
        (["--warm-kernel-cache", "--jobs", "x"], "from 1, got 'x'"),
    ]:
        with pytest.raises(SystemExit) as exited:
            cli.parse_args(argv)
        assert exited.value.code == 2
        assert error in capsys.readouterr().err


def test_the_command_without_a_gpu_says_so_and_exits_1(monkeypatch, capsys):
    monkeypatch.setattr(device, "cupy", None)
    monkeypatch.setattr(device, "cpu_reason", "CuPy is installed but no GPU was found")
    assert cli.main(["--warm-kernel-cache", "-j", "2"]) == 1
    printed = capsys.readouterr()
    assert printed.out == ""  # no report either: the warm-up is all it does
    assert printed.err.startswith("error: no GPU to compile CuPy's kernels for: CuPy is installed")


def test_the_command_prints_a_line_per_module_and_the_total(fake_gpu, capsys):
    assert cli.main(["--warm-kernel-cache", "-j", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    labels = [(file, unit) for file, unit in modules()]
    said = [line.split(" cached in ")[0].split() for line in lines[:-1]]
    assert sorted(tuple(words) for words in said) == sorted(
        (file,) if unit is None else (file, unit) for file, unit in labels
    )
    assert all(re.search(r"\.cu( \S+)? +cached in \d+\.\d s$", line) for line in lines[:-1])
    total = (
        rf"CuPy kernel cache: {len(labels)} modules of {len(kernels.REGISTRY)} kernel files in "
        r"\d+\.\d s, 3 at once "
    )
    assert re.match(total + r"\(the longest: \w+\.cu( \S+)?, \d+\.\d s\)$", lines[-1])


def test_the_command_exits_1_naming_a_file_that_did_not_compile(fake_gpu, capsys):
    fake_gpu.failing = "cast.cu"
    assert cli.main(["--warm-kernel-cache"]) == 1
    printed = capsys.readouterr()
    assert re.search(r"^  cast\.cu +FAILED after \d+\.\d s: CompileError: nvrtc", printed.out, re.M)
    assert "error: kernel modules that did not compile: cast.cu: CompileError" in printed.err


# ---- the loader: a split file is compiled a kernel at a time -------------------------------
def test_the_loader_compiles_one_kernel_of_a_split_file_and_the_whole_of_another(monkeypatch):
    """A launch of a GEMM compiles that instantiation alone (seconds, not a minute); a launch
    of an unsplit file compiles the file once for all its kernels."""
    from minitorch_amp.backend import cast, gemm

    fake = FakeCupy()
    compiled = fake.compiled

    def raw_module(**kwargs):
        class Module:
            def compile(self):
                compiled.append((kwargs, fake.current))

            def get_function(self, name):
                assert name in kwargs["name_expressions"]
                return ("kernel", name)

        return Module()

    fake.RawModule = raw_module
    monkeypatch.setattr(device, "cupy", fake)
    monkeypatch.setattr(kernels, "_functions", {})
    kernels._module.cache_clear()
    try:
        first, second = gemm.KERNELS.names[:2]
        assert kernels.get_function(gemm.FILE, first) == ("kernel", first)
        assert kernels.get_function(gemm.FILE, first) == ("kernel", first)  # looked up once
        assert kernels.get_function(gemm.FILE, second) == ("kernel", second)
        casts = cast.CAST.names
        for name in casts[:2]:
            kernels.get_function("cast.cu", name)
    finally:
        kernels._module.cache_clear()  # no fake module left for a later test
    entry = kernels.REGISTRY[gemm.FILE]
    assert [kwargs["name_expressions"] for kwargs, _ in compiled] == [
        (first,),
        (second,),
        kernels.REGISTRY["cast.cu"].names,
    ]
    assert compiled[0][0]["code"] == entry.unit(first)[0] != compiled[1][0]["code"]
    assert compiled[2][0]["code"] == kernels.REGISTRY["cast.cu"].source()
