"""tools/mutants.py's mutants still apply to the code as it is (running them is the tool's job:
``python tools/mutants.py``; docs/contributing.md)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("mutants", ROOT / "tools" / "mutants.py")
mutants = importlib.util.module_from_spec(spec)
sys.modules["mutants"] = mutants  # dataclasses look their module up there
spec.loader.exec_module(mutants)


@pytest.mark.parametrize("mutant", mutants.MUTANTS, ids=lambda m: m.name)
def test_each_mutant_applies_exactly_once_and_names_tests_that_exist(mutant):
    text = (ROOT / mutant.path).read_text()
    assert text.count(mutant.search) == 1, (
        f"{mutant.name}: its search text must occur once in {mutant.path}; a refactor moved "
        "it: update the mutant's search text (and check it is still killed)"
    )
    assert mutant.replace != mutant.search
    for test in mutant.tests:
        path, _, name = test.partition("::")
        assert (ROOT / path).is_file(), test
        if name:  # a renamed test would make the mutant's run an error, not a kill
            assert f"def {name.split('[')[0]}(" in (ROOT / path).read_text(), test


def test_mutant_names_are_unique():
    names = [m.name for m in mutants.MUTANTS]
    assert len(names) == len(set(names))


def test_apply_refuses_a_search_text_that_is_not_there_once(tmp_path):
    (tmp_path / "f.py").write_text("a = 1\na = 1\n")
    twice = mutants.Mutant("twice", "f.py", "a = 1", "a = 2", ("t",), "a test mutant")
    with pytest.raises(LookupError, match="occurs 2 times"):
        mutants.apply(tmp_path, twice)
    once = mutants.Mutant("once", "f.py", "a = 1\na", "b = 1\na", ("t",), "a test mutant")
    assert mutants.apply(tmp_path, once) == "a = 1\na = 1\n"
    assert (tmp_path / "f.py").read_text() == "b = 1\na = 1\n"
