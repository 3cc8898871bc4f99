"""NaN/Inf checking of every op's output, Paddle's tensor checker."""

from __future__ import annotations

import functools
import numbers
import os
from collections.abc import Callable
from enum import Enum

import numpy as np

from ...autograd import OP_TABLE, Tensor
from ...backend import asnumpy, get_array_module, place_of
from ...backend.dtypes import FP8, bfloat16
from ..op_lists import PADDLE_NAMES, PADDLE_ONLY
from .observers import install as _install
from .observers import install_grad_observer, uninstall_grad_observer
from .observers import uninstall as _uninstall

FP16_MAX = 65504.0  # the largest finite float16


# ---- NaN/Inf checking ---------------------------------------------------------------------
class DebugMode(Enum):
    """What the tensor checker does (Paddle's ``FLAGS_check_nan_inf_level``).

    CHECK_NAN_INF_AND_ABORT: print the first NaN/Inf output and raise RuntimeError.
    CHECK_NAN_INF: print every NaN/Inf output and go on.
    CHECK_ALL_FOR_OVERFLOW: also print fp32 outputs with finite values beyond ±65504 (fp16).
    CHECK_ALL: print statistics of every checked output.
    """

    CHECK_NAN_INF_AND_ABORT = 0
    CHECK_NAN_INF = 1
    CHECK_ALL_FOR_OVERFLOW = 2
    CHECK_ALL = 3


def _op_name(name, what: str) -> str:
    """Our name for a checked/skipped op: ours or Paddle's, forward or backward (``_grad``)."""
    if not isinstance(name, str):
        raise ValueError(f"{what} must hold op names (strings), got {name!r}")
    base, grad = (name[: -len("_grad")], "_grad") if name.endswith("_grad") else (name, "")
    ours = PADDLE_NAMES.get(base, base)
    if ours not in OP_TABLE and ours not in PADDLE_ONLY:
        raise ValueError(
            f"{what} names an unknown op {name!r}; known ops are: {', '.join(sorted(OP_TABLE))}, "
            "each also as '<op>_grad' for its backward, and Paddle's names such as "
            "'elementwise_pow_grad' (Paddle's transfer_dtype is 'cast' here)"
        )
    return ours + grad


def _op_names(names, what: str) -> frozenset | None:
    if names is None:
        return None
    if not isinstance(names, (list, tuple)):
        raise ValueError(f"{what} must be list or tuple of op names, got {type(names).__name__}")
    return frozenset(_op_name(n, what) for n in names)


class TensorCheckerConfig:
    """Configuration of the NaN/Inf checker that :func:`enable_tensor_checker` turns on.

    Args:
        enable: whether :func:`enable_tensor_checker` turns checking on at all.
        debug_mode: a :class:`DebugMode`.
        output_dir: append report lines to ``output_dir/worker_cpu.log`` (``worker_gpu0.log``
            on GPU 0) instead of printing them.
        checked_op_list: check only these ops: names from the op table or Paddle's
            (``elementwise_pow``), a backward as ``<op>_grad`` (``elementwise_pow_grad``).
        skipped_op_list: never check these ops (the same names).
        debug_step: ``[start, end)``: check only while the class-level counter
            ``TensorCheckerConfig.current_step_id`` is in the window. Each
            ``enable_tensor_checker`` call inside it moves the counter on by one; once it
            reaches ``end`` it stops there and checking stays off (Paddle's rule: a window
            that starts above the counter is never entered unless the counter is set).
        stack_height_limit: accepted for compatibility; the Python traceback shows the stack.

    Raises:
        ValueError: a bad debug_mode, debug_step, op list or stack_height_limit.

    Example:
        >>> from minitorch_amp.amp.debugging import DebugMode, TensorCheckerConfig
        >>> TensorCheckerConfig(True, DebugMode.CHECK_NAN_INF, debug_step=[2, 1])
        Traceback (most recent call last):
        ...
        ValueError: debug_step must be [start, end), two ints with end > start, got [2, 1]
    """

    current_step_id = 0  # class-level, as in Paddle

    def __init__(
        self,
        enable: bool,
        debug_mode: DebugMode = DebugMode.CHECK_NAN_INF_AND_ABORT,
        output_dir: str | None = None,
        checked_op_list: list[str] | tuple[str, ...] | None = None,
        skipped_op_list: list[str] | tuple[str, ...] | None = None,
        debug_step: list[int] | tuple[int, int] | None = None,
        stack_height_limit: int = 1,
    ):
        if not isinstance(debug_mode, DebugMode):
            members = ", ".join(f"DebugMode.{m}" for m in DebugMode.__members__)
            raise ValueError(f"debug_mode must be one of {members}, got {debug_mode!r}")
        self.start_step = self.end_step = None
        if debug_step is not None:
            if not isinstance(debug_step, (list, tuple)):
                raise ValueError(f"debug_step must be list or tuple, got {debug_step!r}")
            whole = len(debug_step) == 2 and all(
                isinstance(b, numbers.Integral) and not isinstance(b, bool) for b in debug_step
            )
            if not whole or not debug_step[1] > debug_step[0]:
                raise ValueError(
                    "debug_step must be [start, end), two ints with end > start, "
                    f"got {debug_step!r}"
                )
            self.start_step, self.end_step = max(int(debug_step[0]), 0), int(debug_step[1])
        if not isinstance(stack_height_limit, int):
            raise ValueError(f"stack_height_limit must be int, got {stack_height_limit!r}")
        self.enable = bool(enable)
        self.debug_mode = debug_mode
        self.output_dir = output_dir
        self.checked_op_list = _op_names(checked_op_list, "checked_op_list")
        self.skipped_op_list = _op_names(skipped_op_list, "skipped_op_list")
        self.debug_step = debug_step
        self.stack_height_limit = stack_height_limit

    def update_and_check_step_id(self) -> bool:
        """True when checking should be on for this enable call; inside the ``debug_step``
        window it also moves ``current_step_id`` on by one (Paddle's rule)."""
        if not self.enable:
            return False
        if self.start_step is None:
            return True
        step = TensorCheckerConfig.current_step_id
        if not self.start_step <= step < self.end_step:
            return False
        TensorCheckerConfig.current_step_id += 1
        return True

    def wants(self, op_name: str) -> bool:
        """Whether the checked/skipped op lists let ``op_name`` be checked."""
        if self.checked_op_list and op_name not in self.checked_op_list:
            return False
        return not (self.skipped_op_list and op_name in self.skipped_op_list)


def _numerics(data):
    """``([num_nan, num_inf, num_zero] int64, [max, min, mean])`` of ``data``, on its device.

    fp16 is examined in fp32, fp32 in fp32, anything else in float64. NOTE: max, min and mean
    are taken over the *finite* values (NaN when there are none); Paddle takes them over all
    values, so a single NaN turns all three into NaN and hides the size of the rest.
    """
    xp = get_array_module(data)
    work = np.float32 if data.dtype in (np.float16, np.float32) else np.float64
    x = data.astype(work, copy=False)
    nan, inf = xp.isnan(x), xp.isinf(x)
    finite = ~(nan | inf)
    stats = xp.stack([nan.sum(), inf.sum(), (x == 0).sum()]).astype(np.int64)
    if x.size == 0:
        return stats, xp.full(3, np.nan, dtype=work)
    count = finite.sum()
    hi = xp.where(finite, x, -np.inf).max()
    lo = xp.where(finite, x, np.inf).min()
    mean = xp.where(finite, x, 0).sum(dtype=work) / xp.maximum(count, 1)
    values = xp.stack([hi, lo, mean]).astype(work)
    return stats, xp.where(count > 0, values, np.nan).astype(work)


def _dtype_name(dtype) -> str:
    names = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64"}
    return names.get(str(dtype), str(dtype))


def _emit(line: str, place, output_dir: str | None) -> None:
    if output_dir is None:
        print(line)
        return
    os.makedirs(output_dir, exist_ok=True)
    name = "worker_cpu.log" if place.kind == "cpu" else f"worker_gpu{place.index}.log"
    with open(os.path.join(output_dir, name), "a") as f:
        f.write(line + "\n")


def _report(data, op_type, var_name, stats, values, mode: DebugMode, output_dir) -> None:
    """Print (or log) one tensor's line as Paddle does at ``mode``; raise when aborting."""
    num_nan, num_inf, num_zero = (int(v) for v in asnumpy(stats))
    hi, lo, mean = (float(v) for v in asnumpy(values))
    place = place_of(data)
    hint = f"[device={place}, op={op_type}, tensor={var_name}, dtype={_dtype_name(data.dtype)}]"
    numbers = f"max={hi:e}, min={lo:e}, mean={mean:e}"
    if num_nan or num_inf:
        counts = f"num_nan={num_nan}, num_inf={num_inf}, num_zero={num_zero}"
        line = f"[PRECISION] [ERROR] in {hint}, numel={data.size}, {counts}, {numbers}"
        _emit(line, place, output_dir)
        if mode is DebugMode.CHECK_NAN_INF_AND_ABORT:
            raise RuntimeError(f"(PreconditionNotMet) There are NAN or INF ({counts}) in {hint}.")
    elif mode is DebugMode.CHECK_ALL or (
        mode is DebugMode.CHECK_ALL_FOR_OVERFLOW
        and data.dtype == np.float32
        and (hi > FP16_MAX or lo < -FP16_MAX)
    ):
        line = f"[PRECISION] in {hint}, numel={data.size}, num_zero={num_zero}, {numbers}"
        _emit(line, place, output_dir)


def _check(data, op_type: str, var_name: str, config: TensorCheckerConfig) -> None:
    # like Paddle, integer and bool outputs pass; bfloat16 and FP8 (NumPy's kind 'V' for
    # bfloat16 and float8_e4m3fn) are checked: the FP8 GEMMs show their casts as cast_to_fp8
    # (see amp.fp8.gemm)
    if (data.dtype.kind == "f" or data.dtype == bfloat16 or data.dtype in FP8) and data.size:
        stats, values = _numerics(data)
        _report(data, op_type, var_name, stats, values, config.debug_mode, config.output_dir)


_checker: TensorCheckerConfig | None = None  # the config in force; the observer is on iff set


def _check_op(op, out: Tensor) -> None:
    if _checker.wants(op.name):
        _check(out._data, op.name, "", _checker)


def _check_grads(op, grads) -> None:
    """Backward: the gradients ``op``'s backward returned for the inputs that take one."""
    name = op.name + "_grad"
    if _checker.wants(name):
        for g in grads:
            if g is not None:
                _check(g, name, "", _checker)


def enable_tensor_checker(checker_config: TensorCheckerConfig) -> None:
    """Check every op's floating output after its forward, and the gradients each op's
    backward returns (as ``<op>_grad``), as ``checker_config`` says.

    Counts one step; outside the config's ``debug_step`` window (or with ``enable=False``)
    checking is turned off instead. Each check reads three numbers back to the host.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp.amp import debugging
        >>> config = debugging.TensorCheckerConfig(True, debugging.DebugMode.CHECK_NAN_INF)
        >>> debugging.enable_tensor_checker(config)
        >>> y = mt.to_tensor([1.0, 0.0, 3.0]) / mt.to_tensor([0.5, 0.0, 2.0])
        [PRECISION] [ERROR] in [device=cpu, op=divide, tensor=, dtype=fp32], numel=3, num_nan=1, num_inf=0, num_zero=0, max=2.000000e+00, min=1.500000e+00, mean=1.750000e+00
        >>> debugging.disable_tensor_checker()
    """  # noqa: E501 - Paddle's report line is long
    global _checker
    if not isinstance(checker_config, TensorCheckerConfig):
        raise TypeError(f"expected a TensorCheckerConfig, got {type(checker_config).__name__}")
    if checker_config.update_and_check_step_id():
        _checker = checker_config
        _install(_check_op)
        install_grad_observer(_check_grads)
    else:
        disable_tensor_checker()


def disable_tensor_checker() -> None:
    """Turn the NaN/Inf checker off (a no-op when it is off)."""
    global _checker
    _checker = None
    _uninstall(_check_op)
    uninstall_grad_observer(_check_grads)


def check_numerics(
    tensor: Tensor,
    op_type: str,
    var_name: str,
    debug_mode: DebugMode = DebugMode.CHECK_NAN_INF_AND_ABORT,
) -> tuple[Tensor, Tensor]:
    """Count NaN/Inf/zeros of ``tensor`` and report it as the checker would at ``debug_mode``.

    Returns:
        ``(stats, values)``: int64 ``[num_nan, num_inf, num_zero]`` and float32
        ``[max, min, mean]`` over the finite values, both on the tensor's device.

    Raises:
        RuntimeError: NaN or Inf found with ``debug_mode=CHECK_NAN_INF_AND_ABORT``.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp.amp.debugging import check_numerics
        >>> stats, values = check_numerics(mt.to_tensor([1.0, 0.0, 3.0]), "pow", "res")
        >>> stats.numpy(), values.numpy()
        (array([0, 0, 1]), array([3.       , 0.       , 1.3333334], dtype=float32))
    """
    if not isinstance(tensor, Tensor):
        raise TypeError(f"check_numerics expects a Tensor, got {type(tensor).__name__}")
    data = tensor._data
    stats, values = _numerics(data)
    _report(data, op_type, var_name, stats, values, debug_mode, None)
    return Tensor._wrap(stats), Tensor._wrap(values.astype(np.float32))


def check_layer_numerics(forward: Callable) -> Callable:
    """Decorate a Layer's ``forward`` so its input and every op inside it are checked.

    The first argument is checked (``op=<Layer>.forward, tensor=input``), then the checker runs
    over every op of the forward, so the outputs are checked too. It uses the config of the
    checker already on, else CHECK_NAN_INF_AND_ABORT; the previous state is restored after.
    Only the forward is checked (Paddle's also covers that layer's backward): the backward
    runs later, outside the call; turn on :func:`enable_tensor_checker` to check gradients.

    Raises:
        RuntimeError: forward got no arguments, or its first one is not a Tensor (Paddle).

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> from minitorch_amp.amp.debugging import check_layer_numerics
        >>> class Inverse(nn.Layer):
        ...     @check_layer_numerics
        ...     def forward(self, x):
        ...         return 1.0 / x
        >>> Inverse()(mt.to_tensor([0.0, 2.0]))
        Traceback (most recent call last):
        ...
        RuntimeError: (PreconditionNotMet) There are NAN or INF (num_nan=0, num_inf=1, num_zero=0) in [device=cpu, op=divide, tensor=, dtype=fp32].
    """  # noqa: E501 - Paddle's message is long

    @functools.wraps(forward)
    def checked_forward(self, *args, **kwargs):
        global _checker
        if not args:
            raise RuntimeError("No elements found in args: forward needs a Tensor argument.")
        if not isinstance(args[0], Tensor):
            raise RuntimeError("First input of this layer must be tensor.")
        saved = _checker
        config = saved if saved is not None else TensorCheckerConfig(enable=True)
        _check(args[0]._data, f"{type(self).__name__}.forward", "input", config)
        _checker = config
        _install(_check_op)
        try:
            return forward(self, *args, **kwargs)
        finally:
            if _checker is config:  # (a forward that turned the checker on or off wins)
                _checker = saved
                if saved is None:
                    _uninstall(_check_op)

    return checked_forward
