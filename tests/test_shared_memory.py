"""Issue 53: when the store is shared, memory lives in it. Two hosts (separate workspaces, one PostgreSQL,
one namespace) write memory every way there is — ``memory_write``, a compaction's daily entry, a hand edit
of the working copy — and each finds the other's with ``memory_search`` and ``memory_get``; alternating
syncs embed nothing new; concurrent appends to today's file lose no entry; a conflicting edit of
``MEMORY.md`` is refused with a Fix and nothing is lost; namespaces never see each other's documents.

The pure parts (:func:`contextmem.memory_docs.decide`, the daily entries' merge) are tested without a
database at the end.
"""

from __future__ import annotations

import json
import tempfile
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextmem.errors import ConfigError, MemoryConflictError, PathEscapeError
from contextmem.memory import MemoryTools
from contextmem.memory_docs import Base, DocState, daily_blocks, decide, documents_of, new_daily_entries
from contextmem.memory_files import append_note, note_text, read_note_item
from contextmem.redaction import redact_secrets
from contextmem.textlines import lines
from contextmem.workspace import Workspace
from tests.pg import pg_dsn  # noqa: F401  (fixture)
from tests.security.doors import assert_one_line_error, hostile_text, raw_exception
from tests.test_memory_contract import CountingEmbedder

DIM = 384
DAY = datetime(2026, 11, 28, 10, 15)
DAILY = "memory/2026-11-28.md"


class Host:
    """One host: its own workspace, its own index on the shared PostgreSQL, its tools and embedder."""

    def __init__(self, root: Path, dsn: str, namespace: str = "default") -> None:
        from contextmem.memory.pg_index import PgMemoryIndex

        self.workspace = Workspace(root, namespace)
        self.workspace.ensure()
        self.embedder = CountingEmbedder()
        self.index = PgMemoryIndex(self.workspace, self.embedder, dsn)
        self.tools = MemoryTools(self.index, clock=lambda: DAY)

    def search(self, query: str) -> list[dict[str, Any]]:
        answer = self.tools.call("memory_search", {"query": query, "k": 10})
        assert not answer.startswith("error"), answer
        hits: list[dict[str, Any]] = json.loads(answer)
        return hits

    def finds(self, text: str, query: str) -> bool:
        """Whether ``memory_search`` finds ``text`` and ``memory_get`` reads it at the hit."""
        for hit in self.search(query):
            got = self.tools.call(
                "memory_get",
                {
                    "path": hit["path"],
                    "from_line": hit["start_line"],
                    "lines": hit["end_line"] - hit["start_line"] + 1,
                },
            )
            if text in got:
                return True
        return False

    def get(self, path: str) -> str:
        return self.tools.call("memory_get", {"path": path, "lines": 400})


@pytest.fixture
def hosts(pg_dsn: str, tmp_path: Path) -> Iterator[tuple[Host, Host]]:  # noqa: F811
    a, b = Host(tmp_path / "hostA", pg_dsn), Host(tmp_path / "hostB", pg_dsn)
    yield a, b
    a.index.close()
    b.index.close()


def test_a_fact_written_on_either_host_is_found_on_the_other(hosts: tuple[Host, Host]) -> None:
    a, b = hosts
    assert a.tools.call(
        "memory_write", {"text": "The billing cutover owner is Priya Raman", "target": "core"}
    ) == ("saved to MEMORY.md")
    assert (
        b.tools.call("memory_write", {"text": "The staging cluster moved to kestrel-9"})
        == f"saved to {DAILY}"
    )
    assert a.finds("Priya Raman", "billing cutover owner")  # its own
    assert b.finds("Priya Raman", "billing cutover owner")  # the issue: B never found A's fact
    assert a.finds("kestrel-9", "staging cluster")
    assert "- The billing cutover owner is Priya Raman" in b.get("MEMORY.md")
    # every host's working copy holds the same bytes after a sync
    assert (a.workspace.dir / DAILY).read_bytes() == (b.workspace.dir / DAILY).read_bytes()
    assert a.workspace.core_file.read_bytes() == b.workspace.core_file.read_bytes()


def test_a_hand_edit_of_the_working_copy_reaches_the_other_host(hosts: tuple[Host, Host]) -> None:
    a, b = hosts
    a.tools.call("memory_write", {"text": "Deploys freeze on Fridays", "target": "core"})
    b.index.sync()
    core = b.workspace.core_file
    core.write_bytes(core.read_bytes() + b"- The pager rota starts on Mondays\n")
    daily = b.workspace.dir / DAILY
    daily.write_bytes(b"## 09:00\n\nThe vendor call moved to Wednesday.\n")
    report = b.index.sync()  # an edit on disk is the host's own until its next sync (any search syncs)
    assert report.conflicts == [] and report.changed
    assert a.finds("pager rota starts on Mondays", "pager rota")
    assert a.finds("vendor call moved to Wednesday", "vendor call")
    assert "Deploys freeze on Fridays" in a.get("MEMORY.md")  # nothing of A's was lost


def test_a_compactions_daily_entry_reaches_the_other_host(pg_dsn: str, tmp_path: Path) -> None:  # noqa: F811
    import asyncio

    from contextmem.messages import assistant, user
    from contextmem.runtime import ContextMem
    from contextmem.settings import Settings

    async def compact_on_a() -> None:
        settings = Settings(workspace=tmp_path / "hostA", store=pg_dsn, context_window=20_000)
        runtime = await ContextMem.open(settings, llm=None, embedder=CountingEmbedder())
        assert runtime.shared_documents is not None
        engine = await runtime.session("chat")
        await engine.add(user("The quarterly audit is owned by Tomasz Wierzbicki."), assistant("Noted."))
        await engine.clear()  # what leaves the context goes to today's daily memory: the shared document
        await runtime.flush()
        await runtime.close()

    asyncio.run(compact_on_a())
    b = Host(tmp_path / "hostB", pg_dsn)
    try:
        assert b.finds("Tomasz Wierzbicki", "who owns the quarterly audit")
    finally:
        b.index.close()


def test_the_daily_summary_on_every_host_lands_once_and_every_host_finds_it(
    pg_dsn: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A shared store keeps no dialog/ file, so the 23:55 job read nothing and wrote nothing; now it reads
    the day's messages in the store, and the two hosts running it at once write one entry."""
    import asyncio

    from contextmem.messages import assistant, user
    from contextmem.runtime import ContextMem
    from contextmem.settings import Settings

    async def scenario() -> None:
        hosts = [
            await ContextMem.open(
                Settings(workspace=tmp_path / name, store=pg_dsn, context_window=20_000),
                llm=None,
                embedder=CountingEmbedder(),
            )
            for name in ("hostA", "hostB")
        ]
        try:
            engine = await hosts[0].session("chat")
            await engine.add(user("The data-centre move is led by Ingrid Halvorsen."), assistant("Noted."))
            now = datetime.now()
            written = await asyncio.gather(*(h.daily_summary_job().run_once(now) for h in hosts))
            assert all(written), written
            daily = f"memory/{now:%Y-%m-%d}.md"
            shared = hosts[1].shared_documents
            assert shared is not None
            document = shared.get(daily)
            assert document is not None
            assert document.content.count(b" daily summary\n") == 1, document.content  # one heading
            for host in reversed(hosts):  # each finds it, the host that did not talk first
                hits = json.loads(
                    host.tools.call("memory_search", {"query": "who leads the data-centre move"})
                )
                assert any("Ingrid Halvorsen" in hit["snippet"] for hit in hits), hits
            again = await hosts[1].daily_summary_job().run_once(now)  # the same day again: nothing new
            assert again is None or shared.get(daily) == document
        finally:
            for host in hosts:
                await host.close()

    asyncio.run(scenario())


def test_alternating_syncs_embed_nothing_new_after_the_first(hosts: tuple[Host, Host]) -> None:
    a, b = hosts
    for n in range(3):
        a.tools.call("memory_write", {"text": f"Fact {n} from host A about the rollout"})
        b.tools.call("memory_write", {"text": f"Fact {n} from host B about the rollout", "target": "core"})
    a.index.sync()
    b.index.sync()
    a.embedder.passages.clear()
    b.embedder.passages.clear()
    state = [h.workspace.dir / "memory" / ".shared.json" for h in (a, b)]
    written = [p.stat().st_mtime_ns for p in state]
    reports = [h.index.sync() for h in (a, b, a, b, a, b)]
    assert a.embedder.passages == [] and b.embedder.passages == []
    assert [p.stat().st_mtime_ns for p in state] == written  # an idle sync writes nothing on disk
    assert [r.changed for r in reports] == [False] * 6, reports
    # a new fact is embedded once, by the host whose sync finds it first
    a.tools.call("memory_write", {"text": "The rollback drill is on Tuesday"})
    a.index.sync()
    b.index.sync()
    assert len(a.embedder.passages) == 1 and b.embedder.passages == []


def _round_trips(host: Host) -> Counter[str]:
    """What ``host``'s index asks the database from now on, by what it says it does (one entry a round
    trip through its link)."""
    asked: Counter[str] = Counter()
    link = host.index._db
    real = link.run

    def run(what: str, *args: Any, **kwargs: Any) -> Any:
        asked[what.split(" of ", maxsplit=1)[0]] += 1
        return real(what, *args, **kwargs)

    link.run = run  # type: ignore[method-assign]
    return asked


def test_a_search_asks_the_database_only_what_it_needs(hosts: tuple[Host, Host]) -> None:
    """Issue 53's load run: a search under 100 MCP clients made 14 round trips, each a thread hop and a
    wait for a core, and the sync before it half of them: the documents listed twice, the stored vectors
    and sparse terms read twice, the chunks counted for a report nobody read, a daily file written within
    the last 2 s (always, under load) read again to learn it was unchanged, the generation read again
    right after the sync had. Each is asked once now, or not at all; what the search finds is unchanged."""
    a, b = hosts
    # Saved without the tool, which indexes what it saves: this search's sync has the note to index.
    append_note(a.workspace, "The kafka upgrade is owned by Ines", "daily", shared=documents_of(a.index))
    after_write = _round_trips(a)
    assert "Ines" in json.dumps(a.search("who owns the kafka upgrade"))
    assert after_write["listing the memory documents"] == 1
    assert after_write["reading stored vectors"] == 1 and after_write["reading stored sparse terms"] <= 1
    assert after_write["counting"] == 0
    idle = _round_trips(a)
    assert "Ines" in json.dumps(a.search("who owns the kafka upgrade"))  # within 2 s of the write
    assert idle["listing the memory documents"] == 1
    assert idle["reading a memory document"] == 0  # its listed hash is the one indexed: not read
    assert idle["reading the generation"] == 0  # the sync just read it
    assert sum(idle.values()) <= 3, idle  # the listing, the index's files, and the search's reads at once
    # another host's write is still found at once: the listing says the document changed
    b.tools.call("memory_write", {"text": "The staging runner is owned by Oskar"})
    assert "Oskar" in json.dumps(a.search("who owns the staging runner"))
    append_note(a.workspace, "The invoice job is owned by Pia", "daily", shared=documents_of(a.index))
    assert a.index.sync().chunks_total > 0  # sync() itself still counts


def test_a_search_reads_what_it_needs_in_one_job(hosts: tuple[Host, Host]) -> None:
    """Issue 53's load run: each read of a search (keywords, vectors, rows, neighbours, their vectors) was a
    hop to the index's loop thread and a wait for a core. A note's chunks are read in context, so a search
    there reads the most; all of it is one job now, and what it finds is the same as each read alone."""
    from contextmem.memory.index_storage import IndexStorage

    a, _ = hosts
    sections = [
        f"## Step {n}\n\n" + f"The {word} stage of the release train is checked by the duty engineer. " * 12
        for n, word in enumerate(["freeze", "branch", "canary", "rollout", "cleanup"])
    ]
    (a.workspace.dir / "memory" / "runbook.md").write_text("\n\n".join(sections) + "\n")
    query = "who checks the canary stage of the release train"
    a.index.search(query)  # the sync that indexes the note, and the speakers' names read once after it
    hops = _round_trips(a)
    hits = a.index.search(query, 5, mmr_lambda=0.5)
    asked = dict(hops)
    # each read alone, as a backend without a driver of its own answers them
    a.index._drive = lambda flow: IndexStorage._drive(a.index, flow)  # type: ignore[method-assign]
    one_by_one = a.index.search(query, 5, mmr_lambda=0.5)
    assert hits == one_by_one and any("runbook" in h.path for h in hits)
    assert asked == {
        "listing the memory documents": 1,
        "reading the memory index": 1,
        "searching the memory index": 1,
    }, asked
    assert hops["reading vectors"] == 2  # read alone: the in-context vectors, then the MMR's


def test_two_hosts_appending_to_todays_file_at_once_lose_no_entry(hosts: tuple[Host, Host]) -> None:
    a, b = hosts
    per_thread = 15
    errors: list[str] = []

    def write(host: Host, tag: str) -> None:
        for i in range(per_thread):
            answer = host.tools.call("memory_write", {"text": f"entry {tag}-{i}"})
            if answer != f"saved to {DAILY}":
                errors.append(answer)

    threads = [
        threading.Thread(target=write, args=(h, f"{name}{t}"))
        for name, h in (("a", a), ("b", b))
        for t in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    expected = {f"entry {name}{t}-{i}" for name in "ab" for t in range(2) for i in range(per_thread)}
    for host in (a, b):
        host.index.sync()
        text = (host.workspace.dir / DAILY).read_text()
        found = [line[2:] for line in lines(text) if line.startswith("- ")]
        assert sorted(found) == sorted(expected), (len(found), len(expected))


def test_a_conflicting_edit_of_memory_md_is_refused_with_a_fix_and_nothing_is_lost(
    hosts: tuple[Host, Host],
) -> None:
    from contextmem.memory.working_copy import WorkingCopy

    a, b = hosts
    a.tools.call("memory_write", {"text": "The on-call phone is with Ines", "target": "core"})
    b.index.sync()
    a.workspace.core_file.write_text("- The on-call phone is with Ines until March\n")
    assert a.index.sync().conflicts == []  # A's edit was made on the current version: written back
    b.workspace.core_file.write_text("- The on-call phone is with Ines, ask her first\n")
    report = b.index.sync()
    assert len(report.conflicts) == 1 and "MEMORY.md" in report.conflicts[0]
    assert_one_line_error(MemoryConflictError(report.conflicts[0]))
    # nothing is lost: B's edit stays in B's copy, A's in the shared document (and A's copy)
    assert "ask her first" in b.workspace.core_file.read_text()
    assert "until March" in b.get("MEMORY.md") and "until March" in a.workspace.core_file.read_text()
    assert a.finds("until March", "on-call phone")
    copy = WorkingCopy(b.workspace, b.index.documents)  # type: ignore[arg-type]
    with pytest.raises(MemoryConflictError) as refused:
        b.index.documents.put("MEMORY.md", b"- overwritten\n", 1, 0)  # type: ignore[union-attr]
    assert_one_line_error(refused.value)
    assert copy.sync().conflicts  # still refused until the user says which wins
    assert copy.sync(overwrite=True).pulled == ["MEMORY.md"]
    assert "until March" in b.workspace.core_file.read_text()


def test_namespaces_never_see_each_others_documents(pg_dsn: str, tmp_path: Path) -> None:  # noqa: F811
    alice, bob = Host(tmp_path / "h", pg_dsn, "alice"), Host(tmp_path / "h", pg_dsn, "bob")
    try:
        alice.tools.call("memory_write", {"text": "Alice's locker code is 4411", "target": "core"})
        bob.index.sync()
        assert bob.search("locker code") == []
        assert bob.get("MEMORY.md").startswith("error: ")
        assert not bob.workspace.core_file.exists()
        assert bob.index.documents is not None and bob.index.documents.states() == {}
        assert alice.finds("4411", "locker code")
    finally:
        alice.index.close()
        bob.index.close()


@pytest.mark.parametrize(
    "name", ["../MEMORY.md", "/etc/passwd", "memory/../../x.md", "notes.md", "memory/a.txt", "x" * 5000]
)
def test_a_document_name_cannot_escape(hosts: tuple[Host, Host], name: str) -> None:
    a, _ = hosts
    answer = a.tools.call("memory_get", {"path": name})
    assert answer.startswith("error: ") and "Fix:" in answer and "\n" not in answer, answer
    from contextmem.memory_docs import document_name

    with pytest.raises((PathEscapeError, ConfigError)):
        document_name(a.workspace.files, name)


def test_a_document_is_bounded(hosts: tuple[Host, Host]) -> None:
    from contextmem.memory_docs import MAX_DOC_BYTES

    a, _ = hosts
    docs = a.index.documents
    assert docs is not None
    with pytest.raises(ConfigError) as refused:
        docs.put("memory/big.md", b"x" * (MAX_DOC_BYTES + 1), 0, 0)
    assert_one_line_error(refused.value)
    assert docs.get("memory/big.md") is None or docs.get("memory/big.md").version == 0  # type: ignore[union-attr]


def test_push_moves_an_existing_workspace_in_and_merges_daily_files(pg_dsn: str, tmp_path: Path) -> None:  # noqa: F811
    """The migration: two hosts' own files (as before issue 53) go into the shared store; their daily
    files of the same day merge, entry by entry."""
    for name, fact in (("hostA", "alpha"), ("hostB", "beta")):
        ws = Workspace(tmp_path / name)
        ws.ensure()
        (ws.dir / DAILY).write_text(f"## 09:00\n\n- shared line\n\n## 10:{len(fact)}0\n\n- {fact} fact\n")
        (ws.dir / "memory" / f"{name}.md").write_text(f"notes of {name}\n")
    a, b = Host(tmp_path / "hostA", pg_dsn), Host(tmp_path / "hostB", pg_dsn)
    try:
        a.index.sync()
        b.index.sync()
        a.index.sync()
        for host in (a, b):
            daily = (host.workspace.dir / DAILY).read_text()
            assert daily.count("shared line") == 1 and "alpha fact" in daily and "beta fact" in daily, daily
            assert {p.name for p in (host.workspace.dir / "memory").glob("*.md")} == {
                "2026-11-28.md",
                "hostA.md",
                "hostB.md",
            }
    finally:
        a.index.close()
        b.index.close()


# --- the door: a note reads back exactly from the other host ----------------------------------------


# Pinned at 25 in every profile: each example opens two indexes on a real PostgreSQL.
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hostile=hostile_text(), target=st.sampled_from(["daily", "core"]))
def test_a_note_written_on_one_host_reads_back_exactly_on_the_other(
    pg_dsn: str,  # noqa: F811
    hostile: str,
    target: str,
) -> None:
    with tempfile.TemporaryDirectory() as root:
        namespace = f"n{uuid.uuid4().hex[:12]}"
        a, b = Host(Path(root) / "a", pg_dsn, namespace), Host(Path(root) / "b", pg_dsn, namespace)
        try:
            answer = a.tools.call("memory_write", {"text": hostile, "target": target})
            path = "MEMORY.md" if target == "core" else DAILY
            if not answer.startswith("saved to"):
                assert answer.startswith("error: ") and "\n" not in answer and "Fix:" in answer, answer
                assert not raw_exception(answer)
                assert b.get(path).startswith("error: ")
                return
            note = note_text(redact_secrets(hostile))
            docs = b.index.documents
            assert docs is not None
            doc = docs.get(path)
            assert doc is not None
            stored = doc.content.decode("utf-8")
            body = stored.split("\n\n", 1)[1] if target == "daily" else stored
            assert read_note_item(body) == note  # byte-exact in the shared document
            b.index.sync()
            assert (b.workspace.dir / path).read_bytes() == doc.content  # and in the other host's copy
            got = b.get(path)
            assert not raw_exception(got.partition("\n")[0])
        finally:
            a.index.close()
            b.index.close()


# --- the pure parts ---------------------------------------------------------------------------------


def _base(version: int, hash_: str) -> Base:
    return Base(version, hash_, 0, 0)


def _doc(version: int, hash_: str, deleted: bool = False) -> DocState:
    return DocState(version, hash_, 0, 0, deleted)


def test_decide_covers_every_case() -> None:
    core, daily = "MEMORY.md", DAILY
    assert decide(core, None, None, None) == "keep"
    assert decide(core, None, None, _doc(1, "h")) == "pull"
    assert decide(core, None, _base(1, "h"), _doc(1, "h")) == "delete_shared"
    assert decide(core, None, _base(1, "h"), _doc(2, "g")) == "pull"  # changed elsewhere: comes back
    assert decide(core, None, _base(1, "h"), _doc(2, "", deleted=True)) == "forget"
    assert decide(core, "h", _base(1, "h"), _doc(1, "h")) == "keep"
    assert decide(core, "h", _base(1, "h"), _doc(2, "g")) == "pull"
    assert decide(core, "h", _base(1, "h"), _doc(2, "", deleted=True)) == "delete_local"
    assert decide(core, "h", _base(1, "h"), None) == "create"
    assert decide(core, "e", _base(1, "h"), _doc(1, "h")) == "push"
    assert decide(core, "e", None, None) == "create"
    assert decide(core, "e", None, _doc(3, "e")) == "adopt"
    assert decide(core, "e", _base(1, "h"), _doc(2, "g")) == "conflict"
    assert decide(core, "e", None, _doc(2, "g")) == "conflict"
    assert decide(daily, "e", _base(1, "h"), _doc(2, "g")) == "merge"
    assert decide(daily, "e", None, _doc(2, "g")) == "merge"


def test_daily_entries_merge_without_duplicates_or_losses() -> None:
    shared = b"## 09:00\n\n- one\n\n## 10:00\n\n- two\n"
    local = b"## 09:00\n\n- one\n\n## 11:00\n\n- three\n"
    added = new_daily_entries(local, shared)
    assert added == b"\n## 11:00\n\n- three\n"
    merged = shared + added
    assert daily_blocks(merged) == [b"## 09:00\n\n- one", b"## 10:00\n\n- two", b"## 11:00\n\n- three"]
    assert new_daily_entries(local, merged) == b""  # merging again adds nothing
    assert new_daily_entries(b"", shared) == b""
    assert new_daily_entries(b"## 12:00\n\n- four", b"") == b"## 12:00\n\n- four\n"


@given(
    entries=st.lists(
        st.sampled_from([b"## 09:00\n\n- a", b"## 10:00\n\n- b", b"## 11:00\n\n- c\r"]), max_size=6
    ),
    others=st.lists(st.sampled_from([b"## 09:00\n\n- a", b"## 12:00\n\n- d"]), max_size=6),
)
def test_a_merge_keeps_every_entry_of_both_sides(entries: list[bytes], others: list[bytes]) -> None:
    local = b"\n\n".join(entries) + (b"\n" if entries else b"")
    shared = b"\n\n".join(others) + (b"\n" if others else b"")
    merged = daily_blocks(shared + new_daily_entries(local, shared))
    for block in set(daily_blocks(local)) | set(daily_blocks(shared)):
        assert merged.count(block) >= max(daily_blocks(local).count(block), daily_blocks(shared).count(block))
    assert merged[: len(daily_blocks(shared))] == daily_blocks(shared)  # the shared text is only appended to


def test_the_cli_pushes_a_workspace_pulls_it_on_another_host_and_exports(
    pg_dsn: str,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """What a user runs to move an existing workspace into the shared store, and to get files back."""
    from contextmem.cli.main import main

    old = Workspace(tmp_path / "old")
    old.ensure()
    old.core_file.write_text("- The VPN certificate renews in May\n")
    (old.dir / DAILY).write_text("## 08:00\n\n- Standup moved to 09:30\n")

    def run(workspace: Path, *argv: str) -> int:
        return main(["--workspace", str(workspace), "--store", pg_dsn, "--embedder", "hash:384", *argv])

    assert run(tmp_path / "old", "memory", "push") == 0
    assert "2 written back" in capsys.readouterr().out
    assert run(tmp_path / "new", "memory", "pull") == 0
    assert (tmp_path / "new" / "MEMORY.md").read_bytes() == old.core_file.read_bytes()
    assert (tmp_path / "new" / DAILY).read_bytes() == (old.dir / DAILY).read_bytes()
    assert run(tmp_path / "new", "memory", "export", str(tmp_path / "export")) == 0
    assert (tmp_path / "export" / "MEMORY.md").read_bytes() == old.core_file.read_bytes()
    assert (tmp_path / "export" / DAILY).read_bytes() == (old.dir / DAILY).read_bytes()
    # a conflicting edit: refused with its Fix and exit 1, then taken over with --overwrite
    (tmp_path / "new" / "MEMORY.md").write_text("- The VPN certificate renews in June\n")
    old.core_file.write_text("- The VPN certificate renews in July\n")
    assert run(tmp_path / "old", "memory", "push") == 0
    capsys.readouterr()
    assert run(tmp_path / "new", "memory", "push") == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "Fix:" in err and "\n" not in err, err
    assert "June" in (tmp_path / "new" / "MEMORY.md").read_text()  # kept until the user says otherwise
    assert run(tmp_path / "new", "memory", "pull", "--overwrite") == 0
    assert "July" in (tmp_path / "new" / "MEMORY.md").read_text()


def test_the_cli_says_push_needs_a_shared_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from contextmem.cli.main import main

    assert main(["--workspace", str(tmp_path), "--embedder", "hash:384", "memory", "push"]) != 0
    err = capsys.readouterr().err.strip()
    assert "Fix:" in err and "postgresql://" in err and "\n" not in err, err


def test_an_append_retried_after_its_commit_landed_is_not_doubled(hosts: tuple[Host, Host]) -> None:
    """The link retries a transaction whose answer was lost in transit, though its commit may have
    landed: here every write is run twice, as such a retry would, and each note lands once."""
    from contextmem.memory.pg_docs import PgDocuments

    a, b = hosts
    assert a.index.working_copy is not None
    docs = a.index.working_copy.docs
    assert isinstance(docs, PgDocuments)
    link = docs._db

    class RetriedLink:
        def run(self, what: str, fn: Any, **options: bool) -> Any:
            link.run(what, fn, **options)  # committed; the answer "lost"
            return link.run(what, fn, **options)

        def rows(self, *args: Any, **options: Any) -> Any:
            return link.rows(*args, **options)

    docs._db = RetriedLink()  # type: ignore[assignment]
    a.tools.call("memory_write", {"text": "The DNS cutover is at 06:00"})
    a.tools.call("memory_write", {"text": "The DNS cutover is at 06:00", "target": "core"})
    docs._db = link
    b.index.sync()
    assert (b.workspace.dir / DAILY).read_text().count("DNS cutover") == 1
    assert b.workspace.core_file.read_text().count("DNS cutover") == 1


def test_an_oversized_working_copy_file_is_refused_and_the_rest_syncs(hosts: tuple[Host, Host]) -> None:
    from contextmem.memory_docs import MAX_DOC_BYTES

    a, b = hosts
    (a.workspace.dir / "memory" / "dump.md").write_bytes(b"y" * (MAX_DOC_BYTES + 1))
    a.tools.call("memory_write", {"text": "The firewall rules were reviewed"})
    report = a.index.sync()
    assert len(report.conflicts) == 1 and "dump.md" in report.conflicts[0]
    assert_one_line_error(ConfigError(report.conflicts[0]))
    assert b.finds("firewall rules were reviewed", "firewall rules")
    assert not (b.workspace.dir / "memory" / "dump.md").exists()


def test_a_link_in_a_working_copy_is_never_followed_and_the_shared_document_stays(
    hosts: tuple[Host, Host], tmp_path: Path
) -> None:
    a, b = hosts
    a.tools.call("memory_write", {"text": "The quokka expedition is in May", "target": "core"})
    b.index.sync()
    outside = tmp_path / "outside.md"
    outside.write_text("- platypus passwords live here\n")
    b.workspace.core_file.unlink()
    b.workspace.core_file.symlink_to(outside)
    report = b.index.sync()
    assert "MEMORY.md" not in report.removed and report.conflicts == []
    assert b.finds("quokka expedition", "quokka expedition") and a.finds("quokka expedition", "quokka")
    assert (
        not any("platypus" in h["snippet"] for h in b.search("platypus passwords"))
        and outside.read_text() == "- platypus passwords live here\n"
    )


def test_the_index_is_checked_and_repaired_against_the_shared_documents(hosts: tuple[Host, Host]) -> None:
    import psycopg

    a, b = hosts
    a.tools.call("memory_write", {"text": "The canary runs on kestrel-7", "target": "core"})
    a.index.sync()
    assert a.index.check().ok and b.index.check().ok
    with psycopg.connect(a.index.dsn, autocommit=True) as conn:
        conn.execute("UPDATE cm_memory_chunks SET text = 'forged' WHERE path = 'MEMORY.md'")
    report = b.index.check(repair=True)
    assert not report.ok and "does not match" in "\n".join(report.problems)
    assert a.index.check().ok and a.finds("kestrel-7", "canary runs")
