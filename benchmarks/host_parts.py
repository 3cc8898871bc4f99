"""The instrument of ``host_profile.py``: the library's functions wrapped from the outside,
each call's own time (less the wrapped calls it makes) added to the part it belongs to, and
the cost of the wrapping itself measured so that it can be taken out.

``install(profile)`` wraps every function a part names (see ``host_profile``'s table) and
returns the patches to undo; ``HostProfile.run_step`` times one step under them and
``calibrate`` measures what one wrapped call costs.
"""

from __future__ import annotations

import functools
import sys
import types
from collections import Counter, defaultdict
from dataclasses import dataclass
from time import perf_counter

from minitorch_amp import amp, nn
from minitorch_amp.autograd import dispatch, engine, seeds
from minitorch_amp.autograd.op import Op
from minitorch_amp.autograd.tensor import Tensor
from minitorch_amp.backend import cast, fused_optim, gemm, kernels, loss_scaling, memory, primitives
from minitorch_amp.backend import device as _device
from minitorch_amp.optimizer.bucket import Bucket
from minitorch_amp.optimizer.optimizer import Optimizer

PARTS = ("layers", "dispatch", "amp", "record", "allocation", "launch")  # in and under ops
PARTS += ("engine", "scaler", "optimizer")  # the phases around the ops
OTHER = "other"
OVERHEAD = "instrumentation"  # the outer wrappers' part when every function is wrapped twice
LAUNCH = "kernels.launch"  # the function whose calls are the raw kernel launches
TENSOR_OPERATORS = {f"__{n}__" for n in ("add", "sub", "mul", "truediv", "matmul", "pow")}
TENSOR_OPERATORS |= {f"__r{n[2:]}" for n in TENSOR_OPERATORS} | {"__neg__"}


# ---- the profiler ----------------------------------------------------------------------------
def _label(fn) -> str:
    module = (getattr(fn, "__module__", None) or "").rpartition(".")[2]
    return f"{module}.{getattr(fn, '__qualname__', None) or getattr(fn, '__name__', '?')}"


class HostProfile:
    """Exclusive host seconds per (op, part, function), from wrapped functions.

    A wrapped call only logs its entry ``((part, op, function), time)`` and its exit ``time``;
    :meth:`run_step` rebuilds the calls from the log after the step. ``op`` is the op (or
    phase) the call runs for: ``apply``'s op, an op's backward and a phase's entry points set
    it (each call counts as one of that op), other calls inherit it (None outside every op).

    ``HostProfile(profile.log, OVERHEAD)`` makes wrappers that log into ``profile``'s log as
    part ``OVERHEAD`` whatever they wrap: installed over ``profile``'s own wrappers, each of
    their calls takes exactly one wrapped call's cost, measured inside a real step.
    """

    def __init__(self, log: list | None = None, only: str | None = None):
        self.log: list = [] if log is None else log
        self.only = only

    def wrap(self, fn, part: str, op: str | None = None):
        """``fn`` timed as ``part``."""
        tag = (self.only, None, self.only) if self.only else (part, op, _label(fn))
        log = self.log.append

        def timed(*args, **kwargs):
            log((tag, perf_counter()))
            try:
                return fn(*args, **kwargs)
            finally:
                log(perf_counter())

        return functools.update_wrapper(timed, fn, updated=())

    def wrap_apply(self, fn):
        """``apply`` timed as dispatch, for the op it runs."""
        if self.only:
            return self.wrap(fn, "dispatch")
        log = self.log.append

        def timed(op, *inputs, **attrs):
            log((("dispatch", op.name, "dispatch.apply"), perf_counter()))
            try:
                return fn(op, *inputs, **attrs)
            finally:
                log(perf_counter())

        return functools.update_wrapper(timed, fn, updated=())

    def run_step(self, step) -> StepRecord:
        """Run ``step()``; what each (op, part, function) spent in it."""
        self.log.clear()
        start = perf_counter()
        step()
        end = perf_counter()
        cells: dict = defaultdict(lambda: [0.0, 0, 0])  # [seconds, calls, wrapped calls inside]
        calls: Counter = Counter()  # per op and phase
        stack = [[(OTHER, None, None), None, start, 0.0, 0]]  # [tag, op, start, inner s, inner]
        for event in self.log:
            if isinstance(event, float):  # an exit: the frame on top is complete
                (part, opens, function), op, begin, inner, inner_calls = stack.pop()
                elapsed = event - begin
                cell = cells[op, part, function]
                cell[0] += elapsed - inner
                cell[1] += 1
                cell[2] += inner_calls
                stack[-1][3] += elapsed
                stack[-1][4] += 1
                if opens is not None:
                    calls[opens] += 1
            else:
                tag, begin = event
                stack.append([tag, tag[1] or stack[-1][1], begin, 0.0, 0])
        (base,) = stack
        cells[None, OTHER, None] = [end - start - base[3], 0, base[4]]
        self.log.clear()
        return StepRecord(end - start, {k: tuple(v) for k, v in cells.items()}, calls)


@dataclass
class StepRecord:
    total: float  # seconds, instrumented
    cells: dict  # (op, part, function) -> (seconds, calls, wrapped calls inside)
    calls: Counter  # op or phase -> calls


@dataclass(frozen=True)
class Calibration:
    """Seconds of one wrapped call, and the share of it inside the call's own frame (the
    rest falls in the caller's)."""

    per_call: float
    inside: float

    def corrected(self, seconds: float, calls: float, calls_inside: float) -> float:
        """Own time without the instrumentation: less the inside share of each call and the
        outside share of each wrapped call made from inside."""
        return seconds - calls * self.inside - calls_inside * (self.per_call - self.inside)


def calibrate(number: int = 2000, repeats: int = 3) -> Calibration:
    """Time loops of an empty function, bare and wrapped: the fastest of ``repeats`` each
    (noise only adds time)."""

    def empty(*args, **kwargs):
        return None

    profile = HostProfile()
    wrapped = profile.wrap(empty, "calibration")

    def loop(fn) -> float:
        start = perf_counter()
        for _ in range(number):
            fn(1, 2)
        return (perf_counter() - start) / number

    bare = min(loop(empty) for _ in range(repeats))
    runs = [profile.run_step(lambda: loop(wrapped)) for _ in range(repeats)]
    fastest = min(runs, key=lambda r: r.total)
    # NOTE: all that a call of the empty function records is overhead, and so is the rest of
    # its cost, which lands in the caller's frame (where the bare call's own cost stays).
    inside = sum(s for (_, part, _), (s, _, _) in fastest.cells.items() if part == "calibration")
    return Calibration(per_call=fastest.total / number - bare, inside=inside / number)


# ---- where the parts live: wrapping the library from the outside -----------------------------
class Patches:
    """Attributes replaced on modules, classes and objects, put back by :meth:`undo`."""

    def __init__(self):
        self._undo: list = []  # functions that each put one thing back
        self._bindings: dict | None = None

    def set(self, owner, name: str, value) -> None:
        if name in vars(owner):
            old = vars(owner)[name]
            self._undo.append(lambda: setattr(owner, name, old))
        else:  # inherited: deleting ours uncovers it again
            self._undo.append(lambda: delattr(owner, name))
        setattr(owner, name, value)

    def on_undo(self, restore) -> None:
        """Call ``restore()`` when undoing (after what was patched later is put back)."""
        self._undo.append(restore)

    def everywhere(self, fn, wrapper) -> None:
        """Replace ``fn`` under every name a minitorch_amp module (or the example) binds it."""
        if self._bindings is None:
            self._bindings = defaultdict(list)
            for name, module in list(sys.modules.items()):
                if name.startswith("minitorch_amp") or name == "simple_net":
                    for attr, value in list(vars(module).items()):
                        if isinstance(value, types.FunctionType):
                            self._bindings[id(value)].append((module, attr))
        for module, attr in self._bindings.get(id(fn), ()):
            self.set(module, attr, wrapper)

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()


def _subclasses(cls) -> list:
    """Every subclass of ``cls``, at any depth, once."""
    found = {}
    for sub in cls.__subclasses__():
        found.update(dict.fromkeys([sub, *_subclasses(sub)]))
    return list(found)


def _own_functions(*modules) -> list:
    """The public functions ``modules`` define (not those they import, not cached ones)."""
    return [
        value
        for module in modules
        for name, value in vars(module).items()
        if isinstance(value, types.FunctionType)
        and value.__module__ == module.__name__
        and not name.startswith("_")
    ]


def _stored(cls, name):
    """``cls.name`` as a class stores it (a staticmethod stays one), found along the MRO."""
    return next(vars(klass)[name] for klass in cls.__mro__ if name in vars(klass))


def install(profile: HostProfile) -> Patches:
    """Wrap the functions of the module docstring's table; return what puts them back (and
    put back at once what was wrapped when one of them cannot be: the library changed)."""
    patches = Patches()
    try:
        _install(profile, patches)
    except BaseException:
        patches.undo()
        raise
    return patches


def _install(profile: HostProfile, p: Patches) -> None:
    wrap = profile.wrap
    # each class attribute is read before anything is patched
    ops = [(cls, _stored(cls, "forward"), _stored(cls, "backward")) for cls in _subclasses(Op)]
    layers = [cls for cls in _subclasses(nn.Layer) if "forward" in vars(cls)]
    functional = [m for n, m in sys.modules.items() if n.startswith(nn.functional.__name__ + ".")]
    # layers and dispatch
    p.set(nn.Layer, "__call__", wrap(nn.Layer.__call__, "layers"))
    for cls in layers:
        p.set(cls, "forward", wrap(vars(cls)["forward"], "layers"))
    for fn in _own_functions(*functional):
        p.everywhere(fn, wrap(fn, "layers"))
    for name in [n for n in vars(Tensor) if n in TENSOR_OPERATORS]:
        p.set(Tensor, name, wrap(vars(Tensor)[name], "layers"))
    p.everywhere(dispatch.apply, profile.wrap_apply(dispatch.apply))
    p.everywhere(dispatch.promote, wrap(dispatch.promote, "dispatch"))
    # amp: the rule with its cast cache, and the region
    p.set(dispatch.hooks, "autocast", wrap(dispatch.hooks.autocast, "amp"))
    for name in ("__init__", "__enter__", "__exit__"):
        p.set(amp.auto_cast, name, wrap(getattr(amp.auto_cast, name), "amp"))
    # record and allocation
    p.set(dispatch, "Context", wrap(dispatch.Context, "record"))
    p.set(dispatch, "Node", wrap(dispatch.Node, "record"))
    p.set(Tensor, "_wrap", classmethod(wrap(vars(Tensor)["_wrap"].__func__, "allocation")))
    p.set(Tensor, "__init__", wrap(vars(Tensor)["__init__"], "allocation"))
    p.everywhere(memory.track, wrap(memory.track, "allocation"))
    if _device.cupy is not None:  # CuPy allocates inside its launches, through this function
        previous = _device.cupy.cuda.get_allocator()
        _device.cupy.cuda.set_allocator(wrap(previous, "allocation"))
        p.on_undo(functools.partial(_device.cupy.cuda.set_allocator, previous))
    # launch
    for cls, forward, backward in ops:
        p.set(cls, "forward", staticmethod(wrap(forward.__func__, "launch")))
        backward = wrap(backward.__func__, "launch", f"{cls.name} backward")
        p.set(cls, "backward", staticmethod(backward))
    for fn in (*_own_functions(primitives, cast, gemm, loss_scaling, fused_optim), kernels.launch):
        p.everywhere(fn, wrap(fn, "launch"))
    for cls in (Optimizer, *_subclasses(Optimizer)):
        for name in [n for n in ("_update", "_advance") if n in vars(cls)]:
            p.set(cls, name, wrap(vars(cls)[name], "launch"))
    p.set(Bucket, "_twin", wrap(Bucket._twin, "launch"))  # the CPU's (and CuPy's) optim.cu
    for fn in (seeds.initial_grad, engine._conform, engine._accumulate_leaf):
        p.everywhere(fn, wrap(fn, "launch"))  # the engine's own array maths
    # the phases: backward, the scaler, the optimizer
    p.everywhere(engine.backward, wrap(engine.backward, "engine", "(backward engine)"))
    for fn in (engine._topological_order, engine._propagate, engine._destinations):
        p.everywhere(fn, wrap(fn, "engine"))  # seen one by one in the function table
    for name in ("scale", "unscale_", "step", "minimize", "update"):
        p.set(amp.AmpScaler, name, wrap(vars(amp.AmpScaler)[name], "scaler", "(scaler)"))
    for name in ("step", "minimize", "clear_grad"):
        p.set(Optimizer, name, wrap(vars(Optimizer)[name], "optimizer", "(optimizer)"))
