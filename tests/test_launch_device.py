"""Work for data on one GPU runs on that GPU, whichever GPU is current; a capture that cannot
begin leaves the device, stream and allocator as they were.

CuPy and two GPUs are stood in for (``benchmarks/gpu_stand_in.py``, with arrays that remember
the GPU that was current when they were made): each raw launch records the current GPU and
its array arguments' GPUs, which must agree, as ``cast.cast`` and ``gemm_gpu.launch`` already
do ("launch where the data is")."""

from __future__ import annotations

import contextlib
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp.backend import device as _device
from minitorch_amp.backend import fp8_gemm, fp8_kernels, graphs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import gpu_stand_in

CURRENT = [0]  # the stood-in current GPU


class TwoGpuDevice(gpu_stand_in.StandInDevice):
    """A stood-in GPU whose ``with`` makes it current, as CuPy's ``Device`` does."""

    def __init__(self, index: int = 0, hopper: bool = True):
        super().__init__(index, hopper)
        self.id = index

    def __enter__(self):
        self._previous = CURRENT[0]
        CURRENT[0] = self.id
        return self

    def __exit__(self, *exc):
        CURRENT[0] = self._previous
        return False

    def use(self):
        CURRENT[0] = self.id


class OnGpu(gpu_stand_in.StandInArray):
    """A stood-in array that remembers the GPU current when it was made."""

    def __array_finalize__(self, obj):
        self.gpu = getattr(obj, "gpu", CURRENT[0])

    @property
    def device(self):
        return TwoGpuDevice(self.gpu)


@pytest.fixture
def two_gpus(monkeypatch):
    """``(launches, on)``: every raw launch as ``(name, current GPU, [its arrays' GPUs])``,
    and ``on(i, array)``, a copy of ``array`` made on GPU ``i``."""
    monkeypatch.setattr(gpu_stand_in, "StandInArray", OnGpu)
    monkeypatch.setattr(gpu_stand_in.StandInCupy, "ndarray", OnGpu)
    wrap = gpu_stand_in.wrap
    monkeypatch.setattr(gpu_stand_in, "wrap", lambda out, array_type=OnGpu: wrap(out, OnGpu))
    cupy = gpu_stand_in.StandInCupy()
    cupy.cuda.Device = TwoGpuDevice
    cupy.cuda.runtime.getDevice = lambda: CURRENT[0]
    cupy.cuda.runtime.getDeviceCount = lambda: 2

    def asarray(a, dtype=None):
        if isinstance(a, OnGpu):
            return a if dtype is None else a.astype(dtype)
        out = np.array(a, dtype=dtype).view(OnGpu)
        out.gpu = CURRENT[0]
        return out

    cupy.asarray = cupy.array = asarray
    launches = []

    def launch(file, name, grid, block, args, shared_mem=0):
        gpus = [a.gpu for a in args if isinstance(a, OnGpu)]
        launches.append((name, CURRENT[0], gpus))

    def on(index, array):
        with TwoGpuDevice(index):
            return asarray(np.asarray(array))

    CURRENT[0] = 0
    with gpu_stand_in.stand_in(cupy=cupy, launch=launch):
        yield launches, on
    CURRENT[0] = 0


def assert_launched_where_their_arrays_are(launches):
    assert launches
    for name, current, gpus in launches:
        assert set(gpus) == {current}, f"{name} launched on gpu:{current}, its arrays on {gpus}"


def test_the_fused_optimizer_uploads_its_table_on_the_parameters_gpu(two_gpus):
    launches, _ = two_gpus
    mt.set_device("gpu:1")
    layer = mt.nn.Linear(4, 4)
    opt = mt.optimizer.SGD(learning_rate=0.1, parameters=layer.parameters())
    layer(mt.ones([2, 4])).sum().backward()
    mt.set_device("gpu:0")  # another model's GPU is current now
    launches.clear()
    opt.step()
    assert [name for name, *_ in launches] == ["sgd_step<float, float>"]
    assert_launched_where_their_arrays_are(launches)
    assert CURRENT[0] == 0  # and the current GPU is left as it was


@pytest.mark.parametrize("transposed", [False, True])
def test_an_fp8_cast_allocates_and_launches_on_its_inputs_gpu(two_gpus, transposed):
    launches, on = two_gpus
    x = on(1, np.ones((64, 64), np.float16))
    scale = on(1, np.ones(1, np.float32))
    cast = fp8_kernels.cast_transpose_fp8 if transposed else fp8_kernels.cast_fp8_with_amax
    for _ in range(2):  # the first call plans the launch, the second reuses it
        *outs, amax = cast(x, scale, 0)
        assert [o.gpu for o in (*outs, amax)] == [1] * (len(outs) + 1)
    assert len(launches) == 2
    assert_launched_where_their_arrays_are(launches)
    assert CURRENT[0] == 0


def test_a_misaligned_fp8_cast_input_is_copied_on_its_own_gpu(two_gpus):
    launches, on = two_gpus
    x = on(1, np.ones((65, 64), np.float16))[1:]  # 128 bytes in: contiguous, not its start
    x = x.reshape(-1)[1:]  # 2 bytes off a 16-byte boundary
    out, amax = fp8_kernels.cast_fp8_with_amax(x, on(1, np.ones(1, np.float32)), 0)
    assert (out.gpu, amax.gpu) == (1, 1)
    assert_launched_where_their_arrays_are(launches)


def test_an_fp8_gemm_allocates_and_launches_on_its_operands_gpu(two_gpus):
    launches, on = two_gpus
    a = on(1, np.zeros((128, 128), np.uint8)).view(mt.float8_e4m3fn)
    b_t = on(1, np.zeros((128, 128), np.uint8)).view(mt.float8_e4m3fn)
    one = on(1, np.ones(1, np.float32))
    for _ in range(2):  # the first call plans the launch, the second reuses it
        out = fp8_gemm.fp8_gemm_nt(a, b_t, one, one, np.float32)
        assert out.gpu == 1
    assert len(launches) == 2
    assert_launched_where_their_arrays_are(launches)


@pytest.mark.usefixtures("two_gpus")
def test_a_host_fed_value_is_written_on_its_buffers_gpu(monkeypatch):
    lr = graphs.HostFed(_device.Place("gpu", 1), np.float32)
    filled_on = []
    fill = OnGpu.fill
    monkeypatch.setattr(OnGpu, "fill", lambda a, v: (filled_on.append(CURRENT[0]), fill(a, v)))
    lr.follow(lambda: 0.5)
    assert lr.array.gpu == 1 and filled_on == [1] and float(lr.array[0]) == 0.5
    assert CURRENT[0] == 0


# ---- a capture that cannot begin ----------------------------------------------------------
class _Stream:
    def __init__(self, state, name="capture stream"):
        self.state, self.name = state, name

    def wait_event(self, event):
        pass

    def record(self):
        return object()

    def __enter__(self):
        self._previous, self.state["stream"] = self.state["stream"], self.name
        return self

    def __exit__(self, *exc):
        self.state["stream"] = self._previous

    def begin_capture(self, mode=None):
        raise RuntimeError("cudaErrorStreamCaptureUnsupported (stood in)")


def test_a_capture_that_cannot_begin_leaves_device_stream_and_allocator_as_they_were(
    monkeypatch,
):
    state = {"allocator": "default", "stream": "legacy", "device": 0}

    @contextlib.contextmanager
    def using_allocator(malloc):
        previous, state["allocator"] = state["allocator"], "the graph's pool"
        try:
            yield
        finally:
            state["allocator"] = previous

    class Device:
        def __init__(self, index=0):
            self.index = index

        def __enter__(self):
            self._previous, state["device"] = state["device"], self.index

        def __exit__(self, *exc):
            state["device"] = self._previous

    cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(is_hip=False),
        MemoryPool=object,
        Device=Device,
        Stream=lambda non_blocking=False: _Stream(state),
        get_current_stream=lambda: _Stream(state, "legacy"),
        using_allocator=using_allocator,
    )
    monkeypatch.setattr(_device, "cupy", types.SimpleNamespace(cuda=cuda))
    capture = graphs.Capture(1)  # on gpu:1 while gpu:0 is current
    with pytest.raises(RuntimeError, match="CaptureUnsupported"):
        capture.begin()
    assert state == {"allocator": "default", "stream": "legacy", "device": 0}
    assert graphs.active() is None and capture._exit is None
