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
caller's own tensor again, a view of one is copied. Tensors that require grad are used as
they are while they are the same at every call (weights); once one is new at a call, such
tensors are copied too (inputs whose gradient the step wants) and the caller's tensor gets
the copy's gradient after each call.

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
import weakref

import numpy as np

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
    static_copy,
    used_as_it_is,
)

__all__ = ["CacheInfo", "GraphWarning", "GraphedFunction"]

_COPIED, _AS_IS = "copied tensor", "tensor used as it is"
_GRAD_INPUT = "copied tensor that requires grad"

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
        self._fresh: set = set()  # signatures whose tensors requiring grad are new each call
        self._last_key: dict = {}  # such a signature -> the exact key of its last call
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
        if any(map(is_grad_input, leaves)):
            key = self._grad_input_key(key, args, kwargs, place)
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
        if variant.grad_slots and variant.same_grad_input(leaves):
            self._give_up(
                key,
                leaves,
                "a Tensor that requires grad and is not a Parameter is passed again (the same "
                "object as at the previous call): it is copied, as a new input would be, so "
                "the gradient would not reach it. Make a weight a Parameter "
                "(mt.create_parameter, nn.Parameter) to have it used as it is",
            )
            return self._eager(args, kwargs)
        variant.copy_in(leaves)
        if variant.graph is not None:
            variant.graph.replay()
            self._counts["replays"] += 1
            variant.hand_grads_to(leaves)
            return variant.outputs
        if variant.warm_ups < self._warmup:
            last = variant.warm_ups + 1 == self._warmup
            rehearse = last and self._warmup > 1
            outputs = self._warm_up(key, variant, leaves, rehearse)
            variant.warm_ups += 1  # (after the call: one that raised has not warmed up)
            variant.hand_grads_to(leaves)
            if last and pending_backward(outputs):
                self._say(
                    f"{self!r}: {self._name} returns a tensor whose backward has not run (a "
                    "forward only); its graph is captured next, and a replay runs only what "
                    "the step itself runs, so a backward() on a replay's outputs fails. Graph "
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
        variant.drop_grads()  # (a new input would come without a gradient)
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
        variant.drop_grads()
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
        variant.hand_grads_to(leaves)
        return outputs

    # ---- the cache --------------------------------------------------------------------------
    def _grad_input_key(self, key, args, kwargs, place):
        """The key of a call with a Tensor that requires grad and is no Parameter: by identity
        (a weight made by hand, used as it is), until such a Tensor is a new one at a call
        (an input whose gradient the step wants): from then on such Tensors are copied."""
        loose = (_describe((args, kwargs), [], copy_grad_inputs=True), place)
        if loose in self._fresh:
            return loose
        previous = self._last_key.get(loose)
        if len(self._last_key) >= _EAGER_KEYS:
            self._last_key.clear()
        self._last_key[loose] = key
        if previous is None or previous == key:
            return key
        self._fresh.add(loose)  # (the earlier variant stays, for the tensor it holds)
        del self._last_key[loose]
        return loose

    def _add(self, key, args, kwargs, leaves) -> _Variant:
        variant = _Variant(args, kwargs, leaves, copy_grad_inputs=key in self._fresh)
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

    A Parameter is used as it is (the step updates it). Any other Tensor is copied; a copy
    of one that requires grad requires grad too (a *grad input*: PyTorch's graphs copy such
    inputs into static buffers as well). Its gradient is dropped before each eager call and
    the capture, as a new tensor comes without one, and handed to the caller's tensor after
    each call (after a replay: the buffer the next replay rewrites, as the outputs)."""

    __slots__ = (
        "args", "kwargs", "statics", "warm_ups", "graph", "outputs", "grad_slots", "last_seen",
    )  # fmt: skip

    def __init__(self, args, kwargs, leaves, copy_grad_inputs: bool):
        self.statics = [
            t if used_as_it_is(t) or (is_grad_input(t) and not copy_grad_inputs) else static_copy(t)
            for t in leaves
        ]
        self.args, self.kwargs = rebuild((args, kwargs), iter(self.statics))
        self.warm_ups = 0
        self.graph = None
        self.outputs = None
        self.grad_slots = [i for i, t in enumerate(leaves) if copy_grad_inputs and is_grad_input(t)]
        self.last_seen: list = []  # weak references to the last call's grad inputs

    def same_grad_input(self, leaves) -> bool:
        """Whether a grad input is the very tensor of the previous call (a hand-made weight,
        which a copy would cut off from its gradient); remembers this call's."""
        seen = [leaves[i] for i in self.grad_slots]
        again = any(r() is t for r, t in zip(self.last_seen, seen))
        self.last_seen = [weakref.ref(t) for t in seen]
        return again

    def copy_in(self, leaves) -> None:
        for static, value in zip(self.statics, leaves):
            if static is not value:
                static.set_value(value)  # device to device: the graph reads `static`

    def drop_grads(self) -> None:
        for i in self.grad_slots:
            self.statics[i]._grad = None

    def hand_grads_to(self, leaves) -> None:
        for i in self.grad_slots:
            leaves[i]._grad = self.statics[i]._grad_value

    def drop(self) -> None:
        if self.graph is not None:
            self.graph.reset()
        self.graph = self.outputs = None


def _describe(value, leaves: list, copy_grad_inputs: bool = False):
    """A hashable description of ``value`` (the signature); its Tensors go into ``leaves``.

    A Tensor is described by shape, dtype and device (its values are copied in at each
    call) and whether it requires grad, or, if it is a Parameter, by identity. Lists, tuples
    and dicts are looked into.
    Anything else is described by its value, so it must be hashable: numbers and strings
    compare by value, other objects (a Layer, an optimizer) by identity.
    """
    if isinstance(value, Tensor):
        leaves.append(value)
        if used_as_it_is(value) or (is_grad_input(value) and not copy_grad_inputs):
            return (_AS_IS, id(value))
        data = value._data
        kind = _COPIED if value.stop_gradient else _GRAD_INPUT
        return (kind, data.shape, data.dtype, _device.place_of(data))
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(_describe(v, leaves, copy_grad_inputs) for v in value))
    if isinstance(value, dict):
        items = value.items()
        return (type(value), tuple((k, _describe(v, leaves, copy_grad_inputs)) for k, v in items))
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
