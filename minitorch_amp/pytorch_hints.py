"""What to use instead, when a PyTorch name is looked up and this library has none.

``minitorch_amp`` follows Paddle, so some of a PyTorch script's first lines name things that
are spelled differently here (``torch.manual_seed`` is ``seed``, ``nn.Module`` is
``nn.Layer``) or mean something else (``model.half()`` keeps batch norm in float32 as
Paddle's ``float16()`` does). Looking such a name up still raises ``AttributeError``, so
``hasattr`` and ``getattr(obj, name, default)`` behave as before, but the message says what
to use. The ``__getattr__`` hooks that call :func:`missing` run only for names that normal
lookup did not find, so existing attributes cost nothing extra.

The table in docs/porting.md, "A PyTorch script's first lines", is checked row by row
against these hints by ``tests/test_pytorch_first_lines.py``.
"""

from __future__ import annotations

_SEED = "use mt.seed(n) (Paddle's name; it seeds every random function and the DataLoader)"
_TO_TENSOR = (
    "use mt.to_tensor(data, dtype=None, place=None, stop_gradient=True) (Paddle's name; "
    "PyTorch's requires_grad=True is stop_gradient=False)"
)

HINTS: dict[str, dict[str, str]] = {
    "minitorch_amp": {
        "tensor": _TO_TENSOR,
        "from_numpy": "use mt.to_tensor(array) (it copies the array)",
        "manual_seed": _SEED,
        "cat": "use mt.concat(tensors, axis=0) (Paddle's name)",
        "optim": (
            "use mt.optimizer (Paddle's name): mt.optimizer.SGD(model.parameters(), lr=0.1) "
            "takes PyTorch's arguments too"
        ),
        "half": "use mt.float16 or the string 'float16'",
        "double": "use mt.float64 or the string 'float64'",
        "long": "use mt.int64 or the string 'int64'",
        "int": "use mt.int32 or the string 'int32'",
        "clamp": "use mt.clip(x, min, max) (Paddle's name)",
        "permute": "use mt.transpose(x, perm) (Paddle's transpose takes the full permutation)",
        "view": "use mt.reshape(x, shape) (the shape as one list)",
        "is_tensor": "use isinstance(x, mt.Tensor)",
        "set_autocast_enabled": (
            "enter or leave a region instead: with mt.amp.auto_cast(enable=False): ... "
            "(or mt.autocast('cuda', enabled=False))"
        ),
        "clear_autocast_cache": (
            "leave it out: the weight-cast cache is cleared when the outermost region exits"
        ),
    },
    "minitorch_amp.optimizer": {
        "lr_scheduler": (
            "use mt.optimizer.lr (Paddle's module): a schedule such as "
            "lr.StepDecay(learning_rate=0.1, step_size=30) is passed as the optimizer's "
            "learning_rate= and stepped with scheduler.step()"
        ),
    },
    "minitorch_amp.amp": {
        "custom_fwd": (
            "not provided: inside forward, run the float32 part under "
            "mt.amp.auto_cast(enable=False) with x.astype('float32') inputs "
            "(PyTorch's cast_inputs=torch.float32)"
        ),
        "custom_bwd": (
            "not needed: a PyLayer's backward runs under the AMP region in force when backward runs"
        ),
    },
    "minitorch_amp.nn": {
        "Module": (
            "use nn.Layer (Paddle's name for the same role): subclass it, call "
            "super().__init__() and define forward; parameters(), state_dict(), "
            "train() and eval() work as in PyTorch"
        ),
        "ModuleList": "use nn.LayerList (Paddle's name)",
        "ModuleDict": "use nn.LayerDict (Paddle's name)",
        "init": "use nn.initializer (Paddle's name), e.g. nn.initializer.XavierUniform()",
    },
    "minitorch_amp.cuda": {
        "manual_seed": _SEED,
        "manual_seed_all": _SEED,
        "synchronize": "use mt.device.synchronize()",
        "current_device": "use mt.get_device() (a string such as 'gpu:0')",
        "set_device": "use mt.set_device('gpu:N')",
    },
    "Tensor": {
        "view": (
            "use x.reshape([-1, 8]) (the shape as one list). Paddle's view(shape_or_dtype) "
            "shares memory through its stride kernels, which this library does not have"
        ),
        "permute": "use x.transpose(perm) (Paddle's transpose takes the full permutation)",
        "is_cuda": "use x.place.is_gpu_place()",
        "device": "use x.place (Paddle's name; a Place such as Place(gpu:0))",
        "contiguous": "leave it out: every tensor here is contiguous, so use x itself",
        "clamp": "use x.clip(min, max) (Paddle's name)",
        "long": "use x.astype('int64')",
        "int": "use x.astype('int32')",
        "double": "use x.astype('float64')",
        "bool": "use x.astype('bool')",
        "type": "use x.astype(dtype) to convert, x.dtype to read",
        "new_zeros": "use mt.zeros(shape, dtype=x.dtype)",
        "bfloat16": "use x.astype('bfloat16')",
    },
    "Layer": {
        "half": (
            "use model.float16() (Paddle's name; batch norm stays float32), or "
            "model.to(dtype='float16') to convert every tensor"
        ),
        "double": "use model.to(dtype='float64')",
        "type": "use model.astype(dtype) (Paddle's name)",
        "cuda": "use model.to(device) with device 'gpu', 'cuda' or a Place",
        "cpu": "use model.to('cpu')",
        "modules": "use model.sublayers(include_self=True) (Paddle's name)",
        "named_modules": "use model.named_sublayers(include_self=True) (Paddle's name)",
        "add_module": "use model.add_sublayer(name, layer) (Paddle's name)",
        "register_parameter": "use model.add_parameter(name, parameter) (Paddle's name)",
        "requires_grad_": (
            "set each parameter's flag: for p in model.parameters(): p.stop_gradient = True "
            "(PyTorch's requires_grad_(False); Paddle's Layer has no requires_grad_)"
        ),
    },
    "Optimizer": {
        "param_groups": (
            "use opt.get_lr() to read the learning rate and opt.set_lr(0.01) to change it "
            "(Paddle keeps no param_groups list; a group's settings are the dicts given "
            "as parameters=)"
        ),
    },
}


def missing(owner: str, name: str, shown: str | None = None, names=()) -> AttributeError:
    """The AttributeError for ``name`` looked up on ``owner`` (a module's name, or
    ``'Tensor'``, ``'Layer'``, ``'Optimizer'``), with what to use when there is a hint.

    Args:
        owner: the key of :data:`HINTS`.
        name: the name looked up.
        shown: how the message names the object (default: Python's own wording).
        names: the owner's names, to suggest one that differs only in case
            (``nn.Conv2d`` -> ``Conv2D``).
    """
    if shown is None:  # Python's own wording for a module or an instance
        shown = f"module {owner!r}" if owner.startswith("minitorch_amp") else f"{owner!r} object"
    message = f"{shown} has no attribute {name!r}"
    hint = HINTS.get(owner, {}).get(name)
    if hint is None and names and not name.startswith("_"):
        same = [n for n in names if n.lower() == name.lower() and n != name]
        if same:
            hint = f"did you mean {same[0]}? (Paddle's spelling)"
    return AttributeError(f"{message}; {hint}" if hint else message, name=name)
