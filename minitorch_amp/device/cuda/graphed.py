"""A training step captured as a CUDA graph in one line: what ``graphs.graphed`` returns.

``step = graphs.graphed(step)`` (or ``@graphs.graphed``) keeps the step callable as before.
Per input signature (the shapes, dtypes and devices of its Tensor arguments, and the values
of the others) it keeps a *variant*: static copies of the Tensor arguments, then

1. ``warmup`` eager calls on those copies (the first builds optimizer state, compiles
   kernels and uploads tables; the last one, when there are two or more, is a *rehearsal*:
   it runs under the sync debug mode ``"warn"``, and a host read or upload it reports means
   the step cannot be captured);
2. one capture (the step is recorded, not run) and a replay that runs it;
3. from then on: copy the arguments into the static copies, replay, return the outputs the
   capture returned, now holding this call's values.

A step that cannot be captured (a float32 matmul on cuBLAS, a host read, an input off the
current GPU) runs eagerly for that signature from then on, after one :class:`GraphWarning`
per reason that says why. Where there is no
GPU the step runs eagerly, after one warning. Capturing and replaying are done by a
*recorder* (``graphs.graphed`` passes the CUDA one), so the bookkeeping here is tested on the
CPU with a stand-in.
"""

from __future__ import annotations

import collections
import copy
import functools
import sys
import warnings

import numpy as np

from ...autograd.creation import zeros_like
from ...autograd.tensor import Tensor
from ...backend import device as _device
from ...backend import sync as _sync
from ...backend.graphs import GraphError

__all__ = ["CacheInfo", "GraphWarning", "GraphedFunction"]

CacheInfo = collections.namedtuple(
    "CacheInfo", ["captures", "replays", "eager_calls", "variants", "maxsize"]
)
CacheInfo.__doc__ = """What a :class:`GraphedFunction` did: graphs captured, replays, calls
run eagerly (warm-ups, fallbacks, no GPU), variants held now, and the most it holds."""

_COPIED, _AS_IS = "copied tensor", "tensor used as it is"
_EAGER_KEYS = 1024  # signatures remembered as not capturable (then forgotten, all at once)


class GraphWarning(UserWarning):
    """A graphed step runs eagerly instead of replaying a CUDA graph (the message says why)."""


class GraphedFunction:
    """``function`` warmed up, captured and replayed per input signature (see the module).

    Args:
        function: the step; its Tensor arguments (also inside lists, tuples and dicts) are
            its inputs.
        recorder: captures and replays. ``recorder.unsupported()`` returns why graphs
            cannot be used now (a sentence) or None; ``recorder.capture(function, args,
            kwargs)`` records ``function(*args, **kwargs)`` without running its GPU work and
            returns ``(graph, outputs)``, where ``graph`` has ``replay()`` and ``reset()``.
        warmup: eager calls per signature before its capture (at least 1).
        cache_size: the most signatures with a graph kept; the least recently used goes.
    """

    def __init__(self, function, recorder, *, warmup: int = 2, cache_size: int = 8):
        if not callable(function):
            raise TypeError(f"graphed() needs a callable, got {type(function).__name__}")
        for name, value in (("warmup", warmup), ("cache_size", cache_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        functools.update_wrapper(self, function, updated=())
        self._function = function
        self._recorder = recorder
        self._warmup = warmup
        self._cache_size = cache_size
        self._name = getattr(function, "__name__", type(function).__name__)
        self.reset()

    def reset(self) -> None:
        """Forget every graph and every fallback; the next calls warm up and capture anew."""
        for variant in getattr(self, "_variants", {}).values():
            variant.drop()
        self._variants: collections.OrderedDict = collections.OrderedDict()
        self._eager_keys: set = set()  # signatures that could not be captured
        self._said: set = set()  # the warnings given (each is given once)
        self._counts = dict(captures=0, replays=0, eager_calls=0)

    def cache_info(self) -> CacheInfo:
        """Counts since the wrapper was made (or reset), as ``functools.lru_cache`` has."""
        return CacheInfo(**self._counts, variants=len(self._variants), maxsize=self._cache_size)

    def __repr__(self) -> str:
        return f"graphed({self._name})"

    def __get__(self, obj, objtype=None):
        """As a method: the instance is one more (non-Tensor) argument, compared by identity."""
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args, **kwargs):
        leaves: list = []
        signature = _describe((args, kwargs), leaves)
        why = self._recorder.unsupported()
        if why is not None:
            self._say(
                f"{self!r}: CUDA graphs need a GPU, and {why}; {self._name} runs eagerly, "
                "as if it were not wrapped (this is said once)"
            )
            return self._eager(args, kwargs)
        place = _device.current_place()
        key = (signature, place)
        if key in self._eager_keys:
            return self._eager(args, kwargs)
        variant = self._variants.get(key)
        if variant is None:
            elsewhere = next((t for t in leaves if _device.place_of(t._data) != place), None)
            if elsewhere is not None:  # a graph records the current GPU's work, nothing else
                self._give_up(
                    key,
                    leaves,
                    f"an input is on {_device.place_of(elsewhere._data)}, not on the "
                    f"current device {place}, "
                    "and a graph records only the current GPU's work (a replay would give the "
                    "capture's results again); move the inputs there first (Tensor.cuda())",
                )
                return self._eager(args, kwargs)
            variant = self._add(key, args, kwargs, leaves)
        else:
            self._variants.move_to_end(key)
        variant.copy_in(leaves)
        if variant.graph is not None:
            variant.graph.replay()
            self._counts["replays"] += 1
            return variant.outputs
        if variant.warm_ups < self._warmup:
            rehearse = variant.warm_ups + 1 == self._warmup > 1
            outputs = self._warm_up(key, variant, leaves, rehearse)
            variant.warm_ups += 1  # (after the call: one that raised has not warmed up)
            return outputs
        return self._capture(key, variant, args, kwargs, leaves)

    # ---- the three ways a call runs -------------------------------------------------------------
    def _eager(self, args, kwargs):
        self._counts["eager_calls"] += 1
        return self._function(*args, **kwargs)

    def _warm_up(self, key, variant, leaves, rehearse: bool):
        """An eager call on the static copies; a rehearsal also listens for host reads."""
        if not rehearse:
            return self._eager(variant.args, variant.kwargs)
        with warnings.catch_warnings(record=True) as heard:
            warnings.simplefilter("always", _sync.SyncWarning)
            with _sync.sync_debug_mode("warn"):
                outputs = self._eager(variant.args, variant.kwargs)
        reads = [w for w in heard if issubclass(w.category, _sync.SyncWarning)]
        for w in heard:  # the step's other warnings go on to the caller's filters
            if w not in reads:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if reads:
            # NOTE: the sync module's advice (switch the debug mode off) does not apply here.
            read = str(reads[0].message).split("; set_sync_debug_mode is")[0]
            self._give_up(key, leaves, f"the eager rehearsal before the capture found {read}")
        return outputs

    def _capture(self, key, variant, args, kwargs, leaves):
        """Record the step once; a replay then runs it. If it cannot be recorded, run eagerly.

        NOTE: a failed capture has run the step's Python up to the failing line, none of its
        GPU work. The rehearsal finds host reads before that; what is left (a float32 matmul
        on cuBLAS) fails in the forward pass, before the step changes any state.
        """
        try:
            with _sync.sync_debug_mode("error"):  # a host read names its line, then stops
                graph, outputs = self._recorder.capture(
                    self._function, variant.args, variant.kwargs
                )
        except (GraphError, _sync.SyncError) as err:
            self._give_up(key, leaves, str(err))
            return self._eager(args, kwargs)
        variant.graph, variant.outputs = graph, outputs
        self._counts["captures"] += 1
        graph.replay()  # the capture recorded this call's step; the replay runs it
        self._counts["replays"] += 1
        return outputs

    # ---- the cache --------------------------------------------------------------------------
    def _add(self, key, args, kwargs, leaves) -> _Variant:
        variant = _Variant(args, kwargs, leaves)
        self._variants[key] = variant
        if len(self._variants) > self._cache_size:
            _, oldest = self._variants.popitem(last=False)
            oldest.drop()
            self._say(
                f"{self!r}: more than cache_size={self._cache_size} input signatures (shapes, "
                "dtypes, devices, non-Tensor arguments), so the least recently used graph was "
                f"dropped; it is captured again, after {self._warmup} eager call(s), when its "
                "inputs come back. Give the step fewer distinct signatures (pad batches to a "
                "few shapes, pass changing numbers as Tensors) or raise cache_size"
            )
        return variant

    def _give_up(self, key, leaves, reason: str) -> None:
        """Run this signature eagerly from now on (until reset()), and say why once."""
        variant = self._variants.pop(key, None)
        if variant is not None:
            variant.drop()
        if len(self._eager_keys) >= _EAGER_KEYS:
            self._eager_keys.clear()  # (such signatures try once more, then come back)
        self._eager_keys.add(key)
        inputs = ", ".join(f"{t.dtype}{t.shape}" for t in leaves) or "no Tensor arguments"
        self._say(
            f"{self!r}: {self._name} cannot be captured as a CUDA graph, so calls with these "
            f"inputs ({inputs}), and any others it cannot capture for this reason, run eagerly "
            f"until reset(): {reason}",
            once=reason,
        )

    def _say(self, message: str, once: str | None = None) -> None:
        """Warn once per message (or per ``once``), at the caller's line (the first frame
        outside this file)."""
        once = message if once is None else once
        if once in self._said:
            return
        self._said.add(once)
        frame = sys._getframe(1)
        while frame.f_back is not None and frame.f_code.co_filename == __file__:
            frame = frame.f_back
        warnings.warn_explicit(message, GraphWarning, frame.f_code.co_filename, frame.f_lineno)


class _Variant:
    """One input signature: the step's arguments with static copies for its Tensors, the
    eager calls made so far, and once captured, the graph and the outputs it writes."""

    __slots__ = ("args", "kwargs", "statics", "warm_ups", "graph", "outputs")

    def __init__(self, args, kwargs, leaves):
        # A Tensor that requires grad (a parameter) is used as it is: the step updates it.
        self.statics = [t if not t.stop_gradient else zeros_like(t) for t in leaves]
        self.args, self.kwargs = _rebuild((args, kwargs), iter(self.statics))
        self.warm_ups = 0
        self.graph = None
        self.outputs = None

    def copy_in(self, leaves) -> None:
        for static, value in zip(self.statics, leaves):
            if static is not value:
                static.set_value(value)  # device to device: the graph reads `static`

    def drop(self) -> None:
        if self.graph is not None:
            self.graph.reset()
        self.graph = self.outputs = None


def _describe(value, leaves: list):
    """A hashable description of ``value`` (the signature); its Tensors go into ``leaves``.

    A Tensor is described by shape, dtype and device (its values are copied in at each
    call), or, if it requires grad, by identity. Lists, tuples and dicts are looked into.
    Anything else is described by its value, so it must be hashable: numbers and strings
    compare by value, other objects (a Layer, an optimizer) by identity.
    """
    if isinstance(value, Tensor):
        leaves.append(value)
        if not value.stop_gradient:
            return (_AS_IS, id(value))
        data = value._data
        return (_COPIED, data.shape, data.dtype, _device.place_of(data))
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(_describe(v, leaves) for v in value))
    if isinstance(value, dict):
        return (type(value), tuple((k, _describe(v, leaves)) for k, v in value.items()))
    try:
        hash(value)
    except TypeError:
        raise TypeError(
            f"graphed(): an argument of type {type(value).__name__} is neither a Tensor, a "
            "list, tuple or dict, nor hashable, so it cannot be part of the cache key; pass "
            "data as a Tensor (mt.to_tensor(array)) and settings as numbers or strings"
        ) from None
    if isinstance(value, (float, np.floating)):  # -0.0 == 0.0, and NaN equals nothing
        return (type(value), float(value).hex())
    return (type(value), value)


def _rebuild(value, tensors):
    """``value`` with each Tensor replaced by the next of ``tensors`` (as _describe found them)."""
    if isinstance(value, Tensor):
        return next(tensors)
    if isinstance(value, (list, tuple)):
        items = [_rebuild(v, tensors) for v in value]
        kind = type(value)
        return kind._make(items) if hasattr(kind, "_make") else kind(items)  # a namedtuple
    if isinstance(value, dict):
        rebuilt = copy.copy(value)
        for k, v in value.items():
            rebuilt[k] = _rebuild(v, tensors)
        return rebuilt
    return value


def arguments_seen(args, kwargs) -> list:
    """``wrap_cuda_graph``'s view of a call's arguments, in order (kept alive with its graph): each
    Tensor, also inside lists, tuples and dicts, with the array it holds; dict keys and
    keyword names; every other value."""
    found: list = []

    def walk(value):
        if isinstance(value, Tensor):
            found.extend((value, value._data))
        elif isinstance(value, (list, tuple)):
            found.append(type(value))
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            found.append(type(value))
            for key, item in value.items():
                found.append(key)
                walk(item)
        else:
            found.append(value)

    walk(args)
    walk(dict(sorted(kwargs.items())))
    return found


def same_argument(a, b) -> bool:
    """An argument the graph can replay for: the very Tensor or array captured, or another
    value equal to the captured one (a float by its bits: -0.0 is not 0.0, NaN is NaN)."""
    if a is b:
        return True
    if isinstance(a, Tensor) or _device.is_array(a) or type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a.hex() == b.hex()
    try:
        return bool(a == b)
    except Exception:  # (an object whose == does not give one truth value)
        return False
