"""Fuzzing ``load`` with both checkpoint formats: random bytes, valid files mutated (bits
flipped, cut short, bytes inserted, deleted or overwritten, hostile integers written over
lengths), zip headers rewritten field by field, and pickle programs made of random opcodes.

Whatever the file, loading it ends one of two ways, within ``max_bytes`` plus a small constant
(the peak measured with ``tracemalloc``):

* a clean load, in which every array holds bytes the file holds (for a deflated entry, bytes
  of its decompressed content; for a protocol 2 pickle, the latin-1 text it stores in UTF-8;
  byte-swapped when the dtype says so): nothing uninitialised, nothing made up;
* a ``CheckpointError``, never another exception.

The CI profile runs a fixed (derandomized) few hundred files in about fifteen seconds;
``HYPOTHESIS_PROFILE=thorough`` runs 10,000 mutated files of each format.
"""

from __future__ import annotations

import functools
import io
import os
import pickle
import shutil
import struct
import tempfile
import zipfile
from collections import OrderedDict

import numpy as np
import pytest
from hostile_files import PROTO_4, SLACK, ZIP_FIELDS, load_measured, zip_field_positions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paddle_pickles import FakeTensor, save_object, save_state_dict

import minitorch_amp as mt
from minitorch_amp.io import CheckpointError

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
MUTATED = {"thorough": 10_000, "dev": 30}.get(PROFILE, 600)  # files of each format
OTHER = {"thorough": 2_000, "dev": 10}.get(PROFILE, 150)  # random bytes, crafted headers


def fuzz_settings(examples: int):
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=PROFILE != "thorough",  # CI and dev: the same files every run
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# ---- valid files to start from -------------------------------------------------------------
def _state():
    rng = np.random.default_rng(7)
    return {
        "w": mt.to_tensor(rng.standard_normal((3, 4)).astype("float16")),
        "b": mt.to_tensor(rng.standard_normal(5).astype("float32")),
        "ids": np.arange(6, dtype="int64").reshape(2, 3),
        "bf": mt.to_tensor(rng.standard_normal(4).astype("float32"), dtype="bfloat16"),
        "misc": [1, 2.5, "text", None, True, np.float32(1.5), (3, "x")],
    }


def _zip_seeds(folder) -> list[bytes]:
    path = os.path.join(folder, "stored")
    mt.save(_state(), path)
    with open(path, "rb") as f:
        stored = f.read()
    deflated = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(stored)) as src,
        zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as dst,
    ):
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    return [stored, deflated.getvalue()]


def _pickle_seeds(folder) -> list[bytes]:
    rng = np.random.default_rng(3)
    arrays = {
        "weight": rng.standard_normal((3, 4)).astype("float32"),
        "bias": rng.standard_normal(4).astype("float64"),
        "steps": np.arange(3, dtype="int32"),
    }
    names = {key: f"linear_0.{key}" for key in arrays}
    seeds = []
    for protocol in (2, 3, 4):
        path = os.path.join(folder, f"state{protocol}")
        save_state_dict(path, {**arrays, "LR_Scheduler": {"last_epoch": 3}}, names, protocol)
        with open(path, "rb") as f:
            seeds.append(f.read())
    nested = {
        "model": {"fc.weight": FakeTensor("linear_0.w_0", arrays["weight"])},
        "opt": {"master_weights": OrderedDict(w=FakeTensor("w", arrays["bias"]))},
        "epoch": 7,
        "scalar": np.float32(0.25),
        "set": {1, 2},
    }
    path = os.path.join(folder, "nested")
    save_object(path, nested, protocol=4)
    with open(path, "rb") as f:
        return [*seeds, f.read()]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("fuzz"))


@functools.cache
def seeds(kind: str) -> list[bytes]:
    """The valid files of ``kind`` ("zip" or "pickle") that the mutations start from."""
    folder = tempfile.mkdtemp(prefix="fuzz-seeds-")
    try:
        return _zip_seeds(folder) if kind == "zip" else _pickle_seeds(folder)
    finally:
        shutil.rmtree(folder)


# ---- what every outcome must be ------------------------------------------------------------
def check_load(data: bytes, max_bytes: int, folder: str) -> None:
    path = os.path.join(folder, "fuzzed")
    with open(path, "wb") as f:
        f.write(data)
    result, peak = load_measured(path, max_bytes=max_bytes)
    assert peak <= max_bytes + SLACK, f"peak {peak} bytes under max_bytes={max_bytes}"
    if isinstance(result, Exception):
        assert isinstance(result, CheckpointError), repr(result)
        return
    sources = [data, *_inflated_entries(data)]
    for array in _arrays(result):
        assert _comes_from(array, sources), f"an array {array.dtype}{array.shape} not in the file"


def _arrays(obj):
    """Every array (Tensors as NumPy, scalars as 0-d) in ``obj``, each container once."""
    seen, stack = set(), [obj]
    while stack:
        value = stack.pop()
        if isinstance(value, mt.Tensor):
            yield value.numpy()
        elif isinstance(value, (np.ndarray, np.generic)):
            yield np.asarray(value)
        elif isinstance(value, (dict, list, tuple, set, frozenset)) and id(value) not in seen:
            seen.add(id(value))
            stack.extend(value.values() if isinstance(value, dict) else value)


def _comes_from(array: np.ndarray, sources: list[bytes]) -> bool:
    stored = {array.tobytes(order="A"), array.byteswap().tobytes(order="A")}  # as "<" or ">"
    as_text = {raw.decode("latin1").encode("utf-8") for raw in stored}  # a protocol 2 pickle
    return any(form in source for form in stored | as_text for source in sources)


def _inflated_entries(data: bytes) -> list[bytes]:
    """The decompressed content of each deflated entry of ``data``, if it is a readable zip
    (at most 1 MiB each)."""
    out = []
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            for info in zf.infolist():
                if info.compress_type == zipfile.ZIP_DEFLATED:
                    try:
                        with zf.open(info) as entry:
                            out.append(entry.read(2**20))
                    except Exception:  # an unreadable entry gives nothing
                        pass
    except Exception:  # not a zip: nothing to add
        pass
    return out


# ---- strategies ----------------------------------------------------------------------------
HOSTILE = [0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 2**31 - 1, 2**31, 2**32 - 1, 10**12, 2**62]
HOSTILE += [2**63 - 1, 2**64 - 1]
MAX_BYTES = st.sampled_from([2**16, 2**20, 2**23])


@st.composite
def mutated(draw, seeds: list[bytes]) -> bytes:
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "delete", "overwrite", "integer"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut":
            del data[at:]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 16))]
        elif kind == "overwrite":
            chunk = draw(st.binary(min_size=1, max_size=8))
            data[at : at + len(chunk)] = chunk
        else:
            size = draw(st.sampled_from([1, 2, 4, 8]))
            value = draw(st.sampled_from(HOSTILE)) % 2 ** (8 * size)
            data[at : at + size] = value.to_bytes(size, "little")
    return bytes(data)


@st.composite
def rewritten_zip_headers(draw, seeds: list[bytes]) -> bytes:
    seed = draw(st.sampled_from(seeds))
    with zipfile.ZipFile(io.BytesIO(seed)) as zf:
        names = zf.namelist()
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(names))
        field = draw(st.sampled_from(sorted(ZIP_FIELDS)))
        value = draw(st.sampled_from(HOSTILE) | st.integers(0, 2**32 - 1))
        for offset, fmt in zip_field_positions(seed, name, field):  # where they were
            struct.pack_into(fmt, data, offset, value % 2 ** (8 * struct.calcsize(fmt)))
    return bytes(data)


_ALLOWED_GLOBALS = [
    ("numpy.core.multiarray", "_reconstruct"), ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "scalar"), ("_codecs", "encode"), ("builtins", "list"),
    ("builtins", "tuple"), ("builtins", "set"), ("builtins", "bytes"), ("builtins", "eval"),
    ("collections", "OrderedDict"), ("os", "system"),
]  # fmt: skip


_BARE_OPCODES = [bytes([code]) for code in b"N)]}(tl\x85\x86\x87asueRb0\x94\x8f\x90"]


@st.composite
def pickle_programs(draw) -> bytes:
    """Random opcodes with random (often hostile) arguments, ending in STOP."""
    ops = [PROTO_4]
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.integers(0, 9))
        if kind == 0:
            ops.append(draw(st.sampled_from(_BARE_OPCODES)))
        elif kind == 1:
            ops.append(b"K" + bytes([draw(st.integers(0, 255))]))
        elif kind == 2:
            ops.append(b"J" + struct.pack("<i", draw(st.integers(-(2**31), 2**31 - 1))))
        elif kind == 3:  # bytes, honest or not about their length
            payload = draw(st.binary(max_size=64))
            declared = draw(st.sampled_from([len(payload), *HOSTILE]))
            ops.append(b"\x8e" + struct.pack("<Q", declared % 2**64) + payload)
        elif kind == 4:
            text = draw(st.text(max_size=16)).encode()
            ops.append(b"\x8c" + bytes([len(text)]) + text)
        elif kind == 5:
            module, name = draw(st.sampled_from(_ALLOWED_GLOBALS))
            ops.append(f"c{module}\n{name}\n".encode())
        elif kind == 6:
            ops.append(b"h" + bytes([draw(st.integers(0, 255))]))
        elif kind == 7:
            ops.append(b"r" + struct.pack("<I", draw(st.sampled_from([0, 1, 2**20, 2**32 - 1]))))
        elif kind == 8:  # a shape tuple for _reconstruct or ndarray
            dims = draw(st.lists(st.sampled_from([0, 1, 4, 10**8, 10**15]), max_size=3))
            ops.append(b"(" + b"".join(pickle.dumps(d, 2)[2:-1] for d in dims) + b"t")
        else:
            ops.append(b"\x8c\x01" + draw(st.sampled_from([b"b", b"f", b"u", b"O"])))
    return b"".join(ops) + b"."


# ---- the fuzz tests ------------------------------------------------------------------------
@fuzz_settings(MUTATED)
@given(data=st.data(), max_bytes=MAX_BYTES)
def test_mutated_zip_checkpoints_load_cleanly_or_raise_the_checkpoint_error(
    workdir, data, max_bytes
):
    check_load(data.draw(mutated(seeds("zip"))), max_bytes, workdir)


@fuzz_settings(MUTATED)
@given(data=st.data(), max_bytes=MAX_BYTES)
def test_mutated_paddle_pickles_load_cleanly_or_raise_the_checkpoint_error(
    workdir, data, max_bytes
):
    check_load(data.draw(mutated(seeds("pickle"))), max_bytes, workdir)


@fuzz_settings(OTHER)
@given(data=st.data(), max_bytes=MAX_BYTES)
def test_rewritten_zip_headers_load_cleanly_or_raise_the_checkpoint_error(workdir, data, max_bytes):
    check_load(data.draw(rewritten_zip_headers(seeds("zip"))), max_bytes, workdir)


@fuzz_settings(OTHER)
@given(program=pickle_programs(), max_bytes=MAX_BYTES)
def test_random_pickle_programs_load_cleanly_or_raise_the_checkpoint_error(
    workdir, program, max_bytes
):
    check_load(program, max_bytes, workdir)


@fuzz_settings(OTHER)
@given(
    head=st.sampled_from([b"", b"PK\x03\x04", b"\x80\x02", b"\x80\x04\x95"]),
    body=st.binary(max_size=2048),
    max_bytes=MAX_BYTES,
)
def test_random_bytes_load_cleanly_or_raise_the_checkpoint_error(workdir, head, body, max_bytes):
    check_load(head + body, max_bytes, workdir)


def test_the_seeds_load_and_their_arrays_come_from_their_files(workdir):
    # the check above must accept honest files (and so can fail only for made-up values)
    every_seed = seeds("zip") + seeds("pickle")
    for seed in every_seed:
        path = os.path.join(workdir, "seed")
        with open(path, "wb") as f:
            f.write(seed)
        arrays = list(_arrays(mt.load(path)))
        assert len(arrays) >= 3
        check_load(seed, 2**20, workdir)
    assert not _comes_from(np.full(64, 12345.678), every_seed)
