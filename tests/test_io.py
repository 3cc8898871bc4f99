"""save / load: bit-exact round trips of nested state, and clear errors for bad files."""

from __future__ import annotations

import json
import os
import zipfile

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp.io import CheckpointError
from minitorch_amp.nn.parameter import Parameter


def nested_state():
    rng = np.random.default_rng(0)
    half = rng.standard_normal((3, 4)).astype(np.float16)
    half[0, :3] = [np.inf, -0.0, np.float16(6e-8)]  # inf, signed zero, a subnormal
    return {
        "model": {
            "linear_0.w_0": Parameter(half, name="linear_0.w_0"),
            "linear_0.b_0": mt.to_tensor(rng.standard_normal(4).astype(np.float32)),
            "emb/weight": mt.to_tensor(np.arange(6, dtype=np.int64).reshape(2, 3)),
            "mask": mt.to_tensor(np.array([True, False])),
            "f64": mt.to_tensor(np.array(np.pi)),
        },
        "opt": {"LR_Scheduler": {"last_epoch": 3, "last_lr": 0.1 + 0.2}},
        "epoch": 3,
        "best": float("nan"),
        "big": 2**70,
        "ok": True,
        "tag": "run/1.a",
        "nothing": None,
        "history": [0.5, (1, "two"), np.float32(1.5), np.array([1, 2], dtype=np.uint8)],
        7: "int key",
    }


def bits(t):
    a = t.numpy() if isinstance(t, mt.Tensor) else np.asarray(t)
    return a.dtype, a.shape, a.tobytes()


def test_nested_round_trip_is_bit_exact(tmp_path):
    state = nested_state()
    mt.save(state, tmp_path / "ckpt.pdparams")
    back = mt.load(tmp_path / "ckpt.pdparams")
    assert list(back) == list(state)
    assert list(back["model"]) == list(state["model"])
    for key, t in state["model"].items():
        assert isinstance(back["model"][key], mt.Tensor)
        assert bits(back["model"][key]) == bits(t)
    assert back["model"]["linear_0.w_0"].name == "linear_0.w_0"
    assert back["opt"] == {"LR_Scheduler": {"last_epoch": 3, "last_lr": 0.1 + 0.2}}
    assert back["epoch"] == 3 and type(back["epoch"]) is int
    assert np.isnan(back["best"]) and back["big"] == 2**70 and back["ok"] is True
    assert back["tag"] == "run/1.a" and back["nothing"] is None and back[7] == "int key"
    assert back["history"][:2] == [0.5, (1, "two")]
    assert type(back["history"][2]) is np.float32 and back["history"][2] == 1.5
    assert isinstance(back["history"][3], np.ndarray)
    assert bits(back["history"][3]) == bits(state["history"][3])


def test_return_numpy_gives_arrays(tmp_path):
    mt.save({"w": mt.ones([2], dtype="float16")}, tmp_path / "x")
    w = mt.load(tmp_path / "x", return_numpy=True)["w"]
    assert isinstance(w, np.ndarray) and w.dtype == np.float16 and w.flags.writeable


def test_the_file_is_an_open_format(tmp_path):
    mt.save({"a.b": mt.to_tensor([1.0, 2.0])}, tmp_path / "x")
    with zipfile.ZipFile(tmp_path / "x") as zf:
        structure = json.loads(zf.read("__structure__.json"))
    assert structure["format"] == "minitorch_amp" and structure["root"]["items"][0][0] == "a.b"
    np.testing.assert_array_equal(np.load(tmp_path / "x")["arrays/0"], [1.0, 2.0])


def test_save_is_atomic_and_leaves_no_temporary_files(tmp_path):
    path = tmp_path / "sub" / "ckpt"
    mt.save({"x": 1}, path)
    mt.save({"x": 2}, path)
    assert mt.load(path) == {"x": 2}
    assert os.listdir(tmp_path / "sub") == ["ckpt"]
    with pytest.raises(TypeError):
        mt.save({"x": 3, "bad": object()}, path)
    assert mt.load(path) == {"x": 2}
    assert os.listdir(tmp_path / "sub") == ["ckpt"]


@pytest.mark.parametrize(
    "obj, where",
    [
        ({"opt": {"x": object()}}, "obj['opt']['x']: cannot save object of type object"),
        ([1, {2.5: 1}], "obj[1]: cannot save dict key 2.5"),
        ({"a": np.array([object()])}, "obj['a']: cannot save an array of dtype object"),
        ({"s": {1, 2}}, "obj['s']: cannot save object of type set"),
    ],
)
def test_unsupported_objects_are_refused_with_their_key_path(tmp_path, obj, where):
    with pytest.raises(TypeError) as info:
        mt.save(obj, tmp_path / "x")
    assert str(info.value).startswith(where)
    assert not os.path.exists(tmp_path / "x")


def test_a_cycle_is_refused(tmp_path):
    loop: dict = {}
    loop["self"] = loop
    with pytest.raises(TypeError, match="contains itself"):
        mt.save(loop, tmp_path / "x")


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        mt.load(tmp_path / "nope.pdparams")
    assert info.value.filename == str(tmp_path / "nope.pdparams")


def saved_bytes(tmp_path) -> bytes:
    mt.save(nested_state(), tmp_path / "good")
    return (tmp_path / "good").read_bytes()


@pytest.mark.parametrize("cut", [0.3, 0.9, 0.999])
def test_truncated_file(tmp_path, cut):
    data = saved_bytes(tmp_path)
    (tmp_path / "bad").write_bytes(data[: int(len(data) * cut)])
    with pytest.raises(CheckpointError, match="bad"):
        mt.load(tmp_path / "bad")


def test_random_bytes_and_empty_file(tmp_path):
    (tmp_path / "noise").write_bytes(np.random.default_rng(1).bytes(4096))
    (tmp_path / "empty").write_bytes(b"")
    for name in ("noise", "empty"):
        with pytest.raises(CheckpointError, match=f"{name}.*not a checkpoint"):
            mt.load(tmp_path / name)


def test_flipped_bytes_inside_an_array_are_detected(tmp_path):
    data = bytearray(saved_bytes(tmp_path))
    start = data.index(b"\x93NUMPY")  # the first .npy entry
    data[start + 130] ^= 0xFF  # past the 128-byte .npy header: inside the values
    (tmp_path / "bad").write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="corrupt"):
        mt.load(tmp_path / "bad")


def write_zip(path, entries: dict) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        for name, content in entries.items():
            zf.writestr(name, content)


@pytest.mark.parametrize(
    "entries, message",
    [
        ({"x.npy": b"abc"}, "without __structure__.json"),
        ({"__structure__.json": b"{not json"}, "not valid JSON"),
        ({"__structure__.json": json.dumps({"format": "other"})}, "unknown format"),
        (
            {
                "__structure__.json": json.dumps(
                    {
                        "format": "minitorch_amp",
                        "version": 1,
                        "root": {"type": "tensor", "array": 0},
                    }
                )
            },
            "no arrays/0.npy",
        ),
        (
            {
                "__structure__.json": json.dumps(
                    {
                        "format": "minitorch_amp",
                        "version": 1,
                        "root": {"type": "dict", "items": [["a", 5]]},
                    }
                )
            },
            "malformed entry",
        ),
        (
            {
                "__structure__.json": json.dumps(
                    {"format": "minitorch_amp", "version": 1, "root": {"type": "pickle"}}
                )
            },
            "unknown entry type",
        ),
    ],
)
def test_a_zip_with_the_wrong_structure(tmp_path, entries, message):
    write_zip(tmp_path / "bad", entries)
    with pytest.raises(CheckpointError, match=message) as info:
        mt.load(tmp_path / "bad")
    assert str(tmp_path / "bad") in str(info.value)


def test_an_array_that_disagrees_with_the_index(tmp_path):
    mt.save({"w": mt.ones([2, 3])}, tmp_path / "good")
    with zipfile.ZipFile(tmp_path / "good") as zf:
        structure = zf.read("__structure__.json")
    with zipfile.ZipFile(tmp_path / "bad", "w") as zf:
        zf.writestr("__structure__.json", structure)
        with zf.open("arrays/0.npy", "w") as f:
            np.lib.format.write_array(f, np.ones(5, dtype=np.float64))
    with pytest.raises(CheckpointError, match="the index says"):
        mt.load(tmp_path / "bad")


def test_pickled_arrays_are_not_loaded(tmp_path):
    mt.save({"w": np.zeros(2)}, tmp_path / "good")
    with zipfile.ZipFile(tmp_path / "good") as zf:
        structure = json.loads(zf.read("__structure__.json"))
    structure["root"]["items"][0][1]["dtype"] = "|O"
    with zipfile.ZipFile(tmp_path / "bad", "w") as zf:
        zf.writestr("__structure__.json", json.dumps(structure))
        with zf.open("arrays/0.npy", "w") as f:
            np.lib.format.write_array(f, np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(CheckpointError, match="corrupt"):
        mt.load(tmp_path / "bad")
