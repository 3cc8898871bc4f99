"""FP8 scaling states in the model's checkpoint (Transformer Engine saves them as each
module's ``extra_state``).

A weight that has run FP8 GEMMs under delayed scaling adds twelve float32 entries to
``Layer.state_dict()``, beside its own::

    <weight's key>._fp8_meta.<input|weight|grad>.<scale|scale_inv|amax_history|fp8_max>

``fp8_max`` (448 for E4M3, 57344 for E5M2) names the format each scale was made for: a scale
is ``fp8_max / amax / 2**margin``, so under the other format it would saturate (or waste) a
whole step's casts. A load under another format is refused, as one with another history
length is. A checkpoint saved before ``fp8_max`` was saved loads without that check.

Plain arrays, so every checkpoint format saves them and a model without FP8 meta (or one
under current scaling, which keeps nothing between steps) saves exactly what it did before.
``set_state_dict`` restores them with the weights, all or nothing: every entry is checked
before anything is written. A weight that already trains in FP8 has its states overwritten
in place (a captured CUDA graph keeps reading the same arrays); one that has not yet run an
FP8 GEMM keeps the loaded state until its first ``fp8_autocast``, whose delayed recipe must
have the saved ``amax_history_len`` (``autocast._take_up``).

Example:
    >>> import minitorch_amp as mt
    >>> from minitorch_amp import amp, nn
    >>> layer = nn.Linear(4, 3)
    >>> with amp.fp8_autocast(recipe=amp.DelayedScaling(amax_history_len=2)):
    ...     _ = layer(mt.ones([2, 4]))
    >>> [key[len("weight._fp8_meta.") :] for key in layer.state_dict() if "_fp8_meta.input" in key]
    ['input.scale', 'input.scale_inv', 'input.amax_history', 'input.fp8_max']
    >>> fresh = nn.Linear(4, 3)
    >>> fresh.set_state_dict(layer.state_dict())
    ([], [])
    >>> amp.fp8_meta(fresh.weight).input.scale.tolist()
    [448.0]
"""

from __future__ import annotations

import numpy as np

from ...autograd.tensor import Tensor
from ...backend import device as _device
from ...backend.dtypes import FP8_MAX
from ...nn.layer.state_dict import extra_state
from .autocast import GemmMeta, fp8_meta, set_fp8_meta
from .recipe import DelayedScaling
from .scaling import ScalingState

__all__ = ["ROLES", "FIELDS", "FORMAT_FIELD", "fp8_entries", "prepare_fp8_load"]

ROLES = ("input", "weight", "grad")
FIELDS = ("scale", "scale_inv", "amax_history")
FORMAT_FIELD = "fp8_max"  # optional on load: older checkpoints lack it
_NAMES = tuple(f"{role}.{field}" for role in ROLES for field in FIELDS)
_FORMAT_NAMES = tuple(f"{role}.{FORMAT_FIELD}" for role in ROLES)
_DTYPE_OF_MAX = {value: np.dtype(dtype) for dtype, value in FP8_MAX.items()}


def fp8_entries(param: Tensor) -> dict:
    """``{'input.scale': Tensor, ...}``: copies of ``param``'s delayed-scaling states and
    each role's ``fp8_max``, or ``{}`` (no FP8 meta, or current scaling)."""
    meta = fp8_meta(param)
    if meta is None or not (meta.recipe is None or isinstance(meta.recipe, DelayedScaling)):
        return {}
    out = {}
    for role in ROLES:
        state = getattr(meta, role)
        for field in FIELDS:
            out[f"{role}.{field}"] = Tensor._wrap(getattr(state, field).copy())
        if state.dtype is not None:  # None: loaded from a checkpoint that did not say
            fp8_max = np.array([FP8_MAX[state.dtype]], np.float32)
            out[f"{role}.{FORMAT_FIELD}"] = Tensor._wrap(_device.to_place(fp8_max, param.place))
    return out


def _refuse(message: str) -> ValueError:
    return ValueError(f"set_state_dict: {message}; nothing was loaded")


def prepare_fp8_load(param: Tensor, key: str, fields: dict):
    """Check the FP8 entries ``fields`` (``{'input.scale': value, ...}``) saved for the
    weight ``key`` and stage them on its device; returns ``commit()``, which writes them.

    Raises:
        ValueError: an unknown or missing entry, values that are not floating-point numbers,
            a scale or inverse of another shape than [1], histories of unequal lengths or of
            another length than the weight's recipe keeps, a scale that is not finite and
            above 0, an inverse other than ``1 / scale`` in float32, a negative amax, an
            ``fp8_max`` that is no FP8 format's or not the format the weight trains with.
    """
    where = f"{key}{extra_state.mark}"
    unknown = [where + name for name in fields if name not in _NAMES + _FORMAT_NAMES]
    if unknown:
        raise _refuse(
            f"unknown FP8 entries {unknown}; each weight saves <role>.<field> with role in "
            f"{ROLES} and field in {FIELDS + (FORMAT_FIELD,)}"
        )
    absent = [where + name for name in _NAMES if name not in fields]
    if absent:
        raise _refuse(f"the FP8 state of {key!r} is incomplete: no {absent}")
    arrays = {name: _floats(where + name, fields[name]) for name in _NAMES}
    lengths = {arrays[f"{role}.amax_history"].shape for role in ROLES}
    for name, array in arrays.items():
        if not name.endswith("amax_history") and array.shape != (1,):
            raise _refuse(f"{where + name!r} has shape {list(array.shape)}, not [1]")
    if len(lengths) != 1 or len(next(iter(lengths))) != 1 or next(iter(lengths))[0] < 1:
        raise _refuse(f"the FP8 amax histories of {key!r} have shapes {sorted(lengths)}")
    length = next(iter(lengths))[0]
    meta = fp8_meta(param)
    training = meta is not None and isinstance(meta.recipe, DelayedScaling)
    if training and meta.recipe.amax_history_len != length:
        raise _refuse(
            f"{key!r} saved an FP8 amax history of {length} steps, but the weight trains with "
            f"DelayedScaling(amax_history_len={meta.recipe.amax_history_len}); load it into a "
            "model that has not run FP8 yet and resume with the saved length, or leave out "
            "the '._fp8_meta.' entries"
        )
    for role in ROLES:
        _check_role(where + role, *(arrays[f"{role}.{field}"] for field in FIELDS))
    dtypes = _saved_formats(key, where, fields, meta if training else None)
    place = param.place
    staged = {name: _device.to_place(array, place) for name, array in arrays.items()}

    def commit() -> None:
        states = [
            ScalingState.restored(*(staged[f"{r}.{f}"] for f in FIELDS), dtype=dtypes[r])
            for r in ROLES
        ]
        if training:  # in place: whatever holds these arrays sees the loaded values
            for role, state in zip(ROLES, states):
                for field in FIELDS:
                    target = getattr(getattr(meta, role), field)
                    _device.get_array_module(target).copyto(target, getattr(state, field))
        else:
            set_fp8_meta(param, GemmMeta(None, *states))

    return commit


def _saved_formats(key: str, where: str, fields: dict, training: GemmMeta | None) -> dict:
    """Each role's saved FP8 dtype (None where the checkpoint does not say), refused unless
    ``fp8_max`` is an FP8 format's largest value and, for a weight that already trains, the
    format its recipe gives that role."""
    dtypes = {}
    for role in ROLES:
        name = f"{role}.{FORMAT_FIELD}"
        if name not in fields:
            dtypes[role] = None
            continue
        value = _floats(where + name, fields[name])
        dtype = _DTYPE_OF_MAX.get(float(value[0])) if value.shape == (1,) else None
        if dtype is None:
            raise _refuse(
                f"{where + name!r} is {value.tolist()}, not [448.0] (E4M3) or [57344.0] (E5M2)"
            )
        if training is not None and getattr(training, role).dtype != dtype:
            raise _refuse(
                f"{key!r} saved the FP8 scales of its {role} for {dtype.name}, but the weight "
                f"trains with {getattr(training, role).dtype.name} there "
                f"(fp8_format={training.recipe.fp8_format.name}); a scale is fp8_max / amax, "
                "so resume with the saved fp8_format, or leave out the '._fp8_meta.' entries"
            )
        dtypes[role] = dtype
    return dtypes


def _floats(name: str, value) -> np.ndarray:
    """``value`` as a float32 host array, refused unless it holds floating-point numbers."""
    array = value._data if isinstance(value, Tensor) else value
    try:
        array = _device.asnumpy(array)
    except (ValueError, TypeError) as exc:
        raise _refuse(f"{name!r} is not an array of numbers ({exc})") from None
    if array.dtype.kind != "f":
        raise _refuse(
            f"{name!r} holds dtype {array.dtype}, not floating-point numbers; an FP8 scaling "
            "state is float32"
        )
    return array.astype(np.float32)


def _check_role(name: str, scale, scale_inv, amax_history) -> None:
    """A scale finite and above 0, its float32 inverse beside it, no negative amax (an
    inf or NaN amax is what an overflowing step records, and loads)."""
    if not (np.isfinite(scale).all() and (scale > 0).all()):
        raise _refuse(f"{name + '.scale'!r} is {scale.tolist()}: a scale is finite and > 0")
    if (np.float32(1.0) / scale).tobytes() != scale_inv.tobytes():
        raise _refuse(
            f"{name + '.scale_inv'!r} is {scale_inv.tolist()}, not 1 / scale = "
            f"{(np.float32(1.0) / scale).tolist()}: the entries do not belong together"
        )
    if (amax_history < 0).any():
        raise _refuse(f"{name + '.amax_history'!r} holds a negative amax")


extra_state.entries = fp8_entries
extra_state.prepare = prepare_fp8_load
