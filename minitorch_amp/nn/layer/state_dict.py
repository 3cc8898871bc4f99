"""A layer's state dict: collecting it (with hooks), and loading one by copying in place.

``Layer.state_dict()`` hands out the layer's own tensors, then runs each layer's state-dict
hooks on the result (``decorate(save_dtype=...)`` casts the entries there). Loading goes the
other way and must not replace the tensors, because an optimizer (and its master weights)
holds the very Parameter objects. So values are *copied into* the existing arrays, found
through ``state_dict(use_hook=False)``: a hook's cast copies are not the layer's tensors.

NOTE: the obvious loop (check a key, cast it, copy it, go on) leaves a half-loaded model
behind when the fifth value has the wrong shape, holds strings, or the device runs out of
memory for its cast. So loading validates, then writes: every value is checked and *staged*
(cast to its target's dtype, on its target's device, or on the host when the device has no
room for all of them) before the first byte is written, and writing is then a copy between
arrays of the same shape and dtype that allocates nothing and cannot fail.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict

import ml_dtypes
import numpy as np

from ...autograd import view_writes as _view_writes
from ...autograd.tensor import Tensor
from ...backend import device as _device
from ...backend import dtypes as _dtypes
from ...backend import memory as _memory
from ...backend.cast import cast
from ...backend.error_notes import add_note


class ParamExtraState:
    """State a parameter carries beside its values, saved under ``<its key><mark><field>``:
    the FP8 scaling states (``amp.fp8.checkpoint`` installs the two functions; nn never
    imports amp). ``entries(param) -> {field: Tensor}`` (empty: nothing to save);
    ``prepare(param, key, {field: value}) -> commit``, which checks everything and raises
    ValueError to refuse, while ``commit()`` only writes and cannot fail."""

    mark = "._fp8_meta."
    entries = None
    prepare = None


extra_state = ParamExtraState()


def extra_owner(key: str):
    """The parameter key that ``key`` is extra state of, or None for an ordinary key."""
    if not isinstance(key, str):
        return None
    owner, mark, _ = key.partition(extra_state.mark)
    return owner if mark else None


def collect_state_dict(
    layer, destination, include_sublayers: bool, prefix: str, use_hook: bool
) -> OrderedDict:
    """What ``Layer.state_dict`` returns: parameters, persistable buffers, sublayers, then
    the parameters' extra state (FP8 scaling states; after the hooks, so that
    ``decorate(save_dtype=...)`` cannot round a scale)."""
    out = _collect(layer, destination, include_sublayers, prefix, use_hook)
    if extra_state.entries is not None:
        params = layer.named_parameters(
            prefix=prefix.rstrip("."), include_sublayers=include_sublayers
        )
        for key, param in params:
            for field, value in extra_state.entries(param).items():
                out[key + extra_state.mark + field] = value
    return out


def _collect(layer, destination, include_sublayers: bool, prefix: str, use_hook: bool):
    """Parameters, persistable buffers, then sublayers.

    After a layer's entries and its sublayers' are in, its hooks run on the whole dict so far
    (Paddle's order); a hook returning a value replaces the dict.
    """
    out = OrderedDict() if destination is None else destination
    for name, value in layer._parameters.items():
        if value is not None:
            out[prefix + name] = value
    for name, value in layer._buffers.items():
        if value is not None and name not in layer._non_persistable_buffer_names_set:
            out[prefix + name] = value
    if include_sublayers:
        for name, sub in layer._sub_layers.items():
            if sub is not None:
                out = _collect(sub, out, True, f"{prefix}{name}.", use_hook)
    if use_hook:
        for hook in list(layer._state_dict_hooks.values()):
            result = hook(out)
            if result is not None:
                out = result
    return out


def load_state_dict(layer, state_dict: dict, use_structured_name: bool = True):
    """Copy ``state_dict``'s values into ``layer``'s parameters and persistable buffers.

    Values may be Tensors or arrays (NumPy or CuPy) of numbers, on any device; each is cast to
    the target's dtype (floats round to nearest even) and moved to its device. An integer or
    bool target takes only values it holds exactly; a float target refuses finite values that
    would become inf in its dtype (1e5 into float16), but an inf or NaN in the source loads.
    Keys are structured names (``fc.weight``) or, with ``use_structured_name=False``, the
    tensors' unique names (``linear_0.w_0``).
    All values are loaded, or none.

    Returns:
        ``(missing_keys, unexpected_keys)``, as Paddle's ``set_state_dict`` does; missing
        tensors keep their values and a warning lists them.

    Raises:
        ValueError: a value has the wrong shape, is not numbers (``None``, strings, objects)
            holds numbers its integer target cannot, or finite numbers beyond its float
            target's range; nothing was loaded.
        OutOfMemoryError, MemoryError: no room to stage the values, even on the host;
            nothing was loaded.

    Example:
        >>> from minitorch_amp import nn
        >>> src, dst = nn.Linear(2, 2), nn.Linear(2, 2)
        >>> weight = dst.weight
        >>> dst.set_state_dict(src.state_dict())
        ([], [])
        >>> dst.weight is weight, bool((dst.weight.numpy() == src.weight.numpy()).all())
        (True, True)
    """
    try:
        plan, missing = _plan(layer, state_dict, use_structured_name)
        commits, extra_used = _plan_extra_state(layer, state_dict, use_structured_name)
        staged = _stage_all(plan)
        own = [_own_array(target) for _, target, _ in plan]  # (allocated before any write)
    except ValueError:  # refused: its message says that nothing was loaded
        raise
    except BaseException as exc:
        add_note(exc, "set_state_dict: nothing was loaded; every tensor is as it was")
        raise
    for (_, target, _), array, mine in zip(plan, staged, own):  # all checked: now write
        if mine is not None:
            target._data = mine
        _write(target._data, array)
        target._version += 1  # an optimizer's fp32 master of it must follow
        _view_writes.wrote(target)
    for commit in commits:  # the extra state, checked and staged too
        commit()
    if missing:
        warnings.warn(
            f"set_state_dict: no value for {missing}; those tensors keep their values",
            stacklevel=3,
        )
    used = {name for name, _, _ in plan} | extra_used | set(missing)  # (a key holding None)
    return missing, [k for k in state_dict if k not in used]


def _plan(layer, state_dict: dict, use_structured_name: bool) -> tuple[list, list]:
    """``(name, target, source array)`` for each value to load, and the missing names."""
    plan, missing = [], []
    for key, target in layer.state_dict(use_hook=False).items():
        if extra_owner(key) is not None:  # extra state: _plan_extra_state loads it
            if key not in state_dict and use_structured_name:
                missing.append(key)
            continue
        name = key if use_structured_name else (target.name or key)
        value = state_dict.get(name)
        if value is None:
            missing.append(name)
        else:
            plan.append((name, target, _source_array(name, value, target)))
    return plan, missing


def _plan_extra_state(layer, state_dict: dict, use_structured_name: bool) -> tuple[list, set]:
    """``(commits, keys used)`` for the parameters' extra state in ``state_dict``; each
    ``prepare`` has checked and staged its values (or raised ValueError)."""
    if extra_state.prepare is None:
        return [], set()
    by_owner: dict = {}
    for key, value in state_dict.items():
        owner = extra_owner(key)
        if owner is not None:
            by_owner.setdefault(owner, {})[key[len(owner) + len(extra_state.mark) :]] = value
    commits, used = [], set()
    for key, param in layer.named_parameters():
        name = key if use_structured_name else (param.name or key)
        fields = by_owner.get(name)
        if fields:
            commits.append(extra_state.prepare(param, name, fields))
            used.update(name + extra_state.mark + field for field in fields)
    return commits, used


_NOT_NUMBERS = {"O": "Python objects (None, strings, ...)", "U": "strings", "S": "bytes"}


def _source_array(name: str, value, target: Tensor):
    """``value`` as an array, refused unless it has ``target``'s shape and holds numbers."""
    array = value._data if isinstance(value, Tensor) else value
    if not _device.is_array(array):
        try:
            array = _device.asnumpy(array)  # lists and numbers
        except (ValueError, TypeError) as exc:  # ragged lists, ...
            raise ValueError(
                f"set_state_dict: {name!r} is not an array ({exc}); nothing was loaded"
            ) from None
    if list(array.shape) != target.shape:
        raise ValueError(
            f"set_state_dict: {name!r} has shape {list(array.shape)} in the state dict but "
            f"the layer expects {target.shape}; nothing was loaded"
        )
    if array.dtype.kind not in "biuf" and array.dtype != _dtypes.bfloat16:
        what = _NOT_NUMBERS.get(array.dtype.kind, "no real numbers")
        raise ValueError(
            f"set_state_dict: {name!r} holds {what} (dtype {array.dtype}), which cannot be "
            f"loaded into a {target.dtype} tensor; nothing was loaded. Give an array of "
            f"numbers, e.g. numpy.asarray(value, dtype='{target.dtype}')"
        )
    return array


def _stage_all(plan: list) -> list:
    """Each value as its target will hold it, checked; on the target's device where it has
    room for all of them, on the host otherwise. Writes nothing."""
    need: dict = {}
    for _, target, _ in plan:
        need[target.place] = need.get(target.place, 0) + target._data.nbytes
    room = {place: _memory.memory_available(place) >= n for place, n in need.items()}
    owners = {id(_owner(target._data)) for _, target, _ in plan}
    staged = []
    for name, target, array in plan:
        on_device = room[target.place] or not target._data.flags.c_contiguous
        try:
            staged.append(_stage(name, array, target, target.place if on_device else None, owners))
        except _memory.OOM_ERRORS:
            if not target._data.flags.c_contiguous:
                raise
            staged.append(_stage(name, array, target, None, owners))  # no room after all
    return staged


def _stage(name: str, array, target: Tensor, place, owners: set):
    """``array`` cast to ``target``'s dtype on ``place`` (None: the host), checked.

    The result is never an array that writing another target could change before it is read
    (a state dict may hold the layer's own tensors, even under each other's keys).
    """
    moved = _device.to_place(array, _device.CPU if place is None else place)
    if moved.dtype != target.dtype:
        with np.errstate(over="ignore", invalid="ignore"):  # checked below where it matters
            staged = cast(moved, target.dtype)  # bfloat16: rounded once (backend.cast)
        _check_exact(name, moved, staged, target)
        _check_in_range(name, moved, staged, target)
    elif moved is array and id(_owner(array)) in owners:
        staged = moved.copy()
    else:
        return moved
    if place is not None:
        _memory.track(staged)  # device memory while it lives (the CPU budget counts it)
    return staged


def _check_exact(name: str, source, staged, target: Tensor) -> None:
    """An integer or bool target takes only values it holds exactly."""
    if target.dtype.kind not in "biu" or np.can_cast(source.dtype, target.dtype):
        return
    xp = _device.get_array_module(staged)
    with np.errstate(over="ignore", invalid="ignore"):
        exact = bool(xp.array_equal(staged.astype(source.dtype), source))  # NaN: not equal
    if not exact:
        raise ValueError(
            f"set_state_dict: {name!r} holds values a {target.dtype} tensor cannot hold "
            "exactly (fractions, NaN, inf or out of range); nothing was loaded"
        )


def _check_in_range(name: str, source, staged, target: Tensor) -> None:
    """A float target refuses finite values that became inf in its dtype (1e5 in float16).

    An inf or NaN already in the source loads as it is: the checkpoint held it.
    """
    if not _dtypes.is_floating(target.dtype):
        return
    xp = _device.get_array_module(staged)
    if bool(xp.isfinite(staged).all()):  # the common case: one pass, nothing overflowed
        return
    overflowed = xp.isinf(staged) & xp.isfinite(source)
    if not bool(overflowed.any()):
        return
    largest = float(xp.abs(source[overflowed].astype("float64")).max())
    limit = float(ml_dtypes.finfo(target.dtype).max)
    raise ValueError(
        f"set_state_dict: {name!r} holds {largest:.6g}, beyond the largest {target.dtype} "
        f"({limit:.6g}): it would load as inf; nothing was loaded. Load the checkpoint into a "
        "float32 model (and keep the layers holding such values in float32 when converting), "
        "or rescale those values to fit"
    )


def _own_array(target: Tensor):
    """Memory of its own for a target whose array is a view of another tensor's (a buffer
    registered as ``src.reshape(...)``), as ``set_value`` gives it: loading writes the target,
    not the tensor it was made from behind that one's version. None for an owned array."""
    data = target._data
    if data.base is None:
        return None
    own = _device.get_array_module(data).empty_like(data)
    _memory.track(own)
    return own


def _write(data, staged) -> None:
    """Copy ``staged`` into ``data`` (same shape and dtype): nothing to allocate or fail."""
    if _device.place_of(staged) == _device.place_of(data):
        _device.get_array_module(data).copyto(data, staged)
    else:
        data.set(staged)  # a host array into device memory, without a temporary


def _owner(array):
    """The array that owns ``array``'s memory (``array`` itself unless it is a view)."""
    while _device.is_array(array.base):
        array = array.base
    return array
