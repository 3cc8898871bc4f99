"""The distributed API in one process: arguments, partitioning, wrappers, checkpoints.

Multi-rank behaviour is specified in ``test_distributed_training.py`` (under mpiexec); here a
world of one rank (not launched by mpiexec), or a stand-in communicator that only claims a
rank and a size, checks everything that needs no second process.
"""

from __future__ import annotations

import numpy as np
import pytest
from dist_training import build, masters_of, params_of, train
from hypothesis import given
from hypothesis import strategies as st

import minitorch_amp as mt
from minitorch_amp import amp, nn, optimizer
from minitorch_amp import distributed as dist
from minitorch_amp.backend import comm as _comm
from minitorch_amp.distributed.sharding import (
    ShardedOptimizer,
    gather_optimizer_state_dict,
    group_sharded_parallel,
    partition,
    save_group_sharded_model,
)
from minitorch_amp.nn.parameter import Parameter


@pytest.fixture(autouse=True)
def world_of_one(monkeypatch):
    """Each test starts without a world and leaves none behind."""
    for key in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMIX_SIZE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv(_comm.BACKEND_ENV, raising=False)
    _comm.shutdown()
    yield
    _comm.shutdown()


def stand_in(rank: int, size: int) -> _comm.Comm:
    """A communicator that claims ``rank`` of ``size`` (for code that only asks who it is)."""
    return _comm.Comm(rank, size, timeout=1.0)


# ---- partition ------------------------------------------------------------------------------
@given(st.lists(st.integers(1, 50), min_size=1, max_size=12), st.integers(1, 5))
def test_partition_is_balanced_complete_and_deterministic(sizes, world_size):
    params = [Parameter(np.zeros(n, "float32")) for n in sizes]
    owner = partition(params, world_size)
    assert owner == partition(params, world_size)  # every rank computes the same split
    assert sorted(owner) == sorted(id(p) for p in params)
    loads = [sum(n for p, n in zip(params, sizes) if owner[id(p)] == r) for r in range(world_size)]
    # greedy largest-first: no rank carries more than the lightest one plus one parameter
    assert max(loads) - min(loads) <= max(sizes)


def test_a_sharded_optimizer_keeps_state_only_for_its_parameters():
    model, opt, _ = build("O2")
    sharded = ShardedOptimizer(opt, stand_in(rank=1, size=2))
    mine = sharded._parameter_list
    assert 0 < len(mine) < len(model.parameters())
    assert all(sharded.owner_of(p) == 1 for p in mine)
    assert opt._param_groups[0]["params"] == mine
    assert "rank 1 owns" in repr(sharded)


def test_loading_a_full_state_dict_into_a_shard_keeps_the_owned_part():
    model, opt, scaler = build("O2")
    train(model, opt, scaler, "O2", [0])
    full = opt.state_dict()
    _, opt2, _ = build("O2")  # same parameter names (fixed in dist_training)
    sharded = ShardedOptimizer(opt2, stand_in(rank=0, size=2))
    sharded.set_state_dict(full)
    mine = {p.name for p in sharded._parameter_list}
    assert set(masters_of(sharded)) == mine
    for name in mine:
        np.testing.assert_array_equal(
            masters_of(sharded)[name], full["master_weights"][name].numpy()
        )
    shard = sharded.state_dict()
    assert set(shard["master_weights"]) == mine
    owners = {k.split("_moment")[0].split("_beta")[0] for k in shard if "_0" in k}
    assert owners == {f"{name}_fp32_master_0" for name in mine}  # O2: Paddle's master keys


def test_reduce_scatter_with_unequal_blocks_checks_its_counts():
    comm = dist.init_parallel_env() and _comm.get_world()
    flat = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(comm.reduce_scatter(flat, counts=[5]), flat)  # one rank
    for counts in ([2, 3], [4]):
        with pytest.raises(ValueError, match="one block length per rank"):
            comm.reduce_scatter(flat, counts=counts)


# ---- group_sharded_parallel ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"level": "p_g_os"}, ValueError, "not implemented"),
        ({"level": "zero3"}, ValueError, "level must be one of"),
        ({"level": "os", "offload": True}, ValueError, "offload"),
        ({"level": "os", "group": object()}, ValueError, "group=None"),
        ({"level": "os", "buffer_max_size": 0}, ValueError, "buffer_max_size"),
    ],
)
def test_group_sharded_parallel_rejects_what_it_cannot_do(kwargs, error, match):
    dist.init_parallel_env()
    model, opt, _ = build("fp32")
    with pytest.raises(error, match=match):
        group_sharded_parallel(model, opt, **kwargs)
    assert opt._parameter_list == model.parameters()  # nothing was sharded


def test_group_sharded_parallel_checks_model_and_optimizer():
    dist.init_parallel_env()
    model, opt, _ = build("fp32")
    with pytest.raises(TypeError, match="bare model"):
        group_sharded_parallel(dist.DataParallel(model), opt, "os")
    with pytest.raises(TypeError, match="optimizer"):
        group_sharded_parallel(model, object(), "os")
    other = optimizer.SGD(0.1, parameters=nn.Linear(2, 2).parameters())
    with pytest.raises(ValueError, match="not the model's"):
        group_sharded_parallel(model, other, "os")


def test_sharding_needs_the_parallel_environment():
    model, opt, _ = build("fp32")
    with pytest.raises(RuntimeError, match="init_parallel_env"):
        group_sharded_parallel(model, opt, "os_g")


@pytest.mark.parametrize("level", ["os", "os_g"])
def test_in_a_world_of_one_sharded_training_is_plain_training(level):
    dist.init_parallel_env()
    params, masters = {}, {}
    for sharded in (False, True):
        model, opt, scaler = build("O2")
        if sharded:
            model, opt, scaler = group_sharded_parallel(model, opt, level, scaler)
        train(model, opt, scaler, "O2", range(3))
        params[sharded], masters[sharded] = params_of(model), masters_of(opt)
    for name in params[False]:
        np.testing.assert_array_equal(params[True][name], params[False][name])
        np.testing.assert_array_equal(masters[True][name], masters[False][name])


def test_gathered_state_and_saved_model_load_into_a_plain_optimizer(tmp_path):
    dist.init_parallel_env()
    model, opt, scaler = build("O2")
    model, opt, scaler = group_sharded_parallel(model, opt, "os_g", scaler)
    train(model, opt, scaler, "O2", range(2))
    full = gather_optimizer_state_dict(opt)
    assert set(full) == set(opt.state_dict())
    save_group_sharded_model(model, str(tmp_path / "ckpt"), opt)
    plain_model, plain_opt, _ = build("O2", seed=5)
    plain_model.set_state_dict(mt.load(str(tmp_path / "ckpt" / "model.pdmodel")))
    plain_opt.set_state_dict(mt.load(str(tmp_path / "ckpt" / "model.pdopt")))
    for name, value in masters_of(opt).items():
        np.testing.assert_array_equal(masters_of(plain_opt)[name], value)
    for name, value in params_of(model).items():
        np.testing.assert_array_equal(params_of(plain_model)[name], value)
    with pytest.raises(TypeError, match="group_sharded_parallel"):
        gather_optimizer_state_dict(plain_opt)
    with pytest.raises(ValueError, match="dst"):
        gather_optimizer_state_dict(opt, dst=3)


# ---- DataParallel ---------------------------------------------------------------------------
def test_data_parallel_checkpoints_are_the_bare_models():
    dist.init_parallel_env()
    inner = nn.Linear(3, 2)
    model = dist.DataParallel(inner)
    assert list(model.state_dict()) == list(inner.state_dict())  # no '_layers.' prefix
    assert model.weight is inner.weight  # attributes reach the wrapped model
    state = {k: mt.zeros(v.shape) for k, v in inner.state_dict().items()}
    model.set_state_dict(state)
    assert float(inner.weight.abs().sum().numpy()) == 0.0


def test_data_parallel_rejects_bad_arguments():
    with pytest.raises(RuntimeError, match="init_parallel_env"):
        dist.DataParallel(nn.Linear(2, 2))
    dist.init_parallel_env()
    with pytest.raises(TypeError, match="wraps a Layer"):
        dist.DataParallel(object())
    with pytest.raises(ValueError, match="comm_buffer_size"):
        dist.DataParallel(nn.Linear(2, 2), comm_buffer_size=0)
    with pytest.raises(ValueError, match="group=None"):
        dist.DataParallel(nn.Linear(2, 2), group=1)


def test_decorate_before_data_parallel_as_in_paddle():
    dist.init_parallel_env()
    model = dist.DataParallel(nn.Linear(2, 2))
    with pytest.raises(RuntimeError, match=r"first use paddle\.amp\.decorate"):
        amp.decorate(model, level="O2")


def test_decorate_reaches_through_a_sharded_optimizer():
    dist.init_parallel_env()
    model = nn.Linear(2, 2)
    opt = optimizer.Adam(0.1, parameters=model.parameters())
    model, sharded, _ = group_sharded_parallel(model, opt, "os")
    out_model, out_opt = amp.decorate(model._layers, sharded, level="O2")
    assert out_opt is sharded and opt._multi_precision
    assert out_model.weight.dtype == mt.float16
