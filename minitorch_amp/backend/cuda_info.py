"""What CuPy and CUDA report about this machine, for ``python -m minitorch_amp``.

Kept in ``backend/``, the one package that imports CuPy. Nothing here raises: a missing
CuPy, driver or NVRTC is reported as such.
"""

from __future__ import annotations

from . import device as _device


def cupy_facts() -> dict:
    """CuPy, CUDA and device facts; empty strings where there is no CuPy or no GPU."""
    facts = {"cupy": "not installed", "cuda runtime": "", "cuda driver": "", "gpus": []}
    try:
        import cupy
    except ImportError:
        return facts
    facts["cupy"] = cupy.__version__
    try:
        runtime = cupy.cuda.runtime
        facts["cuda runtime"] = _cuda_version(runtime.runtimeGetVersion())
        facts["cuda driver"] = _cuda_version(runtime.driverGetVersion())
        for index in range(runtime.getDeviceCount()):
            props = runtime.getDeviceProperties(index)
            name = props["name"]
            name = name.decode() if isinstance(name, bytes) else str(name)
            capability = f"{props['major']}.{props['minor']}"
            memory = props["totalGlobalMem"] / 2**30
            facts["gpus"].append(
                f"gpu:{index} {name}, compute capability {capability}, {memory:.1f} GiB"
            )
    except Exception as exc:  # no driver, no device: report it, do not fail
        facts["cuda driver"] = facts["cuda driver"] or f"unavailable ({type(exc).__name__})"
    return facts


def _cuda_version(number: int) -> str:
    """CUDA's integer version (12040) as text (12.4)."""
    return f"{number // 1000}.{number % 1000 // 10}"


def nvrtc_facts() -> str:
    """Which NVRTC the kernels compile with: CuPy's on a GPU, else the library the tests use."""
    if _device.cupy is not None:
        try:
            major, minor = _device.cupy.cuda.nvrtc.getVersion()
        except Exception as exc:
            return f"not loadable ({type(exc).__name__}: {exc})"
        return f"{major}.{minor} (CuPy's)"
    from . import nvrtc

    try:
        major, minor = nvrtc.version()
    except Exception as exc:  # NvrtcUnavailableError, OSError
        return f"not found ({exc})"
    return f"{major}.{minor} (libnvrtc, no GPU: compile checks only)"
