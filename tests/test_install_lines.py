"""Install lines run as written: every shell block of the README is valid bash, and every
``pip install`` that the docs, the examples or an error message shows installs this checkout
(``pip install -e ".[extra]"`` from the repository root) with extras that pyproject.toml
defines. minitorch_amp is on no package index, so ``pip install minitorch_amp[...]`` cannot
work; third-party packages (``pip install hypothesis``) may be named as they are.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = set(
    tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
)

# what follows "pip install" up to the end of the command as it is written: a backtick, a
# shell comment, "&&", or the end of the line
PIP_INSTALL = re.compile(r"pip install ([^`#\n]*?)(?=`|#|&&|$)", re.MULTILINE)
TOKEN = re.compile(r"\"[^\"]*\"|'[^']*'|\S+")
LOCAL_TARGET = re.compile(r"^\.(\[(?P<extras>[\w,-]+)\])?$")


def _unquoted(token: str) -> str:
    """A shell word without its quotes, or a word of prose without its punctuation."""
    token = token.strip("\"'(),;:")
    return token if token == "." else token.rstrip(".")


def _texts() -> list[tuple[str, str]]:
    """(where, text) for the README, every docs page, and every string in the package and
    the examples (docstrings and error messages alike)."""
    found = [(p.relative_to(ROOT).as_posix(), p.read_text()) for p in _pages()]
    for path in sorted(
        [*(ROOT / "minitorch_amp").rglob("*.py"), *(ROOT / "examples").glob("*.py")]
    ):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.append((f"{path.relative_to(ROOT).as_posix()}:{node.lineno}", node.value))
    return found


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _install_lines() -> list[tuple[str, str]]:
    return [
        (where, match.group(1).strip())
        for where, text in _texts()
        for match in PIP_INSTALL.finditer(text)
    ]


def test_the_scan_finds_the_install_lines_it_is_meant_to_check():
    lines = _install_lines()
    assert any(where == "README.md" and '-e ".[test]"' in args for where, args in lines)
    assert any(where.startswith("minitorch_amp/") for where, _ in lines)
    assert len(lines) >= 10, lines


@pytest.mark.parametrize(("where", "args"), _install_lines(), ids=lambda v: v)
def test_a_pip_install_line_installs_this_checkout_editable_with_defined_extras(where, args):
    words = TOKEN.findall(args)
    # the command ends where a parenthetical remark begins: "pip install X (or ...)"
    words = words[: next((i for i, w in enumerate(words) if w.startswith("(")), len(words))]
    tokens = [_unquoted(word) for word in words]
    for i, token in enumerate(tokens):
        assert not token.startswith("minitorch_amp"), (
            f'{where}: "pip install {args}" names minitorch_amp, which is on no package '
            'index; write pip install -e ".[extra]" (from the repository root)'
        )
        if token.startswith("."):
            local = LOCAL_TARGET.match(token)
            assert local, f"{where}: {token!r} is not . or .[extras]"
            assert "-e" in tokens[:i], f'{where}: write pip install -e "{token}" (editable)'
            unknown = set((local.group("extras") or "").split(",")) - {""} - EXTRAS
            assert not unknown, f"{where}: extras {sorted(unknown)} are not in pyproject.toml"


def _bash_blocks(page: Path) -> list[tuple[int, str]]:
    blocks, lines = [], page.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.strip() in ("```bash", "```sh", "```shell"):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            blocks.append((i + 1, "\n".join(lines[i + 1 : end]) + "\n"))
    return blocks


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.name)
def test_every_bash_block_of_a_page_is_valid_shell(page):
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    for line, block in _bash_blocks(page):
        out = subprocess.run([bash, "-n"], input=block, capture_output=True, text=True)
        assert out.returncode == 0, f"{page.name}:{line}: bash -n says {out.stderr}\n{block}"
        assert not re.search(r"<[^<>\n]+>", block), (
            f"{page.name}:{line}: a <placeholder> pasted into bash is a redirection:\n{block}"
        )


def test_the_readme_has_bash_blocks_to_check():
    assert len(_bash_blocks(ROOT / "README.md")) >= 3


def test_the_readmes_virtual_environment_leaves_git_status_clean():
    # the README creates .venv in the checkout: git must not list it as untracked
    readme = (ROOT / "README.md").read_text()
    assert "python3 -m venv .venv" in readme
    out = subprocess.run(
        ["git", "check-ignore", "--no-index", "-q", ".venv/bin/python"], cwd=ROOT, check=False
    )
    assert out.returncode == 0, ".venv/ is not in .gitignore"
