"""PyTorch's ``torch.cuda.amp.GradScaler`` (``minitorch_amp.cuda.amp.GradScaler``).

Paddle's :class:`~minitorch_amp.amp.GradScaler` in every respect (it takes either argument
form) but two, where PyTorch's answer is kept: its ``state_dict()`` has PyTorch's keys, so a
checkpoint written through PyTorch's spelling loads into ``torch.amp.GradScaler`` and back
(both scalers load both forms), and a disabled one's ``get_scale()`` is 1.0 (Paddle: 0.0).
"""

from __future__ import annotations

from .grad_scaler import GradScaler as _PaddleGradScaler

__all__ = ["GradScaler"]


class GradScaler(_PaddleGradScaler):
    """``cuda.amp.GradScaler``: a :class:`minitorch_amp.amp.GradScaler` that saves PyTorch's
    state dict keys (``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval``,
    ``_growth_tracker``) and, disabled, answers ``get_scale()`` with PyTorch's 1.0.

    Example:
        >>> import minitorch_amp as mt
        >>> scaler = mt.cuda.amp.GradScaler(init_scale=1024.0, growth_interval=100)
        >>> for key, value in scaler.state_dict().items():
        ...     print(key, value)
        scale 1024.0
        growth_factor 2.0
        backoff_factor 0.5
        growth_interval 100
        _growth_tracker 0
    """

    _state_dict_form = "torch"
    _disabled_scale = 1.0
