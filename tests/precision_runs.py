"""The trainings that docs/bf16.md and docs/fp8.md measure, each run once per test session.

Both pages compare float32, float16 O2, bfloat16 O2 and FP8 O2 on SimpleNet (width 256, batch
64, 20 batches, learning rate 0.01) and on the digits examples at their defaults. The tests
that hold FP8 and bfloat16 to their targets (tests/test_fp8_training.py) and the tests that
compare the pages' tables with the runs (tests/test_docs_precision_numbers.py) share these
runs: each function trains once and remembers its result, so no training runs twice.

NOTE: one BLAS thread, for speed (OpenBLAS's threads made these small GEMMs several times
slower on a busy two-core machine); the results are the same with two. They are not the same
with another OpenBLAS kernel: with OPENBLAS_CORETYPE=Haswell instead of this machine's
SkylakeX, the 16-bit runs' losses differ in the sixth digit and the digits CNN's fp32 run
classifies one test image differently. BLAS_KERNEL names the kernel the pages were measured
with; ``blas_kernel()`` names this machine's.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

from threadpoolctl import threadpool_info, threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

import simple_net  # noqa: E402

BLAS_KERNEL = "SkylakeX"  # OpenBLAS's kernel where docs/bf16.md's and fp8.md's runs were made
# docs/bf16.md and docs/fp8.md: ARGS="--input-size 256 --learning-rate 0.01 --epochs 8"
SIMPLE_NET = dict(input_size=256, batch_size=64, batches=20, learning_rate=0.01)
SIMPLE_NET_EPOCHS = 30  # bf16.md's figure and final-loss table; its epoch table is the first 8


def blas_kernel() -> str:
    """OpenBLAS's kernel on this machine (``threadpoolctl``'s "architecture"), or "unknown"."""
    for pool in threadpool_info():
        if pool.get("internal_api") == "openblas":
            return str(pool.get("architecture"))
    return "unknown"


def simple_net_losses(mode: str, dtype: str = "float16", epochs: int = 8) -> tuple[float, ...]:
    """The mean loss of each epoch of ``python examples/simple_net.py --mode ... $ARGS``.

    The first ``n`` epochs of a longer run are the losses of an ``n``-epoch run (same weights,
    data and steps), so a 30-epoch run answers an 8-epoch question too.
    """
    if epochs < SIMPLE_NET_EPOCHS and dtype != "float8":
        return _simple_net_losses(mode, dtype, SIMPLE_NET_EPOCHS)[:epochs]
    return _simple_net_losses(mode, dtype, epochs)


@functools.cache  # NOTE: positional arguments only: f(a, b=1) and f(a, 1) are two cache keys
def _simple_net_losses(mode: str, dtype: str, epochs: int) -> tuple[float, ...]:
    with threadpool_limits(limits=1, user_api="blas"):
        losses = simple_net.train(
            **SIMPLE_NET, epochs=epochs, mode=mode, dtype=dtype, log=lambda *_: None
        )
    return tuple(losses)


@functools.cache
def digits_data():
    import digits_mlp  # digits_cnn loads the same images; scikit-learn brings them

    return digits_mlp.load_data()


def digits_run(example: str, mode: str, dtype: str = "float16"):
    """``examples/<example>.py``'s ``train(mode, dtype=...)`` at its defaults: a ``Result``."""
    return _digits_run(example, mode, dtype)


@functools.cache
def _digits_run(example: str, mode: str, dtype: str):
    module = __import__(example)
    with threadpool_limits(limits=1, user_api="blas"):
        return module.train(mode, data=digits_data(), log=None, dtype=dtype)
