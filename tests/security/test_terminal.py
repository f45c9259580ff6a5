"""The CLI's terminal sink: a note, a session id and a summary holding escape sequences or other controls
are printed by ``memory search``, ``sessions list`` and ``sessions show`` escaped (``\\x1b``), never raw.

Doors: ``memory_write`` (a note), a session id, a stored summary. Sink: the terminal. Contract:
``terminal_unsafe(output) == []`` and the text is still recognisable (its escaped form is printed).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from contextmem.cli.main import main
from contextmem.cli.render import shown
from contextmem.engine import ContextEngine
from contextmem.engine.types import summary_to_json
from contextmem.errors import ContextmemError
from contextmem.messages import AssistantMessage, UserMessage
from contextmem.settings import Settings
from contextmem.store.open import open_store
from contextmem.summarize.summarizer import Summary
from tests.security.doors import TERMINAL_SEQUENCES, hostile_text, terminal_unsafe

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
hostile = st.one_of(st.sampled_from(TERMINAL_SEQUENCES), hostile_text(max_size=12, surrogates=False)).map(
    lambda text: f"zebra {text} quokka"
)


def _seed(tmp_path: Path, url: str, session_id: str, summary: str) -> None:
    async def seed() -> None:
        store = open_store(url)
        try:
            engine = await ContextEngine.open(
                session_id, store=store, settings=Settings(workspace=tmp_path), workspace_dir=tmp_path
            )
            await engine.add(UserMessage(f"hello {summary}"), AssistantMessage("hi"))
            await store.set_meta("default", session_id, summary=summary_to_json(Summary(summary)))
        finally:
            await store.close()

    asyncio.run(seed())


def test_the_issue_reproduction_prints_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    _seed(tmp_path, url, f"id{OSC52}", f"summary \x1b[2J{OSC52}")
    common = ["--workspace", str(tmp_path), "--store", url]
    assert main([*common, "sessions", "list"]) == 0
    assert main([*common, "sessions", "show", f"id{OSC52}"]) == 0
    out = capsys.readouterr().out
    assert terminal_unsafe(out) == [] and "\\x1b]52;c;" in out and "\\x1b[2J" in out


# Pinned at 15 in every profile: each example writes memory, a session and a summary; runs the CLI 3 times.
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(note=hostile, session_id=hostile, summary=hostile)
def test_untrusted_text_reaches_the_terminal_escaped(
    note: str, session_id: str, summary: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tmp_path = tmp_path_factory.mktemp("ws")
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    try:
        _seed(tmp_path, url, session_id, summary)
    except ContextmemError:
        assume(False)  # a session id the store refuses with a typed error: another door's test
    (tmp_path / "MEMORY.md").write_text("")
    from contextmem.memory import MemoryTools, SqliteMemoryIndex, embedder_from_spec

    with SqliteMemoryIndex.from_settings(Settings(workspace=tmp_path), embedder_from_spec("hash")) as index:
        MemoryTools(index).memory_write(note, "core")
    common = ["--workspace", str(tmp_path), "--store", url, "--embedder", "hash"]
    import io
    import sys
    from contextlib import redirect_stderr, redirect_stdout

    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(sys.stdout):
        assert main([*common, "memory", "search", "zebra quokka", "--k", "3"]) == 0
        assert main([*common, "sessions", "list"]) == 0
        assert main([*common, "sessions", "show", session_id]) == 0
    output = out.getvalue()
    assert terminal_unsafe(output) == [], output
    assert shown(session_id) in output
    assert "quokka" in output and "zebra" in output
