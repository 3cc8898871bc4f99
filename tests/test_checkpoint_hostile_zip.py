"""Loading a zip checkpoint made to hurt: an index that decompresses to 20 MB, an entry that
inflates past the size it declares, a ``.npy`` header claiming 4 GiB, a directory of 20,000
entries, a compression method ``save`` never uses. Each is a ``CheckpointError`` and costs at
most ``max_bytes`` plus a small constant (measured with ``tracemalloc``)."""

from __future__ import annotations

import io
import json
import struct
import time
import zipfile

import numpy as np
import pytest
from hostile_files import SLACK, load_measured, set_zip_field
from test_reliability_io import npy_header, tensor_node, write_checkpoint

import minitorch_amp as mt
from minitorch_amp.io import CheckpointError


def index_of(root: dict) -> bytes:
    return json.dumps({"format": "minitorch_amp", "version": 1, "root": root}).encode()


def index_of_nones(count: int) -> bytes:
    """The index of a list of ``count`` Nones (17 bytes each), written fast."""
    nodes = b", ".join([b'{"type": "none"}'] * count)
    return index_of({"type": "list", "items": []}).replace(b"[]", b"[" + nodes + b"]")


def deflated(path, entries: dict) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)


# ---- the index ----------------------------------------------------------------------------
def test_an_index_of_more_than_16_mib_is_refused_before_it_is_decompressed(tmp_path):
    path = tmp_path / "bomb.pdparams"
    deflated(path, {"__structure__.json": index_of_nones(1_200_000)})  # 20 MB of JSON
    assert path.stat().st_size < 200_000
    start = time.perf_counter()
    result, peak = load_measured(path, max_bytes=2**30)
    assert isinstance(result, CheckpointError), type(result)
    assert "16777216" in str(result) and "max_bytes=None" in str(result)
    assert peak < SLACK and time.perf_counter() - start < 1.0


def test_the_index_counts_against_max_bytes_at_what_parsing_it_can_take(tmp_path):
    path = tmp_path / "index.pdparams"
    deflated(path, {"__structure__.json": index_of_nones(60_000)})  # about 1 MB
    size = zipfile.ZipFile(path).getinfo("__structure__.json").file_size
    max_bytes = 40 * size  # less than the 48 bytes per byte that parsing JSON can take
    result, peak = load_measured(path, max_bytes=max_bytes)
    assert isinstance(result, CheckpointError), type(result)
    assert "__structure__.json" in str(result) and "max_bytes" in str(result)
    assert peak < SLACK
    assert len(mt.load(path, max_bytes=50 * size)) == 60_000


def test_an_entry_that_inflates_past_its_declared_size_costs_only_its_declaration(tmp_path):
    path = tmp_path / "liar.pdparams"
    real = b"[" + b" " * 50_000_000 + b"]"  # 50 MB once decompressed
    buffer = io.BytesIO()
    deflated(buffer, {"__structure__.json": real})
    path.write_bytes(set_zip_field(buffer.getvalue(), "__structure__.json", "size", 100))
    result, peak = load_measured(path, max_bytes=2**30)
    assert isinstance(result, CheckpointError), type(result)
    assert peak < SLACK


@pytest.mark.parametrize("method", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_bzip2_and_lzma_entries_are_refused_as_their_inflation_cannot_be_bounded(tmp_path, method):
    # zipfile decompresses a bzip2 or lzma block whole (no output limit): 100 bytes declared
    # would still inflate to 50 MB before the size is checked
    path = tmp_path / "packed.pdparams"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as zf:
        zf.writestr("__structure__.json", b"[" + b" " * 50_000_000 + b"]")
    path.write_bytes(set_zip_field(buffer.getvalue(), "__structure__.json", "size", 100))
    result, peak = load_measured(path, max_bytes=2**30)
    assert isinstance(result, CheckpointError), type(result)
    assert f"method {method}" in str(result)
    assert peak < SLACK


# ---- arrays -------------------------------------------------------------------------------
def test_a_header_declaring_more_than_its_entry_holds_is_refused_before_allocating(tmp_path):
    # what stops it is the entry's declared size, checked against the header before the
    # array is made: without that check, np.empty would take the 100 MB first
    path = tmp_path / "short.pdparams"
    shape = (25_000_000,)
    write_checkpoint(
        path,
        tensor_node(0, "<f4", list(shape)),
        {"arrays/0.npy": npy_header("<f4", shape) + b"\x00" * 10},
    )
    result, peak = load_measured(path, max_bytes=None)  # no limit: only that check is left
    assert isinstance(result, CheckpointError), type(result)
    assert "100000000 bytes, but the archive holds 10 bytes" in str(result)
    assert peak < SLACK


def test_a_npy_header_declaring_4_gib_is_refused_without_reading_it(tmp_path):
    path = tmp_path / "header.pdparams"
    entry = b"\x93NUMPY\x02\x00" + struct.pack("<I", 2**32 - 1) + b" " * 50_000_000
    deflated(
        path, {"__structure__.json": index_of(tensor_node(0, "<f4", [1])), "arrays/0.npy": entry}
    )
    result, peak = load_measured(path, max_bytes=2**30)
    assert isinstance(result, CheckpointError), type(result)
    assert "header of 4294967295 bytes" in str(result)
    assert peak < SLACK


# ---- the archive --------------------------------------------------------------------------
def test_the_zip_directory_counts_against_max_bytes(tmp_path):
    path = tmp_path / "many.pdparams"
    with zipfile.ZipFile(path, "w") as zf:
        for i in range(20_000):
            zf.writestr(f"x{i}", b"")
    max_bytes = 2**20
    result, peak = load_measured(path, max_bytes=max_bytes)
    assert isinstance(result, CheckpointError), type(result)
    assert "central directory" in str(result)
    assert peak < max_bytes + SLACK


@pytest.mark.parametrize(
    "method",
    [1, 8, 12, 14, 99],  # shrink, deflate, bzip2, lzma, none at all: save() only stores
)
def test_a_compression_method_save_never_uses_is_a_checkpoint_error(tmp_path, method):
    mt.save({"w": np.arange(100, dtype="float32")}, tmp_path / "good")
    data = (tmp_path / "good").read_bytes()
    path = tmp_path / "bad"
    path.write_bytes(set_zip_field(data, "arrays/0.npy", "method", method))
    with pytest.raises(CheckpointError, match="bad"):
        mt.load(path)
