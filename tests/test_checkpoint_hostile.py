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
    result, peak = load_measured(path, max_bytes=2**20)  # ample for all but the declaration
    assert isinstance(result, CheckpointError), result
    assert str(path) in str(result)
    assert peak < SLACK


TRUNCATED = b"\x00" * 16 + STOP  # far less than declared
PAST_THE_END = "more than the file holds"
RAW_DECLARATIONS = {
    "BINBYTES8 of 2**62 bytes": (op(b"\x8e", "Q", 2**62) + TRUNCATED, PAST_THE_END),
    "BINUNICODE8 of 2**40 bytes": (op(b"\x8d", "Q", 2**40) + TRUNCATED, PAST_THE_END),
    "BINBYTES of 2**31 bytes": (op(b"B", "I", 2**31) + TRUNCATED, PAST_THE_END),
    "LONG4 of 2**30 bytes": (op(b"\x8b", "i", 2**30) + TRUNCATED, PAST_THE_END),
    "FRAME of 2**60 bytes": (op(b"\x95", "Q", 2**60) + op(b"N") + STOP, PAST_THE_END),
    "a memo entry 2**32 - 1": (op(b"N") + op(b"r", "I", 2**32 - 1) + STOP, "max_bytes"),
}


@pytest.mark.parametrize("form", RAW_DECLARATIONS)
def test_a_length_or_index_a_pickle_declares_is_checked_before_it_is_allocated(tmp_path, form):
    body, message = RAW_DECLARATIONS[form]
    path = tmp_path / "w.pdparams"
    path.write_bytes(PROTO_4 + body)
    result, peak = load_measured(path, max_bytes=2**34)
    assert isinstance(result, CheckpointError), result
    assert message in str(result)
    assert peak < SLACK


AMPLIFIERS = {  # each copy is counted before it is made, the first one past max_bytes refused
    "list(x) ten times": lambda big: [Call(list, (big,)) for _ in range(10)],
    "tuple(x) ten times": lambda big: [Call(tuple, (big,)) for _ in range(10)],
    "set(x) ten times": lambda big: [Call(set, (big,)) for _ in range(10)],
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
    max_bytes = 64 * 2**20
    write_pickle(path, {"x": big, "text": TEXT})
    assert mt.load(path, max_bytes=max_bytes)["x"] == big  # the file's own objects fit
    write_pickle(path, {"x": big, "text": TEXT, "copies": AMPLIFIERS[form](big)})
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


def dtype_with_state(state) -> Call:
    return Call(np.dtype, ("f4", False, True), state)


NUMPYS_STATE = (3, "<", None, None, None, -1, -1, 0)  # what NumPy pickles for float32


@pytest.mark.parametrize(
    "state",
    [
        NUMPYS_STATE[:7] + (1 | 8 | 16,),  # flags: "holds Python objects", "needs init"
        NUMPYS_STATE[:3] + (("a",), {"a": (np.dtype("f4"), 0)}) + NUMPYS_STATE[5:],  # fields
        NUMPYS_STATE[:5] + (3, 1, 0),  # an item size of 3 bytes
    ],
    ids=["object-flags", "fields", "item-size"],
)
def test_a_dtype_takes_only_its_byte_order_from_the_pickle(tmp_path, state):
    # NumPy's dtype.__setstate__ would take these as they are: a float32 that "holds
    # objects" makes NumPy fail when the array is byte-swapped or freed
    path = tmp_path / "w.pdparams"
    data = np.arange(2, dtype="<f4").tobytes()
    write_pickle(
        path, {"w": reconstructed((0,), "b", (1, (2,), dtype_with_state(state), False, data))}
    )
    with pytest.raises(CheckpointError, match="only a byte order"):
        mt.load(path)
    big_endian = NUMPYS_STATE[:1] + (">",) + NUMPYS_STATE[2:]
    swapped = np.arange(2, dtype=">f4").tobytes()
    write_pickle(
        path,
        {"w": reconstructed((0,), "b", (1, (2,), dtype_with_state(big_endian), False, swapped))},
    )
    loaded = mt.load(path, return_numpy=True)["w"]
    assert loaded.dtype == np.float32 and not loaded.dtype.hasobject
    np.testing.assert_array_equal(loaded, [0.0, 1.0])


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
