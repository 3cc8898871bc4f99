"""Installation checks, under Paddle's name: ``minitorch_amp.utils.run_check()``.

``python -m minitorch_amp`` prints an environment report (versions, CUDA, the device, each
raw kernel checked against its twin, the environment variables in effect) and then runs
:func:`run_check`.
"""

from .environment import ENVIRONMENT_VARIABLES, collect_env, format_report
from .training_check import run_check

__all__ = ["ENVIRONMENT_VARIABLES", "collect_env", "format_report", "run_check"]
