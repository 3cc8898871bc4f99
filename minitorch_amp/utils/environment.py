"""What this installation runs on: versions, the device, CUDA, and the environment variables.

``python -m minitorch_amp`` prints :func:`format_report` of :func:`collect_env` (in the spirit
of ``python -m torch.utils.collect_env``), then a :func:`kernel_line` per kernel as each is
checked, then runs :func:`minitorch_amp.utils.run_check`.
Every environment variable minitorch_amp reads is listed in :data:`ENVIRONMENT_VARIABLES`
and, with more words, in ``docs/environment.md``.
"""

from __future__ import annotations

import os
import platform
import sys
import textwrap

import numpy as np

from ..backend import cuda_info as _cuda_info
from ..backend import device as _device
from ..backend import gemm_sm90 as _gemm_sm90
from ..backend import host_c as _host_c
from ..backend import kernels as _kernels

ENVIRONMENT_VARIABLES: dict[str, str] = {
    # read by minitorch_amp itself
    "MINITORCH_AMP_DEVICE": "'cpu' or 'gpu' ('cuda', 'gpu:N'): force the backend chosen at import",
    "MINITORCH_AMP_RAW_KERNELS": "'0': CuPy's own array code instead of the kernels of cuda/",
    "MINITORCH_AMP_GEMM_KERNEL": "'auto', 'sm80' or 'sm90': which GEMM kernel runs on a GPU",
    "MINITORCH_AMP_DIST_BACKEND": "'mpi', 'nccl' or 'local': force the distributed backend",
    "MINITORCH_AMP_DIST_TIMEOUT": "seconds a collective waits for the other ranks (600)",
    "MINITORCH_AMP_KERNEL_CACHE": "where the report keeps compiled kernels; '0': no cache",
    "MINITORCH_AMP_HOST_C": "'0': NumPy, not the compiled csrc/*.c, for the CPU's float16, GELU",
    "CC": "the C compiler the csrc/*.c files are compiled with at first use (cc)",
    "MINITORCH_AMP_MALLOC": "'heap' (default) or 'system': glibc's thresholds for temporaries",
    "XDG_CACHE_HOME": "the caches are in its minitorch_amp/kernels and /host (~/.cache)",
    "CUDA_PATH": "the CUDA toolkit whose headers the NVRTC compile check uses",
    "CUDA_HOME": "the same, when CUDA_PATH is not set",
    # set by mpiexec, read to learn the ranks
    "PMI_SIZE": "ranks started by MPICH's mpiexec",
    "PMIX_SIZE": "ranks started by a PMIx launcher",
    "OMPI_COMM_WORLD_SIZE": "ranks started by Open MPI's mpiexec",
    "MPI_LOCALNRANKS": "ranks on this node (MPICH)",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "ranks on this node (Open MPI)",
    "MPI_LOCALRANKID": "this rank's index on its node (MPICH)",
    "OMPI_COMM_WORLD_LOCAL_RANK": "this rank's index on its node (Open MPI)",
    "PMI_LOCAL_RANK": "this rank's index on its node (PMI)",
    # set by the launcher when it runs as root
    "OMPI_ALLOW_RUN_AS_ROOT": "set to 1 by the launcher as root, for Open MPI",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "set to 1 by the launcher as root, for Open MPI",
    # read by the test suite
    "HYPOTHESIS_PROFILE": "the tests' Hypothesis profile: 'ci' (default) or 'thorough'",
    "CI": "set by CI: the tests also check the kernels with nvcc",
}


def gemm_kernel() -> str:
    """Which kernel a float16 matrix product runs here, as ``backend/gemm.py`` will choose it
    (``MINITORCH_AMP_GEMM_KERNEL``, the compute capability, the raw-kernel switch)."""
    try:
        choice = _gemm_sm90.requested()
    except ValueError as exc:
        return f"error: {exc}"
    setting = f"{_gemm_sm90.KERNEL_ENV}={choice}"
    if _device.current_place().kind != "gpu":
        return f"the NumPy twin (no GPU; {setting})"
    if not _kernels.enabled():
        return "CuPy's matmul (MINITORCH_AMP_RAW_KERNELS=0)"
    if choice == "sm80":
        return f"gemm_fp16.cu (mma.sync), chosen by {setting}"
    if _gemm_sm90.device_is_hopper():
        return (
            f"gemm_sm90.cu (wgmma + TMA) where TMA can address the operands, else "
            f"gemm_fp16.cu ({setting})"
        )
    if choice == "sm90":
        capability = _device.cupy.cuda.Device().compute_capability
        return (
            f"error: {setting} asks for gemm_sm90.cu, which needs compute capability 9.0, "
            f"and this GPU has {capability}; unset it"
        )
    return f"gemm_fp16.cu (mma.sync; gemm_sm90.cu needs compute capability 9.0; {setting})"


def collect_env() -> dict:
    """Everything the report shows, as a dict of plain values (strings and lists)."""
    from .. import __version__

    facts = _cuda_info.cupy_facts()
    place = _device.current_place()
    if place.kind == "gpu":
        backend = f"{place} (CuPy)"
    else:
        backend = "cpu (NumPy)"
        if _device.cpu_reason:
            backend += f": {_device.cpu_reason}"
        elif os.environ.get("MINITORCH_AMP_DEVICE", "").strip().lower() == "cpu":
            backend += ": MINITORCH_AMP_DEVICE=cpu"
    return {
        "minitorch_amp": f"{__version__} ({os.path.dirname(os.path.dirname(__file__))})",
        "python": f"{platform.python_version()} ({sys.executable})",
        "platform": platform.platform(),
        "numpy": np.__version__,
        "cupy": facts["cupy"],
        "cuda runtime": facts["cuda runtime"] or "-",
        "cuda driver": facts["cuda driver"] or "-",
        "gpus": facts["gpus"],
        "nvrtc": _cuda_info.nvrtc_facts(),
        "backend": backend,
        "gemm kernel": gemm_kernel(),
        "cpu float16": _host_c.status("float16"),
        "cpu gelu": _host_c.status("gelu"),
        "environment": {k: os.environ[k] for k in ENVIRONMENT_VARIABLES if k in os.environ},
    }


def format_report(info: dict, kernels: list | None = None) -> str:
    """The report as text: ``name: value`` per fact (wrapped at 88 columns), the variables
    that are set, then the kernels (``python -m minitorch_amp`` prints those as they come)."""
    lines = ["minitorch_amp environment report", ""]
    for key in (
        "minitorch_amp",
        "python",
        "platform",
        "numpy",
        "cupy",
        "cuda runtime",
        "cuda driver",
        "nvrtc",
        "backend",
        "gemm kernel",
        "cpu float16",
        "cpu gelu",
    ):
        text = textwrap.wrap(str(info[key]), 88 - 15, break_on_hyphens=False) or [""]
        lines.append(f"{key + ':':<15}{text[0]}")
        lines += [f"{'':<15}{more}" for more in text[1:]]
    lines.append(f"{'gpus:':<15}{'none' if not info['gpus'] else info['gpus'][0]}")
    lines += [f"{'':<15}{gpu}" for gpu in info["gpus"][1:]]
    lines += ["", "environment variables in effect:"]
    if info["environment"]:
        lines += [f"  {key}={value}" for key, value in info["environment"].items()]
    else:
        lines.append("  none of those minitorch_amp reads is set (see docs/environment.md)")
    if kernels is not None:
        lines += ["", "kernels (cuda/*.cu):"]
        lines += [kernel_line(file, status) for file, status in kernels]
    return "\n".join(lines)


def kernel_line(file: str, status: str) -> str:
    """One kernel's line: its file in a column as wide as the longest registered name, then
    its status."""
    width = max([len(file), *map(len, _kernels.REGISTRY)]) + 2
    return f"  {file:<{width}}{status}"
