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

A warm-up call returns its outputs as an eager call would: a static copy among them is the
caller's own tensor again, a view of one is copied. A Tensor that requires grad (a Parameter,
a weight made by hand) is used as it is and is part of the signature by identity: the step
updates it, and its gradient flows to it and to whatever it was computed from. A graph keeps
the tensors it captured, so when such a Tensor (not a Parameter) is another one than at the
previous call with the same signature otherwise (an input whose gradient the step wants, new
at each call), that signature runs eagerly from then on, with eager's gradients, after one
:class:`GraphWarning`.

A step that cannot be captured (a float32 matmul on cuBLAS, a host read, an input off the
current GPU) runs eagerly for that signature from then on, after one :class:`GraphWarning`
per reason that says why. Where there is no
GPU the step runs eagerly, after one warning. Capturing and replaying are done by a
*recorder* (``graphs.graphed`` passes the CUDA one), so the bookkeeping here is tested on the
CPU with a stand-in.
"""

from __future__ import annotations

import collections
import functools
import sys
import warnings

import numpy as np

from ...autograd import engine as _engine
from ...autograd.creation import zeros_like
from ...autograd.tensor import Tensor
from ...backend import device as _device
from ...backend import sync as _sync
from ...backend.graphs import GraphError
from .graph_arguments import (
    as_eager,
    check_counts,
    is_grad_input,
    pending_backward,
    rebuild,
    used_as_it_is,
)

__all__ = ["CacheInfo", "GraphWarning", "GraphedFunction"]

_COPIED, _AS_IS = "copied tensor", "tensor used as it is"
_GRAD_INPUT = "tensor that requires grad, by shape"  # (to find one that is new at a call)

CacheInfo = collections.namedtuple(
    "CacheInfo", ["captures", "replays", "eager_calls", "variants", "maxsize"]
)
CacheInfo.__doc__ = """What a :class:`GraphedFunction` did: graphs captured, replays, calls
run eagerly (warm-ups, fallbacks, no GPU), variants held now, and the most it holds."""

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
        check_counts(warmup, cache_size)
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
        self._last_key: dict = {}  # a signature, grad inputs by shape -> its last exact key
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
        if len(kwargs) > 1:  # f(x=a, y=b) is f(y=b, x=a): one signature, one graph
            kwargs = dict(sorted(kwargs.items()))
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
        unknown = key not in self._variants and any(map(is_grad_input, leaves))
        if unknown and self._grad_input_is_new(key, args, kwargs, leaves):
            return self._eager(args, kwargs)
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
            last = variant.warm_ups + 1 == self._warmup
            rehearse = last and self._warmup > 1
            passes = _engine.backward_passes
            outputs = self._warm_up(key, variant, leaves, rehearse)
            variant.warm_ups += 1  # (after the call: one that raised has not warmed up)
            forward_only = _engine.backward_passes == passes  # (a whole step runs a backward)
            if last and forward_only and pending_backward(outputs):
                self._say(
                    f"{self!r}: {self._name} runs no backward and returns a tensor that "
                    "needs one (a forward only); its graph is captured next, and a replay runs "
                    "only what the step itself runs, so a backward() on a replay's outputs "
                    "fails. Graph "
                    "the whole training step (forward, backward, optimizer step), or call the "
                    "forward with gradients off (with mt.no_grad()), or return such tensors "
                    "detached (this is said once)"
                )
            return as_eager(outputs, variant.statics, leaves)
        return self._capture(key, variant, args, kwargs, leaves)

    # ---- the three ways a call runs -------------------------------------------------------------
    def _eager(self, args, kwargs):
        self._counts["eager_calls"] += 1
        return self._function(*args, **kwargs)

    def _warm_up(self, key, variant, leaves, rehearse: bool):
        """An eager call on the static copies; a rehearsal also listens for host reads."""
        if not rehearse:
            return self._eager(variant.args, variant.kwargs)
        heard: list = []
        try:
            with warnings.catch_warnings(record=True) as heard:
                warnings.simplefilter("always", _sync.SyncWarning)
                with _sync.sync_debug_mode("warn"):
                    outputs = self._eager(variant.args, variant.kwargs)
        finally:  # the step's other warnings go on to the caller's filters, also if it raised
            reads = [w for w in heard if issubclass(w.category, _sync.SyncWarning)]
            for w in heard:
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
    def _grad_input_is_new(self, key, args, kwargs, leaves) -> bool:
        """Whether this call, which has no variant, runs eagerly because a Tensor that requires
        grad and is not a Parameter is another one than at the previous call whose signature
        differs only there: a graph keeps the tensors it captured, and copying such an input
        in would cut it off from its gradient. Then the signature (such Tensors by shape) runs
        eagerly from now on, and the previous call's variant goes, unless it was captured (a
        weight used at several calls, whose graph still replays for it)."""
        loose = (_describe((args, kwargs), [], grad_inputs_by_shape=True), key[1])
        if loose in self._eager_keys:
            return True
        previous = self._last_key.get(loose)
        if previous is None:
            if len(self._last_key) >= _EAGER_KEYS:
                self._last_key.clear()
            self._last_key[loose] = key
            return False
        if previous == key:
            return False
        del self._last_key[loose]
        variant = self._variants.get(previous)
        if variant is not None and variant.graph is None:  # (it holds the earlier tensor)
            del self._variants[previous]
            variant.drop()
        self._give_up(
            loose,
            leaves,
            "an input that requires grad is a new tensor at this call (not the one of the "
            "previous call), and a graph keeps the tensors it captured (a copy would cut this "
            "one off from its gradient). Pass such data with stop_gradient=True, or make it a "
            "Parameter (nn.Parameter) or the same tensor at every call",
        )
        return True

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
    eager calls made so far, and once captured, the graph and the outputs it writes.

    A Tensor that requires grad (a Parameter, a weight made by hand) is used as it is: the
    step updates it, and its gradient reaches it and what it was computed from."""

    __slots__ = ("args", "kwargs", "statics", "warm_ups", "graph", "outputs")

    def __init__(self, args, kwargs, leaves):
        self.statics = [t if used_as_it_is(t) else zeros_like(t) for t in leaves]
        self.args, self.kwargs = rebuild((args, kwargs), iter(self.statics))
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


def _describe(value, leaves: list, grad_inputs_by_shape: bool = False):
    """A hashable description of ``value`` (the signature); its Tensors go into ``leaves``.

    A Tensor is described by shape, dtype and device (its values are copied in at each
    call), or, if it requires grad, by identity (with ``grad_inputs_by_shape``, only a
    Parameter is; another Tensor that requires grad is described by shape, to find one that
    is new at a call). Lists, tuples and dicts are looked into.
    Anything else is described by its value, so it must be hashable: numbers and strings
    compare by value, other objects (a Layer, an optimizer) by identity.
    """
    if isinstance(value, Tensor):
        leaves.append(value)
        if used_as_it_is(value) and not (grad_inputs_by_shape and is_grad_input(value)):
            return (_AS_IS, id(value))
        data = value._data
        kind = _COPIED if value.stop_gradient else _GRAD_INPUT
        return (kind, data.shape, data.dtype, _device.place_of(data))
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(_describe(v, leaves, grad_inputs_by_shape) for v in value))
    if isinstance(value, dict):
        items = value.items()
        return (
            type(value),
            tuple((k, _describe(v, leaves, grad_inputs_by_shape)) for k, v in items),
        )
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
