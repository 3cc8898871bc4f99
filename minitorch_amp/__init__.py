"""minitorch_amp: a small, readable deep-learning engine built for Automatic Mixed Precision."""

from . import amp, device, distributed, nn, optimizer, utils
from .amp import (
    autocast,
    get_autocast_cpu_dtype,
    get_autocast_dtype,
    get_autocast_gpu_dtype,
    is_autocast_enabled,
)
from .autograd import Tensor, enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .autograd.creation import (
    arange,
    empty,
    empty_like,
    full,
    full_like,
    normal,
    ones,
    ones_like,
    rand,
    randint,
    randn,
    seed,
    to_tensor,
    uniform,
    zeros,
    zeros_like,
)
from .autograd.functions import (
    abs,  # noqa: A004 - Paddle's name (paddle.abs)
    add,
    argmax,
    broadcast_to,
    cast,
    clip,
    concat,
    divide,
    equal,
    exp,
    expand,
    expand_as,
    flatten,
    greater_equal,
    greater_than,
    less_equal,
    less_than,
    log,
    matmul,
    max,  # noqa: A004 - Paddle's name (paddle.max)
    mean,
    mm,
    multiply,
    neg,
    not_equal,
    pow,  # noqa: A004 - Paddle's name (paddle.pow)
    reshape,
    sigmoid,
    sqrt,
    square,
    squeeze,
    stack,
    subtract,
    sum,  # noqa: A004 - Paddle's name (paddle.sum)
    tanh,
    transpose,
    unsqueeze,
    where,
)
from .autograd.functions_index import (
    chunk,
    clone,
    gather,
    index_select,
    masked_fill,
    split,
    take_along_axis,
    tril,
    triu,
    unbind,
)
from .autograd.functions_math import bmm, cumsum, einsum, rsqrt
from .autograd.functions_sort import argsort, multinomial, sort, topk
from .autograd.gradients import grad
from .backend import Place, get_device, is_compiled_with_cuda, set_device
from .backend.device import CPUPlace, CUDAPlace
from .backend.dtypes import (
    bfloat16,
    bool_,
    float8_e4m3fn,
    float8_e5m2,
    float16,
    float32,
    float64,
    get_default_dtype,
    int32,
    int64,
    set_default_dtype,
)
from .cuda_namespace import cuda  # PyTorch's torch.cuda.amp (autocast, GradScaler)
from .distributed import DataParallel
from .hapi import summary
from .io import load, save
from .nn import ParamAttr

bool = bool_  # noqa: A001 - Paddle exposes paddle.bool

__version__ = "0.1.0"


def __getattr__(name: str):
    """A PyTorch name this package spells differently raises an AttributeError that says
    what to use (``minitorch_amp.pytorch_hints``); called only for names not found."""
    from .pytorch_hints import missing

    raise missing("minitorch_amp", name, names=globals())
