"""ClipGradByGlobalNorm in 2 D + 1 GPU launches (``backend/global_norm.py``, the fourth part
of ``cuda/reduction.cu``), checked without a GPU.

The kernels run on the g++ emulator (``primitives_emulator.cpp``) behind the real launcher,
and each result is held to the bits of the per-gradient path on the same emulator: a
``sum_squares`` launch per gradient, the 0-d additions, sqrt, maximum and division, and a
multiply per gradient (the stand-in's 0-d and elementwise operations are NumPy's, which round
float32 as CuPy's do). On a GPU the same comparison runs against CuPy's own operations.
"""

from __future__ import annotations

import contextlib

import emulated_gpu
import ml_dtypes
import numpy as np
import pytest
from emulated_gpu import HostArray
from test_amp_kernels import assert_same_bits

from minitorch_amp.backend import device, global_norm, kernels
from minitorch_amp.nn.clip import ClipGradByGlobalNorm
from minitorch_amp.nn.parameter import Parameter

bfloat16 = ml_dtypes.bfloat16
# (shape, dtype): a 16-bit and a float32 gradient of several tiles, a bfloat16 one of more
# tiles than one block finishes (16), an empty one, exactly one tile, a scalar
SHAPES = [
    ((3, 5), np.float16),
    ((4097,), np.float32),
    ((70000,), bfloat16),
    ((0,), np.float16),
    ((4096,), np.float32),
    ((), np.float16),
]


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    return emulated_gpu.build("primitives_emulator.cpp", tmp_path_factory.mktemp("emulator"))


@pytest.fixture
def gpu(emulator, monkeypatch):
    """CuPy stood in for by NumPy arrays, ``reduction.cu`` launched on the emulator; the
    list of launches (name, grid) is returned."""
    launches = emulated_gpu.install(emulator, monkeypatch, "reduction.cu", block=256)
    fake = device.cupy
    for name in ("sqrt", "maximum", "multiply"):
        setattr(fake, name, getattr(np, name))
    fake.empty_like = lambda a: np.empty_like(a).view(HostArray)
    monkeypatch.setattr(kernels, "_tables", type(kernels._tables)())
    return launches


def gradients(scale: float, seed: int = 0, specials=()):
    rng = np.random.default_rng(seed)
    grads = [(rng.standard_normal(shape) * scale).astype(dtype) for shape, dtype in SHAPES]
    for index, value in specials:
        grads[index].reshape(-1)[0] = value
    return [emulated_gpu.on_device(g) for g in grads]


def clip(grads, clip_norm, per_gradient=False, monkeypatch=None):
    """The clipped gradients (host arrays), by the fast path or the per-gradient one."""
    params = [Parameter(np.zeros(1, np.float32)) for _ in grads]
    with monkeypatch.context() if per_gradient else contextlib.nullcontext() as patch:
        if per_gradient:
            patch.setattr(global_norm, "applies", lambda grads, outs: False)
        pairs = ClipGradByGlobalNorm(clip_norm)(list(zip(params, grads)))
    return [emulated_gpu.to_host(g._data) for _, g in pairs]


# NOTE: the stand-in's per-gradient path multiplies inf by 0 in NumPy, which warns
@pytest.mark.filterwarnings("ignore:invalid value encountered in multiply:RuntimeWarning")
@pytest.mark.parametrize(
    "scale, clip_norm, specials",
    [
        (1.0, 1.0, ()),  # clipped: the norm is some 270
        (1e-3, 1.0, ()),  # not clipped: scale = clip / clip = 1
        (100.0, 0.5, ()),  # float16 squares far past 65504 (float32 sums)
        (1.0, 1.0, [(2, np.nan)]),  # NaN anywhere: every output NaN
        (1.0, 1.0, [(1, np.inf)]),  # inf: scale 0, inf * 0 NaN, the rest 0
        (1e-4, 3.0, [(0, 2.0**-24)]),  # a float16 subnormal (its square flushes)
    ],
)
def test_the_fast_path_has_the_bits_of_the_per_gradient_path(
    gpu, monkeypatch, scale, clip_norm, specials
):
    grads = gradients(scale, specials=specials)
    want = clip(grads, clip_norm, per_gradient=True, monkeypatch=monkeypatch)
    gpu.clear()
    got = clip(grads, clip_norm)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, i
        assert_same_bits(g, w, f"gradient {i}")
    names = [name for name, _ in gpu]
    assert names == [
        "sum_squares_tensors<__half>",
        "sum_squares_tensors<float>",
        "sum_squares_tensors<__nv_bfloat16>",
        "clip_scale",
        "scale_tensors<__half>",
        "scale_tensors<float>",
        "scale_tensors<__nv_bfloat16>",
    ]


def test_the_per_gradient_path_launches_per_gradient(gpu, monkeypatch):
    """What the fast path replaces: a sum of squares for each gradient (the bfloat16 one of
    18 tiles two), and the stand-in's NumPy for everything after."""
    clip(gradients(1.0), 1.0, per_gradient=True, monkeypatch=monkeypatch)
    assert len(gpu) == len(SHAPES) + 1


def test_a_capped_grid_strides_over_the_tiles_with_the_same_bits(gpu, monkeypatch):
    grads = gradients(1.0, seed=1)
    want = clip(grads, 1.0)
    monkeypatch.setattr(global_norm, "MAX_BLOCKS", 2)
    got = clip(grads, 1.0)
    assert all(grid == (2,) for name, grid in gpu[-7:] if name != "clip_scale")
    for g, w in zip(got, want):
        assert_same_bits(g, w)


def test_the_table_is_uploaded_once_for_the_same_gradients(gpu, monkeypatch):
    built = []
    table = global_norm._table
    monkeypatch.setattr(global_norm, "_table", lambda *args: built.append(1) or table(*args))
    grads = gradients(1.0)
    clipper = ClipGradByGlobalNorm(1.0)
    params = [Parameter(np.zeros(1, np.float32)) for _ in grads]
    for _ in range(3):  # the outputs are the clip's own buffers: the same every step
        clipper(list(zip(params, grads)))
    assert len(built) == 1
    clipper(list(zip(params, gradients(1.0, seed=2))))  # new gradient arrays: a new table
    assert len(built) == 2


def test_only_float_gradients_of_one_device_that_are_contiguous_take_it(gpu):
    g16, g32 = (
        emulated_gpu.on_device(np.ones(4, np.float16)),
        emulated_gpu.on_device(np.ones(4, np.float32)),
    )
    assert global_norm.applies([g16, g32], [g16.copy(), g32.copy()])
    g64 = emulated_gpu.on_device(np.ones(4, np.float64))
    assert not global_norm.applies([g64], [g64.copy()])  # a float64 norm: per gradient
    strided = emulated_gpu.on_device(np.ones(8, np.float32))[::2]
    assert not global_norm.applies([strided], [g32.copy()])
    assert not global_norm.applies([g32], [g16.copy()])  # an output of another dtype
    assert not global_norm.applies([np.ones(4, np.float32)], [np.ones(4, np.float32)])


def test_without_a_gpu_the_numpy_path_runs(monkeypatch):
    monkeypatch.setattr(device, "cupy", None)
    grads = [np.array([3.0, 4.0], np.float32)]
    assert not global_norm.applies(grads, [grads[0].copy()])
    params = [Parameter(np.zeros(2, np.float32))]
    [(_, out)] = ClipGradByGlobalNorm(1.0)(list(zip(params, grads)))
    np.testing.assert_allclose(out.numpy(), [0.6, 0.8], rtol=1e-6)


@pytest.mark.gpu
def test_on_a_gpu_the_fast_path_has_the_bits_of_cupys_own_operations(monkeypatch):
    cupy = device.cupy
    rng = np.random.default_rng(0)
    host = [(rng.standard_normal(shape) * 3).astype(dtype) for shape, dtype in SHAPES]
    grads = [cupy.asarray(g) for g in host]
    params = [Parameter(np.zeros(1, np.float32)) for _ in grads]
    launched = []
    real = kernels.launch
    monkeypatch.setattr(kernels, "launch", lambda *a, **k: launched.append(a[1]) or real(*a, **k))
    got = [cupy.asnumpy(g._data) for _, g in ClipGradByGlobalNorm(1.0)(list(zip(params, grads)))]
    assert len(launched) == 7  # three dtypes: 2 x 3 + 1
    monkeypatch.setattr(global_norm, "applies", lambda grads, outs: False)
    pairs = ClipGradByGlobalNorm(1.0)(list(zip(params, grads)))
    for g, (_, w) in zip(got, pairs):
        assert_same_bits(g, cupy.asnumpy(w._data))


def test_the_environment_reports_check_passes_on_the_emulator(gpu):
    from minitorch_amp.utils.kernel_check_ops import global_norm_matches

    assert global_norm_matches(emulated_gpu.on_device, emulated_gpu.to_host)
    assert [name for name, _ in gpu][-4:] == [  # the fast path ran (on the device side)
        "clip_scale",
        "scale_tensors<__half>",
        "scale_tensors<float>",
        "scale_tensors<__nv_bfloat16>",
    ]


def test_a_clip_called_again_on_the_same_pairs_keeps_its_launches_and_result(gpu, monkeypatch):
    """The second call with the same parameters, gradient tensors and arrays checks and
    plans nothing again, launches the same kernels, and gives the same outputs' bits."""
    grads = gradients(1.0)
    params = [Parameter(np.zeros(1, np.float32)) for _ in grads]
    pairs = list(zip(params, grads))
    clipper = ClipGradByGlobalNorm(1.0)
    first = clipper(pairs)
    want = [emulated_gpu.to_host(g._data).copy() for _, g in first]
    first_launches = list(gpu)
    gpu.clear()
    for name in ("applies", "plan"):
        monkeypatch.setattr(global_norm, name, lambda *args, name=name: pytest.fail(name))
    again = clipper(pairs)
    assert gpu == first_launches
    assert [g for _, g in again] == [g for _, g in first] and again is not first
    for g, w in zip(again, want):
        assert_same_bits(emulated_gpu.to_host(g[1]._data), w)


def test_a_kept_clip_reads_the_clip_norm_of_the_call(gpu, monkeypatch):
    grads = gradients(1.0, seed=3)
    params = [Parameter(np.zeros(1, np.float32)) for _ in grads]
    clipper = ClipGradByGlobalNorm(1.0)
    clipper(list(zip(params, grads)))
    clipper.clip_norm = 0.25
    got = [emulated_gpu.to_host(g._data).copy() for _, g in clipper(list(zip(params, grads)))]
    for g, w in zip(got, clip(grads, 0.25)):  # a fresh clip at 0.25
        assert_same_bits(g, w)


def test_a_clip_plans_anew_when_anything_in_its_pairs_changed(gpu, monkeypatch):
    grads = gradients(1.0, seed=4)
    params = [Parameter(np.zeros(1, np.float32)) for _ in grads]
    clipper = ClipGradByGlobalNorm(1.0)
    planned = []
    real = global_norm.plan
    monkeypatch.setattr(global_norm, "plan", lambda *a: planned.append(1) or real(*a))
    pairs = list(zip(params, grads))
    clipper(pairs)
    other = gradients(1.0, seed=5)
    changes = {
        "another array": lambda: [(p, other[0] if i == 0 else g) for i, (p, g) in enumerate(pairs)],
        "another order": lambda: pairs[::-1],
        "one gradient fewer": lambda: pairs[:-1],
        "no gradient for one": lambda: [
            (p, None if i == 1 else g) for i, (p, g) in enumerate(pairs)
        ],
    }
    for what, changed in changes.items():
        clipper(pairs)
        before = len(planned)
        clipper(changed())
        assert len(planned) == before + 1, what
    from minitorch_amp.autograd.tensor import Tensor

    wrapped = [(p, Tensor._wrap(g)) for p, g in pairs]  # as an optimizer passes them
    clipper(wrapped)
    before = len(planned)
    wrapped[0][1]._data = other[0]  # the same tensor, holding another array
    clipper(wrapped)
    assert len(planned) == before + 1
    clipper(pairs)
    before = len(planned)
    params[2].need_clip = False  # one left out of the norm
    clipper(pairs)
    assert len(planned) == before + 1
    params[2].need_clip = True
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "0")  # raw kernels off: per gradient
    gpu.clear()
    clipper(pairs)
    assert "clip_scale" not in [name for name, _ in gpu]
    assert (len(pairs), id(params[0])) not in clipper._kept  # its plan dropped, not used


def test_a_copy_of_a_clip_keeps_no_launches(gpu):
    import copy
    import pickle

    grads = gradients(1.0)
    params = [Parameter(np.zeros(1, np.float32)) for _ in grads]
    clipper = ClipGradByGlobalNorm(1.0)
    clipper(list(zip(params, grads)))
    assert len(clipper._kept) == 1
    assert copy.deepcopy(clipper)._kept == {}
    restored = pickle.loads(pickle.dumps(clipper))
    assert restored._kept == {} and restored.clip_norm == 1.0


def test_a_clip_shared_by_two_parameter_groups_keeps_both_plans(gpu, monkeypatch):
    """An optimizer's groups share its clip, each group clipped on its own: the two sets of
    pairs take turns, and each finds its own kept plan."""
    grads = gradients(1.0, seed=6)
    params = [Parameter(np.zeros(1, np.float32)) for _ in grads]
    first, second = list(zip(params, grads))[:3], list(zip(params, grads))[3:]
    clipper = ClipGradByGlobalNorm(1.0)
    planned = []
    real = global_norm.plan
    monkeypatch.setattr(global_norm, "plan", lambda *a: planned.append(1) or real(*a))
    want = [emulated_gpu.to_host(g._data).copy() for _, g in clipper(first)]
    clipper(second)
    for _ in range(3):
        got = clipper(first)
        clipper(second)
    assert len(planned) == 2
    for (_, g), w in zip(got, want):
        assert_same_bits(emulated_gpu.to_host(g._data), w)


def test_pairs_given_as_a_generator_are_clipped_like_a_list():
    """The clip reads its pairs twice (the norm, then the results): an iterator is taken
    into a list first, where it gave back no pairs at all."""
    params = [Parameter(np.zeros(2, np.float32)) for _ in range(2)]
    grads = [np.array([3.0, 0.0], np.float32), np.array([0.0, 4.0], np.float32)]
    clipper = ClipGradByGlobalNorm(1.0)
    from_list = clipper(list(zip(params, grads)))
    from_generator = clipper((p, g) for p, g in zip(params, grads))
    assert len(from_generator) == 2
    for (_, a), (_, b) in zip(from_list, from_generator):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_allclose(from_generator[1][1].numpy(), [0.0, 0.8], rtol=1e-6)
