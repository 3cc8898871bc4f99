"""``backend/row_sums.py``: LayerNorm's and softmax's row and column sums, BLAS on the CPU and
reductions on a GPU (which a CUDA graph can capture; cuBLAS cannot be called while a stream
is captured). On the CPU the reductions (the GPU's formulas, run by NumPy) agree with the
BLAS sums; on a GPU a GPT's O2 step is captured and replays its eager losses.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp.backend import row_sums

ROOT = Path(__file__).resolve().parents[1]
SHAPES = [(1, 1), (7, 40), (64, 128), (3, 5, 9), (2, 0)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_the_cpu_sums_agree_with_the_reductions_a_gpu_runs(shape, dtype):
    rng = np.random.default_rng(sum(shape))
    a, b = (rng.standard_normal(shape).astype(dtype) for _ in "ab")
    tol = {"float32": 2e-6, "float64": 1e-14}[dtype]
    pairs = [
        (row_sums.row_dots(a), row_sums.reduced_row_dots(a)),
        (row_sums.row_dots(a, b), row_sums.reduced_row_dots(a, b)),
    ]
    if shape[-1]:  # (the mean of no columns is NaN both ways, with a warning)
        pairs.append((row_sums.row_means(a), row_sums.reduced_row_means(a)))
    if len(shape) == 2:
        pairs.append((row_sums.column_dots(a, b), row_sums.reduced_column_dots(a, b)))
    for cpu, gpu in pairs:
        assert cpu.dtype == gpu.dtype == np.dtype(dtype) and cpu.shape == gpu.shape
        scale = max(float(np.abs(a).sum()), 1.0)  # the sums' size, not each result's
        np.testing.assert_allclose(cpu, gpu, rtol=0, atol=tol * scale)


def test_other_dtypes_take_the_reduction():
    a = np.arange(12, dtype=np.float16).reshape(3, 4)
    np.testing.assert_array_equal(row_sums.row_dots(a, a), row_sums.reduced_row_dots(a, a))
    np.testing.assert_array_equal(row_sums.row_means(a), row_sums.reduced_row_means(a))
    np.testing.assert_array_equal(row_sums.column_dots(a, a), row_sums.reduced_column_dots(a, a))


@pytest.mark.gpu
def test_on_a_gpu_the_sums_are_reductions_with_the_cpu_values():
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((64, 128)).astype("float32") for _ in "ab")
    da, db = (mt.to_tensor(x, place="gpu:0")._data for x in (a, b))
    for name, args in (("row_dots", (a, b)), ("row_means", (a,)), ("column_dots", (a, b))):
        gpu = getattr(row_sums, name)(*(da, db)[: len(args)])
        np.testing.assert_allclose(gpu.get(), getattr(row_sums, name)(*args), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_on_a_gpu_a_gpt_o2_step_is_captured_and_replays_its_eager_losses(monkeypatch):
    """LayerNorm, softmax, GELU, AdamW with clipping and a schedule, GradScaler: the whole
    step of examples/gpt.py (a small one, as benchmarks/gpt_step.py runs it) replayed as a
    CUDA graph, no eager fallback."""
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import gpt_step

    def run(graph: bool):
        mt.seed(0)
        model = gpt_step.gpt.GPT(20, context=16, width=32, num_layers=2, num_heads=2, dropout=0)
        step = gpt_step.ours_training(model, "O2", 1e-3, graph=graph)
        rng = np.random.default_rng(3)
        batches = [[mt.to_tensor(rng.integers(0, 20, (4, 16))) for _ in "xy"] for _ in range(6)]
        return [step(x, y).item() for x, y in batches], step

    eager, _ = run(graph=False)
    losses, graphed_step = run(graph=True)
    # NOTE: not bit for bit: the embeddings' gradients are CuPy's scatter_add, atomic adds
    # whose order over repeated tokens varies from run to run, eager or replayed
    np.testing.assert_allclose(losses, eager, rtol=2e-3)
    captures, replays = graphed_step.step.cache_info()[:2]
    assert captures == 1 and replays == 4  # two warm-up calls, then one capture replayed
