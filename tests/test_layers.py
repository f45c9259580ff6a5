"""The architecture, as a test: every module of ``src/contextmem`` stays on its floor, and nothing cycles.

Floors, bottom to top. A module may import from its own floor or any floor below it, never above;
CONTRIBUTING.md draws the same picture.

0. ``errors`` — the one exception tree; imports nothing of ours.
1. ``messages`` (+ ``message_checks``), ``namespace``, ``workspace``, ``safefs``, ``redaction``, ``dsn``,
   ``secret_rules`` (+ ``secret_checks``), ``secret_tables``, ``secret_scanner``, ``logs``, ``models``,
   ``settings``, ``settings_text``, ``textcut``, ``textlines``, ``lang``, ``offloop`` — values and pure
   checks: what a message is, which names and paths are allowed and where a namespace's files lie, what a
   secret looks like (our table and the maintained scanner beside it), how a store URL is shown without
   its password, loggers that redact, what a model's window is, what the settings are and how a bad one
   is told, how a long text is cut, what a line of a memory file is, each language's tables, and when
   work over large text leaves the event loop.
2. ``formats``, ``tokens``, ``jsonl`` — the edges of a message: wire formats, token counts, JSON Lines.
3. ``budget``, ``compaction``, ``summarize``, ``llm`` — the pure core that plans (budget arithmetic,
   safe cuts, compaction plans, summaries) and the LLM protocol with its provider adapters.
4. ``store``, ``archive``, ``memory_files``, ``memory_docs`` — durable state: sessions, the dialog
   archive, the memory files and the shared memory documents they are a working copy of.
5. ``memory`` — long-term memory search: the index over the memory files, the agent's memory tools.
6. ``engine`` — one session's context: applies plans, the only assembler of requests.
7. ``runtime`` — ``ContextMem``: store, workspace, LLM, memory and engines wired together from settings.
8. ``agent``, ``eval`` — the reference tool-calling loop, opened on a runtime; the evaluations users run
   on their own data (memory search, compaction, replay), which open one. Only ``cli`` imports ``eval``.
9. ``contextmem`` (the package itself) — the curated public API re-exporting the floors below.
10. ``integrations``, ``mcp``, ``testing`` — adapters (framework sessions, the MCP server) and the fakes
    tests and users run; nothing below imports them.
11. ``cli`` — the command line and the demo: launches the adapters (``contextmem mcp``) and may use the
    fakes (the offline demo); no adapter imports it.

Imports counted, by the floors and by the cycle check alike: module-level and inside functions, absolute
(``contextmem.x``) and relative, and those under ``if TYPE_CHECKING:``. A type or a deferred import still
couples two modules: a circle hidden under ``TYPE_CHECKING`` or in a function is still a circle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

import contextmem

PACKAGE = "contextmem"
SRC = Path(contextmem.__file__).parent

FLOORS: list[set[str]] = [
    {"errors"},
    {
        "messages",
        "namespace",
        "safefs",
        "redaction",
        "dsn",
        "secret_rules",
        "secret_tables",
        "secret_scanner",
        "secret_checks",
    }
    | {"message_checks", "logs"}
    | {"models", "settings", "settings_text", "textcut", "textlines", "workspace", "lang", "offloop"},
    {"formats", "tokens", "jsonl"},
    {"budget", "compaction", "summarize", "llm"},
    {"store", "archive", "memory_files", "memory_docs"},
    {"memory"},
    {"engine"},
    {"runtime"},
    {"agent", "eval"},
    {""},  # the package itself: contextmem/__init__.py, the public API
    {"integrations", "mcp", "testing"},
    {"cli"},
]


When = Literal["on_import", "type_checking", "in_function"]


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    when: When  # runs when the module is imported; only for the type checker; when a function runs


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


def _walk(node: ast.AST, *, when: When) -> Iterator[tuple[ast.Import | ast.ImportFrom, When]]:
    """Every import under ``node``, with when it runs."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, when
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _walk(child, when="in_function" if when == "on_import" else when)
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield from _walk(ast.Module(body=[stmt], type_ignores=[]), when="type_checking")
            for stmt in child.orelse:
                yield from _walk(ast.Module(body=[stmt], type_ignores=[]), when=when)
        else:
            yield from _walk(child, when=when)


def _targets(
    module: str, node: ast.Import | ast.ImportFrom, modules: dict[str, Path], package_name: str
) -> list[str]:
    """The modules of ours an import statement loads (a name that is a submodule counts as that module)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name == package_name or a.name.startswith(package_name + ".")]
    if node.level:
        package = module if modules[module].name == "__init__.py" else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{node.module}" if node.module else package
    else:
        base = node.module or ""
    if base != package_name and not base.startswith(package_name + "."):
        return []
    found = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
    if len(found) < len(node.names):
        found.append(base)
    return found


def _imports(modules: dict[str, Path], package_name: str = PACKAGE) -> list[Import]:
    """Every import of one of ``modules`` by another (or itself), from their source."""
    out = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, when in _walk(tree, when="on_import"):
            targets = _targets(module, node, modules, package_name)
            out.extend(Import(module, target, node.lineno, when) for target in targets)
    return out


IMPORTS = _imports(MODULES)


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
    seen = {(i.importer, i.imported, i.when) for i in IMPORTS}
    engine_core = "contextmem.engine.core"
    assert (engine_core, "contextmem.errors", "on_import") in seen  # from ..errors import ...
    assert (engine_core, "contextmem.engine.types", "on_import") in seen  # from .types import ...
    assert ("contextmem.runtime", "contextmem.memory", "type_checking") in seen
    assert ("contextmem.runtime", "contextmem.llm.registry", "in_function") in seen


def test_no_import_runs_up_a_floor() -> None:
    upward = sorted(
        f"{i.importer} (floor {floor(i.importer)}) imports {i.imported} (floor {floor(i.imported)}) "
        f"at line {i.line}"
        for i in IMPORTS
        if floor(i.imported) > floor(i.importer)
    )
    assert not upward, "imports up a floor:\n" + "\n".join(upward)


def test_the_product_does_not_import_its_evaluation() -> None:
    """``eval`` measures the product; only ``cli`` (its adapter) and ``eval`` itself may import it."""
    users = sorted(
        f"{i.importer} imports {i.imported} at line {i.line}"
        for i in IMPORTS
        if component(i.imported) == "eval" and component(i.importer) not in ("eval", "cli")
    )
    assert not users, "the product imports its evaluation:\n" + "\n".join(users)


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


def _graph(modules: dict[str, Path], imports: list[Import]) -> dict[str, set[str]]:
    """Who imports whom: every kind of import (on import, for the type checker, in a function)."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for i in imports:
        if i.imported != i.importer:
            graph[i.importer].add(i.imported)
    return graph


@pytest.mark.parametrize("when", ["type_checking", "in_function"])
def test_a_circle_hidden_from_the_import_system_is_still_found(tmp_path: Path, when: When) -> None:
    """Guards the check: ``engine.core`` imports ``engine.removal``, which imports the engine back only
    for its type (or only inside a function): Python runs it, the layers are still tied in a circle."""
    back = {
        "type_checking": "if TYPE_CHECKING:\n    from .core import Engine\n",
        "in_function": "def pop():\n    from .core import Engine\n",
    }[when]
    package = tmp_path / "pkg"
    package.mkdir()
    files = {
        "__init__.py": "",
        "core.py": "from .removal import pop\nfrom . import base\n",
        "removal.py": "from typing import TYPE_CHECKING\nfrom pkg.base import X\n" + back,
        "base.py": "X = 1\n",
    }
    for name, text in files.items():
        (package / name).write_text(text, encoding="utf-8")
    modules = {
        "pkg" if name == "__init__.py" else f"pkg.{name[:-3]}": package / name for name in sorted(files)
    }
    imports = _imports(modules, "pkg")
    assert ("pkg.removal", "pkg.core", when) in {(i.importer, i.imported, i.when) for i in imports}
    assert _cycles(_graph(modules, imports)) == [["pkg.core", "pkg.removal"]]


def test_no_import_cycles() -> None:
    """No circle among our modules, counting imports for the type checker and inside functions too."""
    cycles = _cycles(_graph(MODULES, IMPORTS))
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


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
