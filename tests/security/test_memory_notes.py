"""Issue 49, items 1 and 2: a note reads back as it was written, and no note or entry forges a line.

* 1: ``memory_write("Contract price: 10 - 20 EUR")`` saved ``- Contract price: 1020 EUR`` (an unanchored
  bullet pattern ate `` - `` inside the line): long-term memory silently corrupted.
* 2: a note holding a line end only ``str.splitlines`` knows (U+2028, NEL, VT, FF, RS...) and then
  ``## 23:59 ...`` put a heading at column 0 of the daily file, since the writer indented only after
  ``\\n`` and ``\\r``. Writers and readers now share one definition of a line
  (:mod:`contextmem.textlines`).

The door is ``memory_write`` (library and MCP); its sinks are the memory file, ``memory_get`` and a
``memory_search`` snippet, and the list a later note joins. ``append_daily`` (compaction digests and
summaries, the 23:55 job) is the door of text derived from what people and tools wrote.
"""

from __future__ import annotations

import json
import re
import tempfile
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextmem.errors import ConfigError
from contextmem.memory import HashEmbedder, MemoryTools, SqliteMemoryIndex
from contextmem.memory_files import append_daily, append_note, note_text, read_note_item
from contextmem.redaction import redact_secrets
from contextmem.textlines import lines, lines_with_ends
from contextmem.workspace import Workspace
from tests.pg import pg_dsn  # noqa: F401  (fixture, of the `tools` fixture)
from tests.security import test_memory_attacks
from tests.security.doors import (
    LINE_BREAKS,
    forged_lines,
    hidden_line_starts,
    hostile_text,
    raw_exception,
)
from tests.security.test_memory_attacks import Tools

tools = test_memory_attacks.tools  # fixture: MemoryTools over SQLite and over a real PostgreSQL
NOTES = ("Contract price: 10 - 20 EUR", "2 * 3 = 6 replicas")
DAILY = "memory/2026-03-08.md"  # of test_memory_attacks.DAY, the clock of `tools`
ENTRY_HEADING = re.compile(r"##[ \t]+\d{1,2}:\d\d")  # what an engine entry's heading starts with


def column_zero(text: str) -> list[str]:
    """The lines of ``text`` that start at column 0 with text (headings, items, paragraphs)."""
    return [line for line in lines(text) if line and not line[0].isspace()]


def items(text: str) -> list[str]:
    """The notes of the list items at column 0 of a memory file, read back with ``read_note_item``."""
    found, offset = [], 0
    for line, end in lines_with_ends(text):
        if line.startswith("- "):
            found.append(read_note_item(text[offset:]))
        offset += len(line) + len(end)
    return found


def _sqlite_tools(root: Path, hour: int = 14, minute: int = 30) -> MemoryTools:
    ws = Workspace(root / "ws")
    ws.ensure()
    return MemoryTools(
        SqliteMemoryIndex(ws, HashEmbedder(64), db_path=root / "index.sqlite"),
        clock=lambda: datetime(2026, 3, 8, hour, minute),
    )


# --- examples ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["daily", "core"])
def test_a_note_reads_back_as_written_from_the_file_memory_get_and_search(tools: Tools, target: str) -> None:
    t = tools()
    path = "MEMORY.md" if target == "core" else DAILY
    for note in NOTES:
        assert t.call("memory_write", {"text": note, "target": target}) == f"saved to {path}"
    written = (t.workspace.dir / path).read_bytes().decode("utf-8")
    assert [line for line in lines(written) if line.startswith("- ")] == [f"- {note}" for note in NOTES]
    assert items(written) == list(NOTES)
    got = t.call("memory_get", {"path": path})
    between = "\n" if target == "core" else "\n\n## 14:30\n\n"  # a daily note is an entry of its own
    assert got.endswith(f"- Contract price: 10 - 20 EUR{between}- 2 * 3 = 6 replicas"), got
    for query, note in (("contract price EUR", NOTES[0]), ("replicas", NOTES[1])):
        hits = json.loads(t.call("memory_search", {"query": query}))
        assert hits[0]["path"] == path and f"- {note}" in hits[0]["snippet"], hits


def test_only_a_leading_bullet_is_dropped_and_only_once() -> None:
    assert note_text("  - 10 - 20 EUR\n") == "10 - 20 EUR"
    assert note_text("* 2 * 3 = 6") == "2 * 3 = 6"
    assert note_text("- - nested") == "- nested"  # one marker, not every one
    assert note_text("-5 degrees") == "-5 degrees"  # no blank after it: not a marker
    assert note_text("\u2028 a\u2029\u2029 b \x85") == "a\u2029\u2029 b"  # outer whitespace: str.strip's


@pytest.mark.parametrize("separator", LINE_BREAKS)
def test_a_note_cannot_forge_a_heading_or_an_item_after_any_line_end(tmp_path: Path, separator: str) -> None:
    """A note ending in a forged ``## 23:59`` heading and list: the 23:59 note after it must still start
    its own heading, and every line of the note is its item's indented continuation."""
    t = _sqlite_tools(tmp_path)
    note = f"Deploy window{separator}## 23:59 forged{separator}{separator}- injected item"
    t.call("memory_write", {"text": note})
    t.clock = lambda: datetime(2026, 3, 8, 23, 59)
    t.call("memory_write", {"text": "Rollback done."})
    written = (t.workspace.dir / DAILY).read_bytes().decode("utf-8")
    ours = ["## 14:30", "- Deploy window", "## 23:59", "- Rollback done."]
    assert column_zero(written) == ours
    assert items(written) == [note, "Rollback done."]
    assert [line for line in forged_lines(written, note) if line not in ours] == []
    assert hidden_line_starts(written) == []


def test_a_line_of_spaces_in_a_note_reads_back(tmp_path: Path) -> None:
    t = _sqlite_tools(tmp_path)
    note = "table:\n   \n\tindented\r\n\r\nend"
    t.call("memory_write", {"text": note, "target": "core"})
    written = t.workspace.core_file.read_bytes().decode("utf-8")
    assert written == "- table:\n     \n  \tindented\r\n\r\n  end\n"
    assert items(written) == [note]


@pytest.mark.parametrize("separator", LINE_BREAKS)
def test_an_entry_body_cannot_forge_an_entry_heading(tmp_path: Path, separator: str) -> None:
    """The body's own markdown lines stay (other headings, list items); a line only ``str.splitlines``
    ends is indented, and a markdown line reading as an entry's heading is escaped. The title (it holds
    a session id) stays on the heading's line."""
    ws = Workspace(tmp_path)
    own = "### 2026-03-08\n- Ann: the canary runs on kestrel-7\r\n## Goal"
    body = f"{own}{separator}## 23:59 forged{separator}- injected item"
    append_daily(ws, body, datetime(2026, 3, 8, 12, 0), title=f"s1{separator}## 23:59 forged: left")
    append_note(ws, "Rollback done.", "daily", datetime(2026, 3, 8, 23, 59))
    written = ws.daily_file(datetime(2026, 3, 8).date()).read_bytes().decode("utf-8")
    markdown_line = separator in ("\n", "\r", "\r\n")
    assert column_zero(written) == [
        "## 12:00 s1 ## 23:59 forged: left",
        *lines(own),
        *(["\\## 23:59 forged", "- injected item"] if markdown_line else []),
        "## 23:59",
        "- Rollback done.",
    ]
    assert hidden_line_starts(written) == []


# --- properties -------------------------------------------------------------------------------------


def _one_line_error(answer: str) -> None:
    assert answer.startswith("error: ") and "\n" not in answer and "Fix:" in answer, answer
    assert not raw_exception(answer), answer


@given(hostile=hostile_text(), target=st.sampled_from(["daily", "core"]))
def test_memory_write_keeps_any_note_exactly_and_forges_nothing(hostile: str, target: str) -> None:
    """Any note (lone surrogates too) is saved as one item that reads back exactly from the file and
    from memory_get, or refused with one line; the notes after it join the right list (core) or come
    under their own heading (daily), and no reader finds a line of it at column 0."""
    with tempfile.TemporaryDirectory() as root:
        t = _sqlite_tools(Path(root))
        path = "MEMORY.md" if target == "core" else DAILY
        t.call("memory_write", {"text": "alpha", "target": target})
        answer = t.call("memory_write", {"text": hostile, "target": target})
        saved = answer.startswith("saved to")
        if not saved:
            _one_line_error(answer)
        note = note_text(redact_secrets(hostile)) if saved else ""
        t.call("memory_write", {"text": "omega", "target": target})
        t.clock = lambda: datetime(2026, 3, 8, 23, 59)
        t.call("memory_write", {"text": "zeta", "target": target})

        written = (t.workspace.dir / path).read_bytes().decode("utf-8")
        notes = ["alpha", note, "omega", "zeta"] if saved else ["alpha", "omega", "zeta"]
        assert items(written) == notes
        expected = [f"- {lines(n)[0]}" for n in notes]
        if target == "daily":
            headings = ["## 14:30"] * (len(notes) - 1) + ["## 23:59"]
            expected = [line for pair in zip(headings, expected, strict=True) for line in pair]
        assert column_zero(written) == expected
        assert [line for line in forged_lines(written, hostile) if line not in expected] == []
        assert hidden_line_starts(written) == []

        got = t.call("memory_get", {"path": path, "lines": 400})
        header, _, body = got.partition("\n")
        assert not raw_exception(header) and "more" not in header, header
        # memory_get shows a file's lines joined with "\n": the same lines, each end as "\n"
        assert items(body) == ["\n".join(lines(n)) for n in notes]


@given(
    hostile=hostile_text(surrogates=False), title=hostile_text(surrogates=False), minute=st.integers(0, 59)
)
def test_an_entry_body_forges_no_entry_heading_and_no_hidden_line(
    hostile: str, title: str, minute: int
) -> None:
    """Any body of an append_daily entry (a digest or summary of what people wrote; the messages door
    refuses lone surrogates before they get this far) and any title (it holds a session id): the file's
    entry headings are the writers' own, every line at column 0 starts a markdown line, and a note after
    it starts its own heading."""
    with tempfile.TemporaryDirectory() as root:
        ws = Workspace(root)
        day = datetime(2026, 3, 8).date()
        try:
            append_daily(ws, hostile, datetime(2026, 3, 8, 12, minute), title=f"{title}: left the context")
        except ConfigError:  # nothing but line ends and blanks: refused, nothing written
            assert not redact_secrets(hostile.strip("\n")).strip()
            assert not ws.daily_file(day).exists()
            return
        append_note(ws, "Rollback done.", "daily", datetime(2026, 3, 8, 23, 59))
        written = ws.daily_file(day).read_bytes().decode("utf-8")
        headings = [line for line in lines(written) if ENTRY_HEADING.match(line)]
        assert (
            len(headings) == 2
            and headings[0].startswith(f"## 12:{minute:02d} ")
            and headings[1] == "## 23:59"
        )
        assert lines(written)[0] == headings[0] and headings[0].endswith(": left the context")
        assert hidden_line_starts(written) == []
        assert column_zero(written)[-2:] == ["## 23:59", "- Rollback done."]
