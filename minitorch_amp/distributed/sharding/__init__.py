"""Optimizer and gradient sharding with optimize-cast (Paddle's ``paddle.distributed.sharding``)."""

from .group_sharded import (
    gather_optimizer_state_dict,
    group_sharded_parallel,
    save_group_sharded_model,
)
from .optimizer import ShardedOptimizer, partition

__all__ = [
    "ShardedOptimizer",
    "gather_optimizer_state_dict",
    "group_sharded_parallel",
    "partition",
    "save_group_sharded_model",
]
