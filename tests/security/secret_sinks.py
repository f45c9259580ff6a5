"""One conversation through every derived sink: the runner both secret tests use (test_secrets_sinks.py,
test_secrets_heldout.py).

Each sample goes in as a user message and a tool output that compaction summarises (the summary, its
stored copy, the daily entry), through ``memory_write`` to both targets, and typed by hand into
``MEMORY.md``; then the index is searched for each sample's form and values. The text of every sink comes
back by name: memory files, the index's own rows (the SQLite file's bytes, or every ``cm_memory_*`` row in
PostgreSQL), search snippets, ``memory_get``, the summary and its stored copy, events and log records.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from contextmem.engine import EngineEvent
from contextmem.messages import assistant, tool_call, tool_result, user
from contextmem.runtime import ContextMem
from contextmem.settings import Settings

Sample = tuple[str, str, Sequence[str]]
"""(form, text, the secret values in the text)."""


async def sinks(
    tmp_path: Path,
    store_url: str,
    caplog: pytest.LogCaptureFixture,
    samples: Sequence[Sample],
    *,
    llm: Any = "none",
    **settings_values: Any,
) -> dict[str, str]:
    """Every sample through one runtime (``llm``; ``settings_values`` over the defaults); the text of
    each derived sink, by name."""
    caplog.set_level(logging.DEBUG, logger="contextmem")
    values = {"agent_max_context_turns": 2, **settings_values}
    settings = Settings(workspace=tmp_path / "ws", store=store_url, **values)
    runtime = await ContextMem.open(settings, llm=llm, embedder="hash:384")
    events: list[EngineEvent] = []
    engine = await runtime.session("secrets")
    engine.subscribe(events.append)
    for i, (form, text, _) in enumerate(samples):
        await engine.add(
            user(f"Here is the {form} setup, why does it fail?\n{text}"),
            assistant("Let me look.", tool_calls=[tool_call(f"c{i}", "shell", {"cmd": "cat setup"})]),
            tool_result(f"c{i}", f"$ cat setup\n{text}\nexit 0"),
            assistant("The setup reads fine."),
        )
    for i in range(4):  # the turns above leave the context: summary, daily entry
        await engine.add(user(f"and now something else {i}"), assistant(f"ok {i}"))
    await engine.build("system")
    await engine.compact()
    await engine.wait_idle()
    await runtime.flush()

    tools = runtime.tools
    written = [tools.memory_write(text, target) for _, text, _ in samples for target in ("daily", "core")]
    core = runtime.workspace.core_file
    hand_typed = "\n".join(f"- {text}" for _, text, _ in samples)  # a person pasting into their notes
    core.write_text(core.read_text(encoding="utf-8") + "\n" + hand_typed + "\n", encoding="utf-8")
    queries = [form for form, _, _ in samples] + [v for _, _, values in samples for v in values]
    assert runtime.memory is not None
    hits = [h for q in queries for h in runtime.memory.search(q, k=5)]
    searched = [tools.memory_search(q) for q in queries]
    files = [core, *sorted(runtime.workspace.daily_dir.glob("*.md"))]
    got = [tools.memory_get(f.relative_to(runtime.workspace.root).as_posix(), 1, 100_000) for f in files]
    state = await runtime.store.open_session(settings.namespace, "secrets")
    index_rows, documents = index_text(runtime.memory)
    await runtime.close()
    assert hits and engine.summary is not None and state.summary  # every sink was reached
    daily = "\n".join(f.read_text(encoding="utf-8") for f in sorted(runtime.workspace.daily_dir.glob("*.md")))
    return {
        "summary": engine.summary.render(),
        "stored summary": state.summary,
        "daily memory and memory_write files": daily
        + "\n".join(written)
        + core.read_text(encoding="utf-8").replace(hand_typed, "")
        + documents.replace(hand_typed, ""),  # a shared store's copy of the files, checked as they are
        "index rows": index_rows,
        "search snippets": "\n".join(h.snippet for h in hits) + "\n".join(searched),
        "memory_get": "\n".join(got),
        "events": "\n".join(repr(e.data) for e in events),
        "logs": "\n".join(caplog.text.splitlines()),
    }


def index_text(index: Any) -> tuple[str, str]:
    """All the index keeps (the SQLite file's bytes, or every row of PostgreSQL's memory tables but the
    documents), and the memory documents a shared store keeps: the memory files themselves, where what a
    person typed by hand stays as typed, as in the file."""
    if hasattr(index, "db_path"):
        index.close()  # its pages written out
        return Path(index.db_path).read_bytes().decode("utf-8", "replace"), ""
    import psycopg

    with psycopg.connect(index.dsn) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_schema || '.' || table_name FROM information_schema.tables "
                "WHERE table_name LIKE 'cm_memory%'"
            )
        ]
        assert tables, "the memory tables were not found"
        documents = [t for t in tables if t.endswith(".cm_memory_docs")]
        rows = "\n".join(
            str(row) for t in tables if t not in documents for row in conn.execute(f"SELECT * FROM {t}")
        )
        texts = [
            f"{path} {bytes(content).decode('utf-8', 'replace')}"
            for t in documents
            for path, content in conn.execute(f"SELECT path, content FROM {t}")
        ]
        return rows, "\n".join(texts)


def leaks(texts: dict[str, str], samples: Sequence[Sample]) -> list[str]:
    """Each (sink, form, value) where a sample's secret value is left in a sink."""
    return sorted(
        f"{name}: {form} {value[:16]}…"
        for form, _, values in samples
        for value in values
        for name, text in texts.items()
        if value in text
    )
