"""Issue 12, points 1, 4 (memory files and index) and 9 (tools): each attack seen on main, re-run as written.

* 1: a symlinked ``MEMORY.md`` or ``memory/`` pointing outside the workspace, a symlink in the default
  namespace into ``namespaces/bob/``, a hard link to an outside file, and a link swapped in while writing:
  nothing is ever written outside, nothing outside is ever found by a search, sync reports what it skipped.
* 4: secrets never reach memory files or the index (stored chunks, keywords, embeddings, snippets).
* 9: bounded work and no raw exceptions: a 100 KB query embeds at most ``MAX_QUERY_CHARS``; a 10 MB
  ``memory_write``, a 5,000-character path, a non-string argument, an unknown argument come back as
  ``error: … Fix: …`` texts.

Tests touching the index run on SQLite and on a real PostgreSQL + pgvector (``tests/pg.py``).
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from contextmem.memory import HashEmbedder, MemoryTools, SqliteMemoryIndex
from contextmem.memory.embedders import EmbedKind, Vectors
from contextmem.memory.pg_reads import tsquery_text
from contextmem.memory.text import MAX_QUERY_CHARS, MAX_QUERY_TERMS, chunk_markdown, query_terms
from contextmem.memory.tools import MAX_WRITE_CHARS
from contextmem.memory_files import DailySummaryJob
from contextmem.safefs import MAX_PATH_CHARS
from contextmem.workspace import Workspace
from tests.pg import pg_dsn  # noqa: F401  (fixture)

DIM = 384  # the PostgreSQL index stores vector(384)
DAY = datetime(2026, 3, 8, 14, 30)
AUTHORIZED_KEYS = b"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOutsideKeyOfTheOwner owner@host quokka-outside\n"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
GITHUB_TOKEN = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"


class RecordingEmbedder:
    """A 384-d HashEmbedder that records every text it is asked to embed, by kind."""

    name = "recording-hash-384"
    dim = DIM

    def __init__(self) -> None:
        self.inner = HashEmbedder(DIM)
        self.texts: dict[str, list[str]] = {"query": [], "passage": []}

    def embed(self, texts: Sequence[str], kind: EmbedKind) -> Vectors:
        self.texts[kind].extend(texts)
        return self.inner.embed(texts, kind)


Tools = Callable[..., MemoryTools]


@pytest.fixture(params=["sqlite", "postgres"])
def tools_for(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Tools]:
    """``tools_for(namespace="default", embedder=None, clock=...)``: MemoryTools over the backend under test,
    on the workspace ``tmp_path / "ws"``. On PostgreSQL the workspace's files are the truth here, as on
    SQLite (these attacks are on files); with shared documents the same links are
    :func:`test_with_shared_documents_no_link_in_a_working_copy_reaches_outside`'s."""
    dsn = request.getfixturevalue("pg_dsn") if request.param == "postgres" else None
    opened: list[Any] = []

    def factory(
        namespace: str = "default", embedder: Any = None, clock: Callable[[], datetime] = lambda: DAY
    ) -> MemoryTools:
        ws = Workspace(tmp_path / "ws", namespace)
        ws.ensure()
        emb = embedder or HashEmbedder(DIM)
        if dsn is None:
            index: Any = SqliteMemoryIndex(ws, emb, db_path=tmp_path / "index.sqlite")
        else:
            from contextmem.memory.pg_index import PgMemoryIndex

            index = PgMemoryIndex(ws, emb, dsn, shared=False)
        opened.append(index)
        return MemoryTools(index, clock=clock)

    yield factory
    for index in opened:
        index.close()


def _outside(tmp_path: Path) -> Path:
    """An ``authorized_keys`` outside the workspace, as in the report."""
    directory = tmp_path / "home" / ".ssh"
    directory.mkdir(parents=True)
    keys = directory / "authorized_keys"
    keys.write_bytes(AUTHORIZED_KEYS)
    return keys


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()
    }


def _searched(tools: MemoryTools, query: str) -> str:
    out = tools.call("memory_search", {"query": query, "k": 10})
    assert not out.startswith("error:"), out
    return out


def _refused(out: str, *words: str) -> None:
    assert out.startswith("error:") and "Fix:" in out, out
    for word in words:
        assert word in out, (word, out)


# --- point 1: symlinks and hard links ------------------------------------------------------------------


def test_symlinked_memory_md_to_an_outside_file_is_neither_written_nor_searched(
    tools_for: Tools, tmp_path: Path
) -> None:
    keys = _outside(tmp_path)
    tools = tools_for()
    ws = tools.workspace
    assert (
        tools.call("memory_write", {"text": "alpha fact about llamas", "target": "core"})
        == "saved to MEMORY.md"
    )
    assert "llamas" in _searched(tools, "alpha llamas")
    ws.core_file.unlink()
    ws.core_file.symlink_to(keys)  # MEMORY.md -> ~/.ssh/authorized_keys

    out = tools.call("memory_write", {"text": "ssh-rsa AAAAB3NzaC1yc2E attacker@evil", "target": "core"})
    _refused(out, "symlink")
    assert keys.read_bytes() == AUTHORIZED_KEYS
    report = tools.index.sync()
    assert report.skipped == ["MEMORY.md"] and report.removed == ["MEMORY.md"]  # the old content left too
    for query in ("quokka-outside owner host ssh-ed25519", "alpha llamas"):
        assert _searched(tools, query) == "[]"
    _refused(tools.call("memory_get", {"path": "MEMORY.md"}), "symlink")
    assert tools.index.check().ok


def test_symlinked_memory_dir_to_outside_is_neither_written_nor_searched(
    tools_for: Tools, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "2026-03-08.md").write_text("## 09:00\n\nquokka outside daily note\n")
    before = _snapshot(outside)
    tools = tools_for()
    ws = tools.workspace
    ws.daily_dir.rmdir()
    ws.daily_dir.symlink_to(outside, target_is_directory=True)

    _refused(tools.call("memory_write", {"text": "a daily note", "target": "daily"}), "symlink")
    assert _snapshot(outside) == before
    assert tools.index.sync().skipped == ["memory"]
    assert _searched(tools, "quokka outside daily note") == "[]"
    _refused(tools.call("memory_get", {"path": "memory/2026-03-08.md"}), "symlink")
    assert _snapshot(outside) == before


@pytest.mark.parametrize("kind", ["file", "dir", "core"])
def test_a_symlink_in_the_default_namespace_into_bob_never_finds_bobs_text(
    tools_for: Tools, tmp_path: Path, kind: str
) -> None:
    bob = tools_for("bob")
    bob.call("memory_write", {"text": "bob private zebra passphrase hint", "target": "core"})
    bob.call("memory_write", {"text": "bob daily zebra meeting", "target": "daily"})
    assert "zebra" in _searched(bob, "zebra")  # Bob himself finds it
    tools = tools_for()  # the default namespace, at the workspace root
    ws = tools.workspace
    if kind == "file":
        (ws.daily_dir / "bob.md").symlink_to(bob.workspace.core_file)
        link, read = "memory/bob.md", "memory/bob.md"
    elif kind == "dir":
        (ws.daily_dir / "bob").symlink_to(bob.workspace.daily_dir, target_is_directory=True)
        link, read = "memory/bob", "memory/bob/2026-03-08.md"
    else:
        ws.core_file.symlink_to(bob.workspace.core_file)
        link, read = "MEMORY.md", "MEMORY.md"

    assert tools.index.sync().skipped == [link]
    for mode in ("hybrid", "keyword", "vector"):
        assert tools.index.search("bob zebra passphrase meeting", 10, mode=mode) == []
    assert _searched(tools, "zebra") == "[]"
    _refused(tools.call("memory_get", {"path": read}), "symlink")
    _refused(tools.call("memory_get", {"path": "namespaces/bob/MEMORY.md"}))
    if kind == "core":
        _refused(
            tools.call("memory_write", {"text": "written through the link", "target": "core"}), "symlink"
        )
        assert "written through" not in bob.workspace.core_file.read_text()


def test_a_hard_link_to_an_outside_file_is_neither_read_nor_written(tools_for: Tools, tmp_path: Path) -> None:
    keys = _outside(tmp_path)
    daily_target = tmp_path / "home" / "notes.md"
    daily_target.write_text("quokka hard-linked daily\n")
    tools = tools_for()
    ws = tools.workspace
    os.link(keys, ws.core_file)
    os.link(daily_target, ws.daily_file(DAY.date()))

    _refused(tools.call("memory_write", {"text": "ssh-rsa AAAAB3 attacker", "target": "core"}), "hard link")
    _refused(tools.call("memory_write", {"text": "daily via hard link", "target": "daily"}), "hard link")
    assert keys.read_bytes() == AUTHORIZED_KEYS
    assert daily_target.read_text() == "quokka hard-linked daily\n"
    assert sorted(tools.index.sync().skipped) == ["MEMORY.md", "memory/2026-03-08.md"]
    assert _searched(tools, "quokka owner host hard-linked daily") == "[]"
    _refused(tools.call("memory_get", {"path": "MEMORY.md"}), "hard link")
    _refused(tools.call("memory_get", {"path": "memory/2026-03-08.md"}), "hard link")


def test_with_shared_documents_no_link_in_a_working_copy_reaches_outside(
    pg_dsn: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """With a shared store the memory documents are rows, and the files a working copy a sync writes and
    reads back: a symlink or a hard link placed in that copy is never written through, and what it points
    at is never indexed, whatever ``memory_write`` answers."""
    from contextmem.memory.pg_index import PgMemoryIndex

    keys = _outside(tmp_path)
    daily_target = tmp_path / "home" / "notes.md"
    daily_target.write_text("quokka hard-linked daily\n")
    ws = Workspace(tmp_path / "ws", "default")
    ws.ensure()
    index = PgMemoryIndex(ws, HashEmbedder(DIM), pg_dsn)  # shared documents, the default on PostgreSQL
    try:
        tools = MemoryTools(index, clock=lambda: DAY)
        assert tools.call("memory_write", {"text": "alpha fact about llamas", "target": "core"}).startswith(
            "saved"
        )
        ws.core_file.unlink()
        ws.core_file.symlink_to(keys)  # MEMORY.md -> ~/.ssh/authorized_keys
        os.link(daily_target, ws.daily_file(DAY.date()))
        tools.call("memory_write", {"text": "ssh-rsa AAAAB3NzaC1yc2E attacker@evil", "target": "core"})
        tools.call("memory_write", {"text": "daily via hard link", "target": "daily"})
        index.sync()
        index.sync()
        assert keys.read_bytes() == AUTHORIZED_KEYS
        assert daily_target.read_text() == "quokka hard-linked daily\n"
        for query in ("quokka-outside owner host ssh-ed25519", "quokka hard-linked daily"):
            assert "quokka" not in _searched(tools, query)
        assert "quokka" not in tools.call("memory_get", {"path": "MEMORY.md"})
    finally:
        index.close()


def test_read_file_follows_no_link_and_reads_no_hard_link(tmp_path: Path) -> None:
    keys = _outside(tmp_path)
    tools = _sqlite_tools(tmp_path)
    ws = tools.workspace
    (ws.dialog_dir / "2026-03-08.jsonl").symlink_to(keys)
    os.link(keys, ws.tool_results_dir / "call_1.txt")
    (ws.dir / "dialog2").symlink_to(ws.dialog_dir, target_is_directory=True)
    _refused(tools.call("read_file", {"path": "dialog/2026-03-08.jsonl"}), "symlink")
    _refused(tools.call("read_file", {"path": "tool_results/call_1.txt"}), "hard link")
    _refused(tools.call("read_file", {"path": "dialog2/2026-03-08.jsonl"}))


def _sqlite_tools(tmp_path: Path, embedder: Any = None, namespace: str = "default") -> MemoryTools:
    ws = Workspace(tmp_path / "ws", namespace)
    ws.ensure()
    index = SqliteMemoryIndex(ws, embedder or HashEmbedder(64), db_path=tmp_path / "index.sqlite")
    return MemoryTools(index, clock=lambda: DAY)


def _exchange(a: Path, b: Path) -> None:
    """Atomically exchange two names (Linux ``renameat2(RENAME_EXCHANGE)``): neither is ever missing."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), 2) != 0:  # AT_FDCWD, RENAME_EXCHANGE
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _swapper(real: Path, link: Path, stop: threading.Event) -> int:
    """Exchange ``real`` (the workspace's entry) with ``link`` (a symlink to outside) until ``stop``."""
    swaps = 0
    while not stop.is_set():
        _exchange(real, link)  # now the link is where the writer looks
        time.sleep(0.0005)
        _exchange(real, link)  # and the real entry is back
        swaps += 1
        time.sleep(0.0005)
    return swaps


@pytest.mark.parametrize("target", ["daily", "core"])
def test_a_link_swapped_in_while_writing_never_gets_a_byte_outside(tmp_path: Path, target: str) -> None:
    keys = _outside(tmp_path)
    outside_dir = keys.parent
    before = _snapshot(outside_dir)
    tools = _sqlite_tools(tmp_path)
    ws = tools.workspace
    tools.call("memory_write", {"text": "first entry", "target": target})
    real = ws.daily_dir if target == "daily" else ws.core_file
    link = ws.dir / "link"
    link.symlink_to(outside_dir if target == "daily" else keys)
    stop = threading.Event()
    swaps: list[int] = []
    thread = threading.Thread(target=lambda: swaps.append(_swapper(real, link, stop)))
    thread.start()
    results = []
    try:
        for i in range(400):
            results.append(
                tools.call("memory_write", {"text": f"entry {i} ssh-rsa AAAA attacker", "target": target})
            )
    finally:
        stop.set()
        thread.join()
    assert _snapshot(outside_dir) == before  # not one byte, not one new file
    saved = [r for r in results if r.startswith("saved to")]
    refused = [r for r in results if r.startswith("error:")]
    assert saved and len(saved) + len(refused) == len(results)
    assert all("symlink" in r or "not a directory" in r for r in refused), refused[:3]
    assert swaps and swaps[0] > 0
    written = (ws.core_file if target == "core" else ws.daily_file(DAY.date())).read_text()
    assert written.count("ssh-rsa AAAA attacker") == len(saved)  # every saved entry is in the real file


def test_created_files_and_directories_are_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        tools = _sqlite_tools(tmp_path)
        ws = tools.workspace
        tools.call("memory_write", {"text": "core fact", "target": "core"})
        tools.call("memory_write", {"text": "daily fact", "target": "daily"})
        tools.call("memory_search", {"query": "fact"})
        ws.files.append("dialog/2026-03-08.jsonl", b"{}\n")
        import asyncio

        assert asyncio.run(DailySummaryJob(ws, lambda text: "summary").run_once(DAY)) is not None
    finally:
        os.umask(old)
    for directory in (ws.dir, ws.daily_dir, ws.dialog_dir, ws.tool_results_dir):
        assert directory.stat().st_mode & 0o777 == 0o700, directory
    files = [ws.core_file, ws.daily_file(DAY.date()), ws.daily_dir / ".daily-summary.json"]
    files += list(tmp_path.glob("index.sqlite*"))
    assert len(files) >= 4
    for file in files:
        assert file.stat().st_mode & 0o777 == 0o600, file


# --- point 4: no secrets in memory files or the index ------------------------------------------------


def test_memory_write_redacts_secrets_before_they_reach_the_file(tmp_path: Path) -> None:
    tools = _sqlite_tools(tmp_path)
    out = tools.call("memory_write", {"text": f"deploy with {AWS_KEY} and {GITHUB_TOKEN}", "target": "core"})
    assert out.startswith("saved to MEMORY.md") and "REDACTED" in out
    text = tools.workspace.core_file.read_text()
    assert AWS_KEY not in text and GITHUB_TOKEN not in text and "[REDACTED]" in text


def _private_key() -> tuple[str, list[str]]:
    body = [f"MIIEowIBAAKCAQEA{i:048d}" for i in range(40)]
    return "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(body) + "\n-----END RSA PRIVATE KEY-----", body


def test_secrets_typed_into_memory_files_never_reach_the_index(tools_for: Tools) -> None:
    embedder = RecordingEmbedder()
    tools = tools_for(embedder=embedder)
    ws = tools.workspace
    key, body = _private_key()
    assert len(chunk_markdown(f"notes\n{key}\nafter")) > 1  # the key block is split between chunks
    ws.core_file.write_text(
        f"# Deploy\nThe AWS key is {AWS_KEY} for the llama bucket.\n\n# Key\n{key}\nafter\n"
    )
    ws.daily_file(DAY.date()).write_text(f"## 10:00\n\ntoken {GITHUB_TOKEN} rotated\n")
    tools.index.sync()
    secrets = [AWS_KEY, GITHUB_TOKEN, *body]
    embedded = "\n".join(embedder.texts["passage"])
    assert embedded and not [s for s in secrets if s in embedded]
    stored = "\n".join(_stored_chunk_texts(tools.index))
    assert "llama bucket" in stored and not [s for s in secrets if s in stored]
    assert tools.index.search(AWS_KEY, 10, mode="keyword") == []
    assert tools.index.search(GITHUB_TOKEN.lower(), 10, mode="keyword") == []
    hits = _searched(tools, "AWS key llama bucket")
    assert "llama bucket" in hits and AWS_KEY not in hits
    assert tools.index.check().ok  # stored chunks are compared with the redacted lines
    got = tools.call("memory_get", {"path": "MEMORY.md", "lines": 100})
    assert "llama bucket" in got and not [s for s in secrets if s in got]
    assert got.count("\n") == ws.core_file.read_text().count("\n")  # line numbers unchanged


def _stored_chunk_texts(index: Any) -> list[str]:
    if isinstance(index, SqliteMemoryIndex):
        return [r[0] for r in index._db.execute("SELECT text FROM chunks")]
    import psycopg

    with psycopg.connect(index.dsn) as conn:
        return [r[0] for r in conn.execute("SELECT text FROM cm_memory_chunks").fetchall()]


def test_an_index_built_before_redaction_is_rederived_and_its_secret_vectors_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = Workspace(tmp_path / "ws")
    ws.ensure()
    ws.core_file.write_text(f"The AWS key is {AWS_KEY}.\n")
    import contextmem.memory.sync as sync_module
    from contextmem.memory.text import content_hash

    with monkeypatch.context() as patch:  # what an index of the previous scheme stored
        patch.setattr(sync_module, "index_chunks", chunk_markdown)
        old = SqliteMemoryIndex(ws, HashEmbedder(64), db_path=tmp_path / "index.sqlite")
        old._keywords = old._keywords.rsplit("|", 1)[0] + "|2"
        old.sync()
        assert AWS_KEY in "".join(_stored_chunk_texts(old))
        old.close()
    index = SqliteMemoryIndex(ws, HashEmbedder(64), db_path=tmp_path / "index.sqlite")
    index.sync()
    assert AWS_KEY not in "".join(_stored_chunk_texts(index))
    leaked = content_hash(f"The AWS key is {AWS_KEY}.")
    assert index._db.execute("SELECT count(*) FROM embeddings WHERE hash=?", (leaked,)).fetchone()[0] == 0
    assert index.check().ok


# --- point 9: bounded work, no raw exceptions ----------------------------------------------------------


def test_a_100kb_query_is_cut_before_it_is_embedded_and_still_answers(tools_for: Tools) -> None:
    embedder = RecordingEmbedder()
    tools = tools_for(embedder=embedder)
    tools.call("memory_write", {"text": "The launch moved to March 3.", "target": "core"})
    query = ("when is the launch " * 6000)[:100_000]
    hits = json.loads(tools.call("memory_search", {"query": query, "k": 3}))
    assert hits and hits[0]["path"] == "MEMORY.md"
    assert embedder.texts["query"] and max(map(len, embedder.texts["query"])) <= MAX_QUERY_CHARS


def test_keyword_queries_keep_a_bounded_number_of_terms() -> None:
    query = " ".join(f"word{i}" for i in range(20_000))
    assert len(query_terms(query)) == MAX_QUERY_TERMS
    pg_expression = tsquery_text(query)
    assert pg_expression is not None and pg_expression.count(" | ") + 1 == MAX_QUERY_TERMS


def test_a_10mb_memory_write_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    tools = _sqlite_tools(tmp_path)
    out = tools.call("memory_write", {"text": "x" * 10_000_000, "target": "core"})
    _refused(out, "'text'", f"{MAX_WRITE_CHARS:,}")
    assert len(out) < 1000
    assert not tools.workspace.core_file.exists()
    with pytest.raises(ValueError, match="Fix:"):  # the method itself refuses too, for library callers
        tools.memory_write("x" * (MAX_WRITE_CHARS + 1))
    assert tools.call("memory_write", {"text": "x" * MAX_WRITE_CHARS}).startswith("saved to")


@pytest.mark.parametrize(
    ("name", "arguments", "words"),
    [
        ("memory_get", {"path": "m" * 5000}, ["'path'", f"{MAX_PATH_CHARS:,}"]),
        ("read_file", {"path": "dialog/" + "d" * 5000}, ["'path'"]),
        ("memory_get", {"path": 7}, ["'path'", "string", "int"]),
        ("memory_get", {"path": ["MEMORY.md"]}, ["'path'", "list"]),
        ("memory_get", {"path": None}, ["'path'", "NoneType"]),
        ("memory_search", {"query": {"$ne": 1}}, ["'query'", "dict"]),
        ("memory_write", {"text": 42}, ["'text'", "int"]),
        ("memory_write", {"text": "x", "target": "elsewhere"}, ["'target'", "'core'"]),
        ("memory_search", {"query": "x", "k": "5"}, ["'k'", "integer", "str"]),
        ("memory_search", {"query": "x", "k": 2.5}, ["'k'", "float"]),
        ("memory_search", {"query": "x", "k": True}, ["'k'", "bool"]),
        ("memory_search", {"query": "x", "k": 0}, ["'k'", "1..50"]),
        ("memory_search", {"query": "x", "k": 10**100}, ["'k'"]),
        ("memory_get", {"path": "MEMORY.md", "lines": 401}, ["'lines'"]),
        ("read_file", {"path": "dialog/x", "offset": -1}, ["'offset'"]),
        ("memory_get", {"path": "MEMORY.md", "from_line": "1"}, ["'from_line'"]),
        ("memory_write", {"txt": "x"}, ["'txt'"]),
        ("memory_search", {"query": "x", "namespace": "bob"}, ["'namespace'"]),
        ("memory_search", {}, ["'query'"]),
        ("memory_search", "[1, 2]", ["list"]),
        ("memory_search", "{not json", ["JSON"]),
        ("memory_write", {"text": "\ud800 lone surrogate"}, ["'text'", "Unicode"]),
        ("memory_search", {"query": "\udcff"}, ["'query'"]),
        ("no_such_tool", {}, ["no_such_tool", "memory_search"]),
    ],
)
def test_bad_arguments_come_back_as_error_texts(
    tmp_path: Path, name: str, arguments: Any, words: list[str]
) -> None:
    tools = _sqlite_tools(tmp_path)
    out = tools.call(name, arguments)
    _refused(out, *words)
    assert len(out) < 2000


def test_an_unexpected_failure_inside_a_tool_is_logged_and_returned_as_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken(HashEmbedder):
        def embed(self, texts: Sequence[str], kind: EmbedKind) -> Vectors:
            raise RuntimeError("embedder exploded at /secret/internal/path")

    tools = _sqlite_tools(tmp_path, Broken(64))
    with caplog.at_level(logging.ERROR, logger="contextmem.memory"):
        out = tools.call("memory_search", {"query": "anything"})
    _refused(out, "internal error", "memory_search", "RuntimeError")
    assert "/secret/internal/path" not in out  # details go to the log, not to the model
    assert any("memory_search" in r.getMessage() and r.exc_info for r in caplog.records)


def test_search_of_a_missing_namespace_dir_and_date_is_empty_not_an_error(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "never-created", "carol")
    index = SqliteMemoryIndex(ws, HashEmbedder(64), db_path=tmp_path / "i.sqlite")
    assert index.search("anything", 3) == [] and index.sync().skipped == []
