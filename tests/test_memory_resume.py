"""A sync commits in parts (SPEC M3, "Resumable"): an interrupted sync keeps a consistent index holding the
parts it committed, and the next sync embeds only the rest. Runs on both backends (the contract fixture).
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from contextmem.memory import SqliteMemoryIndex
from contextmem.memory import sync as sync_module
from contextmem.memory.base import RateMeter
from contextmem.memory.embedders import EmbedKind, Vectors
from contextmem.workspace import Workspace
from tests.pg import pg_dsn  # noqa: F401  (fixture)
from tests.test_memory_contract import CountingEmbedder, Factory, make  # noqa: F401  (fixture)

FILES = 12
CHUNKS_PER_FILE = 4


class Interrupted(KeyboardInterrupt):
    """What Ctrl-C raises, told apart from a real one."""


class FailingEmbedder(CountingEmbedder):
    """Embeds ``batches`` passage batches, then raises as Ctrl-C would."""

    def __init__(self, batches: int) -> None:
        super().__init__()
        self.batches = batches

    def embed(self, texts: Sequence[str], kind: EmbedKind) -> Vectors:
        if kind == "passage":
            if self.batches == 0:
                raise Interrupted
            self.batches -= 1
        return super().embed(texts, kind)


@pytest.fixture
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Embedding batches of 4 chunk texts, a commit every 8 (two files of four chunks)."""
    monkeypatch.setattr(sync_module, "EMBED_BATCH", 4)
    monkeypatch.setattr(sync_module, "COMMIT_CHUNKS", 8)


def _notes(ws: Workspace) -> list[str]:
    texts = []
    for f in range(FILES):
        chunks = [
            f"# Note {f} part {c}\nfact number {f * CHUNKS_PER_FILE + c}" for c in range(CHUNKS_PER_FILE)
        ]
        (ws.daily_dir / f"note-{f:02d}.md").write_text("\n\n".join(chunks) + "\n")
        texts += chunks
    return texts


def _only_missing_files(problems: Sequence[str], indexed: set[str]) -> bool:
    every = {f"memory/note-{f:02d}.md" for f in range(FILES)}
    expected = {f"{p}: not indexed" for p in every - indexed}
    return set(problems) == expected


def test_an_interrupted_sync_keeps_whole_committed_files_and_the_rerun_embeds_only_the_rest(
    make: Factory,  # noqa: F811
    small_parts: None,
) -> None:
    failing = FailingEmbedder(batches=5)  # parts 1 and 2 committed, part 3 interrupted half-way
    index = make(embedder=failing)
    texts = _notes(index.workspace)
    with pytest.raises(Interrupted):
        index.sync()
    assert index.stats() == {"files": 4, "chunks": 16}
    indexed = set(index._indexed_files())  # type: ignore[attr-defined]
    assert len(indexed) == 4
    # Consistent: nothing wrong but the files not reached yet (each committed file whole, with its row).
    report = index.check()
    assert _only_missing_files(report.problems, indexed), report.problems
    assert not index._storage_problems()  # type: ignore[attr-defined]
    hit = index.search("fact number 5", 1, mode="keyword", sync=False)[0]
    assert hit.path in indexed
    index.close()

    counting = CountingEmbedder()  # the same model name: nothing to rebuild
    again = make(embedder=counting)
    result = again.sync()
    embedded_before = failing.passages
    assert len(embedded_before) == 20  # five batches of four
    committed = set(texts[:16])  # the first four files, in scan order
    assert set(counting.passages) == set(texts) - committed
    assert len(counting.passages) == 32 and result.chunks_embedded == 32
    assert sorted(result.added) == sorted(f"memory/note-{f:02d}.md" for f in range(4, FILES))
    assert again.stats() == {"files": FILES, "chunks": FILES * CHUNKS_PER_FILE}
    assert again.check().ok
    assert not again.sync().changed


def test_an_interrupt_inside_a_commit_rolls_that_part_back(
    make: Factory,  # noqa: F811
    small_parts: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index = make(embedder=CountingEmbedder())
    _notes(index.workspace)
    original = type(index)._insert_files  # type: ignore[attr-defined]
    calls = {"n": 0}

    def insert_files(self: Any, states: Any) -> None:
        calls["n"] += 1
        original(self, states)
        if calls["n"] == 3:  # rows written, transaction still open
            raise Interrupted

    async def insert_files_pg(self: Any, conn: Any, states: Any) -> None:
        # PostgreSQL's transactions run on the index's event-loop thread while the caller waits: Ctrl-C
        # (SIGINT) reaches the caller, the main thread, as a real one does, with the transaction open.
        calls["n"] += 1
        await original(self, conn, states)
        if calls["n"] == 3:
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
            await asyncio.sleep(60)

    pg = not isinstance(index, SqliteMemoryIndex)
    assert threading.current_thread() is threading.main_thread()  # where SIGINT is handled
    monkeypatch.setattr(type(index), "_insert_files", insert_files_pg if pg else insert_files)
    # Python's own Ctrl-C handler, also when the runner started with SIGINT ignored (a shell's background job)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt if pg else Interrupted):
            index.sync()
    finally:
        signal.signal(signal.SIGINT, previous)
    monkeypatch.setattr(type(index), "_insert_files", original)
    assert index.stats() == {"files": 4, "chunks": 16}
    assert not index._storage_problems()  # type: ignore[attr-defined]
    indexed = set(index._indexed_files())  # type: ignore[attr-defined]
    assert _only_missing_files(index.check().problems, indexed)
    assert index.sync().chunks_embedded == 32
    assert index.check().ok and index.stats() == {"files": FILES, "chunks": 48}


def test_renames_and_moved_text_across_parts_stay_consistent(
    make: Factory,  # noqa: F811
    small_parts: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    embedder = CountingEmbedder()
    index = make(embedder=embedder)
    ws = index.workspace
    texts = _notes(ws)
    index.sync()
    embedder.passages.clear()
    monkeypatch.setattr(sync_module, "COMMIT_CHUNKS", 1)  # every file its own part
    # note-00 renamed to the end of the scan order; note-01's first text moves into a new file.
    (ws.daily_dir / "note-00.md").rename(ws.daily_dir / "zz-renamed.md")
    note1 = ws.daily_dir / "note-01.md"
    moved = texts[4]
    note1.write_text("\n\n".join([*texts[5:8], "# Fresh\nbrand new text"]) + "\n")
    (ws.daily_dir / "note-99.md").write_text(moved + "\n\n# Other\nanother new text\n")
    for f in range(2, 6):
        (ws.daily_dir / f"note-{f:02d}.md").write_text(f"# Rewritten {f}\nrewritten text {f}\n")
    report = index.sync()
    assert report.removed == ["memory/note-00.md"]
    assert "# Fresh\nbrand new text" in embedder.passages and texts[0] not in embedder.passages
    assert index.check().ok
    assert index.stats() == {"files": FILES + 1, "chunks": FILES * CHUNKS_PER_FILE - 4 * 3 + 2}


def test_progress_counts_across_parts(make: Factory, small_parts: None) -> None:  # noqa: F811
    index = make(embedder=CountingEmbedder())
    _notes(index.workspace)
    calls: list[tuple[int, int]] = []
    index.sync(progress=lambda done, total: calls.append((done, total)))
    assert calls == [(4 * (i + 1), 48) for i in range(12)]


def test_rate_meter_gives_rate_and_eta() -> None:
    now = [100.0]
    meter = RateMeter(clock=lambda: now[0])
    assert str(meter(0, 100)) == ""
    now[0] += 10.0
    status = meter(25, 100)
    assert status.rate == 2.5 and status.eta == 30.0
    assert str(status) == "2.5 chunks/s, ETA 30s"
    now[0] += 400.0
    assert str(meter(99, 100)) == "0.2 chunks/s, ETA 4s"
    assert str(meter(100, 100)).endswith("done")


_KILLED_CHILD = """
import os, signal, sys
from contextmem.memory import HashEmbedder, SqliteMemoryIndex
from contextmem.workspace import Workspace
from contextmem.memory import sync

sync.EMBED_BATCH, sync.COMMIT_CHUNKS = 4, 8


class Killed(HashEmbedder):
    batches = 0

    def embed(self, texts, kind):
        if kind == "passage":
            Killed.batches += 1
            if Killed.batches == 6:
                os.kill(os.getpid(), signal.SIGKILL)
        return super().embed(texts, kind)


ws = Workspace(sys.argv[1], "default")
SqliteMemoryIndex(ws, Killed(384), db_path=sys.argv[2]).sync()
"""


def test_a_killed_sync_keeps_the_committed_parts_on_sqlite(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws", "default")
    ws.ensure()
    _notes(ws)
    db = tmp_path / "index.sqlite"
    child = subprocess.run([sys.executable, "-c", _KILLED_CHILD, str(tmp_path / "ws"), str(db)], check=False)
    assert child.returncode == -9
    embedder = CountingEmbedder()
    embedder.name = "hash-384"  # the killed process's model
    index = SqliteMemoryIndex(ws, embedder, db_path=db)
    try:
        assert index.stats() == {"files": 4, "chunks": 16}
        assert _only_missing_files(index.check().problems, set(index._indexed_files()))
        assert index.sync().chunks_embedded == 32 and len(embedder.passages) == 32
        assert index.check().ok
    finally:
        index.close()
