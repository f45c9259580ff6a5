"""Every example in examples/ runs offline (scripted models) and prints what it promises."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _run(name: str) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _number(pattern: str, text: str) -> int:
    match = re.search(pattern, text)
    assert match, (pattern, text)
    return int(match[1])


def test_mcp_stdio_client_example() -> None:
    pytest.importorskip("mcp")
    out = _run("mcp_stdio_client.py")
    assert (
        "tools: compact, context_stats, list_sessions, memory_get, memory_search, memory_write, read_file"
        in out
    )
    assert "memory_write: saved to MEMORY.md" in out
    assert "memory_search: MEMORY.md lines 1-1: - Launch moved to March 3." in out
    assert "memory_get outside the workspace refused: True" in out


def test_openai_agents_session_example() -> None:
    pytest.importorskip("agents")
    out = _run("openai_agents_session.py")
    assert "model calls: 120" in out
    assert _number(r"largest input: (\d+) items", out) < 60  # 240 items were stored
    assert _number(r"archived: (\d+)", out) > 100
    assert _number(r"prompt tokens: (\d+)", out) <= 3000 - 400
    assert "summary sent first: True; nothing lost: True" in out


def test_langchain_middleware_example() -> None:
    pytest.importorskip("langchain.agents")
    out = _run("langchain_middleware.py")
    assert "messages in graph state: 240" in out
    assert _number(r"largest model input: (\d+) messages", out) < 60
    assert "summary kept: True; nothing lost: True" in out


def test_own_agent_loop_example() -> None:
    out = _run("own_agent_loop.py")
    assert _number(r"largest request: (\d+) of 4000 tokens", out) <= 4000
    assert _number(r"archived: (\d+)", out) > 300
    assert "lost: 0" in out
