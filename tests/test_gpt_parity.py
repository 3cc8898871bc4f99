"""The example's GPT (4 layers, 4 heads, width 128, context 64, dropout 0) computes the same
fp32 losses as the same model in PyTorch: benchmarks/gpt_step.py's parity run.

PyTorch is what the benchmark compares against and no dependency of the tests: without it
this test skips.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_fp32_loss_tracks_pytorch_within_1e_5_over_40_steps(monkeypatch, cpu):
    torch = pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    threadpool_limits = pytest.importorskip("threadpoolctl").threadpool_limits
    import gpt_step

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # NOTE: two thread pools spinning on two cores slow both 20-fold
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            losses = gpt_step.parity(40, batch=16, device=torch.device("cpu"))
    finally:
        torch.set_num_threads(threads)
    ours, theirs = np.array(losses).T
    assert ours[-1] < ours[0] - 0.5  # it trained
    assert np.max(np.abs(ours - theirs)) <= 1e-5
