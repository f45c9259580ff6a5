"""Rules the source keeps that ruff and mypy do not check, each checker shown catching what it guards.

* Every exception raised is one of ours (``errors.py``), so a caller catches one tree. The exceptions of
  Python's own protocols are the only others: ``AttributeError`` from a module's ``__getattr__``.
* Every public module declares ``__all__``: what it offers is written down, not inferred.
* ``src/`` refers only to what is in the repo: a feature id (``C5``, ``M2``) is one that
  ``docs/features.md`` lists, and there are no references to issue numbers or to documents kept elsewhere.
* No two modules share a name unless they have the same role (the allowed pairs are listed, with that role).
* Names spell "summarize" as the package does; prose may say "summarise".
"""

from __future__ import annotations

import ast
import builtins
import io
import re
import tokenize
from collections import defaultdict
from pathlib import Path

import contextmem

SRC = Path(contextmem.__file__).parent
REPO = SRC.parents[1]
SOURCES = {p: p.read_text(encoding="utf-8") for p in sorted(SRC.rglob("*.py"))}

BUILTIN_EXCEPTIONS = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}
# (function name, exception): raises that are a Python protocol, not an error of ours.
PROTOCOL_RAISES = {("__getattr__", "AttributeError")}


def builtin_raises(source: str) -> list[str]:
    """``line: Name`` for each ``raise`` of a builtin exception outside :data:`PROTOCOL_RAISES`."""
    found: list[str] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, child.name)
                continue
            if isinstance(child, ast.Raise) and child.exc is not None:
                target = child.exc.func if isinstance(child.exc, ast.Call) else child.exc
                name = target.id if isinstance(target, ast.Name) else ""
                if name in BUILTIN_EXCEPTIONS and (function, name) not in PROTOCOL_RAISES:
                    found.append(f"{child.lineno}: {name}")
            visit(child, function)

    visit(ast.parse(source), "")
    return found


def declares_all(source: str) -> bool:
    for node in ast.parse(source).body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return True
    return False


def is_public(path: Path) -> bool:
    """A module a user may import: no part of its dotted path starts with ``_`` (packages count by their
    ``__init__``), and not a migration (applied by number, never imported by name)."""
    parts = path.relative_to(SRC).with_suffix("").parts
    if "migrations" in parts or parts[-1] == "__main__":
        return False
    return not any(p.startswith("_") and p != "__init__" for p in parts)


FOREIGN = re.compile(r"\bSPEC\b|\b[Ii]ssues? ?#?\d+|\bissue-\d+|\.\./shared\b")
FEATURE_ID = re.compile(r"\b([CMSA]\d{1,2})\b")


def foreign_references(source: str) -> list[str]:
    """References to what is not in the repo: the spec's document, issue numbers, the shared folder."""
    return [m.group(0) for m in FOREIGN.finditer(source)]


def feature_ids_in(text: str) -> set[str]:
    return set(FEATURE_ID.findall(text))


def listed_feature_ids() -> set[str]:
    """The ids in the first column of ``docs/features.md``'s tables."""
    text = (REPO / "docs" / "features.md").read_text(encoding="utf-8")
    cells = re.findall(r"^\| ([^|]*) \|", text, re.M)
    return {fid for cell in cells for fid in FEATURE_ID.findall(cell) if FEATURE_ID.fullmatch(fid)}


# Names two modules may share because they play the same role in their packages.
SAME_ROLE = {
    "__init__": "a package",
    "base": "the protocol a package's backends implement",
    "open": "the scheme table that opens a package's backend from a URL",
    "registry": "the table a package looks its entries up in (languages, LLM providers)",
}


def shared_names(paths: list[Path]) -> dict[str, list[str]]:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        if "migrations" not in path.parts:
            by_name[path.stem].append(str(path.relative_to(SRC)))
    return {name: found for name, found in by_name.items() if len(found) > 1 and name not in SAME_ROLE}


def ise_names(source: str) -> list[str]:
    """Identifiers spelt ``summaris…`` (the package is ``summarize``); strings and comments are prose."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [t.string for t in tokens if t.type == tokenize.NAME and "summaris" in t.string.lower()]


# --- the checkers catch what they guard against ------------------------------------------------------


def test_builtin_raises_are_found() -> None:
    source = (
        "def f():\n    raise ValueError('x')\n"
        "def g():\n    raise KeyError\n"
        "def __getattr__(name):\n    raise AttributeError(name)\n"
        "def h():\n    raise ConfigError('x. Fix: y')\n"
        "def i():\n    try:\n        pass\n    except OSError:\n        raise\n"
    )
    assert builtin_raises(source) == ["2: ValueError", "4: KeyError"]


def test_a_missing_all_is_found() -> None:
    assert declares_all("__all__ = ['x']\nx = 1\n")
    assert declares_all("__all__: list[str] = []\n")
    assert not declares_all("x = 1\n")
    assert not declares_all("def f():\n    __all__ = []\n")


def test_foreign_references_are_found() -> None:
    text = (
        '"""Offload (SPEC C5, issue 17): see ../shared/seeds; issue-30 drill; Issues #12."""\n_SPECS = {}\n'
    )
    assert foreign_references(text) == ["SPEC", "issue 17", "../shared", "issue-30", "Issues #12"]
    assert feature_ids_in(text) == {"C5"}


def test_shared_module_names_are_found() -> None:
    paths = [SRC / "a" / "writer.py", SRC / "b" / "writer.py", SRC / "a" / "base.py", SRC / "b" / "base.py"]
    assert shared_names(paths) == {"writer": ["a/writer.py", "b/writer.py"]}


def test_ise_names_are_found() -> None:
    source = 'def summarise_text(summariser):\n    """We summarise."""  # summarised\n    return Summarizer\n'
    assert ise_names(source) == ["summarise_text", "summariser"]


# --- the rules hold on src/ ------------------------------------------------------------------------------


def test_every_raise_belongs_to_the_error_tree() -> None:
    found = [f"{p.relative_to(SRC)}:{hit}" for p, text in SOURCES.items() for hit in builtin_raises(text)]
    assert not found, "builtin exceptions raised (Fix: raise a class of errors.py):\n" + "\n".join(found)


def test_every_public_module_declares_all() -> None:
    missing = [
        str(p.relative_to(SRC)) for p, text in SOURCES.items() if is_public(p) and not declares_all(text)
    ]
    assert len(SOURCES) > 100, "the modules were not found"
    assert not missing, "public modules without __all__:\n" + "\n".join(missing)


def test_src_refers_only_to_what_is_in_the_repo() -> None:
    listed = listed_feature_ids()
    assert {"C1", "C14", "M6", "S2", "A4"} <= listed, "docs/features.md lost its id column"
    foreign = [
        f"{p.relative_to(SRC)}: {ref}" for p, text in SOURCES.items() for ref in foreign_references(text)
    ]
    unknown = [
        f"{p.relative_to(SRC)}: {fid}"
        for p, text in SOURCES.items()
        for fid in sorted(feature_ids_in(text) - listed)
    ]
    assert not foreign, "references to what is not in the repo:\n" + "\n".join(foreign)
    assert not unknown, "feature ids docs/features.md does not list:\n" + "\n".join(unknown)


def test_no_two_modules_share_a_name_unless_they_share_a_role() -> None:
    shared = shared_names(list(SOURCES))
    assert not shared, "modules sharing a name (Fix: name each for its role):\n" + "\n".join(
        f"{name}: {', '.join(found)}" for name, found in sorted(shared.items())
    )


def test_names_spell_summarize_one_way() -> None:
    found = [f"{p.relative_to(SRC)}: {name}" for p, text in SOURCES.items() for name in ise_names(text)]
    assert not found, "names spelt -ise (Fix: -ize, as the summarize package):\n" + "\n".join(found)
