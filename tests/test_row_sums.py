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
    step of examples/gpt.py (a small one) replayed as a CUDA graph, no eager fallback."""
    from minitorch_amp import amp
    from minitorch_amp.device.cuda.graphs import graphed

    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    import gpt

    def run(wrap):
        mt.seed(0)
        model = gpt.GPT(20, context=16, width=32, num_layers=2, num_heads=2, dropout=0.0)
        opt, schedule = gpt.build_optimizer(model, 1e-3, 8, 2, 0.1)
        model, opt = amp.decorate(models=model, optimizers=opt, level="O2")
        scaler = amp.GradScaler(init_loss_scaling=1024.0)
        cast = gpt.amp_settings("O2")

        def step(x, y):
            loss = gpt.loss_fn(model, x, y, cast)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.clear_grad()
            return loss

        step = wrap(step)
        rng = np.random.default_rng(3)
        losses = []
        for _ in range(6):
            x, y = (mt.to_tensor(rng.integers(0, 20, (4, 16))) for _ in "xy")
            losses.append(step(x, y).item())
            schedule.step()
        return losses, step

    eager, _ = run(lambda step: step)
    losses, graphed_step = run(graphed)
    # NOTE: not bit for bit: the embeddings' gradients are CuPy's scatter_add, atomic adds
    # whose order over repeated tokens varies from run to run, eager or replayed
    np.testing.assert_allclose(losses, eager, rtol=2e-3)
    captures, replays = graphed_step.cache_info()[:2]
    assert captures == 1 and replays == 4  # two warm-up calls, then one capture replayed
