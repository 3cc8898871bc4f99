"""Where arrays live and how they are computed: the only package that knows NumPy from CuPy."""

# device first: it chooses NumPy or CuPy at import, after compiling cuda/probe.cu through
# kernels, which imports device back (device.py says how that works).
from . import device, host_memory

# isort: split
from . import (
    cast,
    dtypes,
    fp8_gemm,
    fp8_kernels,
    fused_optim,
    gemm,
    kernels,
    loss_scaling,
    primitives,
    random,
)
from .device import (
    CPU,
    DeviceError,
    Place,
    asnumpy,
    current_place,
    get_array_module,
    get_device,
    is_array,
    is_compiled_with_cuda,
    parse_device,
    place_of,
    set_device,
    to_place,
    xp_for,
)

__all__ = [
    "CPU",
    "DeviceError",
    "Place",
    "asnumpy",
    "current_place",
    "dtypes",
    "get_array_module",
    "get_device",
    "is_array",
    "is_compiled_with_cuda",
    "parse_device",
    "place_of",
    "primitives",
    "random",
    "set_device",
    "to_place",
    "xp_for",
]
