"""Which layers stay float32 when a model goes to 16 bits: one rule, two of Paddle's paths.

A layer class says it with ``keeps_float32`` (``'always'``: batch norm; ``'float16'``: layer
norm); ``nn.layer.convert.stays_float32`` reads it for ``decorate(level='O2')`` and for
``Layer.float16()``/``bfloat16()``, which keep different layers, as in Paddle.
"""

from __future__ import annotations

import pytest

from minitorch_amp import nn
from minitorch_amp.amp.decorate import decorate
from minitorch_amp.nn.layer.convert import stays_float32

NORMS = {
    "LayerNorm": lambda: nn.LayerNorm(4),
    "BatchNorm": lambda: nn.BatchNorm(4),
    "BatchNorm1D": lambda: nn.BatchNorm1D(4),
    "BatchNorm2D": lambda: nn.BatchNorm2D(4),
    "BatchNorm3D": lambda: nn.BatchNorm3D(4),
    "Linear": lambda: nn.Linear(4, 4),
}

# (layer, dtype, purpose): stays float32
TABLE = [
    # decorate: Paddle's need_keep_fp32, batch norm always, layer norm for float16 only
    ("LayerNorm", "float16", "decorate", True),
    ("LayerNorm", "bfloat16", "decorate", False),
    ("BatchNorm", "float16", "decorate", True),
    ("BatchNorm1D", "bfloat16", "decorate", True),
    ("BatchNorm2D", "float16", "decorate", True),
    ("BatchNorm3D", "bfloat16", "decorate", True),
    ("Linear", "float16", "decorate", False),
    # float16() / bfloat16(): batch norm only; layer norm is cast even to float16
    ("LayerNorm", "float16", "half", False),
    ("LayerNorm", "bfloat16", "half", False),
    ("BatchNorm", "bfloat16", "half", True),
    ("BatchNorm1D", "float16", "half", True),
    ("BatchNorm2D", "bfloat16", "half", True),
    ("BatchNorm3D", "float16", "half", True),
    ("Linear", "bfloat16", "half", False),
]


@pytest.mark.parametrize(("kind", "dtype", "purpose", "expected"), TABLE)
def test_the_rule(kind, dtype, purpose, expected):
    assert stays_float32(NORMS[kind](), dtype, purpose) is expected


def _dtypes(model) -> list[str]:
    return [str(layer.weight.dtype) for layer in model]


class AlwaysFp32(nn.Linear):
    keeps_float32 = "always"


class Fp32ForFloat16(nn.Linear):
    keeps_float32 = "float16"


class CastBatchNorm(nn.BatchNorm1D):
    keeps_float32 = None


def _model():
    return nn.Sequential(AlwaysFp32(4, 4), Fp32ForFloat16(4, 4), CastBatchNorm(4), nn.Linear(4, 4))


def test_the_class_attribute_decides_not_the_class():
    assert _dtypes(decorate(_model(), level="O2")) == ["float32", "float32", "float16", "float16"]
    bf16 = decorate(_model(), level="O2", dtype="bfloat16")
    assert _dtypes(bf16) == ["float32", "bfloat16", "bfloat16", "bfloat16"]
    assert _dtypes(_model().float16()) == ["float32", "float16", "float16", "float16"]
    assert _dtypes(_model().bfloat16()) == ["float32", "bfloat16", "bfloat16", "bfloat16"]


def test_excluded_layers_add_to_decorates_rule_but_replace_float16s():
    model = _model()
    decorate(model, level="O2", excluded_layers=[model[3]])
    assert _dtypes(model) == ["float32", "float32", "float16", "float32"]
    model = _model()
    model.float16(excluded_layers=[model[3]])
    assert _dtypes(model) == ["float16", "float16", "float16", "float32"]


def test_a_layer_decorate_excluded_stays_for_decorate_only():
    layer = nn.Linear(2, 2)
    decorate(layer, level="O2", excluded_layers=layer)  # marks it
    assert layer._cast_to_low_precision is False
    assert stays_float32(layer, "bfloat16", "decorate")
    assert not stays_float32(layer, "float16", "half")
    assert str(layer.float16().weight.dtype) == "float16"


def test_an_unknown_purpose_names_the_known_ones():
    with pytest.raises(ValueError, match="'decorate' or 'half'"):
        stays_float32(nn.LayerNorm(2), "float16", "to")
