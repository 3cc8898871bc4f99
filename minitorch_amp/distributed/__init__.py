"""Training on several processes: MPI between CPUs (and as the launcher), NCCL between GPUs.

Launch ``N`` ranks with ``mpiexec -n N python train.py`` (or
``python -m minitorch_amp.distributed.launch --nproc_per_node N train.py``); in the script::

    dist.init_parallel_env()
    model = dist.DataParallel(model)           # grads averaged after backward
    # or, with fp32 master weights and moments split across the ranks:
    model, opt, scaler = dist.sharding.group_sharded_parallel(model, opt, "os_g", scaler)

Install MPI with the ``dist`` extra (``mpi4py`` and ``mpich`` from PyPI).
"""

from ..backend.comm import (
    CollectiveMismatchError,
    CollectiveTimeoutError,
    DistributedError,
    RankExitedError,
)
from . import sharding
from .collective import ReduceOp, all_gather, all_reduce, broadcast, reduce_scatter
from .env import (
    ParallelEnv,
    barrier,
    get_backend,
    get_rank,
    get_world_size,
    init_parallel_env,
    is_initialized,
)
from .parallel import DataParallel

__all__ = [
    "CollectiveMismatchError",
    "CollectiveTimeoutError",
    "DataParallel",
    "DistributedError",
    "ParallelEnv",
    "RankExitedError",
    "ReduceOp",
    "all_gather",
    "all_reduce",
    "barrier",
    "broadcast",
    "get_backend",
    "get_rank",
    "get_world_size",
    "init_parallel_env",
    "is_initialized",
    "reduce_scatter",
    "sharding",
]
