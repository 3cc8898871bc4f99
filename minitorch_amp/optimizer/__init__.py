"""Optimizers (Paddle's ``paddle.optimizer``): SGD, Momentum, Adam, AdamW and ``lr`` schedulers.

Example:
    >>> import numpy as np
    >>> from minitorch_amp.nn.parameter import Parameter
    >>> from minitorch_amp import optimizer
    >>> w = Parameter(np.array([1.0], dtype="float32"))
    >>> sched = optimizer.lr.StepDecay(learning_rate=0.1, step_size=10)
    >>> opt = optimizer.Momentum(learning_rate=sched, parameters=[w], weight_decay=1e-4)
    >>> opt.get_lr()
    0.1
"""

from . import lr
from .adam import Adam
from .adamw import AdamW
from .momentum import Momentum
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "Momentum", "Optimizer", "lr"]


def __getattr__(name: str):
    """A PyTorch name this package spells differently raises an AttributeError that says
    what to use (``minitorch_amp.pytorch_hints``); called only for names not found."""
    from ..pytorch_hints import missing

    raise missing("minitorch_amp.optimizer", name, names=globals())
