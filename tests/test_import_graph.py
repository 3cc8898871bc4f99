"""``nn`` has no import cycle: every import, including those inside functions, points one way.

A cycle hidden in a function-level import still couples two modules both ways (``layers``
needed ``convert``, which imported ``norm``, which needs ``layers``), so the graph is read
from the source with ``ast``: every ``import`` anywhere in a module counts. Package
``__init__`` files are left out: re-exporting their modules is not a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """``{module: modules of package it imports}`` for the non-``__init__`` modules of
    ``package`` under ``root``, from every import statement (module level or not)."""
    paths = {module_name(p, root): p for p in (root / package.replace(".", "/")).rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        if path.name == "__init__.py":
            continue
        here = name.rsplit(".", 1)[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = (
                    here.split(".")[: len(here.split(".")) - node.level + 1] if node.level else []
                )
                target = ".".join(base + ([node.module] if node.module else []))
                # ``from . import x`` names a module; ``from .m import f`` names m.
                deps.update(
                    f"{target}.{a.name}" if f"{target}.{a.name}" in paths else target
                    for a in node.names
                )
        graph[name] = {
            d for d in deps if d in paths and d != name and paths[d].name != "__init__.py"
        }
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or None (depth-first search)."""
    state: dict[str, str] = {}  # "open" while on the stack, "done" after
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == "open":
                return stack[stack.index(dep) :] + [dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_nn_has_no_import_cycle():
    graph = import_graph(ROOT, "minitorch_amp.nn")
    assert "minitorch_amp.nn.layer.convert" in graph  # the walk found the modules
    assert "minitorch_amp.nn.layer.layers" in graph["minitorch_amp.nn.layer.norm"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_check_finds_a_cycle_hidden_in_a_function(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .a import A\n")
    (pkg / "a.py").write_text("from .b import B\n\nclass A(B):\n    pass\n")
    (pkg / "b.py").write_text("class B:\n    def f(self):\n        from . import a\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph == {"pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}}
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.a"]
    (pkg / "b.py").write_text("class B:\n    pass\n")
    assert find_cycle(import_graph(tmp_path, "pkg")) is None
