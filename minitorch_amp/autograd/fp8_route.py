"""Where FP8 autocast takes over ``matmul`` and ``linear``.

``minitorch_amp.amp.fp8_autocast`` sets :data:`region` and installs :attr:`Route.gemm`;
autograd never imports amp. ``Tensor.matmul`` (and ``@``) and ``F.linear`` ask
:func:`fp8_gemm` first: it returns the FP8 result, or None when FP8 is off or the operands
do not qualify (then the ordinary op runs).
"""

from __future__ import annotations

import contextvars

# The FP8 autocast state in force here (None: off); set by minitorch_amp.amp.fp8_autocast.
region = contextvars.ContextVar("minitorch_amp_fp8_region", default=None)


class Route:
    """``gemm(kind, state, *inputs, **attrs) -> Tensor | None``, installed by amp.fp8."""

    gemm = None


route = Route()


def fp8_gemm(kind: str, *inputs, **attrs):
    """The FP8 ``kind`` ('matmul' or 'linear') of ``inputs``, or None (run the usual op)."""
    state = region.get()
    if state is None or route.gemm is None:
        return None
    return route.gemm(kind, state, *inputs, **attrs)
