"""The package's shape, read from its imports with ``ast``: no import cycle between files, and no
folder importing a folder above it. The floors are written once, here and in ``docs/architecture.md``.

A module's *unit* is its folder under ``knowledge/`` (``knowledge/service/search.py`` -> ``service``),
or the module itself at the root (``knowledge/sync.py`` -> ``sync``). A unit may import its own
modules and any unit on a lower floor, never one on its own floor or above. ``TYPE_CHECKING`` imports
count too: a type the reader must follow is an arrow like any other.
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "knowledge"

#: Floor of each unit, lowest first. Ground modules import only each other (acyclically).
FLOORS: dict[str, int] = {
    # 0 ground: errors, settings, outcomes, names, folders, plugins, forwarded requests, telemetry, private helpers
    **dict.fromkeys(
        [
            "knowledge",
            "errors",
            "config",
            "outcomes",
            "attributes",
            "access",
            "plugins",
            "_fs",
            "_onnx",
            "_names",
            "_pg",
            "forwarded",
            "vocabulary",
            "telemetry",
        ],
        0,
    ),
    "text": 1,  # analysis, highlight, render: pure functions of text
    # 2 parts: each a contract with its backends
    **dict.fromkeys(["embeddings", "filestore", "catalog", "vectorstore"], 2),
    # readers count tokens with an embedder; LLM configs, accounts live in the catalog
    **dict.fromkeys(["ingest", "llm", "people"], 3),
    "service": 4,  # stores, indexing, search, templates, jobs, fusion
    **dict.fromkeys(["portable", "evaluation", "sync", "sources", "agent_memory"], 5),  # features, handed their parts
    "system": 6,  # the composition root: every part, unguarded
    "workbench": 7,  # the per-person face: every check and audit
    "tools": 8,  # the knowledge tool group a model is handed
    "chat": 9,
    **dict.fromkeys(["pagemodels", "server"], 10),  # page models (Streamlit-free) and the REST/MCP surfaces
    "cli": 11,
    "__main__": 12,
}

GROUND = {u for u, f in FLOORS.items() if f == 0}


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project's modules that ``name`` imports (a ``from pkg import mod`` counts as ``pkg.mod``)."""
    out = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        out.update(t for t in targets if t in known and t != name)
    return out


def unit(name: str) -> str:
    parts = name.split(".")
    return "knowledge" if len(parts) == 1 else parts[1]


MODULES = modules()


@functools.cache
def graph() -> dict[str, set[str]]:
    """Each module of the package and the project's modules it imports (parsed once, when a test asks)."""
    return {name: imports(name, path, MODULES) for name, path in MODULES.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, 1972)."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_reader_finds_imports_and_cycles():
    # the checks below would pass on a reader that sees nothing: pin that it sees
    assert "knowledge.errors" in graph()["knowledge.config"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_unit_has_a_floor():
    assert {unit(m) for m in graph()} - set(FLOORS) == set()


def test_no_import_cycle_between_files():
    assert cycles(graph()) == []


@pytest.mark.parametrize("importer", sorted(MODULES))
def test_no_import_of_a_floor_above_or_beside(importer):
    mine = unit(importer)
    wrong = sorted(
        t
        for t in graph()[importer]
        if unit(t) != mine and not (mine in GROUND and unit(t) in GROUND) and FLOORS[unit(t)] >= FLOORS[mine]
    )
    assert wrong == [], f"{importer} (floor {FLOORS[mine]}) imports {wrong}"


def test_no_private_name_is_imported_across_modules():
    # a name another module uses is public: no `from knowledge.x import _name`
    private = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("knowledge"):
                private += [
                    f"{name}: {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert private == []


def test_every_folder_says_what_it_may_import():
    for init in PACKAGE.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert "import" in doc.lower(), f"{init.parent.name}/__init__.py does not say what the layer may import"
