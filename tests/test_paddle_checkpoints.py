"""Loading checkpoints written by Paddle's paddle.save (pickles), and refusing unsafe ones.

The files come from tests/paddle_pickles.py, which writes the bytes Paddle writes. Expected
results are paddle.load's: Tensors named as saved, the name table dropped, split arrays
joined, (name, ndarray) tuples turned into Tensors.
"""

from __future__ import annotations

import os
import pickle
from collections import OrderedDict

import numpy as np
import pytest
from paddle_pickles import (
    FakeDenseTensor,
    FakeLoDTensor,
    FakeTensor,
    save_object,
    save_state_dict,
)

import minitorch_amp as mt
from minitorch_amp import nn, optimizer
from minitorch_amp.io import CheckpointError

PROTOCOLS = [2, 3, 4]


def _linear_state():
    rng = np.random.default_rng(0)
    return {
        "weight": rng.standard_normal((3, 4)).astype("float32"),
        "bias": rng.standard_normal(4).astype("float32"),
    }


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_layer_state_dict_saved_by_paddle_loads_into_a_layer(tmp_path, protocol):
    state = _linear_state()
    path = tmp_path / "linear.pdparams"
    save_state_dict(path, state, {"weight": "linear_7.w_0", "bias": "linear_7.b_0"}, protocol)
    loaded = mt.load(path)
    assert set(loaded) == {"weight", "bias"}  # the name table is dropped
    assert isinstance(loaded["weight"], mt.Tensor) and loaded["weight"].name == "linear_7.w_0"
    fc = nn.Linear(3, 4)
    assert fc.set_state_dict(loaded) == ([], [])
    np.testing.assert_array_equal(fc.weight.numpy(), state["weight"])
    np.testing.assert_array_equal(fc.bias.numpy(), state["bias"])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_return_numpy_gives_numpy_arrays_for_a_state_dict(tmp_path, protocol):
    state = _linear_state()
    path = tmp_path / "linear.pdparams"
    save_state_dict(path, state, {"weight": "linear_7.w_0", "bias": "linear_7.b_0"}, protocol)
    loaded = mt.load(path, return_numpy=True)
    assert set(loaded) == {"weight", "bias"}
    for key, array in loaded.items():
        assert type(array) is np.ndarray
        np.testing.assert_array_equal(array, state[key])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_empty_arrays_and_scalars_of_every_protocol(tmp_path, protocol):
    # protocol 2 pickles the empty bytes of an empty array as a call of builtins.bytes()
    state = {"empty": np.zeros((0, 3), "float32"), "one": np.ones((), "int64")}
    path = tmp_path / "empty.pdparams"
    save_state_dict(path, state, {"empty": "e", "one": "o"}, protocol)
    loaded = mt.load(path)
    assert loaded["empty"].shape == [0, 3] and loaded["one"].item() == 1


@pytest.mark.parametrize("protocol", [2, 3])
def test_arrays_split_by_protocol_2_and_3_are_joined(tmp_path, protocol):
    big = np.arange(10 * 7, dtype="float16").reshape(10, 7)
    path = tmp_path / "big.pdparams"
    save_state_dict(path, {"big": big}, {"big": "big_0"}, protocol, max_elements=16)
    with open(path, "rb") as f:
        raw = pickle.load(f)  # our own fixture
    assert "UnpackBigParamInfor@@" in raw and "big@@.4" in raw
    loaded = mt.load(path, return_numpy=True)
    assert list(loaded) == ["big"]
    np.testing.assert_array_equal(loaded["big"], big)
    assert loaded["big"].dtype == np.float16


def test_an_optimizer_state_with_its_lr_scheduler(tmp_path):
    fc = nn.Linear(2, 2)
    opt = optimizer.Adam(
        learning_rate=optimizer.lr.StepDecay(0.1, step_size=2), parameters=fc.parameters()
    )
    fc(mt.ones([1, 2])).sum().backward()
    opt.step()
    state = opt.state_dict()
    arrays = {k: v.numpy() for k, v in state.items() if isinstance(v, mt.Tensor)}
    names = {k: k for k in arrays}
    path = tmp_path / "adam.pdopt"
    save_state_dict(path, {**arrays, "LR_Scheduler": state["LR_Scheduler"]}, names, protocol=2)
    loaded = mt.load(path)
    assert loaded["LR_Scheduler"] == state["LR_Scheduler"]
    fresh = optimizer.Adam(
        learning_rate=optimizer.lr.StepDecay(0.1, step_size=2), parameters=fc.parameters()
    )
    fresh.set_state_dict(loaded)
    for key, value in fresh.state_dict().items():
        if isinstance(value, mt.Tensor):
            np.testing.assert_array_equal(value.numpy(), arrays[key])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_nested_object_with_tensors_pickled_as_name_array_pairs(tmp_path, protocol):
    w = np.ones((2, 2), "float32")
    master = np.full((2,), 0.5, "float32")
    obj = {
        "model": {"fc.weight": FakeTensor("linear_0.w_0", w)},
        "opt": {"master_weights": OrderedDict(linear_0=FakeTensor("linear_0.w_0", master))},
        "epoch": 7,
        "note": "run 3",
        "lrs": [0.1, 0.01],
        "plain": np.zeros(3),  # with (name, array) pairs present, plain arrays stay arrays
    }
    path = tmp_path / "all.pdparams"
    save_object(path, obj, protocol)
    loaded = mt.load(path)
    weight = loaded["model"]["fc.weight"]
    assert isinstance(weight, mt.Tensor) and weight.name == "linear_0.w_0"
    np.testing.assert_array_equal(weight.numpy(), w)
    assert isinstance(loaded["opt"]["master_weights"], OrderedDict)
    assert loaded["epoch"] == 7 and loaded["note"] == "run 3" and loaded["lrs"] == [0.1, 0.01]
    assert isinstance(loaded["plain"], np.ndarray)
    as_numpy = mt.load(path, return_numpy=True)
    assert isinstance(as_numpy["model"]["fc.weight"], np.ndarray)


@pytest.mark.parametrize("kind", [FakeLoDTensor, FakeDenseTensor])
def test_static_graph_tensors_of_paddle_2_and_3(tmp_path, kind):
    data = np.arange(6, dtype="float64").reshape(2, 3)
    path = tmp_path / "t.pdtensor"
    save_object(path, {"x": kind(data), "scalar": np.float32(1.5)}, protocol=4)
    loaded = mt.load(path)
    assert isinstance(loaded["x"], mt.Tensor)
    np.testing.assert_array_equal(loaded["x"].numpy(), data)
    assert loaded["scalar"] == np.float32(1.5)


# ---- refusing what a checkpoint never needs -------------------------------------------------
class _RunsShell:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class _Imports:
    def __reduce__(self):
        return (__import__, ("shutil",))


class _EvalsCode:
    def __reduce__(self):
        return (eval, ("__import__('os').getcwd()",))


class _ObjectArray:
    def __reduce__(self):
        return np.array([{"a": 1}], dtype=object).__reduce__()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_malicious_pickle_is_refused_and_nothing_runs(tmp_path, protocol):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pdparams"
    with open(path, "wb") as f:
        pickle.dump({"weight": np.ones(2), "x": _RunsShell(marker)}, f, protocol=protocol)
    with pytest.raises(CheckpointError, match=r"(posix|nt)\.system.*refused.*nothing was run"):
        mt.load(path)
    assert not marker.exists()


@pytest.mark.parametrize(
    "payload, match",
    [
        (_Imports(), "builtins.__import__"),
        (_EvalsCode(), "eval"),
        (_ObjectArray(), "object"),
        (print, "builtins.print"),
    ],
)
def test_other_unsafe_pickles_are_refused(tmp_path, payload, match):
    path = tmp_path / "evil.pdparams"
    with open(path, "wb") as f:
        pickle.dump({"x": payload}, f, protocol=4)
    with pytest.raises(CheckpointError, match=match):
        mt.load(path)


def test_a_truncated_pickle_is_reported_as_corrupt(tmp_path):
    path = tmp_path / "cut.pdparams"
    save_state_dict(path, _linear_state(), {"weight": "w", "bias": "b"})
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        mt.load(path)


def test_max_bytes_bounds_a_pickle_before_it_is_read(tmp_path):
    path = tmp_path / "w.pdparams"
    save_state_dict(path, _linear_state(), {"weight": "w", "bias": "b"})
    with pytest.raises(CheckpointError, match="max_bytes"):
        mt.load(path, max_bytes=100)
    assert set(mt.load(path, max_bytes=None)) == {"weight", "bias"}
