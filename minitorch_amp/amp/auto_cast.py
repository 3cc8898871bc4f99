"""``auto_cast``: run each op in float16 or float32 by Paddle's per-op rule.

Inside ``with auto_cast():`` every op that goes through ``apply`` first passes its inputs to
:func:`cast_inputs`, which picks the op's compute dtype and casts the floating inputs to it:

* white op (matmul, linear) -> float16;
* black op (exp, log, softmax, cross_entropy, sum, mean, ...) -> float32;
* gray op (add, relu, reshape, ...) -> float32 if any floating input is float32, else float16;
* an op Paddle has no float16 kernel for (expand_as) -> float32, whatever the lists say;
* OD: only white ops run in float16; O2 with ``use_promote=False``: everything but black.

The casts are recorded ops, so gradients come back in each input's own dtype: an fp32
parameter feeding a white op receives an fp32 gradient. Within one outermost ``auto_cast``
region each fp32 leaf parameter is cast at most once (the cast cache); integer, bool and
float64 tensors are never cast.
"""

from __future__ import annotations

import contextvars
import functools
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..autograd import dispatch
from ..autograd.grad_mode import ReentrantContext, is_grad_enabled
from ..autograd.ops import Cast
from ..backend import cast as _cast_module
from ..backend.cast_counter import count_cast
from ..backend.dtypes import bfloat16, float16, float32
from .bf16 import bfloat16_unsupported_reason
from .op_lists import LEVELS, no_kernel_ops, reported_lists, resolve_lists

LOW_PRECISION = (float32, float16, bfloat16)  # the dtypes AMP casts between (Paddle's NeedCast)


@dataclass(frozen=True)
class AmpState:
    """Everything ``apply`` needs to decide an op's dtype inside an ``auto_cast`` region.

    ``white_ops``/``black_ops`` decide, in our op names; ``white``/``black`` are what Paddle's
    tracer reports (``_get_amp_op_list()``): its full lists and ours, the custom names moved
    as given (:func:`~minitorch_amp.amp.op_lists.reported_lists`).
    """

    level: str
    dtype: object
    white_ops: frozenset
    black_ops: frozenset
    use_promote: bool
    white: frozenset = frozenset()
    black: frozenset = frozenset()
    # op names -> 'white', 'black' or 'gray': the lists read once per op, not per call
    lists: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    def kind(self, names: tuple) -> str:
        """Which list decides ``names`` (an op's name and the names it also answers to)."""
        kind = self.lists.get(names)
        if kind is None:
            if any(n in no_kernel_ops(self.dtype.name) for n in names):
                kind = "no_kernel"  # Paddle has no low-precision kernel: float32 always
            elif any(n in self.black_ops for n in names):
                kind = "black"
            elif any(n in self.white_ops for n in names):
                kind = "white"
            else:
                kind = "gray"
            self.lists[names] = kind
        return kind


@functools.lru_cache(maxsize=32)
def _amp_state(*settings) -> AmpState:
    """One state per set of settings, so that a region entered every step (``with
    auto_cast():`` in the loop) finds its ops' list decisions already made."""
    return AmpState(*settings)


# Paddle's amp_global_state().amp_dtype: the dtype of the last auto_cast entered in this
# thread or task ('float32' before any). Set on entry and NOT restored on exit, as in Paddle:
# GradScaler.scale(), called after the region, reads it to turn itself off for bfloat16.
_last_amp_dtype = contextvars.ContextVar("minitorch_amp_last_amp_dtype", default="float32")


def last_amp_dtype() -> str:
    """``'float16'`` or ``'bfloat16'``: the dtype of the last ``auto_cast`` entered here."""
    return _last_amp_dtype.get()


# id(param), dtype -> (param, cast copy); one dict per outermost auto_cast region (False
# inside a region with the cache turned off).
_cast_cache = contextvars.ContextVar("minitorch_amp_cast_cache", default=None)


def amp_state() -> AmpState | None:
    """The AMP state in force here, or None when AMP is off."""
    return dispatch.autocast_state.get()


def _validate(level, dtype, use_promote) -> str:
    if not isinstance(level, str) or level.upper() not in LEVELS:
        raise ValueError("level should be O0, OD, O1 or O2.")
    if not isinstance(dtype, str) or dtype.lower() not in ("float16", "bfloat16"):
        raise ValueError(f"dtype should be 'float16' or 'bfloat16', got {dtype!r}")
    if not isinstance(use_promote, bool):
        raise TypeError(f"use_promote must be True or False, got {use_promote!r}")
    return level.upper()


class auto_cast(ReentrantContext):  # noqa: N801 - Paddle's name; a context and a decorator
    """Run the ops inside in mixed precision (Paddle's ``paddle.amp.auto_cast``).

    Args:
        enable: False turns AMP off inside (also inside an enabled region).
        custom_white_list: a list or set of op names to run in float16 (ours, or Paddle's like
            ``matmul_v2``).
        custom_black_list: a list or set of op names to run in float32.
        level: ``'O1'`` (mixed, the default), ``'O2'`` (pure fp16 with
            :func:`~minitorch_amp.amp.decorate`), ``'OD'`` (only white ops in fp16), ``'O0'`` (off).
        dtype: ``'float16'`` or ``'bfloat16'`` (current Paddle's bfloat16 op lists, which are
            float16's for the ops here; see :mod:`~minitorch_amp.amp.op_lists`). On a GPU
            that cannot run bfloat16 (compute capability below 8.0) AMP is turned off
            inside, with a warning, as in Paddle.
        use_promote: at O2, False runs every non-black op in float16 (Paddle < 2.5's O2).

    One object may be entered by several threads or asyncio tasks at once, nested inside
    itself, or decorate a function that several threads call: each thread and task gets back
    the state it had (see :class:`~minitorch_amp.autograd.grad_mode.ReentrantContext`).

    Raises:
        ValueError: an unknown level, dtype or op name, or an op in both custom lists.
        TypeError: a custom list that is a string (``["exp"]``, not ``"exp"``) or no list.

    Example:
        >>> import minitorch_amp as mt
        >>> x, w = mt.randn([2, 3]), mt.randn([3, 4])
        >>> with mt.amp.auto_cast():
        ...     y = mt.matmul(x, w)      # white: float16
        ...     z = y.sum()              # black: float32
        >>> y.dtype, z.dtype
        (dtype('float16'), dtype('float32'))
    """

    def __init__(
        self,
        enable: bool = True,
        custom_white_list=None,
        custom_black_list=None,
        level: str = "O1",
        dtype: str = "float16",
        use_promote: bool = True,
    ):
        level = _validate(level, dtype, use_promote)
        self._dtype_name = dtype.lower()
        bf16 = self._dtype_name == "bfloat16"
        lists = (level, custom_white_list, custom_black_list, self._dtype_name)
        white, black = resolve_lists(*lists)
        if bf16 and enable and level != "O0":
            reason = bfloat16_unsupported_reason()
            if reason is not None:  # Paddle: warn, and run the region without AMP
                warnings.warn(
                    f"auto_cast(dtype='bfloat16') makes no effect here: {reason}", stacklevel=2
                )
                enable = False
        if not enable or level == "O0":
            self._state = None
        else:
            promote = use_promote if level == "O2" else True
            dt = bfloat16 if bf16 else float16
            self._state = _amp_state(level, dt, white, black, promote, *reported_lists(*lists))

    _cache_casts = True  # PyTorch's autocast(cache_enabled=False) turns it off

    def _enter(self):
        _last_amp_dtype.set(self._dtype_name)  # sticky, never reset (Paddle's global state)
        outer = _cast_cache.get()
        if not self._cache_casts:  # no cache in this region (False: off, not "not yet made")
            cache_token = _cast_cache.set(False) if outer is not False else None
        else:
            cache_token = _cast_cache.set({}) if not isinstance(outer, dict) else None
        return dispatch.autocast_state.set(self._state), cache_token

    def _exit(self, saved) -> None:
        state_token, cache_token = saved
        dispatch.autocast_state.reset(state_token)
        if cache_token is not None:  # leaving the outermost region: drop the cached casts
            _cast_cache.reset(cache_token)


def _compute_dtype(names, considered: list, state: AmpState):
    """Paddle's ``GetAmpDestDtype``: the dtype an op runs in, given its considered inputs'
    ``(position, dtype)``. ``names``: the op's name and the names whose list entries also
    decide it."""
    kind = state.kind(names)
    if kind == "no_kernel":
        return float32
    if not state.use_promote:  # O2 with use_promote=False
        return float32 if kind == "black" else state.dtype
    if kind == "white":
        return state.dtype
    if kind == "black" or state.level == "OD":
        return float32
    # gray: promote to the widest, i.e. float32 if any floating input is float32
    return float32 if any(d == float32 for _, d in considered) else state.dtype


def _cast(t, dtype, prepared=None):
    """A recorded cast of ``t`` (``prepared``: its array, made already by ``cast_pair``);
    fp32 leaf parameters go through the region's cast cache."""
    if _is_parameter(t):
        cache, entry = _cache_entry(t, dtype)
        if entry is not None:
            count_cast("cache_hit")
            if entry[1]._node is not None:
                entry[1]._node.ctx.readers += 1
            return entry[1]
        out = dispatch.apply(Cast, t, dtype=dtype, prepared=prepared)
        if out._node is not None:  # the ops that read it (widen_fold writes the gradient
            out._node.ctx.readers = 1  # of a weight read once into its buffer)
        count_cast("weight")
        # NOTE: a cast made under no_grad has no graph; caching it would cut the parameter
        # off from backward for the rest of the region, so only recorded casts are cached.
        if cache is not None and is_grad_enabled():
            cache[(id(t), dtype)] = (t, out, t._version)  # t kept alive: its id stays its
        return out
    count_cast("autocast")
    return dispatch.apply(Cast, t, dtype=dtype, prepared=prepared)


def _is_parameter(t) -> bool:
    return t._node is None and not t.stop_gradient  # a leaf that wants a gradient


def _cache_entry(t, dtype):
    """``(cache, entry)``: the region's cast cache (None: no region, or off) and ``t``'s
    cached ``(t, cast, t's version)`` in it, or None where there is none still good.

    NOTE: a cached cast serves only while it is what casting ``t`` now would give and
    backward can still run through it: a write of ``t``'s values (``set_value``, an
    initializer, an optimizer step) bumps its version, and a backward frees the cast's node.
    A training loop written inside one region casts each weight once per forward pass."""
    cache = _cast_cache.get()
    if not isinstance(cache, dict):  # None: no region; False: off
        return None, None
    entry = cache.get((id(t), dtype))
    if entry is not None and (entry[2] != t._version or _freed(entry[1])):
        return cache, None
    return cache, entry


def _freed(cast) -> bool:
    return cast._node is not None and cast._node.freed


def _cast_together(tensors, dtype) -> dict:
    """The casts of the first two float32 tensors that need a cast kernel (not a cache hit),
    made in one launch (``backend.cast.cast_pair``): ``{id(tensor): array}``.

    Fewer launches (issue 24): an O1 Linear's activation and weight are cast together. The
    arrays are those two casts would make, bit for bit; the casts are still recorded one by
    one (``Cast`` with ``prepared``), so backward, counts and statistics do not change.
    """
    if dtype not in (float16, bfloat16):
        return {}
    misses = {}
    for t in tensors:
        if t._data.dtype == float32 and not (_is_parameter(t) and _cache_entry(t, dtype)[1]):
            misses.setdefault(id(t), t)
    if len(misses) < 2:
        return {}
    a, b = list(misses.values())[:2]
    if type(a._data) is not type(b._data):  # host beside device: the op says what to do
        return {}
    ca, cb = _cast_module.cast_pair(a._data, b._data, dtype)
    return {id(a): ca, id(b): cb}


def cast_inputs(op, inputs: tuple, state: AmpState) -> tuple:
    """Cast ``op``'s floating inputs to its compute dtype (the hook ``apply`` calls)."""
    positions = range(len(inputs)) if op.amp_inputs is None else op.amp_inputs
    names = _NAMES.get(op)
    if names is None:
        names = _NAMES[op] = (op.name, *op.amp_also)
    dtype, cast = _cast_to_rule(names, inputs, positions, state)
    if op.amp_bias is not None and dtype is not None:
        # Paddle adds this input in an add op of its own, after the op: the add's rule,
        # applied to the op's result dtype and this input, decides its dtype.
        _, cast = _cast_to_rule(("add",), (*cast, dtype), (op.amp_bias, len(cast)), state)
        cast = cast[:-1]
    return cast


_NAMES: dict = {}  # op class -> (its name, *the names it also answers to)


def _cast_to_rule(names, inputs: tuple, positions, state: AmpState):
    """``(dtype, inputs)``: the dtype AMP's rule picks for the floating inputs at
    ``positions`` (None when there are none) and the inputs with those cast to it. An entry
    may be a bare dtype (the result of an op that ran before): it counts, and is not cast."""
    Tensor = dispatch.Tensor  # noqa: N806
    considered = []  # (position, dtype) of each input AMP casts between
    for i in positions:
        if i < len(inputs):
            x = inputs[i]
            dtype = x._data.dtype if isinstance(x, Tensor) else x
            if isinstance(dtype, np.dtype) and dtype in LOW_PRECISION:
                considered.append((i, dtype))
    if not considered:
        return None, inputs
    dtype = _compute_dtype(names, considered, state)
    todo = [i for i, d in considered if d != dtype and isinstance(inputs[i], Tensor)]
    if not todo:
        return dtype, inputs
    cast = list(inputs)
    prepared = _cast_together([cast[i] for i in todo], dtype) if len(todo) > 1 else {}
    for i in todo:
        cast[i] = _cast(cast[i], dtype, prepared.pop(id(cast[i]), None))  # each used once
    return dtype, tuple(cast)


dispatch.hooks.autocast = cast_inputs
