"""The architecture, as a test: every module of ``src/contextmem`` stays on its floor, and nothing cycles.

Floors, bottom to top. A module may import from its own floor or any floor below it, never above;
CONTRIBUTING.md draws the same picture.

0. ``errors`` — the one exception tree; imports nothing of ours.
1. ``messages`` (+ ``message_checks``), ``namespace``, ``safefs``, ``redaction``, ``secret_rules``,
   ``secret_tables``, ``models``, ``settings``, ``textcut``, ``lang`` — values and pure checks: what a
   message is, which names and paths are allowed, what a secret looks like, what a model's window is,
   what the settings are, how a long text is cut, each language's tables.
2. ``formats``, ``tokens``, ``jsonl`` — the edges of a message: wire formats, token counts, JSON Lines.
3. ``budget``, ``compaction``, ``summarize``, ``llm`` — the pure core that plans (budget arithmetic,
   safe cuts, compaction plans, summaries) and the LLM protocol with its provider adapters.
4. ``store``, ``archive`` — durable state: sessions and the dialog archive.
5. ``memory`` — long-term memory: markdown files, the index, the agent's memory tools.
6. ``engine`` — one session's context: applies plans, the only assembler of requests.
7. ``runtime`` — ``ContextMem``: store, workspace, LLM, memory and engines wired together from settings.
8. ``agent`` — the reference tool-calling loop, opened on a runtime.
9. ``contextmem`` (the package itself) — the curated public API re-exporting the floors below.
10. ``integrations``, ``mcp``, ``testing`` — adapters (framework sessions, the MCP server) and the fakes
    tests and users run; nothing below imports them.
11. ``cli`` — the command line and the demo: launches the adapters (``contextmem mcp``) and may use the
    fakes (the offline demo); no adapter imports it.

Imports counted: module-level and inside functions, absolute (``contextmem.x``) and relative, and those
under ``if TYPE_CHECKING:`` for the floors (a type still couples the layers). The cycle check uses the
module-level graph without ``TYPE_CHECKING`` imports: what really runs on import.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import contextmem

PACKAGE = "contextmem"
SRC = Path(contextmem.__file__).parent

FLOORS: list[set[str]] = [
    {"errors"},
    {"messages", "namespace", "safefs", "redaction", "secret_rules", "secret_tables", "message_checks"}
    | {"models", "settings", "textcut", "lang"},
    {"formats", "tokens", "jsonl"},
    {"budget", "compaction", "summarize", "llm"},
    {"store", "archive"},
    {"memory"},
    {"engine"},
    {"runtime"},
    {"agent"},
    {""},  # the package itself: contextmem/__init__.py, the public API
    {"integrations", "mcp", "testing"},
    {"cli"},
]


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    module_level: bool  # executed on import (not inside a function, not under TYPE_CHECKING)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, *, runs: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import under ``node``, with whether it runs when the module is imported."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, runs
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _walk(child, runs=False)
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield from _walk(ast.Module(body=[stmt], type_ignores=[]), runs=False)
            for stmt in child.orelse:
                yield from _walk(ast.Module(body=[stmt], type_ignores=[]), runs=runs)
        else:
            yield from _walk(child, runs=runs)


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules of ours an import statement loads (a name that is a submodule counts as that module)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name == PACKAGE or a.name.startswith(PACKAGE + ".")]
    if node.level:
        package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{node.module}" if node.module else package
    else:
        base = node.module or ""
    if base != PACKAGE and not base.startswith(PACKAGE + "."):
        return []
    found = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
    if len(found) < len(node.names):
        found.append(base)
    return found


def _imports() -> list[Import]:
    out = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, runs in _walk(tree, runs=True):
            out.extend(Import(module, target, node.lineno, runs) for target in _targets(module, node))
    return out


IMPORTS = _imports()


def component(module: str) -> str:
    """``contextmem.engine.core`` -> ``engine``; ``contextmem`` -> ``""`` (the public API)."""
    return module.removeprefix(PACKAGE).removeprefix(".").partition(".")[0]


def floor(module: str) -> int:
    name = component(module)
    for i, group in enumerate(FLOORS):
        if name in group:
            return i
    raise AssertionError(f"{module} is on no floor. Fix: add {name!r} to FLOORS in {__file__}")


def test_every_module_is_on_a_floor() -> None:
    assert len(MODULES) > 50, "the modules were not found"
    for module in MODULES:
        floor(module)
    assert set().union(*FLOORS) == {component(m) for m in MODULES}, "a floor names a module that is gone"


def test_the_import_parser_sees_every_kind_of_import() -> None:
    """Guards the test itself: relative, absolute, function-level and TYPE_CHECKING imports are all seen."""
    by = {(i.importer, i.imported): i for i in IMPORTS}
    engine_core = "contextmem.engine.core"
    assert by[(engine_core, "contextmem.errors")].module_level  # from ..errors import ...
    assert by[(engine_core, "contextmem.engine.types")].module_level  # from .types import ...
    runtime = by[("contextmem.runtime", "contextmem.memory")]  # TYPE_CHECKING and inside functions
    assert not runtime.module_level
    assert ("contextmem.runtime", "contextmem.llm.registry") in by  # function-level


def test_no_import_runs_up_a_floor() -> None:
    upward = sorted(
        f"{i.importer} (floor {floor(i.importer)}) imports {i.imported} (floor {floor(i.imported)}) "
        f"at line {i.line}"
        for i in IMPORTS
        if floor(i.imported) > floor(i.importer)
    )
    assert not upward, "imports up a floor:\n" + "\n".join(upward)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan), or a self-import."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1 or v in graph.get(v, ()):
                found.append(sorted(scc))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_finds_cycles() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for i in IMPORTS:
        if i.module_level and i.imported != i.importer:
            graph[i.importer].add(i.imported)
    cycles = _cycles(graph)
    assert not cycles, "module-level import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if component(m) == "integrations"))
def test_integrations_remove_nothing_behind_the_engine(module: str) -> None:
    """Framework adapters go through the engine: no archive writes, no store writes of their own."""
    source = MODULES[module].read_text(encoding="utf-8")
    for forbidden in (
        "DialogArchive",
        ".archive.append(",
        "store.archive(",
        "store.replace(",
        "removeprefix(",
    ):
        assert forbidden not in source, f"{module} uses {forbidden!r}. Fix: call a public engine method"
