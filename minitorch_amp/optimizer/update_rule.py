"""``UpdateRule``: what an optimizer subclass writes, its state and its maths, in one place.

An optimizer is a parameter-group manager (``optimizer.py``) plus an update rule: the
accumulators it keeps (:meth:`UpdateRule._state_layout`), its maths on arrays
(:meth:`UpdateRule._update`, and :meth:`UpdateRule._advance` for per-tensor state), the
per-parameter scalars a step reads (:meth:`UpdateRule._record`), and the ``cuda/optim.cu``
kernel that computes the same maths (``_kernel``, :meth:`UpdateRule._kernel_scalars`).
``_update`` is written once: it is the CPU path, the twin on CuPy, and the specification the
kernel is held to bit for bit (``bucket.py`` runs it; ``tests/test_fused_optim_kernel.py``).
"""

from __future__ import annotations

from ..backend import device as _device
from ..backend import dtypes as _dtypes
from ..regularizer import L2Decay
from .bucket import Record
from .param_groups import check_floating, own_settings


class UpdateRule:
    """The hooks a subclass overrides (SGD, Momentum, Adam, AdamW); see the module docstring."""

    _kernel: str | None = None  # the optim.cu kernel that does this class's _update ('adam')

    def _state_layout(self, group: dict) -> dict:
        """The accumulators: ``{name: (per, initial value)}``, ``per`` being ``'element'``
        (one value per parameter element, e.g. a moment) or ``'tensor'`` (one per parameter,
        shape [1], e.g. Adam's ``beta1_pow_acc``). In the kernel's order: per-element first.
        They are float32 for float16 parameters (as Paddle), else the parameter's dtype."""
        return {}

    def _update(self, p, g, state: dict, lr, hyper: dict) -> None:
        """The optimizer's maths on arrays: update ``p`` and ``state`` in place.

        The one spelling of the maths: the CPU path, the twin on CuPy, and the specification
        that ``cuda/optim.cu`` computes bit for bit (the same float32 operations in the same
        order). Called once per run of parameters with the same scalars, on flat arrays.

        Args:
            p: the parameter values (float32 or wider: the fp32 master under O2), in place.
            g: the gradient after clipping and weight decay, same shape; do not modify it.
            state: ``{name: array}`` (see :meth:`_state_layout`): per-element ones like
                ``p``, per-tensor ones broadcastable to it. Update the per-element ones in
                place; per-tensor ones advance in :meth:`_advance`.
            lr: the learning rate for these parameters (the ratios applied), in ``p``'s
                dtype's wide type: float64 for float64 parameters, else float32.
            hyper: the parameter group (``beta1``, ...) and ``'decay'``: the float32 factor
                ``1 - lr * coeff`` of AdamW's decoupled decay, or None.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement _update()")

    def _advance(self, state: dict, hyper: dict) -> None:
        """Move the per-tensor state one step on, after :meth:`_update` (Adam's beta pows)."""

    def _grad_scale(self, group: dict) -> float:
        """A factor on the gradient (Momentum's): before a fused L2Decay's term, after any
        other regularizer's (``bucket.Bucket.regularized``)."""
        return 1.0

    def _decay_coeff(self, param, group: dict) -> float:
        """The decoupled weight decay coefficient of ``param`` (AdamW's), 0.0 for none."""
        return 0.0

    def _kernel_scalars(self, group: dict) -> tuple:
        """The kernel's hyper-parameters, as ``numpy.float32`` / ``numpy.int32``."""
        return ()

    @classmethod
    def _kernel_kind(cls) -> str | None:
        """The kernel that computes this class's maths: the ``_kernel`` of the class that
        declared it, unless a subclass has written its own ``_update`` or ``_advance``."""
        owner = next((c for c in cls.__mro__ if "_kernel" in vars(c)), None)
        if owner is None or owner._kernel is None:
            return None
        same = cls._update is owner._update and cls._advance is owner._advance
        return owner._kernel if same else None

    def _create_accumulators(self, param, group: dict) -> dict:
        """Fresh state for ``param`` (what a checkpoint is checked against)."""
        data = param._data
        xp = _device.get_array_module(data)
        dtype = _dtypes.accumulation_dtype(data.dtype)
        state = {}
        for name, (per, fill) in self._state_layout(group).items():
            array = xp.full(data.shape if per == "element" else (1,), fill, dtype=dtype)
            state[name] = _device.to_place(array, _device.place_of(data))
        return state

    # Paddle's Optimizer._add_param_group writes a group's weight_decay into each of its
    # parameters' ``regularizer``; AdamW's (whose weight_decay is no regularizer) does not.
    _group_sets_regularizer = True

    def _record(self, param, group: dict) -> Record:
        """``param`` as the update sees it: its lr ratio, weight decay and scalars (read when
        the step's plan is built)."""
        check_floating(param, type(self).__name__)  # (a minimize(parameters=...) extra)
        regularizer = self._own_settings(param, group)[1] or group["_regularizer"]
        l2 = 0.0
        if type(regularizer) is L2Decay and regularizer.coeff != 0.0:
            l2, regularizer = regularizer.coeff, None  # fused into the update, as Paddle does
        return Record(
            param,
            lr_ratio=self._lr_multiplier(param, group),
            l2=l2,
            decay=self._decay_coeff(param, group),
            grad_scale=self._grad_scale(group),
            regularizer=regularizer,
        )

    def _own_settings(self, param, group: dict) -> tuple:
        """``(lr ratio, regularizer)`` of ``param`` in ``group``: its ``ParamAttr``'s (the
        ratio times the group's ``learning_rate``, 1.0 for a plain list of parameters), except
        in a group given as a dict, where the group's replace them.

        Paddle's ``_add_param_group`` writes the group's ``learning_rate`` (default 1.0) into
        ``param.optimize_attr['learning_rate']`` and (but AdamW's) the group's
        ``weight_decay`` (default the optimizer's, a float as ``L2Decay``, None too) into
        ``param.regularizer``. We leave the parameter alone and compute the same numbers: the
        group's value while the parameter's own is what it was when the group took it, the
        parameter's once the user has changed it (in Paddle that change overwrites the value
        the group wrote).
        """
        ratio, regularizer = own_settings(param)
        ratio = 1.0 if ratio is None else float(ratio)
        taken = group.get("_taken")
        if taken is None:  # a plain list of parameters (one group), minimize()'s extras
            return float(group["learning_rate"]) * ratio, regularizer
        ratio_then, regularizer_then = taken[id(param)]
        if ratio == (1.0 if ratio_then is None else ratio_then):
            ratio = float(group["learning_rate"])
        if self._group_sets_regularizer and regularizer is regularizer_then:
            regularizer = group["_regularizer"]
        return ratio, regularizer

    def _lr_multiplier(self, param, group: dict) -> float:
        """The learning-rate ratio of ``param`` (:meth:`_own_settings`): the group's times
        its ``optimize_attr``'s, or in a group given as a dict the group's."""
        return self._own_settings(param, group)[0]
