"""Kernels one eager training step launches on the GPU code path, counted on any machine.

    python benchmarks/launch_count.py             # SimpleNet fp32/O1/O2 and the GPT at O2
    python benchmarks/launch_count.py --top 12    # and each step's most launched kernels
    python benchmarks/launch_count.py --where multiply add   # and where those are launched
    python benchmarks/launch_count.py --time      # and each step's host time on the stand-in
    python benchmarks/launch_count.py --hopper    # the code path of a Hopper (sm_90) GPU

Issue 24 counts kernels per step (at most 30 for the eager O2 SimpleNet step), and on a GPU
``benchmarks/step_kernels.py`` counts them with ``torch.profiler``; most sessions have no
GPU. Here CuPy is stood in for by NumPy: a module whose functions are NumPy's, on arrays that
pose as CuPy ones (``DeviceArray``: an address, a device), so the engine takes its GPU code
path, every launcher included, while NumPy computes what CuPy would and the raw kernels'
launches are recorded, not run (their outputs keep what they were allocated with). Counted
once each, nested calls not again:

* a raw kernel launch (``kernels.launch``);
* a NumPy ufunc on a stand-in array (in CuPy an elementwise kernel or a reduction);
* a CuPy function that computes (not ``empty``/``empty_like``; ``ascontiguousarray`` only
  when it copies), ``random``'s draws, ``cupyx.scatter_add``;
* ``astype`` (a copy), ``copy``, ``fill`` and an assignment into an array;
* an upload (``cupy.asarray`` of host data).

The stand-in device is an sm_80 GPU: GEMMs take the ``mma.sync`` kernel, and FP8 GEMMs,
which need sm_90a, the float32 fallback (cuBLAS). ``--hopper`` makes it a Hopper with 132
SMs: GEMMs take ``gemm_sm90`` (with its split-K reduction where the shape rule splits) and
FP8 GEMMs ``gemm_fp8_sm90``, the tensor maps stood in for by blank ones.

It estimates torch.profiler's count, which also sees memsets and copies that CuPy makes
inside one call (a reduction CuPy splits in two, say); use it to compare versions and modes,
and a GPU to measure. The steps: SimpleNet (width 1024, batch 64, SGD, a GradScaler at O1
and O2, as ``benchmarks/step_kernels.py``; FP8: bfloat16 O2 with FP8 GEMMs under
``amp.fp8_autocast``, no scaler) and ``benchmarks/gpt_step.py``'s GPT step
(batch 16, AdamW, clipping, O2), each counted on the third of three steps.

``--time`` also times each step on the stand-in at sizes where NumPy's arithmetic is small
(SimpleNet width 64, batch 8; the GPT at ``gpu_stand_in.GPT_SIZE``, context 8 and width 16,
batch 1): the host time of the GPU code path with each CuPy call replaced by the stand-in's
(a NumPy call wrapped in Python, where CuPy pays its own launch and allocation: about 4 to
8 µs on an H200) and each raw launch by a count. Not a GPU
time; a way to compare two versions of the package's Python on that path without a GPU.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import statistics
import sys
import time
import traceback
from pathlib import Path
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import gpu_stand_in

import minitorch_amp as mt

hopper = [False]  # --hopper: the stand-in device is a Hopper (see stand_in)
counts: collections.Counter = collections.Counter()
sites: collections.Counter = collections.Counter()  # (kernel, where) for the kernels watched
watched: set[str] = set()
depth = [2]  # the package's frames each site names (--depth)
_depth = [0]  # > 0 inside a counted call: what it calls is not counted again
_PACKAGE = str(Path(mt.__file__).resolve().parent)


def _count(what: str) -> None:
    if _depth[0] == 0:
        counts[what] += 1
        if what in watched:
            sites[what, _where()] += 1


def _where() -> str:
    """The package's innermost frames that led here: ``file:line < file:line``."""
    frames = [
        f"{Path(f.filename).relative_to(_PACKAGE)}:{f.lineno}"
        for f in reversed(traceback.extract_stack())
        if f.filename.startswith(_PACKAGE)
    ]
    return " < ".join(frames[: depth[0]]) or "(outside the package)"


@contextlib.contextmanager
def _inside():
    _depth[0] += 1
    try:
        yield
    finally:
        _depth[0] -= 1


def _plain(x):
    return x.view(np.ndarray) if isinstance(x, DeviceArray) else x


def _wrap(x):
    return gpu_stand_in.wrap(x, DeviceArray)


class DeviceArray(gpu_stand_in.StandInArray):
    """A NumPy array posing as a CuPy one; what is done to it is counted (see above)."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        _count(f"{ufunc.__name__}" + ("" if method == "__call__" else f".{method}"))
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = tuple(_plain(o) for o in out)
        with _inside():
            result = getattr(ufunc, method)(*map(_plain, inputs), **kwargs)
        if out is not None:
            return out[0] if len(out) == 1 else out
        return _wrap(result)

    def __getitem__(self, index):
        return _wrap(super().__getitem__(index))

    def __setitem__(self, index, value):
        _count("assignment")
        with _inside():
            super().__setitem__(index, value)

    def astype(self, dtype, *args, **kwargs):
        if not (np.dtype(dtype) == self.dtype and kwargs.get("copy", True) is False):
            _count("astype")
        with _inside():
            return super().astype(dtype, *args, **kwargs)

    def copy(self, *args, **kwargs):
        _count("copy")
        with _inside():
            return super().copy(*args, **kwargs)

    def fill(self, value):
        _count("fill")
        with _inside():
            super().fill(value)


_FREE = {  # CuPy functions that launch nothing
    "empty", "empty_like", "dtype", "result_type", "can_cast", "promote_types",
    "broadcast_shapes", "shape", "ndim", "isscalar", "iscomplexobj", "finfo", "iinfo",
}  # fmt: skip


class _CuPy(gpu_stand_in.StandInCupy):
    """The ``cupy`` module, stood in for by NumPy (see the module docstring): each call that
    computes is counted once, nested calls not again."""

    ndarray = DeviceArray

    def _counted(self, name, function):
        def call(*args, **kwargs):
            if name not in _FREE:
                _count(name)
            with _inside():
                return _wrap(function(*args, **kwargs))

        return call

    def ascontiguousarray(self, a, dtype=None):
        copies = not (isinstance(a, DeviceArray) and a.flags.c_contiguous)
        if copies or (dtype is not None and np.dtype(dtype) != a.dtype):
            _count("ascontiguousarray (a copy)")
        with _inside():
            return _wrap(np.ascontiguousarray(a, dtype=dtype))

    def asarray(self, a, dtype=None):
        if isinstance(a, DeviceArray):
            return a if dtype is None or np.dtype(dtype) == a.dtype else a.astype(dtype)
        _count("upload")
        return np.array(a, dtype=dtype).view(DeviceArray)

    array = asarray

    def asnumpy(self, a):
        return np.array(a).view(np.ndarray)


@contextlib.contextmanager
def stand_in():
    """CuPy stood in for (``gpu_stand_in``), launches counted in ``counts``, the current
    device ``gpu:0`` (a Hopper with 132 SMs while ``hopper[0]`` is True: see ``--hopper``)."""

    def launch(file, name, grid, block, args, shared_mem=0):
        _count(name.split("<")[0])

    with contextlib.ExitStack() as stack:
        cupy = _CuPy(hopper[0])
        stack.enter_context(gpu_stand_in.stand_in(hopper[0], cupy=cupy, launch=launch))
        stack.enter_context(mock.patch.dict("os.environ", {"MINITORCH_AMP_RAW_KERNELS": "1"}))
        mt.set_device("gpu:0")
        yield


def simple_net_step(mode: str, width: int = 1024, batch: int = 64, dtype: str = "float16"):
    """``benchmarks/step_kernels.py``'s step in ``dtype`` (SGD; a GradScaler at O1 and O2 in
    float16; float8: bfloat16 O2 with the Linear layers' GEMMs in FP8, no scaler)."""
    from step_kernels import make_step

    return make_step(mode, dtype, width, batch)


def gpt_step(level: str = "O2", batch: int = 16, size: dict | None = None):
    """``benchmarks/gpt_step.py``'s step of the GPT example (AdamW, clipping, a schedule);
    ``size``: its context and width, if not the example's (``gpu_stand_in.GPT_SIZE``)."""
    import gpt_step as gpt

    with mock.patch.dict(gpt.CONFIG, size or {}):
        ours, _, batches = gpt.setup(level, batch, None)

    def step():
        (x, y), _ = batches()
        ours(x, y)

    return step


def count(make_step) -> collections.Counter:
    """Launch-like calls of the third step of ``make_step()``'s step, on the stand-in."""
    with stand_in():
        step = make_step()
        for _ in range(2):
            step()
        counts.clear()
        sites.clear()
        step()
        return collections.Counter(counts)


STEPS = {
    "SimpleNet fp32": lambda: simple_net_step("fp32"),
    "SimpleNet O1": lambda: simple_net_step("O1"),
    "SimpleNet O2": lambda: simple_net_step("O2"),
    "SimpleNet O2 FP8": lambda: simple_net_step("O2", dtype="float8"),
    "GPT O2": lambda: gpt_step("O2"),
}
# --time: sizes at which NumPy's arithmetic on the stand-in is small beside the Python
SMALL = {
    "SimpleNet fp32": lambda: simple_net_step("fp32", 64, 8),
    "SimpleNet O1": lambda: simple_net_step("O1", 64, 8),
    "SimpleNet O2": lambda: simple_net_step("O2", 64, 8),
    "SimpleNet O2 FP8": lambda: simple_net_step("O2", 64, 8, dtype="float8"),
    "GPT O2": lambda: gpt_step("O2", batch=1, size=gpu_stand_in.GPT_SIZE),
}


def host_time(make_step, rounds: int = 7, block: int = 20) -> float:
    """Median µs per step of ``make_step()``'s step on the stand-in, over ``rounds`` blocks
    of ``block`` steps after ``block`` untimed ones: the GPU code path's Python, with
    CuPy's calls replaced by the stand-in's (see ``--time``)."""
    with stand_in():
        step = make_step()
        for _ in range(block):
            step()
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(block):
                step()
            times.append((time.perf_counter() - start) / block * 1e6)
        return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=0, help="list each step's most launched")
    parser.add_argument(
        "--where", nargs="+", default=[], metavar="KERNEL", help="list where these are launched"
    )
    parser.add_argument("--depth", type=int, default=2, help="frames per --where site")
    parser.add_argument(
        "--time", action="store_true", help="also time each step's host µs on the stand-in"
    )
    parser.add_argument(
        "--hopper", action="store_true", help="the stand-in GPU is a Hopper (sm_90, 132 SMs)"
    )
    parser.add_argument("--steps", nargs="+", choices=sorted(STEPS), default=list(STEPS))
    args = parser.parse_args(argv)
    watched.update(args.where)
    depth[0] = args.depth
    hopper[0] = args.hopper
    device = "a Hopper (sm_90, 132 SMs)" if args.hopper else "an sm_80 GPU"
    print(
        f"kernels per eager step on the GPU code path of {device}, CuPy stood in for by "
        f"NumPy {np.__version__}"
    )
    print("| step | kernels |\n|---|---|")
    found, places = {}, {}
    for name in args.steps:
        found[name] = count(STEPS[name])
        places[name] = collections.Counter(sites)
    for name, launched in found.items():
        print(f"| {name} | {sum(launched.values())} |")
    if args.time:
        print(
            "\nhost µs per step on the stand-in (SimpleNet width 64, batch 8; the GPT context "
            f"{gpu_stand_in.GPT_SIZE['context']}, width {gpu_stand_in.GPT_SIZE['width']}, "
            "batch 1), median of 7 blocks of 20 steps\n| step | µs per step |\n|---|---|"
        )
        for name in args.steps:
            print(f"| {name} | {host_time(SMALL[name]):.0f} |", flush=True)
    for name, launched in found.items() if args.top else ():
        print(f"\n{name}: the {args.top} most launched\n| kernel or call | per step |\n|---|---|")
        for what, n in launched.most_common(args.top):
            print(f"| {what} | {n} |")
    for name, where in places.items() if args.where else ():
        print(f"\n{name}: where {', '.join(args.where)} are launched\n| kernel | from | per step |")
        print("|---|---|---|")
        for (what, site), n in sorted(where.items()):
            print(f"| {what} | {site} | {n} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
