"""Acceptance: a real terminal (pexpect) drives ``contextmem chat`` with the real local model.

It answers the first-launch questions, sends two messages (streamed replies), then runs ``/context``,
``/compact keep decisions only``, ``/config agent_max_context_turns 4`` and ``/context clear`` and checks
the screen shows each effect. Model calls are kept to a handful with a short reply length.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .local_model import RUNTIME, local_model

if TYPE_CHECKING:
    import pexpect

pytestmark = pytest.mark.local_llm
WAIT = 900  # seconds; the 2-core machine may be busy with other work
ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Screen:
    """What the terminal showed, without colours."""

    def __init__(self, child: pexpect.spawn) -> None:
        self.child = child
        self.text = ""

    def until(self, pattern: str) -> str:
        self.child.expect(pattern, timeout=WAIT)
        shown = ANSI.sub("", self.child.before + self.child.after)
        self.text += shown
        return shown

    def send(self, line: str) -> None:
        self.until("you> ")
        self.child.sendline(line)


def test_chat_in_a_terminal_with_the_local_model(tmp_path: Path) -> None:
    local_model(RUNTIME, "pexpect")  # skip or fail: tests/local_model.py
    import pexpect

    argv = ["-m", "contextmem.cli.main", "--workspace", str(tmp_path), "--max-tokens", "24", "chat"]
    child = pexpect.spawn(
        sys.executable,
        argv,
        encoding="utf-8",
        dimensions=(50, 220),
        timeout=WAIT,
        env={**os.environ, "TERM": "xterm"},
    )
    screen = Screen(child)
    try:
        screen.until("What should I call you")
        child.sendline("Lin")
        screen.until("> ")
        child.sendline("short answers")
        screen.until("> ")
        child.sendline("migrate the billing database")
        screen.until("Saved to")

        screen.send("We decided to use PostgreSQL 16 on port 5433. Reply with one short sentence.")
        reply = screen.until("you> ")
        assert "assistant> " in reply and len(reply.split("assistant> ", 1)[1].strip()) > 0
        child.sendline("What port did we pick? Answer with the number only.")
        screen.until("assistant> ")

        screen.send("/context")
        shown = screen.until(r"summary: \S+")
        for region in ("system", "summary", "history", "tool defs", "output reserve", "free"):
            assert region in shown
        assert "context ▕" in shown and "messages: 4 (assistant 2, user 2)" in shown

        screen.send("/compact keep decisions only")
        shown = screen.until(r"compacted \d+ messages|nothing to compact yet")
        assert "compacted" in shown
        shown = screen.until("## ")  # the new summary follows

        screen.send("/config agent_max_context_turns 4")
        shown = screen.until(r"\(saved to [^)]*\)")
        assert "agent_max_context_turns = 4" in shown
        assert json.loads((tmp_path / "config.json").read_text()) == {"agent_max_context_turns": 4}

        screen.send("/config agent_max_context_turns nope")
        assert "error: invalid settings" in screen.until(r"got 'nope'[^\n]*")

        screen.send("/context clear")
        shown = screen.until(r"context cleared: \d+ messages archived")
        screen.send("/context")
        assert "messages: 0 (none)" in screen.until(r"summary: \S+")

        screen.send("/exit")
        child.expect(pexpect.EOF, timeout=WAIT)
    finally:
        child.close(force=True)

    assert child.exitstatus == 0, screen.text[-2000:]  # a bad /config value: said, no exit 1
    assert "Traceback" not in screen.text
    assert "Lin" in (tmp_path / "user.md").read_text()
    daily = list((tmp_path / "memory").glob("*.md"))
    assert daily and "5433" in daily[0].read_text()  # what left the context went to today's memory
