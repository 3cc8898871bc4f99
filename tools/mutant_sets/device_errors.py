"""Issue 27 items 7 and 11: one error type and message style for device and dtype mistakes, and a
PyTorch script's first lines (they work or say what to write)."""

from __future__ import annotations

from mutant_sets import Mutant

ERRORS = "tests/test_device_dtype_errors.py"
FIRST = "tests/test_pytorch_first_lines.py"
ROW = f"{FIRST}::test_each_row_does_what_the_table_says"

MUTANTS: list[Mutant] = [
    Mutant(
        "device-error-not-a-value-error",
        "minitorch_amp/backend/device_errors.py",
        "class DeviceError(ValueError, TypeError, RuntimeError):",
        "class DeviceError(TypeError, RuntimeError):",
        (f"{ERRORS}::test_device_error_is_also_each_type_these_mistakes_raised_before",),
        "DeviceError is no ValueError: `except ValueError` around Layer.to / set_device, "
        "Paddle's type for an unknown device, no longer catches it",
    ),
    Mutant(
        "layer-to-rewraps-device-errors-as-value-error",
        "minitorch_amp/nn/layer/convert.py",
        '    return _device.parse_device(device, "Layer.to()")\n',
        "    try:\n"
        '        return _device.parse_device(device, "Layer.to()")\n'
        "    except _device.DeviceError as exc:\n"
        "        raise ValueError(str(exc)) from exc\n",
        (
            f"{ERRORS}::test_every_device_or_dtype_mistake_raises_device_error"
            "[Layer._to_impl(unknown device)]",
        ),
        "Layer._to_impl('tpu') raises ValueError where Tensor.to('tpu') raises DeviceError",
    ),
    Mutant(
        "tensor-to-words-an-unknown-device-as-neither",
        "minitorch_amp/autograd/tensor_to.py",
        "raise _errors.unknown_device(first, _dtypes.SUPPORTED, where)  # or 'neither'",
        "raise _errors.neither(first, _dtypes.SUPPORTED, where)",
        (
            f"{ERRORS}::test_layer_to_and_tensor_to_give_the_same_message_for_the_same_argument"
            "[tpu]",
        ),
        "Tensor.to('tpu') and Layer.to('tpu') word the same mistake differently",
    ),
    Mutant(
        "dtype-given-as-device-called-unknown-device",
        "minitorch_amp/backend/device_errors.py",
        "    if isinstance(device, str) and is_dtype_name(device, supported):",
        "    if False:",
        (f"{ERRORS}::test_a_dtype_given_as_a_device_is_called_a_dtype",),
        "set_device('float16') says \"unknown device 'float16'\" instead of calling it a dtype",
    ),
    Mutant(
        "device-given-as-dtype-called-unsupported-dtype",
        "minitorch_amp/backend/device_errors.py",
        "    if isinstance(dtype, str) and DEVICE_STRING.match(dtype):",
        "    if False:",
        (f"{ERRORS}::test_a_device_given_as_a_dtype_is_called_a_device",),
        "to_tensor(x, dtype='cpu') says \"unsupported dtype 'cpu'\" without saying it is a device",
    ),
    Mutant(
        "dtype-list-hard-coded",
        "minitorch_amp/backend/device_errors.py",
        '    return ", ".join(str(d) for d in supported)',
        '    return "float16, bfloat16, float32, float64, int32, int64, bool"',
        (f"{ERRORS}::test_the_dtype_list_is_read_from_the_registry",),
        "the messages list a fixed set of dtypes, so a dtype added to the registry "
        "(float8_e4m3fn) is missing from them",
    ),
    Mutant(
        "environment-variable-refuses-cuda",
        "minitorch_amp/backend/device.py",
        "    if forced and not DEVICE_STRING.match(forced):",
        '    if forced not in ("", "cpu", "gpu"):',
        (f"{ERRORS}::test_the_environment_variable_accepts_cuda_and_device_numbers",),
        "MINITORCH_AMP_DEVICE=cuda is refused although .to('cuda') is accepted",
    ),
    Mutant(
        "spread-shape-reported-as-unsupported-dtype",
        "minitorch_amp/autograd/creation.py",
        "    if _is_count(dtype):",
        "    if False:",
        (f"{ERRORS}::test_a_spread_out_shape_is_answered_with_paddles_one_list",),
        'mt.randn(32, 16) says "unsupported dtype 16" instead of randn([32, 16])',
    ),
    Mutant(
        "python-list-input-reaches-the-op",
        "minitorch_amp/autograd/dispatch.py",
        "        if any(x.__class__ is list for x in inputs):  # ops that take host data still do",
        "        if False:",
        (f"{ERRORS}::test_a_layer_called_on_a_python_list_says_to_make_a_tensor",),
        "a Linear called on a Python list fails with \"'list' object has no attribute 'shape'\"",
    ),
    Mutant(
        "layer-attribute-error-without-hint",
        "minitorch_amp/nn/layer/torch_compat.py",
        '    return missing("Layer", name, f"{type(layer).__name__!r} object")',
        '    return AttributeError(f"{type(layer).__name__!r} object has no attribute {name!r}")',
        (f"{ROW}[model.half()]", f"{ROW}[model.cuda()]"),
        "model.half() is a bare AttributeError that does not say model.float16()",
    ),
    Mutant(
        "tensor-attribute-error-without-hint",
        "minitorch_amp/autograd/tensor_torch.py",
        '    raise missing("Tensor", name)',
        "    raise AttributeError(name)",
        (f"{ROW}[x.view(-1, 8)]",),
        "x.view(-1, 8) is a bare AttributeError that does not say x.reshape([-1, 8])",
    ),
    Mutant(
        "requires-grad-set-the-wrong-way",
        "minitorch_amp/autograd/tensor_torch.py",
        "    self.stop_gradient = not flag",
        "    self.stop_gradient = flag",
        (f"{FIRST}::test_requires_grad_is_the_opposite_of_stop_gradient_both_ways",),
        "x.requires_grad = True sets stop_gradient=True: the tensor gets no gradient",
    ),
    Mutant(
        "optimizer-attribute-error-without-hint",
        "minitorch_amp/optimizer/torch_compat.py",
        '        raise missing("Optimizer", name, f"{type(self).__name__!r} object")',
        "        raise AttributeError(name)",
        (f"{ROW}[opt.param_groups]",),
        "opt.param_groups is a bare AttributeError that does not say get_lr()/set_lr()",
    ),
    Mutant(
        "torch-tensor-hint-missing",
        "minitorch_amp/pytorch_hints.py",
        '        "tensor": _TO_TENSOR,\n',
        "",
        (f"{ROW}[torch.tensor([1.0, 2.0], requires_grad=True)]",),
        "torch.tensor(...) is a bare AttributeError that does not say mt.to_tensor",
    ),
    Mutant(
        "case-only-spelling-not-suggested",
        "minitorch_amp/pytorch_hints.py",
        "        same = [n for n in names if n.lower() == name.lower() and n != name]",
        "        same = []",
        (f"{ROW}[nn.Conv2d(1, 8, 3)]",),
        "nn.Conv2d does not suggest Paddle's nn.Conv2D",
    ),
    Mutant(
        "hint-is-not-an-attribute-error",
        "minitorch_amp/pytorch_hints.py",
        '    return AttributeError(f"{message}; {hint}" if hint else message, name=name)',
        '    return (AttributeError if not hint else TypeError)(f"{message}; {hint}")',
        (f"{FIRST}::test_a_hint_is_still_an_attribute_error_so_hasattr_and_getattr_defaults_hold",),
        "a hinted name raises TypeError, so hasattr(model, 'half') raises instead of False",
    ),
    Mutant(
        "mt-device-not-callable",
        "minitorch_amp/device/__init__.py",
        "sys.modules[__name__].__class__ = _DeviceModule\n",
        "",
        (f"{FIRST}::test_calling_mt_device_gives_the_place_that_to_takes",),
        "torch.device('cuda' if torch.cuda.is_available() else 'cpu') fails: "
        "'module' object is not callable",
    ),
    Mutant(
        "cuda-is-available-missing",
        "minitorch_amp/cuda_namespace.py",
        "cuda.amp, cuda.is_available, cuda.device_count = amp, is_available, device_count\n",
        "cuda.amp = amp\n",
        (f"{ROW}[torch.cuda.is_available()]",),
        "torch.cuda.is_available() is a bare AttributeError",
    ),
]
