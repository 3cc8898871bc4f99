"""CUDA graphs with Paddle's names (``paddle.device.cuda.graphs``) and PyTorch's ``graph``.

Capture one whole training step and replay it: one launch instead of dozens, and no Python
between the kernels (``docs/graphs.md`` explains why that matters and what it takes). The
one-line way is :func:`graphed`::

    @graphs.graphed                       # warm up, capture, replay; eager where it cannot
    def train_step(x, y):
        with amp.auto_cast(level="O2"):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)                  # unscale, skip on inf/nan: all on the device
        scaler.update()
        opt.clear_grad()
        return loss                       # overwritten by the next replay: read it first

    for xb, yb in batches:
        loss = train_step(xb, yb)         # copied into the graph's own input tensors

The manual way, with the undecorated step and static input tensors ``x``, ``y``::

    train_step(x, y)                      # eager warm-up: state, kernels, tables
    g = CUDAGraph()
    g.capture_begin()
    loss = train_step(x, y)               # recorded, not run
    g.capture_end()
    for xb, yb in batches:
        x.set_value(xb); y.set_value(yb)  # new data into the same buffers
        g.replay()                        # the whole step; ``loss`` holds its value

Rules (each broken one is an error during capture, not a wrong result): run the step
eagerly at least once first; no host reads (``.item()``, ``float()``, ``if t:``) inside; feed
new data through the same input tensors; float32 matmuls use cuBLAS, which CuPy refuses to
capture, so capture AMP steps (O1, O2), whose matmuls run on our own kernel.

On the CPU backend everything here exists, :func:`is_cuda_graph_supported` is False,
capturing raises :class:`GraphError`, and :func:`graphed` runs the step eagerly.
"""

from __future__ import annotations

import contextlib
import functools
import warnings

from ...backend import device as _device
from ...backend import graphs as _graphs
from ...backend.graphs import CAPTURE_MODES, GraphError
from .graph_arguments import arguments_seen, check_counts, same_argument
from .graphed import CacheInfo, GraphedFunction, GraphWarning

__all__ = [
    "CUDAGraph",
    "CacheInfo",
    "GraphError",
    "GraphWarning",
    "GraphedFunction",
    "graph",
    "graphed",
    "is_cuda_graph_supported",
    "wrap_cuda_graph",
]

_shared_pools: dict[int, object] = {}  # pool_id -> a memory pool that graphs share


def is_cuda_graph_supported() -> bool:
    """True when CuPy runs on an NVIDIA GPU, so steps can be captured (Paddle's function)."""
    return _graphs.is_supported()


class CUDAGraph:
    """Capture GPU work once, replay it with one launch (Paddle's ``CUDAGraph``).

    Args:
        place: the GPU to capture on (default: the current device).
        mode: ``'thread_local'`` (default), ``'global'`` or ``'relaxed'``: which other
            threads' CUDA calls may not run during the capture (cudaStreamCaptureMode).
        pool_id: graphs given the same int share one private memory pool (safe only when
            they replay in the order they were captured); None gives this graph its own.

    Raises:
        ValueError: an unknown mode.
    """

    def __init__(self, place=None, mode: str = "thread_local", pool_id=None):
        if mode not in CAPTURE_MODES:
            raise ValueError(f"mode must be one of {sorted(CAPTURE_MODES)}, got {mode!r}")
        self._place = _device.current_place() if place is None else _device.parse_device(place)
        self._mode = mode
        self._pool_id = pool_id
        self._capture = None

    def capture_begin(self) -> None:
        """Start recording the GPU work queued from now on (it does not run).

        Raises:
            GraphError: no GPU (the CPU backend), a capture in progress (this graph's or
                another's: a refused call leaves it running, to be ended), or this graph was
                captured already (``reset()`` first).
        """
        self._begin(self._mode)

    def _begin(self, mode: str) -> None:
        """:meth:`capture_begin` in ``mode``, for this capture only (``graph()``'s
        ``capture_error_mode``). Everything is checked before anything is written."""
        if not is_cuda_graph_supported() or self._place.kind != "gpu":
            raise GraphError(
                f"CUDA graphs need a GPU place and CuPy on an NVIDIA GPU; this graph's place "
                f"is {self._place} and is_cuda_graph_supported() is "
                f"{is_cuda_graph_supported()}. Run the step eagerly instead."
            )
        if self._capturing():
            raise GraphError(
                "this graph's capture is in progress; capture_end() it before beginning again"
            )
        if _graphs.active() is not None:
            raise GraphError("another CUDA graph's capture is in progress; end it first")
        if self._capture is not None and self._capture.graph is not None:
            raise GraphError("this graph was captured already; call reset() to capture again")
        pool = None
        if self._pool_id is not None:
            pool = _shared_pools.get(self._pool_id)
            if pool is None:
                pool = _shared_pools[self._pool_id] = _device.cupy.cuda.MemoryPool()
        capture = _graphs.Capture(self._place.index, mode, pool)
        capture.begin()
        self._capture = capture  # (only once begun: a failed begin leaves the graph as it was)

    def _capturing(self) -> bool:
        return self._capture is not None and _graphs.active() is self._capture

    def capture_end(self) -> None:
        """Stop recording and build the graph; :meth:`replay` runs it."""
        if self._capture is None:
            raise GraphError("capture_end() without capture_begin()")
        self._capture.end()

    def replay(self) -> None:
        """Run everything captured, once, on the current stream (nothing waits for it)."""
        if self._capture is None:
            raise GraphError("replay() before capture_begin()/capture_end()")
        self._capture.replay()

    def reset(self) -> None:
        """Forget the captured work, so the graph can capture again.

        Raises:
            GraphError: this graph's capture is in progress (``capture_end()`` it first; as
                Paddle's and PyTorch's, a reset does not end a capture).
        """
        if self._capturing():
            raise GraphError(
                "reset() during this graph's capture: capture_end() it first (a reset "
                "forgets a captured graph, it does not end a capture)"
            )
        if self._capture is not None:
            self._capture.reset()
        self._capture = None

    def _abort(self) -> None:
        if self._capture is not None:
            self._capture.abort()
        self._capture = None


@contextlib.contextmanager
def graph(cuda_graph: CUDAGraph, pool=None, stream=None, capture_error_mode=None):
    """PyTorch's ``with torch.cuda.graph(g):`` for a :class:`CUDAGraph`.

    The block is captured into ``cuda_graph``; if it raises, the capture is dropped and the
    error goes on. ``pool`` and ``stream`` are not supported (a CUDAGraph's ``pool_id``
    shares pools); ``capture_error_mode`` overrides the graph's mode for this capture only.

    Raises:
        GraphError: as :meth:`CUDAGraph.capture_begin`.
        ValueError: ``pool`` or ``stream`` given.
    """
    if pool is not None or stream is not None:
        raise ValueError(
            "graph(): pool= and stream= are not supported; share a pool with "
            "CUDAGraph(pool_id=...) and capture on the current device"
        )
    if not isinstance(cuda_graph, CUDAGraph):
        raise TypeError(f"graph() needs a CUDAGraph, got {type(cuda_graph).__name__}")
    if capture_error_mode is not None and capture_error_mode not in CAPTURE_MODES:
        raise ValueError(
            f"capture_error_mode must be one of {sorted(CAPTURE_MODES)}, got {capture_error_mode!r}"
        )
    cuda_graph._begin(cuda_graph._mode if capture_error_mode is None else capture_error_mode)
    try:
        yield cuda_graph
    except BaseException:
        cuda_graph._abort()
        raise
    cuda_graph.capture_end()


def wrap_cuda_graph(function, mode: str = "thread_local", memory_pool="default", warmup=1):
    """``function`` run eagerly ``warmup`` times, then captured, then replayed (Paddle's name).

    Every call after the warm-up replays the graph and returns the very tensors the captured
    call returned, now holding this call's values. The arguments must be the same tensors
    at every call, also inside lists, tuples and dicts (put new data in them with
    ``Tensor.set_value``), and the other arguments the same values: any other call raises
    :class:`GraphError`. A Layer (anything with a
    ``forward`` method) gets its ``forward`` wrapped and is returned. :func:`graphed` is the
    forgiving form: new tensors each call, a graph per shape, eager where it cannot capture.
    Wrapping a wrapped function (or layer) again replaces the first wrapping, with a
    :class:`GraphWarning`, as Paddle's ``to_static`` does; wrappers never nest.

    Args:
        function: the step to capture.
        mode: the capture mode, as :class:`CUDAGraph`.
        memory_pool: ``'default'`` or ``'new'`` (a pool of its own), or an int shared with
            the graphs given the same int.
        warmup: eager calls before the capture (at least 1: the first call creates optimizer
            state, compiles kernels and builds the tables the graph will reuse).

    Raises:
        ValueError: a bad mode, memory_pool or warmup.
    """
    if mode not in CAPTURE_MODES:
        raise ValueError(f"mode must be one of {sorted(CAPTURE_MODES)}, got {mode!r}")
    if memory_pool not in ("default", "new") and (
        isinstance(memory_pool, bool) or not isinstance(memory_pool, int)
    ):
        raise ValueError(f"memory_pool must be 'default', 'new' or an int, got {memory_pool!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 1:
        raise ValueError(f"warmup must be an int >= 1 (eager calls before capture), got {warmup!r}")
    pool_id = memory_pool if isinstance(memory_pool, int) else None
    forward = getattr(function, "forward", None)
    if callable(forward) and not isinstance(function, _GraphedCallable):
        function.forward = _GraphedCallable(_unwrapped(forward), mode, pool_id, warmup)
        return function
    return _GraphedCallable(_unwrapped(function), mode, pool_id, warmup)


def _unwrapped(function):
    """The function a second ``wrap_cuda_graph`` wraps: the first one's, with a warning.

    NOTE: wrapping the wrapper would nest them: the inner one captures during the outer's
    warm-up. Paddle's ``to_static`` warns and "redecorates to replace the previous one".
    """
    if not isinstance(function, _GraphedCallable):
        return function
    warnings.warn(
        "wrap_cuda_graph: this function (or layer's forward) is already wrapped; the new "
        "wrapping replaces the previous one (its graph is dropped: warm-up and capture start "
        "again). Wrap once, or keep the object the first call returned.",
        GraphWarning,
        stacklevel=3,
    )
    return function._function


class _GraphedCallable:
    """What :func:`wrap_cuda_graph` returns: warm up, capture once, then replay."""

    def __init__(self, function, mode: str, pool_id, warmup: int):
        self._function = function
        self._graph = CUDAGraph(mode=mode, pool_id=pool_id)
        self._warmup_left = warmup
        self._inputs = None
        self._outputs = None

    def __call__(self, *args, **kwargs):
        if self._warmup_left:
            outputs = self._function(*args, **kwargs)
            self._warmup_left -= 1  # (after the call: one that raised has not warmed up)
            return outputs
        inputs = arguments_seen(args, kwargs)
        if self._inputs is None:
            with graph(self._graph):
                self._outputs = self._function(*args, **kwargs)
            self._inputs = inputs
        elif len(inputs) != len(self._inputs) or not all(map(same_argument, inputs, self._inputs)):
            raise GraphError(
                "a graphed function must get the same arguments at every call: the graph "
                "reads the captured call's tensors at their fixed addresses (also those inside "
                "lists, tuples and dicts) and recorded its other arguments' values; copy new "
                "data into the same tensors with Tensor.set_value(...), and pass what changes "
                "as a Tensor"
            )
        self._graph.replay()
        return self._outputs


def graphed(function=None, *, warmup: int = 2, cache_size: int = 8, mode: str = "thread_local"):
    """A training step that replays as a CUDA graph: ``step = graphed(step)`` or ``@graphed``.

    The wrapped step is called as before. Per input signature it runs ``warmup`` times
    eagerly, is then captured once, and every later call copies its arguments into the
    graph's own input tensors and replays the whole step with one launch (PyTorch's
    ``torch.compile(mode="reduce-overhead")`` and ``make_graphed_callables``, for a whole
    step; Paddle's ``wrap_cuda_graph`` with dy2static does the same for a static program).

    - **Inputs** are the Tensors among the arguments, also inside lists, tuples and dicts:
      each call's values are copied into static copies made for the signature, so a new
      batch each call is fine. A Tensor that requires grad (a Parameter, a weight made by
      hand) is used as it is, keyed by identity; when one that is not a Parameter is another
      tensor than at the previous call, those calls run eagerly (eager's gradients) after one
      warning. The step must not write into its other arguments: it sees the copies (a
      warm-up call's outputs do not).
    - **The signature** is every Tensor's shape, dtype and device plus the other arguments'
      values (numbers, strings; other objects by identity; unhashable ones are refused;
      keyword arguments in any order).
      A new one warms up and captures again; at most ``cache_size`` graphs are kept, the
      least recently used is dropped (with one warning: the step changes shape too often).
    - **Outputs** are the tensors the capture returned: the same objects at every replay,
      overwritten by the next one. Read what you keep before the next call (``loss.item()``)
      or copy it (``kept.copy_(loss)``).
    - **Host work inside the step** (a scheduler's ``step()``, Python counters, logging) runs
      only at the capture. The learning rate follows its scheduler anyway (see HostFed).
    - **When it cannot capture**, the step runs eagerly for that signature until
      :meth:`GraphedFunction.reset`, after one :class:`GraphWarning` per reason, naming it: a
      float32 matmul (cuBLAS), a host read or upload, which the last warm-up call (a
      rehearsal under the sync debug mode) finds before anything is captured, or an input
      that is not on the current GPU. Only a warm-up call that returns counts as one. A
      step that runs no backward and returns outputs that need one (a forward graphed
      alone) is told, once, to graph the whole training step: a backward on a replay's
      outputs fails.
      Without a GPU the step runs eagerly, after one warning.

    Args:
        function: the step (left out: ``@graphed(warmup=3)`` returns the decorator).
        warmup: eager calls per signature before its capture (at least 1: the first builds
            optimizer state and tables; with 2 or more the last one is the rehearsal).
        cache_size: the most signatures with a graph kept (each holds its own memory pool).
        mode: the capture mode, as :class:`CUDAGraph`.

    Returns:
        a :class:`GraphedFunction` (``cache_info()``, ``reset()``), or the decorator.

    Raises:
        ValueError: a bad warmup, cache_size or mode.

    Example:
        >>> import warnings
        >>> import minitorch_amp as mt
        >>> from minitorch_amp.device.cuda import graphs
        >>> @graphs.graphed
        ... def double(x):
        ...     return x * 2
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore", graphs.GraphWarning)  # on the CPU: eager
        ...     for batch in ([1.0, 2.0], [3.0, 4.0], [5.0, 6.0]):
        ...         y = double(mt.to_tensor(batch))
        >>> y.numpy()
        array([10., 12.], dtype=float32)
    """
    if mode not in CAPTURE_MODES:
        raise ValueError(f"mode must be one of {sorted(CAPTURE_MODES)}, got {mode!r}")
    check_counts(warmup, cache_size)  # (here too: a decorator factory refuses at once)
    if function is None:
        return functools.partial(graphed, warmup=warmup, cache_size=cache_size, mode=mode)
    recorder = _CUDARecorder(mode)
    return GraphedFunction(function, recorder, warmup=warmup, cache_size=cache_size)


class _CUDARecorder:
    """How :func:`graphed` captures: one :class:`CUDAGraph` (its own pool) per signature."""

    def __init__(self, mode: str):
        self.mode = mode

    def unsupported(self) -> str | None:
        if not is_cuda_graph_supported():
            return "this process computes with NumPy on the CPU (no CuPy on an NVIDIA GPU)"
        place = _device.current_place()
        if place.kind != "gpu":
            return f"the current device is {place}"
        return None

    def capture(self, function, args, kwargs):
        g = CUDAGraph(mode=self.mode)
        try:
            with graph(g):
                outputs = function(*args, **kwargs)
        except _cupy_capture_errors() as err:  # what CuPy itself refuses while capturing
            raise GraphError(f"CuPy refused a call: {type(err).__name__}: {err}") from err
        return g, outputs


def _cupy_capture_errors() -> tuple:
    """CuPy's errors for a call that a capture cannot record: cuBLAS raises
    NotImplementedError; a synchronisation, a CUDA error or CuPy's sync detector (on in the
    sync debug mode "error", which graphed() sets during a capture; backend.sync loads it)."""
    errors = [NotImplementedError]
    cupy = _device.cupy
    if cupy is not None:
        errors.append(cupy.cuda.runtime.CUDARuntimeError)
        detector = getattr(getattr(cupy, "_core", None), "syncdetect", None)
        if hasattr(detector, "DeviceSynchronized"):
            errors.append(detector.DeviceSynchronized)
    return tuple(errors)
