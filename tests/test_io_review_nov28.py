"""What a review of ``minitorch_amp.io`` found (2026-11-28, evening), each checked against
Paddle 2.x's behaviour:

* a Paddle pickle's ``uint16`` arrays are bfloat16 tensors (``paddle.load`` gives them back as
  BF16); an int8 tensor is refused with its key, pointing to ``return_numpy=True``;
* ``DataLoader(batch_size=None, collate_fn=f)`` calls ``f`` on each sample;
* ``save(obj, '')`` / ``save(obj, 'folder/')`` raise Paddle's ValueError, writing nothing;
* ``save`` / ``load`` take an ``io.BytesIO`` (Paddle's "save object to memory");
* ``protocol`` is checked as ``paddle.save`` checks it;
* ``default_collate_fn`` keeps NumPy int32 scalars int32 (``np.array(batch)``).
"""

from __future__ import annotations

import io
import os
import pickle

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp.io import DataLoader, Dataset, IterableDataset, default_collate_fn
from minitorch_amp.io.checkpoint import CheckpointError

TABLE = "StructuredToParameterName@@"


def _paddle_pickle(path, state: dict) -> None:
    """What ``paddle.save(state_dict, path)`` pickles: arrays and the name table."""
    with open(path, "wb") as f:
        pickle.dump({**state, TABLE: {k: f"{k}_0" for k in state}}, f, protocol=4)


def test_a_paddle_bfloat16_tensor_loads_as_bfloat16_with_its_values(tmp_path):
    path = tmp_path / "model.pdparams"
    bits = (np.array([1.0, 2.0, -3.5], "float32").view("uint32") >> 16).astype("uint16")
    _paddle_pickle(path, {"fc.weight": bits})
    w = mt.load(path)["fc.weight"]
    assert w.dtype == mt.bfloat16 and w.name == "fc.weight_0"
    assert w.astype("float32").numpy().tolist() == [1.0, 2.0, -3.5]


def test_an_int8_paddle_tensor_is_refused_with_its_key_and_return_numpy_reads_it(tmp_path):
    path = tmp_path / "q.pdparams"
    _paddle_pickle(path, {"q": np.array([1, -2], "int8")})
    with pytest.raises(CheckpointError, match=r"'q' has dtype int8.*return_numpy=True") as e:
        mt.load(path)
    assert "corrupt" not in str(e.value)
    assert mt.load(path, return_numpy=True)["q"].dtype == np.int8


class _Pairs(Dataset):
    def __getitem__(self, i):
        return np.full([2], i, "float32"), i

    def __len__(self):
        return 3


class _Stream(IterableDataset):
    def __iter__(self):
        return iter([(np.ones(2, "float32"), 0)])


@pytest.mark.parametrize(
    "dataset, doubled", [(_Pairs(), [0, 2, 4]), (_Stream(), [2])], ids=["map-style", "iterable"]
)
def test_batch_size_none_calls_collate_fn_on_each_sample(dataset, doubled):
    def collate(sample):
        return {"x": sample[0] * 2, "y": sample[1]}

    out = list(DataLoader(dataset, batch_size=None, collate_fn=collate))
    assert [item["x"].numpy()[0] for item in out] == doubled


@pytest.mark.parametrize("name", ["", "newdir/"], ids=["empty", "folder-slash"])
def test_a_path_without_a_file_name_is_refused_before_anything_is_written(tmp_path, name):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    before = os.getcwd()
    os.chdir(cwd)
    try:
        with pytest.raises(ValueError, match="received filename is empty string"):
            mt.save({"a": 1}, name)
    finally:
        os.chdir(before)
    assert os.listdir(tmp_path) == ["cwd"] and os.listdir(cwd) == []


def test_saving_to_an_existing_folder_is_refused(tmp_path):
    with pytest.raises(IsADirectoryError, match="it is a directory; give a file name"):
        mt.save({"a": 1}, str(tmp_path / "."))
    assert os.listdir(tmp_path) == []


def test_save_and_load_round_trip_through_a_bytes_io():
    buffer = io.BytesIO()
    mt.save({"w": mt.ones([2], dtype="bfloat16"), "epoch": 3}, buffer)
    buffer.seek(0)
    state = mt.load(buffer)
    assert state["epoch"] == 3 and state["w"].dtype == mt.bfloat16


def test_a_failed_save_into_a_bytes_io_leaves_it_as_it_was():
    buffer = io.BytesIO(b"kept")
    with pytest.raises(TypeError, match=r"obj\['x'\]"):
        mt.save({"a": mt.ones([2]), "x": object()}, buffer)
    assert buffer.getvalue() == b"kept" and buffer.tell() == 0


def test_a_paddle_pickle_loads_from_a_bytes_io():
    data = pickle.dumps({"w": np.ones(2, "float32"), TABLE: {"w": "w_0"}}, protocol=4)
    assert mt.load(io.BytesIO(data))["w"].name == "w_0"


@pytest.mark.parametrize(
    "protocol, message",
    [
        (1, "Expected 1<'protocol'<5, but received protocol=1"),
        (5, "Expected 1<'protocol'<5, but received protocol=5"),
        ("4", "The 'protocol' MUST be `int`, but received <class 'str'>"),
    ],
    ids=["1", "5", "str"],
)
def test_a_bad_protocol_gets_paddles_error_and_writes_nothing(tmp_path, protocol, message):
    with pytest.raises(ValueError) as e:
        mt.save({"a": 1}, tmp_path / "a.pdparams", protocol=protocol)
    assert str(e.value) == message and os.listdir(tmp_path) == []


def test_default_collate_keeps_numpy_int32_scalars_int32():
    assert default_collate_fn([np.int32(1), np.int32(2)]).dtype == np.int32
    assert default_collate_fn([np.int64(1), np.int64(2)]).dtype == np.int64
    assert default_collate_fn([1, 2]).dtype == np.int64
    assert default_collate_fn([np.int8(1), np.int8(2)]).dtype == np.int64
