"""Learning-rate schedulers (Paddle's ``paddle.optimizer.lr``).

A scheduler is a function of the epoch counter ``last_epoch``. The optimizer reads the current
value with ``scheduler()``; the user advances it with ``scheduler.step()`` (per batch or per
epoch, their choice). Construction already takes one step, so ``last_epoch`` starts at 0 and
``last_lr`` holds the value for epoch 0.

* ``scheduler.py``: :class:`LRScheduler`, the base (stepping, ``state_dict``).
* ``decay.py``: ``StepDecay``, ``MultiStepDecay``, ``ExponentialDecay``,
  ``CosineAnnealingDecay``, ``LambdaDecay``, ``LinearWarmup``.
* ``formulas.py``: ``NoamDecay``, ``PiecewiseDecay``, ``NaturalExpDecay``, ``InverseTimeDecay``,
  ``PolynomialDecay``, ``MultiplicativeDecay``, ``LinearLR``.
* ``cyclic.py``: ``CyclicLR``, ``CosineAnnealingWarmRestarts``.
* ``plateau.py``: ``ReduceOnPlateau`` (``step(metrics)``: driven by a metric, not the epoch).
* ``one_cycle.py``: ``OneCycleLR``.

Example:
    >>> from minitorch_amp.optimizer import lr
    >>> sched = lr.StepDecay(learning_rate=0.5, step_size=2, gamma=0.1)
    >>> values = []
    >>> for _ in range(5):
    ...     values.append(round(sched(), 6))
    ...     sched.step()
    >>> values
    [0.5, 0.5, 0.05, 0.05, 0.005]
"""

from .cyclic import CosineAnnealingWarmRestarts, CyclicLR
from .decay import (
    CosineAnnealingDecay,
    ExponentialDecay,
    LambdaDecay,
    LinearWarmup,
    MultiStepDecay,
    StepDecay,
)
from .formulas import (
    InverseTimeDecay,
    LinearLR,
    MultiplicativeDecay,
    NaturalExpDecay,
    NoamDecay,
    PiecewiseDecay,
    PolynomialDecay,
)
from .one_cycle import OneCycleLR
from .plateau import ReduceOnPlateau
from .scheduler import LRScheduler

__all__ = [
    "CosineAnnealingDecay",
    "CosineAnnealingWarmRestarts",
    "CyclicLR",
    "ExponentialDecay",
    "InverseTimeDecay",
    "LRScheduler",
    "LambdaDecay",
    "LinearLR",
    "LinearWarmup",
    "MultiStepDecay",
    "MultiplicativeDecay",
    "NaturalExpDecay",
    "NoamDecay",
    "OneCycleLR",
    "PiecewiseDecay",
    "PolynomialDecay",
    "ReduceOnPlateau",
    "StepDecay",
]
