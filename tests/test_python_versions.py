"""Every Python that ``requires-python = ">=3.10"`` admits runs the package.

Python 3.10 has no ``BaseException.add_note``: the all-or-nothing paths (``Layer.to``,
``set_state_dict``, the optimizer's step) add their "nothing was changed" line through
``backend.error_notes.add_note``, which keeps ``__notes__`` as 3.11 does and, since 3.10
prints no notes, puts the line in the message too. The source is parsed with 3.10's grammar
and searched for the names that 3.11 added, so a 3.11-only call fails here first.
"""

from __future__ import annotations

import ast
import re
import traceback
from pathlib import Path

import pytest
from all_or_nothing import failing_at, state_of

from minitorch_amp import device, nn
from minitorch_amp.backend import device as backend
from minitorch_amp.backend import error_notes
from minitorch_amp.backend.error_notes import add_note, add_note_without_builtin

PACKAGE = Path(__file__).resolve().parents[1] / "minitorch_amp"
SOURCES = sorted(PACKAGE.rglob("*.py"))
NOTES_HELPER = PACKAGE / "backend" / "error_notes.py"  # calls the builtin when it exists
OLDEST = (3, 10)

TYPING_3_11 = "(Self|Never|LiteralString|assert_never|reveal_type)"
# names that exist only from Python 3.11 (``zip(strict=)`` and ``match`` are 3.10)
NEWER_THAN_OLDEST = {
    r"\.add_note\(": "BaseException.add_note: use backend.error_notes.add_note",
    r"\bdatetime\.UTC\b|from datetime import .*\bUTC\b": "datetime.UTC: use timezone.utc",
    rf"\btyping\.{TYPING_3_11}\b|from typing import .*\b{TYPING_3_11}\b": "typing 3.11 names",
    r"\bimport tomllib\b|\bfrom tomllib\b": "tomllib",
    r"\bExceptionGroup\b|\bexcept\s*\*": "ExceptionGroup / except*",
    r"\bStrEnum\b": "enum.StrEnum",
    r"\bTaskGroup\b": "asyncio.TaskGroup",
}


def test_the_oldest_supported_python_is_the_one_pyproject_names():
    pyproject = (PACKAGE.parent / "pyproject.toml").read_text()
    assert f'requires-python = ">={OLDEST[0]}.{OLDEST[1]}"' in pyproject


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_module_parses_with_the_grammar_of_the_oldest_supported_python(path):
    ast.parse(path.read_text(), filename=str(path), feature_version=OLDEST)


def test_no_module_uses_a_name_that_python_3_10_lacks():
    found = []
    for path in SOURCES:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            for pattern, what in NEWER_THAN_OLDEST.items():
                if re.search(pattern, code) and path != NOTES_HELPER:
                    found.append(f"{path.relative_to(PACKAGE)}:{number}: {what}")
    assert not found, "3.11-only names:\n" + "\n".join(found)


def test_without_the_builtin_a_note_is_kept_in_notes_and_shown_in_the_message():
    exc = RuntimeError("injected: the copy back failed")
    add_note_without_builtin(exc, "nothing was converted")
    add_note_without_builtin(exc, "and a second line")
    assert exc.__notes__ == ["nothing was converted", "and a second line"]
    assert str(exc) == "injected: the copy back failed\nnothing was converted\nand a second line"
    assert isinstance(exc, RuntimeError)


def test_without_the_builtin_an_error_without_a_message_gets_the_note_as_its_message():
    exc = MemoryError()
    add_note_without_builtin(exc, "nothing was loaded")
    assert str(exc) == "nothing was loaded"


def test_without_the_builtin_an_error_that_formats_its_arguments_keeps_them():
    exc = KeyError("weight")
    add_note_without_builtin(exc, "nothing was loaded")
    assert exc.args == ("weight",) and str(exc) == "'weight'"
    assert exc.__notes__ == ["nothing was loaded"]


@pytest.mark.parametrize("builtin", [True, False], ids=["builtin add_note", "Python 3.10"])
def test_a_note_shows_in_the_printed_traceback(monkeypatch, builtin):
    if builtin and not error_notes.HAS_BUILTIN_ADD_NOTE:
        pytest.skip("this Python has no BaseException.add_note")
    monkeypatch.setattr(error_notes, "HAS_BUILTIN_ADD_NOTE", builtin)
    exc = ValueError("bad shape")
    add_note(exc, "nothing was converted")
    printed = "".join(traceback.format_exception(type(exc), exc, None))
    assert printed.count("nothing was converted") == (1 if builtin else 2)
    assert exc.__notes__ == ["nothing was converted"]


def test_on_python_3_10_a_failed_layer_to_still_says_nothing_was_converted(monkeypatch):
    monkeypatch.setattr(error_notes, "HAS_BUILTIN_ADD_NOTE", False)
    fc = nn.Linear(8, 4)
    before = state_of(fc)
    fail = failing_at(1, lambda: RuntimeError("injected"), (backend, "to_place"))
    device.set_memory_limit(device.memory_allocated() + 64)  # the host path: to_place runs
    try:
        with fail, pytest.raises(RuntimeError, match="injected") as info:
            fc.to(dtype="float16")
    finally:
        device.set_memory_limit(None)
    assert "nothing was converted" in str(info.value).lower()
    assert any("nothing was converted" in note.lower() for note in info.value.__notes__)
    assert state_of(fc) == before
