"""Every code block a reader may copy runs as written: README.md and docs/ (see ``tests/docblocks.py``).

Python blocks run in a fresh directory with ``HOME`` there too, so nothing touches the developer's
``~/.contextmem``; the OpenAI and Anthropic SDKs reach local servers that speak their APIs
(``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``), never the network. Shell lines run in reading order, per
file, in one workspace, with the model ``openai:gpt-4o-mini`` on the local server unless a line names
another; ``127.0.0.1:8080``, the docs' stand-in for the reader's own server, is that server too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docblocks import DOCS, ROOT, Block, blocks, commands, python_blocks, shell_commands
from tests.servers import FakeAnthropicServer, FakeOpenAIServer, ServerReply, served_window

REPLY = ServerReply("You deploy on Fridays, Ada.")
DOC_SERVER = "http://127.0.0.1:8080"
TIMEOUT = 300


@pytest.fixture
def servers():
    static = served_window("qwen", 32_768)
    with FakeOpenAIServer(default=REPLY, static=static) as openai, FakeAnthropicServer(default=REPLY) as anth:
        yield openai, anth


def doc_env(home: Path, openai: FakeOpenAIServer, anthropic: FakeAnthropicServer) -> dict[str, str]:
    """The reader's environment, pointed at the local servers; no CONTEXTMEM_* of the developer's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTEXTMEM_", "OPENAI_", "ANTHROPIC_"))}
    bin_dir = str(Path(sys.executable).parent)
    return env | {
        "HOME": str(home),
        "PATH": bin_dir + os.pathsep + env.get("PATH", ""),
        "OPENAI_BASE_URL": openai.base_url,
        "OPENAI_API_KEY": "sk-doc-test",
        "ANTHROPIC_BASE_URL": anthropic.base_url,
        "ANTHROPIC_API_KEY": "sk-ant-doc-test",
        "TEAM_KEY": "sk-team-doc-test",
    }


def run_python(block: Block, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", block.body],
        check=False,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def run_shell(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        check=False,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def failure(where: str, proc: subprocess.CompletedProcess[str]) -> str:
    out, err = proc.stdout[-3000:], proc.stderr[-3000:]
    return f"{where} exited {proc.returncode}\n--- stdout\n{out}\n--- stderr\n{err}"


# --- the docs' own code ---------------------------------------------------------------------------


@pytest.mark.parametrize("block", python_blocks(), ids=lambda b: b.where)
def test_python_block_runs_as_written(block, servers, tmp_path):
    openai, anthropic = servers
    proc = run_python(block, tmp_path, doc_env(tmp_path, openai, anthropic))
    assert proc.returncode == 0, failure(block.where, proc)
    # A block written for an SDK really went through it, to the local server.
    if "from openai import" in block.body:
        assert openai.requests, f"{block.where} never called the OpenAI server"
    if "from anthropic import" in block.body:
        assert anthropic.requests, f"{block.where} never called the Anthropic server"
    if "verify()" in block.body:
        assert "lost 0" in proc.stdout, proc.stdout


@pytest.mark.parametrize("path", sorted(shell_commands()), ids=lambda p: str(p.relative_to(ROOT)))
def test_contextmem_lines_run_as_written(path, servers, tmp_path):
    openai, anthropic = servers
    env = doc_env(tmp_path, openai, anthropic) | {
        "CONTEXTMEM_WORKSPACE": str(tmp_path / "workspace"),
        "CONTEXTMEM_MODEL": "openai:gpt-4o-mini",
    }
    for block, command in shell_commands()[path]:
        line = command.replace(DOC_SERVER, openai.origin)
        proc = run_shell(line, ROOT, env)
        assert proc.returncode == 0, failure(f"{block.where}: {command}", proc)


def test_every_doc_file_is_read_and_the_readme_has_its_loops():
    """The collection above is not empty by accident: the README's quick start and both SDK loops, and
    the CLI page's examples, are among what runs."""
    names = {p.name for p in DOCS}
    assert {"README.md", "cli.md", "results.md", "design.md", "configuration.md"} <= names
    readme = [b.body for b in python_blocks() if b.path.name == "README.md"]
    assert any("AsyncOpenAI()" in body for body in readme)
    assert any("AsyncAnthropic()" in body for body in readme)
    assert any("verify()" in body for body in readme)
    assert len(shell_commands()[ROOT / "docs" / "cli.md"]) >= 10


def test_the_readme_stays_short_and_refers_to_no_internal_ids():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    for needle in ("stop ", "issue ", "SPEC", "heldout"):
        assert needle not in text, needle


# --- the oracle: extraction and running catch what they must --------------------------------------


MARKDOWN = """# t
```python
print("a")
```
Text with `contextmem inline` is no command.
```sh
make run                       # not contextmem
contextmem sessions list       # a comment
echo "q # not a comment" | contextmem ask -
pip install '.[memory]'
```
  ```bash
  contextmem --version
  ```
```
contextmem in a block with no language
```
"""


def test_extraction_finds_blocks_lines_and_pipes_and_strips_comments():
    found = blocks(ROOT / "x.md", MARKDOWN)
    assert [b.lang for b in found] == ["python", "sh", "bash", ""]
    assert found[0].body == 'print("a")\n' and found[0].line == 2
    assert commands(found[1]) == ["contextmem sessions list", 'echo "q # not a comment" | contextmem ask -']
    assert commands(found[2]) == ["contextmem --version"]
    assert commands(found[3]) == []


def test_a_failing_block_or_line_is_reported(servers, tmp_path):
    openai, anthropic = servers
    env = doc_env(tmp_path, openai, anthropic)
    bad = Block(ROOT / "x.md", 1, "python", "import contextmem\ncontextmem.no_such_name\n")
    proc = run_python(bad, tmp_path, env)
    assert proc.returncode != 0 and "no_such_name" in failure(bad.where, proc)
    # a pipeline fails when contextmem fails, not only when its last stage does
    assert run_shell("contextmem no-such-command | cat", tmp_path, env).returncode != 0


def test_every_setting_is_documented():
    from contextmem import Settings

    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    missing = [key for key in Settings.model_fields if f"| `{key}` |" not in text]
    assert not missing, f"docs/configuration.md has no row for {missing}"


def security_test_files(text: str) -> set[str]:
    """The test files SECURITY.md names: ``tests/…py`` paths, and bare ``test_x.py`` (under tests/security
    or tests/)."""
    import re

    named = set(re.findall(r"tests/[\w/]+\.py", text))
    for bare in re.findall(r"`(test_\w+\.py)`", text):
        found = [p for p in (f"tests/security/{bare}", f"tests/{bare}") if (ROOT / p).exists()]
        named.add(found[0] if found else f"tests/{bare}")
    return named


def test_every_test_security_md_names_exists():
    missing = sorted(
        p for p in security_test_files((ROOT / "SECURITY.md").read_text()) if not (ROOT / p).exists()
    )
    assert missing == []
    assert security_test_files("`test_nowhere.py` and tests/security/test_gone.py") == {
        "tests/test_nowhere.py",
        "tests/security/test_gone.py",
    }  # the checker reports a name that does not exist
