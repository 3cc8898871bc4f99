"""``GradScaler``'s arguments in Paddle's form and in PyTorch's, turned into Paddle's names.

=========================  =================================================================
form                       arguments, in order
=========================  =================================================================
Paddle                     ``enable, init_loss_scaling, incr_ratio, decr_ratio,
                           incr_every_n_steps, decr_every_n_nan_or_inf,
                           use_dynamic_loss_scaling`` (the first positional is a bool)
PyTorch, older             ``init_scale, growth_factor, backoff_factor, growth_interval,
                           enabled`` (the first positional is a number)
PyTorch, newer             ``device, init_scale, growth_factor, backoff_factor,
                           growth_interval, enabled`` (the first positional is a string)
=========================  =================================================================

Keywords may use either name (``growth_factor=`` or ``incr_ratio=``), with either form,
as Paddle 3.x accepts. What is refused, with the reason: a keyword given under both names
(ValueError, as Paddle), an argument given by position and again by keyword, too many
positional arguments, a first positional of another type, a flag (``enable``/``enabled``,
``use_dynamic_loss_scaling``) that is not a bool, and an unknown device. A bad value given
under PyTorch's name is refused under that name (``growth_interval must be ...``). So
``GradScaler("cuda")`` is PyTorch's device form, never ``enable="cuda"``. PyTorch's
``step(optimizer, closure)`` and ``update(new_scale)`` are refused too, with what to write
instead (``_NO_CLOSURE``, ``_NO_NEW_SCALE``).
"""

from __future__ import annotations

import numbers

import numpy as np

from .scaler_rules import check_attr
from .torch_autocast import check_device

PADDLE_ORDER = (
    "enable",
    "init_loss_scaling",
    "incr_ratio",
    "decr_ratio",
    "incr_every_n_steps",
    "decr_every_n_nan_or_inf",
    "use_dynamic_loss_scaling",
)
TORCH_ORDER = ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled")
# PyTorch's name -> Paddle's
ALIASES = {
    "enabled": "enable",
    "init_scale": "init_loss_scaling",
    "growth_factor": "incr_ratio",
    "backoff_factor": "decr_ratio",
    "growth_interval": "incr_every_n_steps",
}
EXTRAS = ("min_loss_scaling", "max_loss_scaling", "verbose")  # ours, keyword-only
_FLAGS = ("enable", "use_dynamic_loss_scaling", "verbose")


def _positional_names(cls: str, args: tuple) -> tuple[tuple[str, ...], str | None, tuple]:
    """``(names, device, args)``: which form the positional arguments use."""
    first = args[0]
    if isinstance(first, (bool, np.bool_)):
        return PADDLE_ORDER, None, args
    if isinstance(first, str):
        return TORCH_ORDER, first, args[1:]
    if isinstance(first, numbers.Real):
        return TORCH_ORDER, None, args
    raise TypeError(
        f"{cls}: the first positional argument must be enable (a bool: Paddle's "
        f"{cls}(True, 1024.0)), init_scale (a number: PyTorch's {cls}(1024.0)) or a device "
        f"(a string: PyTorch's {cls}('cuda', 1024.0)); got {first!r}"
    )


def parse_scaler_args(cls: str, args: tuple, kwargs: dict) -> dict:
    """Paddle's keyword arguments (and ours) for ``args`` and ``kwargs`` in any accepted form.

    Raises:
        TypeError: the forms are mixed up (see the module notes for each case).
        ValueError: a keyword under both its names, or an unknown device.
    """
    kwargs = dict(kwargs)
    device = kwargs.pop("device", None)
    names: tuple[str, ...] = ()
    if args:
        names, positional_device, args = _positional_names(cls, args)
        if positional_device is not None:
            if device is not None:
                raise TypeError(f"{cls}() got multiple values for argument 'device'")
            device = positional_device
    if len(args) > len(names):
        form = "Paddle's" if names is PADDLE_ORDER else "PyTorch's"
        raise TypeError(
            f"{cls}() takes at most {len(names)} positional arguments in {form} form "
            f"({', '.join(names)}), got {len(args)}"
        )
    if device is not None:
        check_device(device, cls)  # accepted; the scaler follows the loss's device
    out: dict = {}
    given_as: dict = {}  # Paddle's name -> how it was given, for the messages
    for name, value in zip(names, args):
        key = ALIASES.get(name, name)
        out[key], given_as[key] = value, f"positional argument {name!r}"
    for name, value in kwargs.items():
        if name not in PADDLE_ORDER and name not in ALIASES and name not in EXTRAS:
            known = ", ".join((*PADDLE_ORDER, *ALIASES, *EXTRAS, "device"))
            raise TypeError(f"{cls}() got an unexpected keyword argument {name!r}; known: {known}")
        key = ALIASES.get(name, name)
        if key in out:
            earlier = given_as[key]
            if earlier.startswith("positional"):
                raise TypeError(f"{cls}() got multiple values for {earlier} (and {name}=)")
            raise ValueError(
                f"{cls}() got {earlier} and {name}=, two names of one setting "
                f"(PyTorch's and Paddle's); pass only one"
            )
        out[key], given_as[key] = value, f"keyword {name}="
    for key in _FLAGS:
        if key in out and not isinstance(out[key], (bool, np.bool_)):
            raise TypeError(f"{cls}: {given_as[key]} must be True or False, got {out[key]!r}")
    for name, key in ALIASES.items():  # PyTorch's names: a bad value is refused under them
        if key in out and key not in _FLAGS and name in given_as[key]:
            check_attr(key, out[key], shown=name)  # (the constructor checks the rest)
    return out


# PyTorch's step(opt, closure) and update(new_scale): what to write instead
_NO_CLOSURE = (
    "GradScaler.step(optimizer) takes the optimizer only (Paddle's step() takes no closure): "
    "run scaler.scale(closure()).backward(), then scaler.step(optimizer). Nothing was stepped."
)
_NO_NEW_SCALE = (
    "update() takes no new scale (PyTorch's update(new_scale)): call scaler.update(), then "
    "scaler.set_init_loss_scaling(s) to set the scale. Nothing was updated."
)
