"""bench/ and evals/ use contextmem as a user does: public names only, not the CLI, and no bulky data."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("bench", "evals")
MAX_FILE_BYTES = 1_000_000  # a dataset this large is generated at run time (evals/datasets), not committed


def sources() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py") if ".cache" not in p.parts)


def local_modules() -> set[str]:
    """The scripts' own modules (``report``, ``evals.datasets`` ...): their private names are theirs."""
    names = {p.stem for p in sources()}
    return names | {".".join(p.relative_to(ROOT).with_suffix("").parts) for p in sources()}


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def offences(source: str, own: set[str]) -> list[str]:
    """Imports of a private name or of the CLI, and ``x._name`` where ``_name`` is not the file's own."""
    tree = ast.parse(source)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("contextmem.cli"):
                found.append(f"imports the CLI: {node.module}")
            for alias in node.names:
                if private(alias.name) and node.module not in own:
                    found.append(f"imports a private name: {node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("contextmem.cli"):
                    found.append(f"imports the CLI: {alias.name}")
    defined = {  # the file's own names: its classes' and objects' private attributes are its business
        n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    } | {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)}
    found += [
        f"reaches a private name: .{n.attr}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and private(n.attr) and n.attr not in defined
    ]
    return found


def test_bench_and_evals_use_only_public_names_and_not_the_cli() -> None:
    own = local_modules()
    found = [f"{p.relative_to(ROOT)}: {x}" for p in sources() for x in offences(p.read_text("utf-8"), own)]
    assert found == []


@pytest.mark.parametrize(
    "code",
    [
        "from contextmem.memory.text import _CJK_RUN_RE",
        "from contextmem.cli.main import main",
        "import contextmem.cli.main",
        "from contextmem.memory import sqlite_index\nsqlite_index._vectors()",
        "def f(index):\n    return index._vectors()",
    ],
)
def test_the_check_catches_each_kind(code: str) -> None:
    assert offences(code + "\n", local_modules()) != []


def test_no_committed_file_in_bench_or_evals_is_over_a_megabyte() -> None:
    big = [
        f"{p.relative_to(ROOT)}: {p.stat().st_size:,} bytes"
        for folder in FOLDERS
        for p in (ROOT / folder).rglob("*")
        if p.is_file()
        and ".cache" not in p.parts
        and "__pycache__" not in p.parts
        and p.stat().st_size > MAX_FILE_BYTES
    ]
    assert big == []
