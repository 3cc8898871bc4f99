"""AMP debugging (Paddle's ``paddle.amp.debugging``): operator statistics and NaN/Inf checks.

Both tools plug into the single dispatch point: ``apply`` calls every function in
``hooks.observers`` with ``(op, out)`` after each op's forward. Turning a tool on installs one
observer (a new tuple; the old one is never mutated); turning it off removes exactly that one,
so the observers are what they were before.

Backward calls each op's ``backward`` directly, not through ``apply``; the checker also
installs a ``hooks.grad_observers`` entry, so it sees each backward's gradients under the
name ``<op>_grad`` (Paddle's ``elementwise_pow_grad`` is our ``pow_grad``). Operator counts
skip backward, as Paddle's do (it skips ``*_grad`` kernels), but not its casts (Paddle's
``cast_grad`` runs the cast kernel), and count the kernels that run outside ``apply`` (the
optimizer's ``adamw_``, the scaler's ``check_finite_and_unscale``, casts: every cast reports
itself, by the dtype it casts from) through ``hooks.counters``.
"""

from .operator_stats import (
    OperatorStats,
    collect_operator_stats,
    disable_operator_stats_collection,
    enable_operator_stats_collection,
)
from .tensor_checker import (
    DebugMode,
    TensorCheckerConfig,
    check_layer_numerics,
    check_numerics,
    disable_tensor_checker,
    enable_tensor_checker,
)

__all__ = [
    "DebugMode",
    "OperatorStats",
    "TensorCheckerConfig",
    "check_layer_numerics",
    "check_numerics",
    "collect_operator_stats",
    "disable_operator_stats_collection",
    "disable_tensor_checker",
    "enable_operator_stats_collection",
    "enable_tensor_checker",
]
