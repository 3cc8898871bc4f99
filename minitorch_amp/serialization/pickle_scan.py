"""Walk a pickle's opcodes before unpickling it: every length checked, every cost charged.

CPython's unpickler believes what an opcode declares. A ``BINBYTES8`` of ``2**62`` bytes asks
for that much memory before reading a byte, a ``LONG_BINPUT`` of ``2**32 - 1`` grows the memo to
``2**33`` slots, a ``FRAME`` is read whole. So :func:`scan` reads the opcodes first (the file is
mapped, not read) and builds nothing. It refuses an opcode that ``paddle.save`` never writes
(the text forms of protocols 0 and 1, extension codes, out-of-band buffers, persistent ids)
and a length that runs past the end of the file. It charges the budget, before anything exists,
for what unpickling will build:

* each opcode: :data:`OBJECT_COST` bytes, the most one opcode can add (an empty set is 216
  bytes, an item added to a set or dict up to about 130, with the stack slot);
* bytes, ``bytearray``, Python 2 strings and long integers: the bytes they declare; UTF-8
  strings 1, 2 or 4 bytes per byte, as Python will store their characters;
* the unpickler's input buffer, which holds a frame, or an argument it decodes, whole: the
  largest of them (each replaces the one before);
* the memo: 24 bytes per slot up to the highest index used (its resize copies it).

What the allowed calls build at run time (copies, encodings, arrays) is charged by the
unpickler itself (``paddle_pickle.RestrictedUnpickler``).
"""

from __future__ import annotations

import pickle
import struct

import numpy as np

from .bounds import MemoryBudget

OBJECT_COST = 256  # bytes one opcode may add, at most (see the module docstring)
MEMO_SLOT_COST = 24  # a memo slot, and its share of the copy when the memo grows
_MAX_NAME = 1000  # a GLOBAL's module or name, in bytes


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle asks for something a checkpoint never needs (a function, a class, code)."""


# opcode: (struct format of its fixed argument, what follows or what it does)
_OPCODES = {
    b"\x80": ("<B", None),  # PROTO
    b"\x95": ("<Q", "frame"),  # FRAME
    b".": ("", "stop"),  # STOP
    **dict.fromkeys([b"(", b"0", b"1", b"2"], ("", None)),  # MARK POP POP_MARK DUP
    **dict.fromkeys([b"}", b"]", b")", b"\x8f"], ("", None)),  # empty dict list tuple set
    **dict.fromkeys([b"t", b"\x85", b"\x86", b"\x87", b"l", b"d", b"\x91"], ("", None)),
    **dict.fromkeys([b"a", b"e", b"s", b"u", b"\x90"], ("", None)),  # APPEND(S) SETITEM(S) ADD
    **dict.fromkeys([b"N", b"\x88", b"\x89"], ("", None)),  # None True False
    b"J": ("<i", None),  # BININT
    b"K": ("<B", None),  # BININT1
    b"M": ("<H", None),  # BININT2
    b"G": (">d", None),  # BINFLOAT
    b"\x8a": ("<B", "long"),  # LONG1
    b"\x8b": ("<i", "long"),  # LONG4
    b"\x8c": ("<B", "text"),  # SHORT_BINUNICODE
    b"X": ("<I", "text"),  # BINUNICODE
    b"\x8d": ("<Q", "text"),  # BINUNICODE8
    b"C": ("<B", "bytes"),  # SHORT_BINBYTES
    b"B": ("<I", "bytes"),  # BINBYTES
    b"\x8e": ("<Q", "bytes"),  # BINBYTES8
    b"\x96": ("<Q", "bytes"),  # BYTEARRAY8
    b"U": ("<B", "latin1"),  # SHORT_BINSTRING (Python 2's str, decoded as latin-1)
    b"T": ("<i", "latin1"),  # BINSTRING
    b"q": ("<B", "memo"),  # BINPUT
    b"r": ("<I", "memo"),  # LONG_BINPUT
    b"\x94": ("", "memoize"),  # MEMOIZE
    b"h": ("<B", None),  # BINGET
    b"j": ("<I", None),  # LONG_BINGET
    b"c": ("", "global"),  # GLOBAL module\nname\n
    **dict.fromkeys([b"\x93", b"R", b"b", b"\x81", b"\x92"], ("", None)),  # STACK_GLOBAL REDUCE
    # BUILD NEWOBJ NEWOBJ_EX: calls, resolved and charged by the unpickler
}
_PERSISTENT = {b"P", b"Q"}  # PERSID, BINPERSID


def scan(data, budget: MemoryBudget) -> None:
    """Check the pickle in ``data`` (bytes or a mapped file) opcode by opcode, up to its STOP,
    and charge ``budget`` for what unpickling it builds (see the module docstring).

    Raises:
        UnsafePickleError: an opcode that ``paddle.save`` never writes.
        pickle.UnpicklingError: a length past the end of the file, or no STOP.
        CheckpointError: the pickle takes more than the budget allows.
    """
    end = len(data)
    pos = 0
    cost = 0
    buffer = 0  # the unpickler's input buffer: the largest frame or argument read whole
    memo_slots = 0
    limit = None if budget.max_bytes is None else budget.max_bytes - budget.charged
    while pos < end:
        at, code = pos, data[pos : pos + 1]
        spec = _OPCODES.get(code)
        if spec is None:
            raise _refusal(code, at)
        fmt, follows = spec
        pos += 1
        value = 0
        if fmt:
            size = struct.calcsize(fmt)
            _within(pos + size, end, code, at)
            (value,) = struct.unpack_from(fmt, data, pos)
            pos += size
        cost += OBJECT_COST
        if follows == "stop":
            budget.charge(cost, "unpickling it")
            return
        if follows in ("bytes", "text", "latin1", "long", "frame"):
            if value < 0:
                raise pickle.UnpicklingError(f"opcode {code!r} at byte {at}: a negative length")
            _within(pos + value, end, code, at)
            if follows != "bytes" and value > buffer:  # read whole into the input buffer,
                cost += value - buffer  # which the next such read replaces
                buffer = value
            if follows == "text":
                cost += value * _utf8_width(data, pos, value)
            elif follows != "frame":
                cost += value
            pos += value if follows != "frame" else 0  # a frame's opcodes are scanned next
        elif follows == "memo" and value >= memo_slots:
            cost += MEMO_SLOT_COST * (value + 1 - memo_slots)
            memo_slots = value + 1
        elif follows == "memoize":
            cost += MEMO_SLOT_COST
        elif follows == "global":
            for _ in range(2):  # the module and the name, each ending in a newline
                newline = data.find(b"\n", pos, min(end, pos + _MAX_NAME))
                if newline < 0:
                    raise pickle.UnpicklingError(f"a malformed GLOBAL at byte {pos}")
                cost += 2 * (newline - pos)
                pos = newline + 1
        if limit is not None and cost > limit:
            budget.charge(cost, "unpickling it")  # raises
    raise pickle.UnpicklingError("the pickle ends before its STOP opcode")


def _within(needed: int, end: int, code: bytes, at: int) -> None:
    if needed > end:
        raise pickle.UnpicklingError(
            f"opcode {code!r} at byte {at} declares {needed - end} bytes more than the file holds"
        )


def _utf8_width(data, start: int, length: int) -> int:
    """Bytes per character of the ``str`` Python makes of these UTF-8 bytes: 1, 2 or 4."""
    if length < 4096:
        return 4  # not worth looking
    top = int(np.frombuffer(data, np.uint8, length, start).max())
    # a lead byte of 0xC4 or more starts a character past U+00FF, 0xF0 one past U+FFFF
    return 1 if top < 0xC4 else 2 if top < 0xF0 else 4


def _refusal(code: bytes, at: int) -> pickle.UnpicklingError:
    if code in _PERSISTENT:
        return UnsafePickleError(
            "the pickle refers to external objects (a PyTorch-style archive?); not supported"
        )
    if code in b"ILFSVpgio\x82\x83\x84\x97\x98":
        return UnsafePickleError(
            f"opcode {code!r} at byte {at} belongs to protocols 0 and 1, extensions or "
            "out-of-band buffers, which paddle.save (protocol 2 to 4) never writes"
        )
    return pickle.UnpicklingError(f"byte {at} ({code!r}) is not a pickle opcode")
