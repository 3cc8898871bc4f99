"""AMP debugging (Paddle's ``paddle.amp.debugging``): operator statistics and NaN/Inf checks.

Both tools plug into the single dispatch point: ``apply`` calls every function in
``hooks.observers`` with ``(op, out)`` after each op's forward. Turning a tool on installs one
observer (a new tuple; the old one is never mutated); turning it off removes exactly that one,
so the observers are what they were before.

Backward calls each op's ``backward`` directly, not through ``apply``, so neither tool sees
gradient computations: the operator counts match Paddle's (it skips ``*_grad`` kernels), and
the checker covers forward outputs only. Gradients are checked by ``GradScaler`` (found_inf).
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
