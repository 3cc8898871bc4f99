"""Starting the parallel environment: who am I, how many are we (Paddle's names).

Launch every rank with ``mpiexec -n N python train.py`` (or
``python -m minitorch_amp.distributed.launch --nproc_per_node N train.py``), then call
:func:`init_parallel_env` once, before building ``DataParallel`` or sharding. A script that
was not started by ``mpiexec`` runs as a world of one rank, without MPI.
"""

from __future__ import annotations

from ..backend import comm as _comm

__all__ = [
    "ParallelEnv",
    "barrier",
    "get_backend",
    "get_rank",
    "get_world_size",
    "init_parallel_env",
    "is_initialized",
]


def init_parallel_env(backend: str | None = None, timeout: float | None = None) -> ParallelEnv:
    """Connect this process to the others; safe to call more than once (without arguments,
    or with the ones it was started with: a started world cannot change, and says so).

    Args:
        backend: ``'mpi'``, ``'nccl'`` or ``'local'``. Default: ``MINITORCH_AMP_DIST_BACKEND``,
            else NCCL for GPU tensors with a GPU per rank, MPI for several ranks otherwise,
            local for a single process.
        timeout: seconds a collective waits for the other ranks before raising
            ``CollectiveTimeoutError`` (default ``MINITORCH_AMP_DIST_TIMEOUT``, else 600).

    Returns:
        A :class:`ParallelEnv` describing this rank.

    Example:
        >>> from minitorch_amp import distributed as dist
        >>> env = dist.init_parallel_env()  # not under mpiexec: a world of one
        >>> env.rank, env.world_size, dist.get_backend()
        (0, 1, 'local')
    """
    _comm.init(backend, timeout)
    return ParallelEnv()


def is_initialized() -> bool:
    """Whether :func:`init_parallel_env` has run in this process."""
    return _comm.get_world() is not None


def world() -> _comm.Comm:
    """The communicator; raises if :func:`init_parallel_env` has not run."""
    comm = _comm.get_world()
    if comm is None:
        raise RuntimeError(
            "the parallel environment is not initialized: call "
            "minitorch_amp.distributed.init_parallel_env() first (once, in every rank)"
        )
    return comm


def check_group(group) -> None:
    """Only the world group exists."""
    if group is not None:
        raise ValueError(
            "communication groups are not supported: every collective runs over all ranks; "
            "pass group=None"
        )


def get_rank(group=None) -> int:
    """This process's rank, 0 ... world_size - 1 (0 before ``init_parallel_env``)."""
    check_group(group)
    comm = _comm.get_world()
    return 0 if comm is None else comm.rank


def get_world_size(group=None) -> int:
    """How many ranks take part (1 before ``init_parallel_env``)."""
    check_group(group)
    comm = _comm.get_world()
    return 1 if comm is None else comm.size


def get_backend(group=None) -> str:
    """``'mpi'``, ``'nccl'`` or ``'local'``."""
    check_group(group)
    return world().backend


def barrier(group=None) -> None:
    """Wait until every rank has reached this call (raises on a timeout)."""
    check_group(group)
    world().barrier()  # checked: unchecked, a barrier would pair with any collective


class ParallelEnv:
    """This rank's view of the job (Paddle's ``paddle.distributed.ParallelEnv``)."""

    @property
    def rank(self) -> int:
        return get_rank()

    @property
    def local_rank(self) -> int:
        """This rank's number among the ranks on its machine."""
        return _comm.local_rank()

    @property
    def world_size(self) -> int:
        return get_world_size()

    nranks = world_size

    @property
    def device_id(self) -> int:
        from ..backend import device

        place = device.current_place()
        return place.index if place.kind == "gpu" else 0

    def __repr__(self) -> str:
        return f"ParallelEnv(rank={self.rank}, world_size={self.world_size})"
