"""FP8 under data parallelism: each delayed-scaling amax is max-reduced over the ranks
before the scale update (Transformer Engine's amax reduction over ``fp8_group``), so every
rank casts with the same scales and the replicas stay identical.

One ``mpiexec -n 2`` run of ``dist/fp8_worker.py``: rank 1's inputs are ten times rank 0's;
rank 0 alone also evaluates a copy of the model with ``reduce_amax=False``.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi_run import run_mpi

from minitorch_amp import amp


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    _, results = run_mpi("fp8_worker.py", 2, tmp_path=tmp_path_factory.mktemp("fp8-dp"))
    return results


def scaling_keys(result: dict) -> list:
    return sorted(k for k in result if k.endswith((".scale", ".amax_history")))


def test_every_rank_ends_with_the_same_scales_and_amax_histories(ranks):
    keys = scaling_keys(ranks[0])
    assert len(keys) == 2 * 3 * 2  # two Linear weights, three roles, scale and history
    for key in keys:
        assert ranks[0][key].tobytes() == ranks[1][key].tobytes(), key


def test_the_input_amax_recorded_is_the_largest_over_the_ranks(ranks):
    history = ranks[0]["_layers.0.weight.input.amax_history"]  # the last 3 steps, oldest first
    expected = [max(r[f"input_amax:{step}"][0] for r in ranks) for step in range(3)]
    assert history[-3:].tolist() == expected
    assert ranks[0]["_layers.0.weight.input.scale"].tolist() == [np.float32(448.0) / max(expected)]


def test_the_replicas_stay_identical(ranks):
    params = [k for k in ranks[0] if k.startswith("param:")]
    assert params
    for key in params:
        assert ranks[0][key].tobytes() == ranks[1][key].tobytes(), key


def test_a_region_on_one_rank_without_amax_reduction_waits_for_no_other(ranks):
    """Rank 0 evaluated a copy under ``reduce_amax=False`` between two training steps (on
    inputs 100 times larger): the run finished, and the scales and replicas above are the
    same on both ranks, untouched by the copy's own states."""
    assert ranks[0]["rank 0 alone"].shape == (4, 4) and "rank 0 alone" not in ranks[1]
    assert np.isfinite(ranks[0]["rank 0 alone"]).all()


def test_fp8_group_names_the_ranks_that_reduce_all_of_them_only():
    amp.fp8_autocast(fp8_group=None)  # TE's default: the whole world
    with pytest.raises(ValueError, match="fp8_group"):
        amp.fp8_autocast(fp8_group=object())


def test_an_fp8_tensor_all_reduces_in_float32_rounded_once(ranks):
    """MPI took no FP8 buffer (a DLPack BufferError on every rank): FP8 goes on the wire as
    float32, as float16 does, and is rounded once on the way back (13 + 26 = 39 -> 40)."""
    for r in ranks:
        assert r["fp8_all_reduce:SUM"].tolist() == [3.0, -6.0, 40.0]
        assert r["fp8_all_reduce:MAX"].tolist() == [1.5, -3.0, 26.0]
