"""``load`` never trusts a file's own sizes, and ``save`` leaves nothing behind it.

Loading checks every ``.npy`` header against the archive before allocating anything, refuses
more than ``max_bytes`` in all (a zip bomb, or just a bigger file than expected; the error says
how to allow it), and reads an array referenced many times once. Saving keeps the permission
bits of the file it replaces, and the temporary file of a save that died half-way is removed by
the next save to the same path.
"""

from __future__ import annotations

import inspect
import io
import json
import os
import socket
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp.io import CheckpointError


def write_checkpoint(path, root: dict, arrays: dict, compression=zipfile.ZIP_STORED) -> None:
    """A checkpoint by hand: ``arrays`` maps an entry name to its raw ``.npy`` bytes."""
    structure = {"format": "minitorch_amp", "version": 1, "root": root}
    with zipfile.ZipFile(path, "w", compression) as zf:
        zf.writestr("__structure__.json", json.dumps(structure))
        for name, data in arrays.items():
            zf.writestr(name, data)


def npy_header(dtype: str, shape: tuple) -> bytes:
    """The bytes of a ``.npy`` file up to its data: magic, version 1.0, the header dict."""
    buffer = io.BytesIO()
    header = {"descr": dtype, "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue()


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def tensor_node(index: int, dtype: str, shape: list) -> dict:
    return {"type": "tensor", "array": index, "dtype": dtype, "shape": shape}


# ---- load -----------------------------------------------------------------------------------
def test_a_header_declaring_a_trillion_elements_is_a_checkpoint_error(tmp_path):
    path = tmp_path / "bomb.pdparams"
    shape = (10**12,)
    write_checkpoint(
        path,
        {"type": "dict", "items": [["w", tensor_node(0, "<f4", list(shape))]]},
        {"arrays/0.npy": npy_header("<f4", shape)},  # the header and no data
    )
    with pytest.raises(CheckpointError, match=r"obj\['w'\].*4000000000000 bytes") as info:
        mt.load(path)
    assert str(path) in str(info.value)


def reading_cost(path) -> int:
    """What load() counts for reading a checkpoint besides its arrays (its docstring): 48 bytes
    per byte of the index and 16 per byte of the zip's central directory."""
    data = path.read_bytes()
    with zipfile.ZipFile(path) as zf:
        index = zf.getinfo("__structure__.json").file_size
        directory = data.rindex(b"PK\x05\x06") - zf.start_dir  # up to the end record
    return 48 * index + 16 * directory


def test_loading_more_than_max_bytes_is_refused_and_the_error_says_how_to_allow_it(tmp_path):
    path = tmp_path / "big.pdparams"
    mt.save({"w": np.zeros(1000, "float32"), "b": np.zeros(10, "float32")}, path)
    with pytest.raises(CheckpointError, match=r"more than max_bytes=4000.*max_bytes="):
        mt.load(path, max_bytes=4000)  # the arrays alone need 4040
    needed = 4040 + reading_cost(path)
    with pytest.raises(CheckpointError, match=f"more than max_bytes={needed - 1}"):
        mt.load(path, max_bytes=needed - 1)
    assert mt.load(path, max_bytes=needed)["w"].shape == (1000,)
    assert mt.load(path, max_bytes=None)["w"].shape == (1000,)


def test_loading_has_a_size_cap_by_default():
    default = inspect.signature(mt.load).parameters["max_bytes"].default
    assert default == mt.io.DEFAULT_MAX_BYTES == 16 * 2**30


def test_an_array_referenced_many_times_is_decompressed_once(tmp_path, monkeypatch):
    path = tmp_path / "repeated.pdparams"
    array = np.arange(100_000, dtype="float32")
    node = {"type": "ndarray", "array": 0, "dtype": "<f4", "shape": [100_000]}
    write_checkpoint(
        path,
        {"type": "list", "items": [node] * 1000},  # 400 MB if each reference were a copy
        {"arrays/0.npy": npy_bytes(array)},
        compression=zipfile.ZIP_DEFLATED,
    )
    opened = []
    real_open = zipfile.ZipFile.open

    def counting_open(self, name, *args, **kwargs):
        opened.append(name)
        return real_open(self, name, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", counting_open)
    loaded = mt.load(path)
    assert opened.count("arrays/0.npy") == 1
    assert len(loaded) == 1000 and all(a is loaded[0] for a in loaded)
    np.testing.assert_array_equal(loaded[0], array)
    assert len(mt.load(path, max_bytes=array.nbytes + reading_cost(path))) == 1000  # counted once


# ---- save -----------------------------------------------------------------------------------
@pytest.fixture
def usual_umask():
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o444])
def test_save_keeps_the_permission_bits_of_the_file_it_replaces(tmp_path, usual_umask, mode):
    path = tmp_path / "private.pdparams"
    mt.save({"epoch": 1}, path)
    os.chmod(path, mode)
    mt.save({"epoch": 2}, path)
    assert oct(os.stat(path).st_mode & 0o777) == oct(mode)
    assert mt.load(path) == {"epoch": 2}


@pytest.mark.skipif(not hasattr(os, "symlink") or os.name == "nt", reason="POSIX links")
def test_save_through_a_symbolic_link_writes_its_target_and_keeps_the_link(tmp_path):
    target = tmp_path / "runs" / "ckpt.pdparams"
    target.parent.mkdir()
    mt.save({"epoch": 1}, target)
    link = tmp_path / "latest.pdparams"
    os.symlink(os.path.join("runs", "ckpt.pdparams"), link)  # relative, as ln -s makes it
    mt.save({"epoch": 2}, link)
    assert link.is_symlink() and os.readlink(link) == os.path.join("runs", "ckpt.pdparams")
    assert mt.load(target) == {"epoch": 2} and mt.load(link) == {"epoch": 2}
    assert sorted(os.listdir(tmp_path / "runs")) == ["ckpt.pdparams"]  # no temporary left
    dangling = tmp_path / "next.pdparams"
    os.symlink(tmp_path / "runs" / "new.pdparams", dangling)
    mt.save({"epoch": 3}, dangling)  # as open() does: the link's target is created
    assert dangling.is_symlink() and mt.load(tmp_path / "runs" / "new.pdparams") == {"epoch": 3}


def test_a_new_file_gets_the_permissions_open_would_give_it(tmp_path, usual_umask):
    mt.save({"epoch": 1}, tmp_path / "new.pdparams")
    assert oct(os.stat(tmp_path / "new.pdparams").st_mode & 0o777) == oct(0o644)


CRASHING_SAVE = """
import os, sys
import numpy as np
import minitorch_amp as mt

def die(*args, **kwargs):
    os._exit(3)  # killed half-way: no except, no finally

np.lib.format.write_array = die
mt.save({"w": np.ones(4)}, sys.argv[1])
"""


def test_the_next_save_removes_what_a_crashed_save_left_behind(tmp_path):
    path = tmp_path / "ckpt.pdparams"
    mt.save({"epoch": 1}, path)
    crashed = subprocess.run([sys.executable, "-c", CRASHING_SAVE, str(path)], check=False)
    assert crashed.returncode == 3
    assert len(os.listdir(tmp_path)) == 2  # the checkpoint and the crashed save's temporary
    assert mt.load(path) == {"epoch": 1}
    mt.save({"epoch": 2}, path)
    assert os.listdir(tmp_path) == ["ckpt.pdparams"]
    assert mt.load(path) == {"epoch": 2}


def test_a_save_in_progress_elsewhere_keeps_its_temporary_file(tmp_path):
    path = tmp_path / "ckpt.pdparams"
    # a live process (this one) of this host writing to the same path, and a process of
    # another host (its pid means nothing here): the next save must leave both files alone
    live = tmp_path / f".ckpt.pdparams.{socket.gethostname()}-{os.getpid()}.0123abcd.tmp"
    elsewhere = tmp_path / ".ckpt.pdparams.another-host-999999999.0123abcd.tmp"
    for temporary in (live, elsewhere):
        temporary.write_bytes(b"half a checkpoint")
    mt.save({"epoch": 2}, path)
    assert sorted(os.listdir(tmp_path)) == sorted([path.name, live.name, elsewhere.name])
