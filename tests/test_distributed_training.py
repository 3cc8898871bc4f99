"""Distributed training, specified against single-process training (issue 8).

One ``mpiexec -n 2`` run (``dist/train_worker.py``) trains the model of ``dist_training.py``
in several ways; each test compares what the ranks saved with a single-process run made
here, in this process, on the concatenated batch.

Tolerances: averaging two half-batch gradients is the full-batch gradient up to float32
rounding (the order of the sums differs). Under O2 each rank's float16 gradient is rounded
before the average, so the ranks' gradients differ from the full-batch float16 gradient by
about one float16 rounding; after a few Adam steps the fp32 master weights agree to ~1e-4.
"""

from __future__ import annotations

import numpy as np
import pytest
from dist_training import STEPS_ALL, build, masters_of, params_of, state_bytes, train
from mpi_run import run_mpi

import minitorch_amp as mt

SCENARIOS = ["dp-fp32", "dp-O2", "os-O2", "os_g-O2", "inf-dp", "inf-os_g", "accum", "ckpt",
             "dp-O2+clip", "os_g-O2+clip", "mismatch", "os-O2+small", "os_g-O2+small"]  # fmt: skip
FP32_TOL = {"rtol": 1e-5, "atol": 1e-6}
O2_TOL = {"rtol": 0, "atol": 2e-4}


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """What each of the 2 ranks saved, and the folder of the checkpoint they wrote."""
    tmp = tmp_path_factory.mktemp("dist-train")
    _, results = run_mpi("train_worker.py", 2, *SCENARIOS, tmp_path=tmp, timeout=300)
    return results, tmp / "results-train_worker.py-2" / "checkpoint"


def saved(result: dict, prefix: str) -> dict:
    """``name -> array`` of the entries saved under ``prefix`` (e.g. 'dp-O2/param:')."""
    return {k[len(prefix) :]: v for k, v in result.items() if k.startswith(prefix)}


def assert_same(a: dict, b: dict, **tol) -> None:
    assert a.keys() == b.keys()
    for name in a:
        if tol:
            np.testing.assert_allclose(a[name], b[name], err_msg=name, **tol)
        else:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def single_process(mode: str, steps=STEPS_ALL):
    """The same training in this process, on the whole batch: (params, masters, opt)."""
    model, opt, scaler = build(mode)
    train(model, opt, scaler, mode, steps)
    return params_of(model), masters_of(opt), opt


# ---- DataParallel -----------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["fp32", "O2"])
def test_data_parallel_equals_single_process_on_the_whole_batch(ranks, mode):
    results, _ = ranks
    params, masters, _ = single_process(mode)
    tol = FP32_TOL if mode == "fp32" else O2_TOL
    for result in results:
        if mode == "O2":
            assert_same(saved(result, f"dp-{mode}/master:"), masters, **tol)
        else:
            assert_same(saved(result, f"dp-{mode}/param:"), params, **tol)
    # and the ranks hold bit-identical models
    assert_same(saved(results[0], f"dp-{mode}/param:"), saved(results[1], f"dp-{mode}/param:"))


def test_no_sync_accumulates_locally_then_averages_everything(ranks):
    results, _ = ranks
    params, _, _ = single_process("fp32")
    for result in results:
        assert_same(saved(result, "accum/param:"), params, **FP32_TOL)
    # inside no_sync the ranks' gradients are their own (different batches)
    assert not np.allclose(results[0]["accum/unsynced_grad"], results[1]["accum/unsynced_grad"])


# ---- sharding ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["os-O2", "os_g-O2", "os-O2+small", "os_g-O2+small"])
def test_sharded_o2_training_equals_unsharded_o2_training(ranks, name):
    """Bit for bit: the same fp32 averages, the same fp32 update on the owner, and the
    owner's float16 parameter is what every rank then holds. ('+small': 256-byte buckets
    and broadcast chunks, so everything travels in many pieces.)"""
    results, _ = ranks
    for result in results:
        assert_same(saved(result, f"{name}/param:"), saved(result, "dp-O2/param:"))
    masters = {**saved(results[0], f"{name}/master:"), **saved(results[1], f"{name}/master:")}
    assert_same(masters, saved(results[0], "dp-O2/master:"))


@pytest.mark.parametrize("level", ["os", "os_g"])
def test_each_rank_keeps_about_half_of_the_master_weights_and_moments(ranks, level):
    results, _ = ranks
    owned = [set(r[f"{level}-O2/owned"]) for r in results]
    assert owned[0].isdisjoint(owned[1]) and owned[0] | owned[1] == set(results[0]["dp-O2/owned"])
    for key in ("master_bytes", "moment_bytes"):
        full = results[0][f"dp-O2/{key}"]
        shares = [r[f"{level}-O2/{key}"] for r in results]
        assert sum(shares) == full  # every byte is on exactly one rank
        assert all(0.35 <= s / full <= 0.65 for s in shares), (key, shares, full)


@pytest.mark.parametrize("level", ["os", "os_g"])
def test_each_rank_casts_only_its_own_parameters_once_per_step(ranks, level):
    results, _ = ranks
    for result in results:
        casts = result[f"{level}-O2/casts"]
        assert casts["optimizer"] == len(result[f"{level}-O2/owned"]) * len(STEPS_ALL)
        assert casts["weight"] == 0  # O2: forward reads the float16 copy, never casts it


@pytest.mark.parametrize("level", ["os", "os_g"])
def test_parameters_travel_as_float16_and_only_from_their_owner(ranks, level):
    results, _ = ranks
    fp16_param_bytes = sum(v.size * 2 for v in saved(results[0], "dp-O2/param:").values())
    sent = [r[f"{level}-O2/sent"] for r in results]
    broadcasts = [{k: v for k, v in s.items() if k.startswith("broadcast:")} for s in sent]
    assert all(set(b) == {"broadcast:float16"} for b in broadcasts)
    # each step every parameter is sent once, by its owner, in float16
    assert sum(b["broadcast:float16"] for b in broadcasts) == fp16_param_bytes * len(STEPS_ALL)


def test_os_g_keeps_only_the_owned_gradients(ranks):
    results, _ = ranks
    for result in results:
        for held in result["os_g-O2/grads_held"]:
            assert set(held) == set(result["os_g-O2/owned"])
        for held in result["os-O2/grads_held"]:
            assert set(held) == set(results[0]["dp-O2/owned"])  # 'os' all-reduces everything
    for result in results:  # the gradients go out once, in fp32, with no padding
        sent = result["os_g-O2/sent"]
        assert sent["reduce_scatter:float32"] == result["dp-O2/sent"]["all_reduce:float32"]
        assert "all_reduce:float32" not in sent


def test_a_global_norm_clip_sees_every_ranks_gradients(ranks):
    """Sharded, each rank holds only its gradients: the squared norms are summed over the
    ranks, so the clip equals the unsharded one (up to the order of the sums)."""
    results, _ = ranks
    for result in results:
        clipped = saved(result, "os_g-O2+clip/master:")
        reference = saved(results[0], "dp-O2+clip/master:")
        assert_same(clipped, {k: reference[k] for k in clipped}, **O2_TOL)
        unclipped = saved(results[0], "dp-O2/master:")
        assert max(np.abs(reference[k] - unclipped[k]).max() for k in reference) > 1e-3


def test_different_models_on_the_ranks_fail_on_every_rank_and_change_nothing(ranks):
    results, _ = ranks
    for result in results:
        errors = result["mismatch/errors"]
        assert len(errors) == 2 and all("different models" in e for e in errors)
        assert result["mismatch/n_params"] == 2  # the optimizer was not sharded


# ---- overflow -----------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["dp", "os_g"])
def test_an_inf_on_one_rank_makes_every_rank_skip_the_step(ranks, how):
    results, _ = ranks
    for result in results:
        before = saved(result, f"inf-{how}/before:")
        assert before  # params and masters were saved
        assert_same(saved(result, f"inf-{how}/after:"), before)  # bit-identical
        assert result[f"inf-{how}/scale_after"] == result[f"inf-{how}/scale_before"] / 2


# ---- checkpoints ----------------------------------------------------------------------------
def test_a_rank_restored_from_its_shard_continues_bit_identically(ranks):
    results, _ = ranks
    for result in results:
        assert_same(saved(result, "ckpt/restored:"), saved(result, "ckpt/continued:"))


def test_a_sharded_checkpoint_loads_into_one_process_and_continues(ranks):
    """The gathered checkpoint (rank 0's model.pdmodel + model.pdopt) is a plain
    single-process one: loading it and training on the whole batch continues the run."""
    results, folder = ranks
    model, opt, scaler = build("O2", seed=7)  # a different init: the checkpoint must win
    model.set_state_dict(mt.load(str(folder / "model.pdmodel")))
    opt.set_state_dict(mt.load(str(folder / "model.pdopt")))
    scale = mt.load(str(folder / "scaler.pdparams"), return_numpy=True)["scale"]
    scaler.set_init_loss_scaling(float(np.asarray(scale).reshape(-1)[0]))
    assert set(masters_of(opt)) == set(results[0]["dp-O2/owned"])  # every rank's masters
    train(model, opt, scaler, "O2", [2, 3])
    continued = {**saved(results[0], "ckpt/continued:master:"),
                 **saved(results[1], "ckpt/continued:master:")}  # fmt: skip
    assert_same(masters_of(opt), continued, **O2_TOL)
    n = state_bytes(opt)
    assert n[0] == results[0]["dp-O2/master_bytes"] and n[1] == results[0]["dp-O2/moment_bytes"]


# ---- the same on a GPU (2 ranks share one GPU: MPI with host staging) ------------------------
@pytest.mark.gpu
def test_on_the_gpu_sharding_equals_data_parallel_and_overflow_skips(tmp_path):
    _, results = run_mpi(
        "train_worker.py", 2, "dp-O2", "os_g-O2", "inf-os_g",
        tmp_path=tmp_path, timeout=300, env={"MINITORCH_AMP_DEVICE": "gpu"},
    )  # fmt: skip
    for result in results:
        assert_same(saved(result, "os_g-O2/param:"), saved(result, "dp-O2/param:"))
        assert_same(saved(result, "inf-os_g/after:"), saved(result, "inf-os_g/before:"))
    assert_same(saved(results[0], "dp-O2/param:"), saved(results[1], "dp-O2/param:"))
    _, masters, _ = single_process("O2")  # this process computes on the GPU as well
    assert_same(saved(results[0], "dp-O2/master:"), masters, **O2_TOL)
