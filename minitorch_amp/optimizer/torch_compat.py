"""PyTorch's spellings of the optimizers, translated to Paddle's, never guessed.

Paddle's constructors take the learning rate first (``Adam(learning_rate=0.001, beta1, beta2,
epsilon, parameters, ...)``), PyTorch's the parameters (``Adam(params, lr=0.001, betas=(0.9,
0.999), eps=1e-8, weight_decay=0)``). The two cannot be confused: a learning rate is a number
or an ``LRScheduler``, parameters are an iterable of tensors or of group dicts. So:

* first positional argument a number or scheduler: Paddle's order, unchanged;
* first positional argument an iterable (a list, ``model.parameters()``, a generator):
  PyTorch's ``params``; a second positional argument is ``lr``; more are refused (pass them
  by keyword);
* PyTorch keywords become Paddle's: ``lr`` -> ``learning_rate``, ``betas=(b1, b2)`` ->
  ``beta1, beta2``, ``eps`` -> ``epsilon``, ``params`` -> ``parameters``, ``nesterov`` ->
  ``use_nesterov`` (Momentum). ``weight_decay`` keeps its name and meaning (an L2 term added
  to the gradient in SGD, Momentum and Adam; decoupled decay in AdamW, both frameworks);
* PyTorch options without a Paddle equivalent are accepted only at their neutral value
  (``amsgrad=False``, ``foreach=None``, SGD's ``momentum=0``, ...); any other value is refused
  with what to use instead. A value given twice (``lr`` and ``learning_rate``) is refused.
"""

from __future__ import annotations

import functools
import inspect
import numbers

from ..autograd.tensor import Tensor
from ..pytorch_hints import missing
from .lr import LRScheduler

_RENAMED = {"lr": "learning_rate", "eps": "epsilon", "params": "parameters"}
# PyTorch options with no Paddle equivalent: name -> the neutral values accepted
_NEUTRAL = {
    "amsgrad": (False,),
    "maximize": (False,),
    "foreach": (None, False),
    "capturable": (False,),
    "differentiable": (False,),
    "fused": (None, False),
    "dampening": (0, 0.0),
}
_SGD_MOMENTUM_HINT = (
    "SGD(momentum=...) is PyTorch's SGD with momentum; here (as in Paddle) that is "
    "optimizer.Momentum(parameters, momentum=..., use_nesterov=...)"
)


def _is_params(value) -> bool:
    """True for PyTorch's ``params``: an iterable that is not a learning rate or a string."""
    if isinstance(value, (numbers.Number, LRScheduler, str, bytes, dict)) or value is None:
        return False
    if isinstance(value, Tensor):
        raise TypeError(
            "params must be an iterable of Tensors or param-group dicts, got a single Tensor; "
            "pass [tensor]"
        )
    try:
        iter(value)
    except TypeError:
        return False
    return True


def torch_spellings(init):
    """Decorate an optimizer's ``__init__`` to accept PyTorch's forms (module docstring)."""
    signature = inspect.signature(init)

    @functools.wraps(init)
    def wrapper(self, *args, **kwargs):
        owner = type(self).__name__
        args, kwargs = _translate(owner, signature, args, dict(kwargs))
        try:
            signature.bind(self, *args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{owner}(): {exc}") from None
        init(self, *args, **kwargs)

    return wrapper


def _translate(owner: str, signature, args: tuple, kwargs: dict):
    names = set(signature.parameters)
    if args and _is_params(args[0]):  # PyTorch's order: (params, lr)
        if len(args) > 2:
            raise TypeError(
                f"{owner}(params, lr, ...): PyTorch's form takes the parameters and the learning "
                "rate positionally; pass the other arguments by keyword"
            )
        _put(owner, kwargs, "parameters", args[0], "params")
        if len(args) == 2:
            _put(owner, kwargs, "learning_rate", args[1], "lr")
        args = ()
    slots = [n for n in signature.parameters if n != "self"]
    for name, value in zip(slots, args):
        if name != "parameters" and not isinstance(value, Tensor) and _is_params(value):
            raise TypeError(
                f"{owner}(): an iterable (parameters?) was given positionally as {name!r}; "
                f"Paddle's order is ({', '.join(slots[: slots.index('parameters') + 1])}, ...): "
                "pass parameters=... by keyword, or use PyTorch's form (params, lr=...)"
            )
    for torch_name, paddle_name in _RENAMED.items():
        if torch_name in kwargs:
            _put(owner, kwargs, paddle_name, kwargs.pop(torch_name), torch_name)
    if "betas" in kwargs:
        betas = kwargs.pop("betas")
        if "beta1" not in names:
            raise TypeError(f"{owner} has no betas (PyTorch's Adam/AdamW argument)")
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise TypeError(f"{owner}: betas must be a pair (beta1, beta2), got {betas!r}")
        _put(owner, kwargs, "beta1", betas[0], "betas")
        _put(owner, kwargs, "beta2", betas[1], "betas")
    if "nesterov" in kwargs:
        nesterov = kwargs.pop("nesterov")
        if "use_nesterov" in names:
            _put(owner, kwargs, "use_nesterov", nesterov, "nesterov")
        elif nesterov:
            raise TypeError(f"{owner}(nesterov=True): {_SGD_MOMENTUM_HINT}")
    if "momentum" in kwargs and "momentum" not in names and kwargs.pop("momentum") != 0:
        raise TypeError(f"{owner}(momentum=...): {_SGD_MOMENTUM_HINT}")
    for name, neutral in _NEUTRAL.items():
        if name in kwargs and name not in names:
            value = kwargs.pop(name)
            if not any(value is v or (type(value) is type(v) and value == v) for v in neutral):
                raise TypeError(
                    f"{owner}({name}={value!r}): PyTorch's option has no equivalent here; only "
                    f"{name}={neutral[0]!r} (no effect) is accepted"
                )
    return args, kwargs


def _put(owner: str, kwargs: dict, name: str, value, spelled: str) -> None:
    if name in kwargs:
        raise TypeError(f"{owner}() got {name} twice (as {spelled!r} and {name!r}); give it once")
    kwargs[name] = value


class TorchOptimizerMethods:
    """``zero_grad`` and ``load_state_dict``, PyTorch's names, on every optimizer; and for
    a PyTorch name it lacks (``param_groups``), an AttributeError that says what to use."""

    def __getattr__(self, name: str):
        # Only called when normal lookup fails, so existing attributes pay nothing.
        if name.startswith("__"):
            raise AttributeError(name)
        raise missing("Optimizer", name, f"{type(self).__name__!r} object")

    def zero_grad(self, set_to_none: bool = True) -> None:
        """PyTorch's ``zero_grad``: drop every ``.grad`` (``set_to_none=True``, PyTorch's
        default) or zero it (``False``); Paddle's ``clear_grad`` zeroes by default."""
        self.clear_grad(set_to_zero=not set_to_none)

    def load_state_dict(self, state_dict: dict) -> None:
        """:meth:`set_state_dict` under PyTorch's name. The dict is this library's (and
        Paddle's) layout, keyed by parameter name; a PyTorch optimizer state dict
        (``'state'`` and ``'param_groups'``) is refused."""
        if isinstance(state_dict, dict) and {"state", "param_groups"} <= set(state_dict):
            raise TypeError(
                "load_state_dict got a PyTorch optimizer state dict ('state', 'param_groups'); "
                "this optimizer keys its state by parameter name as Paddle does "
                "(e.g. 'linear_0.w_0_moment1_0'): load one saved from opt.state_dict() here"
            )
        self.set_state_dict(state_dict)
