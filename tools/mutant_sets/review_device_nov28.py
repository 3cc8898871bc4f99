"""Defects a review of devices, memory and conversions found (session of 2026-11-28,
evening), each planted back: the tests written with the fixes must see them."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

T = "tests/test_device_review_nov28.py::"
DEVICE = "minitorch_amp/backend/device.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "conversion-leaves-the-optimizer-plan-pinning-the-originals",
        "minitorch_amp/nn/layer/tensor_convert.py",
        "    _release_optimizer_plans(arrays, dtype, place)\n",
        "",
        (T + "test_a_conversion_after_a_step_frees_the_originals_and_fits_a_full_device",),
        "Layer.to after a step frees no fp32 memory (the step plan keeps each array) and a full device refuses it",
    ),
    Mutant(
        "place-takes-any-kind",
        "minitorch_amp/backend/place.py",
        "            self.kind, self.index = _checked_place(kind, index)\n",
        "            self.kind, self.index = kind, index\n",
        (T + "test_a_place_of_an_unknown_kind_or_index_is_refused_where_it_is_made",),
        "Place('xpu') is made, prints as gpu:0 and breaks set_device later",
    ),
    Mutant(
        "memory-functions-refuse-an-int-device",
        "minitorch_amp/backend/memory.py",
        "    if isinstance(device, (int, np.integer)) and not isinstance(device, (bool, np.bool_)):\n",
        "    if False:\n",
        (T + "test_the_memory_functions_take_an_int_as_a_gpu_number",),
        "memory_allocated(0) is refused as a device of the wrong type (Paddle and PyTorch take an int)",
    ),
    Mutant(
        "torch-cuda-memory-name-gives-no-hint",
        "minitorch_amp/cuda_namespace.py",
        '    if name not in HINTS["minitorch_amp.cuda"] and name in device_cuda.__all__:\n',
        "    if False:\n",
        (T + "test_device_cuda_has_paddles_reserved_memory_and_empty_cache",),
        "mt.cuda.memory_allocated raises a bare AttributeError, not saying mt.device.cuda has it",
    ),
    Mutant(
        "layer-has-no-astype",
        "minitorch_amp/nn/layer/convert.py",
        "    def astype(self, dtype=None) -> ConvertMixin:\n",
        "    def _astype(self, dtype=None) -> ConvertMixin:\n",
        (T + "test_layer_astype_converts_every_parameter_and_buffer_and_returns_the_layer",),
        "Paddle's Layer.astype(dtype) is missing",
    ),
    Mutant(
        "place-equals-every-spelling-but-hashes-one",
        "minitorch_amp/backend/place.py",
        "        return isinstance(other, str) and other == str(self)\n",
        "        return isinstance(other, str) and _named_place(other) == self\n",
        (T + "test_a_place_equals_and_hashes_as_its_canonical_name_only",),
        "Place('gpu', 0) == 'cuda:0' while 'cuda:0' in {Place('gpu', 0)} is False",
    ),
]
