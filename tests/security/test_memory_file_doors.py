"""Memory files edited by hand, drawn hostile (issue 49: a property test per door), on SQLite and on a real
PostgreSQL.

A person's editor can put anything in ``MEMORY.md`` and ``memory/*.md``: bytes that are not UTF-8, NUL,
every line separator, bidi and format marks, look-alikes of the headings and items contextmem writes, one
line of hundreds of kilobytes, a last line with no newline. Whatever is there, through the public tools
only: every ``memory_search`` answers; no snippet and no ``memory_get`` reply carries a raw exception; a
hit's lines read back with ``memory_get``; and a later ``memory_write`` keeps the hand-typed bytes and
appends its note on a line of its own, where search finds it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from contextmem.memory import HashEmbedder, MemoryTools, SqliteMemoryIndex
from contextmem.workspace import Workspace
from tests.pg import pg_dsn  # noqa: F401  (fixture)
from tests.security.doors import MARKER_LOOKALIKES, hostile_text, huge, raw_exception

DIM = 384  # the PostgreSQL index stores vector(384)
DAY = datetime(2026, 3, 8, 14, 30)
TODAY = "memory/2026-03-08.md"  # where memory_write appends, on DAY
FILES = ("MEMORY.md", "memory/2026-03-07.md", "memory/notes.md", TODAY)

contents = st.one_of(
    hostile_text(max_size=80).map(
        lambda t: t.encode("utf-8", "surrogatepass")
    ),  # a lone surrogate: bad bytes
    hostile_text(max_size=80).map(lambda t: t.encode("utf-8", "replace")),
    st.binary(max_size=200),
    st.lists(st.sampled_from(MARKER_LOOKALIKES), max_size=6).map(lambda xs: "\n".join(xs).encode()),
    hostile_text(max_size=4).map(lambda t: huge(t or "w", 200_000).encode("utf-8", "surrogatepass")),
    st.just(b""),
)
# Today's file may end in the writer's own heading and item, with or without the last newline: a note
# then joins that list, and must still start a line.
todays = st.one_of(
    contents,
    st.tuples(
        contents, st.sampled_from([b"\n## 14:30\n\n- earlier", b"\n## 14:30\n\n- earlier\n", b"- x"])
    ).map(b"".join),
)
queries = st.one_of(
    hostile_text(max_size=12, surrogates=False), st.sampled_from(["walrus", "## 23:59", "- "])
)


@pytest.fixture(params=["sqlite", "postgres"])
def tools(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryTools]:
    """MemoryTools over the backend under test; one per test, shared by its examples (each rewrites the
    files, and the next search syncs them)."""
    ws = Workspace(tmp_path / "ws")
    ws.ensure()
    if request.param == "sqlite":
        index: Any = SqliteMemoryIndex(ws, HashEmbedder(DIM), db_path=tmp_path / "index.sqlite")
    else:
        from contextmem.memory.pg_index import PgMemoryIndex

        index = PgMemoryIndex(ws, HashEmbedder(DIM), request.getfixturevalue("pg_dsn"))
    yield MemoryTools(index, clock=lambda: DAY)
    index.close()


def assert_answer(reply: str) -> None:
    """A reply of a tool: no raw exception; an error is one line with a Fix."""
    assert not raw_exception(reply), reply[:300]
    if reply.startswith("error: "):
        assert len(reply.splitlines()) == 1 and "Fix:" in reply, reply[:300]


def search(tools: MemoryTools, query: str) -> list[dict[str, Any]]:
    reply = tools.call("memory_search", {"query": query})
    assert not reply.startswith("error"), reply[:300]  # every search answers
    hits: list[dict[str, Any]] = json.loads(reply)
    return hits


Edit = Callable[[str, bytes], None]


# Pinned at 30 in every profile: each example rewrites four files, syncs the index (a real PostgreSQL in
# one run) and makes a dozen tool calls.
@hypothesis_settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.fixed_dictionaries({**dict.fromkeys(FILES, contents), TODAY: todays}),
    query=queries,
    n=st.integers(0, 10**6),
)
def test_hand_edited_memory_files_are_searched_read_and_appended_to(
    tools: MemoryTools, files: dict[str, bytes], query: str, n: int
) -> None:
    root = tools.workspace.dir
    for name, data in files.items():
        (root / name).write_bytes(data)

    for asked in (query, "walrus sings"):
        for hit in search(tools, asked):
            assert hit["path"] in FILES, hit
            assert not raw_exception(hit["snippet"]), hit
            lines = min(hit["end_line"] - hit["start_line"] + 1, 400)
            read = tools.call(
                "memory_get", {"path": hit["path"], "from_line": hit["start_line"], "lines": lines}
            )
            assert_answer(read)
            assert not read.startswith("error"), read[:300]  # a hit's lines read back
    for name in FILES:
        assert_answer(tools.call("memory_get", {"path": name}))

    note = f"kestrel harbour note {n}"
    saved = tools.call("memory_write", {"text": note})
    assert saved == f"saved to {TODAY}", saved
    after = (root / TODAY).read_bytes()
    assert after.startswith(files[TODAY]), "the hand-typed bytes were changed"
    typed = files[TODAY]
    assert not typed or typed.endswith(b"\n") or after[len(typed) :].startswith(b"\n"), after[-300:]
    assert f"- {note}".encode() in after.split(b"\n"), after[-300:]  # a line of its own, whole
    assert TODAY in {hit["path"] for hit in search(tools, note)}


# Found by the test above (kept as examples, so they never depend on a draw reaching them again).


def test_a_word_of_thousands_of_astral_characters_spoils_no_search(tools: MemoryTools) -> None:
    """FTS5 cut the token inside a 4-byte character; the keyword cache's tokenizer raised a decode error,
    left its scratch table full, and every later search answered 'internal error (IntegrityError)'."""
    notes = tools.workspace.dir / "memory" / "notes.md"
    notes.write_text("walrus sings\n\n" + "0\U00010000" * 10_000 + "\n", encoding="utf-8")
    assert search(tools, "walrus sings")
    notes.write_text("walrus sings at dawn\n", encoding="utf-8")
    assert [hit["path"] for hit in search(tools, "walrus sings")] == ["memory/notes.md"]


def test_a_word_repeated_a_hundred_thousand_times_spoils_no_search(tools: MemoryTools) -> None:
    """Its sparse weight (a count) overflowed float16 to inf when stored; inf * 0 made the chunk's score
    NaN, and the ranking raised KeyError: 'internal error in memory_search (KeyError)' on every search."""
    (tools.workspace.dir / "memory" / "notes.md").write_text("0:" * 100_000 + "\n", encoding="utf-8")
    assert isinstance(search(tools, "walrus sings"), list)
    assert [hit["path"] for hit in search(tools, "0:0:0:0")] == ["memory/notes.md"]


@pytest.mark.parametrize("query", ["- ", "0", "walrus"])
def test_a_text_with_no_word_to_embed_spoils_no_search(tools: MemoryTools, query: str) -> None:
    """PostgreSQL's cosine distance from a zero vector is NaN (hand-typed '0', asked '- '): the ranking
    raised KeyError on it."""
    for name in ("memory/notes.md", TODAY):
        (tools.workspace.dir / name).write_text("0", encoding="utf-8")
    assert isinstance(search(tools, query), list)
