"""Loading a file made to hurt: whatever it declares, ``load`` takes at most ``max_bytes``
(plus a small constant) and returns only values the file holds, or raises ``CheckpointError``.

Each hostile file is small; what it declares is not: arrays of 800 MB or 8 PB, a 2**62-byte
string, a memo of 2**32 entries, a copy of a big list made a thousand times, an index that
decompresses to 20 MB. The peak of memory held during each load is measured with
``tracemalloc`` (``hostile_files.load_measured``).
"""

from __future__ import annotations

import io
import pickle

import numpy as np
import pytest
from hostile_files import (
    PROTO_4,
    RECONSTRUCT,
    SLACK,
    STOP,
    Call,
    array_state,
    global_name,
    load_measured,
    op,
)
from paddle_pickles import save_state_dict

import minitorch_amp as mt
from minitorch_amp.io import CheckpointError
from minitorch_amp.serialization import paddle_pickle
from minitorch_amp.serialization.bounds import MemoryBudget


def write_pickle(path, obj) -> None:
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=4)


def reconstructed(shape, dtype: str, state=None) -> Call:
    """NumPy's own pickle form of an array: ``_reconstruct(ndarray, shape, dtype)``, filled by
    ``__setstate__(state)``; ``state=None`` leaves it unfilled."""
    args = (np.ndarray, shape, dtype.encode())
    return Call(RECONSTRUCT, args) if state is None else Call(RECONSTRUCT, args, state)


# ---- what a pickle declares counts against max_bytes ------------------------------------------
BIG_DECLARATIONS = {
    "ndarray((10**8,), 'f8')": Call(np.ndarray, ((10**8,), "f8")),
    "ndarray((10**15,))": Call(np.ndarray, ((10**15,),)),
    "_reconstruct of (10**8,) float64 before its data": reconstructed(
        (10**8,), "f8", array_state(np.zeros(1))
    ),
}


@pytest.mark.parametrize("form", BIG_DECLARATIONS)
def test_an_array_a_pickle_declares_counts_against_max_bytes(tmp_path, form):
    path = tmp_path / "w.pdparams"
    write_pickle(path, {"w": BIG_DECLARATIONS[form]})
    assert path.stat().st_size < 200
    result, peak = load_measured(path, max_bytes=1000)
    assert isinstance(result, CheckpointError), result
    assert str(path) in str(result)
    assert peak < SLACK


RAW_DECLARATIONS = {
    "BINBYTES8 of 2**62 bytes": op(b"\x8e", "Q", 2**62),
    "BINUNICODE8 of 2**40 bytes": op(b"\x8d", "Q", 2**40),
    "BINBYTES of 2**31 bytes": op(b"B", "I", 2**31),
    "LONG4 of 2**30 bytes": op(b"\x8b", "i", 2**30),
    "FRAME of 2**60 bytes": op(b"\x95", "Q", 2**60),
    "a memo entry 2**32 - 1": op(b"N") + op(b"r", "I", 2**32 - 1),
}


@pytest.mark.parametrize("form", RAW_DECLARATIONS)
def test_a_length_or_index_a_pickle_declares_is_checked_before_it_is_allocated(tmp_path, form):
    path = tmp_path / "w.pdparams"
    path.write_bytes(PROTO_4 + RAW_DECLARATIONS[form] + b"\x00" * 16 + STOP)
    result, peak = load_measured(path, max_bytes=2**34)
    assert isinstance(result, CheckpointError), result
    assert peak < SLACK


AMPLIFIERS = {
    "list(x) a thousand times": lambda big: [Call(list, (big,)) for _ in range(1000)],
    "tuple(x) a thousand times": lambda big: [Call(tuple, (big,)) for _ in range(1000)],
    "set(x) a hundred times": lambda big: [Call(set, (big,)) for _ in range(100)],
    "latin-1 encoding a thousand times": lambda big: [
        Call(_codecs_encode(), (TEXT, "latin1")) for _ in range(1000)
    ],
}
TEXT = "\x00" * 100_000  # one object, so the pickle holds it once


def _codecs_encode():
    import _codecs

    return _codecs.encode


@pytest.mark.parametrize("form", AMPLIFIERS)
def test_calls_that_copy_what_the_file_holds_count_against_max_bytes(tmp_path, form):
    path = tmp_path / "w.pdparams"
    big = list(range(100_000))  # 100,000 items: each copy takes 800 KB or more
    write_pickle(path, {"x": AMPLIFIERS[form](big)})
    max_bytes = 8 * 2**20
    assert path.stat().st_size < max_bytes / 2  # the file itself is allowed
    result, peak = load_measured(path, max_bytes=max_bytes)
    assert isinstance(result, CheckpointError), type(result)
    assert "max_bytes" in str(result)
    assert peak < max_bytes + SLACK


def test_a_paddle_state_dict_loads_within_max_bytes(tmp_path):
    rng = np.random.default_rng(0)
    state = {f"w{i}": rng.standard_normal((64, 64)).astype("float32") for i in range(50)}
    path = tmp_path / "w.pdparams"
    save_state_dict(path, state, {k: f"linear_{k}" for k in state})
    max_bytes = 2 * path.stat().st_size  # the arrays (800 KB), and a little for the rest
    result, peak = load_measured(path, max_bytes=max_bytes)
    assert not isinstance(result, Exception), result
    np.testing.assert_array_equal(result["w7"].numpy(), state["w7"])
    assert peak < max_bytes + SLACK


# ---- no array holds bytes the file did not provide ---------------------------------------------
def test_an_array_that_never_gets_its_data_is_refused_not_returned_uninitialised(tmp_path):
    for form in [Call(np.ndarray, ((4096,), "u1")), reconstructed((4096,), "u1")]:
        path = tmp_path / "w.pdparams"
        write_pickle(path, {"w": form})
        with pytest.raises(CheckpointError, match="uninitialised"):
            mt.load(path)


def test_an_array_gets_its_values_from_its_state(tmp_path):
    values = np.arange(12, dtype="<f4").reshape(3, 4)
    path = tmp_path / "w.pdparams"
    write_pickle(path, {"w": reconstructed((0,), "b", array_state(values))})
    loaded = mt.load(path, return_numpy=True)["w"]
    assert type(loaded) is np.ndarray and loaded.flags.writeable
    np.testing.assert_array_equal(loaded, values)


def test_reconstruct_makes_only_plain_ndarrays():
    # The unpickler hands _reconstruct only what numpy.ndarray resolves to, so a pickle cannot
    # pass anything else: the check is called directly.
    class Sneaky(np.ndarray):
        pass

    unpickler = paddle_pickle.RestrictedUnpickler(io.BytesIO(b""), MemoryBudget(None))
    reconstruct = unpickler.find_class("numpy.core.multiarray", "_reconstruct")
    for subtype in (Sneaky, np.ndarray, np.matrix):
        with pytest.raises(paddle_pickle.UnsafePickleError, match=r"only numpy\.ndarray"):
            reconstruct(subtype, (0,), b"b")
    ndarray = unpickler.find_class("numpy", "ndarray")
    assert reconstruct(ndarray, (0,), b"b").shape == (0,)


def test_a_tensor_name_from_the_name_table_must_be_a_string(tmp_path):
    path = tmp_path / "w.pdparams"
    save_state_dict(path, {"w": np.ones(2, "float32")}, {"w": ["not", "a", "name"]})
    with pytest.raises(CheckpointError, match="name"):
        mt.load(path)
    save_state_dict(path, {"w": np.ones(2, "float32")}, {"w": "linear_0.w_0"})
    assert mt.load(path)["w"].name == "linear_0.w_0"


def test_a_global_the_pickle_spells_out_by_hand_is_still_refused(tmp_path):
    path = tmp_path / "w.pdparams"
    path.write_bytes(PROTO_4 + global_name("os", "system") + STOP)
    with pytest.raises(CheckpointError, match=r"os\.system"):
        mt.load(path)
