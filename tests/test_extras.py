"""Every extra that src/ tells users to install exists in pyproject.toml.

The extras are gathered from the code, not listed by hand: ``MissingExtraError(module, extra)`` calls,
``_import(module, extra=...)`` calls, the ``sdk_module`` of each SDK adapter (its extra, see
``llm/sdk.py``), and every ``contextmem[name]`` written in a docstring or message.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "contextmem"
WRITTEN = re.compile(r"contextmem\[([A-Za-z0-9_.-]+)\]")


def pyproject_extras() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return set(project["optional-dependencies"])


def named_extras(source: str) -> set[str]:
    """The extras one module's source names (an f-string placeholder such as ``{extra}`` is not one)."""
    found = set(WRITTEN.findall(source))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", None))
            args = {**dict(enumerate(node.args)), **{k.arg: k.value for k in node.keywords}}
            extra = args.get(1) if name == "MissingExtraError" else None
            if name == "_import":
                extra = args.get("extra", args.get(1))
            if isinstance(extra, ast.Constant) and isinstance(extra.value, str):
                found.add(extra.value)
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(getattr(t, "id", None) == "sdk_module" for t in targets) and isinstance(
                node.value, ast.Constant
            ):
                found.add(node.value.value)
    return found


def test_every_extra_named_in_src_exists_in_pyproject() -> None:
    named = {path.relative_to(SRC).as_posix(): named_extras(path.read_text()) for path in SRC.rglob("*.py")}
    missing = {where: sorted(extras - pyproject_extras()) for where, extras in named.items()}
    assert {where: extras for where, extras in missing.items() if extras} == {}
    # the scan sees the extras it must: one of each way of naming them
    everything = set().union(*named.values())
    assert {"memory", "postgres", "openai", "anthropic", "memory-jieba", "mcp"} <= everything


def test_the_scan_catches_an_extra_that_does_not_exist() -> None:
    source = (
        "raise MissingExtraError('x', 'nope-1')\n"
        "_import('y', extra='nope-2')\n"
        "_import('z', 'nope-3')\n"
        "class A:\n    sdk_module = 'nope-4'\n"
        "'''pip install contextmem[nope-5]'''\n"
        "f'contextmem[{extra}]'\n"
        "_import('fastembed', package='fastembed')\n"  # a pip package, not an extra
    )
    assert named_extras(source) == {"nope-1", "nope-2", "nope-3", "nope-4", "nope-5"}
