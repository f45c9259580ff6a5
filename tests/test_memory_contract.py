"""One contract for both memory indexes (SPEC M3, M4, M6, S2): SQLite ``SqliteMemoryIndex`` and PostgreSQL
``PgMemoryIndex`` (a real PostgreSQL 18 + pgvector from ``tests/pg.py``) must behave the same way.

Every test runs against both. The files are the truth: edits, deletions and renames show up in the next
search; only changed chunks are embedded; namespaces never see each other; Chinese keywords match.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator, Sequence
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from contextmem.memory import HashEmbedder, MemoryIndex, SqliteMemoryIndex
from contextmem.memory.embedders import EmbedKind, Vectors
from contextmem.memory.ranking import context_weight
from contextmem.workspace import Workspace
from tests.pg import pg_dsn  # noqa: F401  (fixture)

DIM = 384  # the PostgreSQL index stores vector(384)


Index = MemoryIndex  # the protocol both backends implement


class CountingEmbedder:
    """A 384-d HashEmbedder that records the passages it embeds."""

    name = "counting-hash-384"
    dim = DIM

    def __init__(self) -> None:
        self.inner = HashEmbedder(DIM)
        self.passages: list[str] = []

    def embed(self, texts: Sequence[str], kind: EmbedKind) -> Vectors:
        if kind == "passage":
            self.passages.extend(texts)
        return self.inner.embed(texts, kind)


Factory = Callable[..., Index]


@pytest.fixture(params=["sqlite", "postgres"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Factory]:
    """``make(namespace="default", embedder=None, files_only=False, **options)`` opens an index of the
    backend under test. ``files_only``: the workspace's files are the index's source on PostgreSQL too
    (no shared documents; SQLite always reads them), for the tests about files themselves; with shared
    documents the index is built and checked from them (``tests/test_shared_memory.py``)."""
    opened: list[Index] = []
    dsn = request.getfixturevalue("pg_dsn") if request.param == "postgres" else None

    def factory(
        namespace: str = "default", embedder: Any = None, files_only: bool = False, **options: Any
    ) -> Index:
        ws = Workspace(tmp_path / "ws", namespace)
        ws.ensure()
        emb = embedder or HashEmbedder(DIM)
        index: Index
        if dsn is None:
            index = SqliteMemoryIndex(ws, emb, db_path=tmp_path / "index.sqlite", **options)
        else:
            from contextmem.memory.pg_index import PgMemoryIndex

            index = PgMemoryIndex(ws, emb, dsn, shared=not files_only, **options)
        assert isinstance(index, MemoryIndex)  # the protocol, checked at run time too
        opened.append(index)
        return index

    yield factory
    for index in opened:
        index.close()


def _paths(index: Index, query: str, **options: Any) -> list[tuple[str, int, int]]:
    return [(h.path, h.start_line, h.end_line) for h in index.search(query, 10, **options)]


def _bump_mtime(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


def test_edit_delete_and_rename_show_up_in_the_next_search(make: Factory) -> None:
    index = make()
    ws = index.workspace
    daily = ws.daily_dir / "2026-01-05.md"
    daily.write_text("## 10:00\n\nThe launch moved to March 3.\n")
    assert _paths(index, "launch March", mode="keyword") == [("memory/2026-01-05.md", 1, 3)]

    daily.write_text("## 10:00\n\nThe launch moved to April 9.\n\n## 11:00\n\nBudget approved.\n")
    assert _paths(index, "March", mode="keyword") == []
    assert _paths(index, "April", mode="keyword") == [("memory/2026-01-05.md", 1, 3)]
    assert _paths(index, "budget", mode="keyword") == [("memory/2026-01-05.md", 5, 7)]

    renamed = ws.daily_dir / "2026-01-06.md"
    daily.rename(renamed)
    assert {p for p, _, _ in _paths(index, "April budget")} == {"memory/2026-01-06.md"}
    renamed.unlink()
    assert index.search("April budget", 10) == []
    assert index.stats() == {"files": 0, "chunks": 0}


def test_only_changed_chunks_are_embedded_and_renames_embed_nothing(make: Factory) -> None:
    embedder = CountingEmbedder()
    index = make(embedder=embedder)
    ws = index.workspace
    ws.core_file.write_text("# A\nalpha fact\n\n# B\nbeta fact\n")
    assert index.sync().chunks_embedded == 2
    embedder.passages.clear()
    ws.core_file.write_text("# A\nalpha fact\n\n# B\nbeta fact, revised\n")
    _bump_mtime(ws.core_file)
    report = index.sync()
    assert report.updated == ["MEMORY.md"] and embedder.passages == ["# B\nbeta fact, revised"]
    embedder.passages.clear()
    (ws.daily_dir / "2026-02-01.md").write_text("# A\nalpha fact\n")
    assert index.sync().chunks_embedded == 0 and embedder.passages == []
    assert index.sync().changed is False  # nothing moved: no work
    assert index.check().ok


def _chunk_ids(index: Index) -> dict[str, int]:
    """Chunk text -> id, of every chunk that says "fact", after a sync."""
    index.sync()
    rows = index._chunk_rows(index._keyword_scores("fact", 100))  # type: ignore[attr-defined]
    return {row.text: cid for cid, row in rows.items()}


def test_an_edit_rewrites_only_the_chunks_it_changed(make: Factory) -> None:
    index = make()
    daily = index.workspace.daily_dir / "2026-02-01.md"
    sections = ["## 09:00\nalpha fact", "## 10:00\nbeta fact", "## 11:00\ngamma fact"]
    daily.write_text("\n\n".join(sections) + "\n")
    before = _chunk_ids(index)
    # An edit in the middle and an append: only those two are new rows.
    sections[1] = "## 10:00\nbeta fact, revised"
    daily.write_text("\n\n".join([*sections, "## 12:00\ndelta fact"]) + "\n")
    _bump_mtime(daily)
    after = _chunk_ids(index)
    assert sorted(after) == sorted([*sections, "## 12:00\ndelta fact"])
    assert {t: after[t] for t in after if after[t] in before.values()} == {
        "## 09:00\nalpha fact": before["## 09:00\nalpha fact"],
        "## 11:00\ngamma fact": before["## 11:00\ngamma fact"],
    }
    daily.write_text("## 11:00\ngamma fact\n")  # the same text on other lines is another row
    _bump_mtime(daily)
    assert _chunk_ids(index)["## 11:00\ngamma fact"] not in after.values()
    assert index.check().ok


def test_chinese_and_english_keyword_search(make: Factory) -> None:
    index = make()
    index.workspace.core_file.write_text(
        "我们决定把数据库迁移到PostgreSQL。\n\n# Travel\nThe user is flying to Tokyo on Friday.\n"
    )
    assert _paths(index, "数据库", mode="keyword") == [("MEMORY.md", 1, 1)]
    assert _paths(index, "迁移方案", mode="keyword") == [("MEMORY.md", 1, 1)]
    assert _paths(index, "tokyo friday", mode="keyword") == [("MEMORY.md", 3, 4)]
    assert _paths(index, "咖啡", mode="keyword") == []


def test_hybrid_ranking_decay_and_min_score(make: Factory) -> None:
    index = make(today=lambda: date(2026, 3, 1))
    ws = index.workspace
    text = "project falcon deadline\n"
    ws.core_file.write_text(text)
    (ws.daily_dir / "2026-03-01.md").write_text(text)
    (ws.daily_dir / "2026-01-30.md").write_text(text)  # 30 days old: its decaying fifth halved
    (ws.daily_dir / "2026-02-20.md").write_text("lunch with the team, weather mild\n")
    hits = {h.path: h.score for h in index.search("project falcon deadline", 5)}
    assert hits["MEMORY.md"] == pytest.approx(1.0)
    assert hits["memory/2026-03-01.md"] == pytest.approx(1.0)
    assert hits["memory/2026-01-30.md"] == pytest.approx(0.8 + 0.2 * 0.5)  # the default floor is 0.8
    plain = make("plain", today=lambda: date(2026, 3, 1), decay_floor=0.0)  # SPEC M4's bare exponential
    for name in ("2026-03-01.md", "2026-01-30.md"):
        (plain.workspace.daily_dir / name).write_text(text)
    assert {h.path: h.score for h in plain.search(text, 5)}["memory/2026-01-30.md"] == pytest.approx(0.5)
    assert index.search("ERR_NOPE falcon", 5, min_score=0.99)  # keyword evidence keeps it
    assert index.search("falcon", 5, mode="vector", min_score=1.01) == []


def test_a_day_the_query_names_ranks_its_daily_file_first(make: Factory) -> None:
    index = make(today=lambda: date(2026, 3, 1))
    ws = index.workspace
    (ws.daily_dir / "2026-01-10.md").write_text("## 09:00\n\nuser: we adopted a kitten called Miso\n")
    for day in range(20, 28):  # newer, and matching the question's words
        (ws.daily_dir / f"2026-02-{day}.md").write_text(f"## 09:00\n\nuser: what happened today? day {day}\n")
    for mode in ("hybrid", "keyword", "vector"):
        hits = index.search("What happened on 2026-01-10?", 3, mode=mode)
        assert (hits[0].path, hits[0].start_line, hits[0].end_line) == ("memory/2026-01-10.md", 1, 3), mode
    assert index.search("2026年1月10日那天发生了什么？", 1)[0].path == "memory/2026-01-10.md"
    assert index.search("What happened?", 1)[0].path != "memory/2026-01-10.md"  # no day named: as before


def test_a_day_the_query_names_ranks_the_chunks_under_its_heading_first(make: Factory) -> None:
    # A transcript kept as a note: the day is in each session's heading, not in the turn that answers.
    index = make()
    session = "# Session {n}, 4:20 pm on {day}\n\n### Ann\nHello again, Bob!\n\n"
    session += "### Bob\nWe baked bread and a cake.\n\n"
    talk = session.format(n=1, day="12 May, 2023") + session.format(n=2, day="17 June, 2023")
    (index.workspace.daily_dir / "talk.md").write_text(talk)
    sessions = {
        "12 May, 2023": {1, 6},
        "17 June, 2023": {9, 14},
    }  # each session's chunks: greeting, Bob's turn
    for day, chunks in sessions.items():
        for mode in ("hybrid", "keyword", "vector"):
            hits = index.search(f"What did they bake on {day}?", 3, mode=mode)
            # that day's chunks first, though the other day's bread turn says the same words
            assert {h.start_line for h in hits[:2]} == chunks, (day, mode)


def test_a_month_the_query_names_ranks_its_days_first(make: Factory) -> None:
    index = make(today=lambda: date(2024, 3, 1))
    session = "# Session {n}, 4:20 pm on {day}\n\n### Ann\nHello again, Bob!\n\n"
    session += "### Bob\nWe baked bread and a cake.\n\n"
    talk = session.format(n=1, day="12 May, 2023") + session.format(n=2, day="17 June, 2023")
    (index.workspace.daily_dir / "talk.md").write_text(talk)
    (index.workspace.daily_dir / "2023-06-20.md").write_text("## 09:00\n\nuser: we baked bread\n")
    (index.workspace.daily_dir / "2024-02-27.md").write_text("## 09:00\n\nuser: we baked bread and a cake\n")
    may = {("memory/talk.md", 1), ("memory/talk.md", 6)}  # the session's greeting and Bob's turn
    june = {("memory/talk.md", 9), ("memory/talk.md", 14), ("memory/2023-06-20.md", 1)}
    for query, month in (("What did they bake in May 2023?", may), ("2023年6月他们烤了什么？", june)):
        for mode in ("hybrid", "keyword", "vector"):
            hits = index.search(query, 4, mode=mode)
            # the month's sections and daily file first, though the newest file says the same words
            assert {(h.path, h.start_line) for h in hits[: len(month)]} == month, (query, mode)


def test_the_reply_to_a_question_that_matches_follows_it(
    make: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    talk = "### Dave\nCan't wait to see the video for your new album. Will it be shot on location?\n\n"
    talk += "### Calvin\nYes! We picked an awesome beach in Miami.\n\n"
    talk += "### Dave\nI restored an old car this week.\n"
    query = "Where is the video for the new album shot?"
    read: list[int] = []  # the chunks whose neighbours a search reads
    for index in (make("in-context"), make("alone", neighbour_weight=0.0)):
        (index.workspace.daily_dir / "talk.md").write_text(talk)
        # the same exchange in a daily file: the entry after a question is another moment, not its reply
        (index.workspace.daily_dir / "2026-01-05.md").write_text(talk.replace("###", "## 09:0"))

        def counted(ids: list[int], own: Any = index._chunk_neighbours) -> Any:
            read.extend(ids)
            return own(ids)

        monkeypatch.setattr(index, "_chunk_neighbours", counted)
        for mode in ("hybrid", "keyword", "vector"):
            read.clear()
            hits = [(h.path, h.start_line) for h in index.search(query, 6, mode=mode)]
            question = hits.index(("memory/talk.md", 1))
            assert hits[question + 1] == ("memory/talk.md", 4), (mode, hits)
            daily = hits.index(("memory/2026-01-05.md", 1))
            assert hits[daily + 1 : daily + 2] != [("memory/2026-01-05.md", 4)], (mode, hits)
            assert len(read) == len(set(read)), (mode, read)  # read once: in context, or for the reply


def test_a_day_named_relative_to_today_ranks_its_daily_file_first(make: Factory) -> None:
    index = make(today=lambda: date(2026, 3, 18))  # a Wednesday
    ws = index.workspace
    (ws.daily_dir / "2026-03-14.md").write_text("## 09:00\n\nuser: we adopted a kitten called Miso\n")
    for day in (15, 16, 17):  # newer, and matching the question's words
        (ws.daily_dir / f"2026-03-{day}.md").write_text(f"## 09:00\n\nuser: what did I do today? day {day}\n")
    for query in (
        "What did I do last Saturday?",
        "What did I do 4 days ago?",
        "上周六我做了什么？",
        "3月14日做了什么",
    ):
        for mode in ("hybrid", "keyword", "vector"):
            assert index.search(query, 3, mode=mode)[0].path == "memory/2026-03-14.md", (query, mode)
    # The reference date is the search's ``today``: on Sunday 15 March, "yesterday" is that Saturday.
    assert (
        index.search("What did I do yesterday?", 1, today=date(2026, 3, 15))[0].path == "memory/2026-03-14.md"
    )
    assert index.search("What did I do yesterday?", 1)[0].path == "memory/2026-03-17.md"
    assert index.search("What did I do?", 1)[0].path != "memory/2026-03-14.md"  # no day named: as before


def test_a_chunk_is_searched_with_its_neighbours_in_its_file(make: Factory) -> None:
    # A turn that answers rarely names its subject; the turn before it does.
    talk = "### Ann\nDo you still go hiking in the mountains?\n\n### Bob\nYes, every weekend since May.\n"
    talk += "\n### Ann\nI bought a new kettle.\n\n### Bob\nWhich brand?\n"
    texts = ["### Ann\nDo you still go hiking in the mountains?", "### Bob\nYes, every weekend since May."]
    texts += ["### Ann\nI bought a new kettle.", "### Bob\nWhich brand?"]
    alone = make("alone", neighbour_weight=0.0)
    read = make("read")  # the default weight, 0.5
    for index in (alone, read):
        (index.workspace.daily_dir / "talk.md").write_text(talk)
    # every chunk is a candidate here (the vector side takes 50); only the first matches "mountains"
    plain_kw = {h.start_line: h.keyword_score for h in alone.search("mountains", 5)}
    assert plain_kw == {1: plain_kw[1], 4: None, 7: None, 10: None}
    # Bob's answer borrows about half of the question's keyword score (a short chunk: nearly the whole
    # weight); the kettle and its reply border no match
    kw = {h.start_line: h.keyword_score for h in read.search("mountains", 5)}
    share = context_weight(len(texts[1]), 1200, 0.5)
    assert kw == {1: plain_kw[1], 4: pytest.approx(share * plain_kw[1]), 7: None, 10: None}  # type: ignore[operator]
    # the vector side: each score is the cosine of the blend of the chunk and its neighbours (to the
    # float16 rounding of SQLite's in-memory matrix)
    emb = HashEmbedder(DIM)
    v, q = emb.embed(texts, "passage"), emb.embed(["hiking weekend"], "query")[0]
    w = [context_weight(len(t), 1200, 0.5) for t in texts]
    blend = [v[0] + w[0] * v[1], v[1] + w[1] * (v[0] + v[2]), v[2] + w[2] * (v[1] + v[3]), v[3] + w[3] * v[2]]
    want = [float(b @ q / np.linalg.norm(b)) for b in blend]
    got = {h.start_line: h.vector_score for h in read.search("hiking weekend", 5, mode="vector")}
    assert [got[line] for line in (1, 4, 7, 10)] == pytest.approx(want, abs=2e-3)
    plain = {h.start_line: h.vector_score for h in alone.search("hiking weekend", 5, mode="vector")}
    assert [plain[line] for line in (1, 4, 7, 10)] == pytest.approx([float(x @ q) for x in v], abs=2e-3)
    # A daily file's entries stand alone: the same talk written as one borrows nothing.
    daily = make("daily")
    (daily.workspace.daily_dir / "2026-03-14.md").write_text(talk)
    assert {h.start_line: h.keyword_score for h in daily.search("mountains", 5)} == plain_kw
    got = {h.start_line: h.vector_score for h in daily.search("hiking weekend", 5, mode="vector")}
    assert [got[line] for line in (1, 4, 7, 10)] == pytest.approx([plain[x] for x in (1, 4, 7, 10)], abs=1e-6)


def _with_and_without(make: Factory, weight: str, talk: str, file: str = "talk.md") -> tuple[Index, Index]:
    """Two indexes of ``talk`` in ``file`` (each chunk alone): ``weight`` at 0, and at its default."""
    name = file.removesuffix(".md")
    blind = make(f"blind-{name}", neighbour_weight=0.0, **{weight: 0.0})
    told = make(f"told-{name}", neighbour_weight=0.0)
    for index in (blind, told):
        (index.workspace.daily_dir / file).write_text(talk)
    return blind, told


def _same(blind: Index, told: Index, query: str, k: int) -> bool:
    return [(h.start_line, h.score) for h in told.search(query, k)] == [
        (h.start_line, h.score) for h in blind.search(query, k)
    ]


# Turns 1 and 4 hold the same words, so only the rule tells them apart: who said it (each names the other),
# or the month's capital ("in May", not "may"). (weight, talk, the query, one the rule leaves alone).
CUE_RULES = [
    (
        "speaker_weight",  # the default 0.05
        "### Ann\nBob baked bread on Sunday.\n\n### Bob\nAnn baked bread on Sunday.\n\n"
        "### Ann\nThe kettle broke again.\n\n### Bob\nBuy a new kettle then.\n",
        "What did Bob say about the bread?",
        "Who baked bread on Sunday?",  # naming nobody
    ),
    (
        "time_weight",  # the default 0.1
        "### Ann\nWe bake bread in may.\n\n### Ann\nWe bake bread in May.\n\n"
        "### Bob\nThe kettle broke again.\n",
        "When does Ann bake bread?",
        "Who bakes bread?",  # not asking when
    ),
]


@pytest.mark.parametrize(("weight", "talk", "asked", "other"), CUE_RULES, ids=["speaker", "when"])
def test_a_query_that_names_a_speaker_or_asks_when_lifts_the_chunks_that_answer(
    make: Factory, weight: str, talk: str, asked: str, other: str
) -> None:
    blind, told = _with_and_without(make, weight, talk)
    even = {h.start_line: h.score for h in blind.search(asked, 4)}
    rest = [score for line, score in even.items() if line not in (1, 4)]
    assert even[1] == pytest.approx(even[4]) and min(even[1], even[4]) > max(rest)
    assert [h.start_line for h in told.search(asked, 4)][:2] == [4, 1]
    assert _same(blind, told, other, 4)  # as without the rule


def test_in_a_daily_file_every_entry_says_when(make: Factory) -> None:
    # every entry of a daily file is dated by its name: a question that asks when singles none out
    talk = CUE_RULES[1][1]
    assert _same(*_with_and_without(make, "time_weight", talk, "2026-03-14.md"), CUE_RULES[1][2], 3)


def test_a_notes_chunk_is_read_in_its_file_and_daily_and_core_entries_stand_alone(make: Factory) -> None:
    # The session that holds the best match lifts its other turns: Tim's answer repeats no word of the query.
    talk = "### John\nI have read three books this month.\n\n### Tim\nMine was The Name of the Wind.\n\n"
    talk += "### John\nI bought a new kettle.\n"
    other = "### Tim\nMy kettle broke again.\n\n### John\nI read the news every morning.\n"
    blind, told = _with_and_without(make, "file_weight", talk)
    for index in (blind, told):
        (index.workspace.daily_dir / "other.md").write_text(other)
        (index.workspace.daily_dir / "2026-03-14.md").write_text(talk.replace("###", "## 09:0"))
        index.workspace.core_file.write_text(talk.replace("###", "##"))
    query, answer = "What books has Tim read?", ("memory/talk.md", 4)
    for mode in ("hybrid", "keyword", "vector"):
        own = {(h.path, h.start_line): h.score for h in blind.search(query, 12, mode=mode)}
        read = {(h.path, h.start_line): h.score for h in told.search(query, 12, mode=mode)}
        assert read.keys() == own.keys() and len(own) >= 6, (mode, own)
        assert own[answer] <= own[("memory/other.md", 1)] < read[answer], (mode, own, read)
        best = {path: max(v for (p, _), v in own.items() if p == path) for path, _ in own}
        for (path, line), score in read.items():
            if path in ("memory/2026-03-14.md", "MEMORY.md"):  # a daily file's or core memory's: unchanged
                assert score == own[(path, line)], (mode, path, line)
            else:  # the default 0.3 of its file's best
                assert score == pytest.approx(0.7 * own[(path, line)] + 0.3 * best[path], abs=1e-5), (
                    mode,
                    path,
                )


def test_a_query_naming_a_speaker_is_encoded_partly_without_the_name(make: Factory) -> None:
    # John names Tim; Tim's own turn does not. Speakers are known per namespace, read again after a sync.
    talk = "### John\nTim, Tim: which book?\n\n### Tim\nI read The Name of the Wind.\n\n### Ann\nNice.\n"
    blind, told = _with_and_without(make, "unnamed_weight", "### John\nWhich book has Tim read?\n")
    query, unnamed = "Which book has Tim read?", "Which book has read?"
    neighbour = make("neighbour")  # names Tim too, in its own namespace only
    (neighbour.workspace.daily_dir / "talk.md").write_text(talk)
    neighbour.sync()
    assert [h.vector_score for h in told.search(query, 3)] == [h.vector_score for h in blind.search(query, 3)]
    for index in (blind, told):
        (index.workspace.daily_dir / "talk.md").write_text(talk)
    asked, cut = told.embedder.embed([query, unnamed], "query")
    norm = float(np.linalg.norm(0.7 * asked + 0.3 * cut))
    for mode in ("hybrid", "vector"):
        own = {h.start_line: h for h in blind.search(query, 3, mode=mode)}
        without = {h.start_line: h for h in blind.search(unnamed, 3, mode=mode)}
        read = {h.start_line: h for h in told.search(query, 3, mode=mode)}
        assert read.keys() == own.keys() == without.keys() == {1, 4, 7}, mode
        for line, hit in read.items():
            mixed = (0.7 * own[line].vector_score + 0.3 * without[line].vector_score) / norm
            assert hit.vector_score == pytest.approx(mixed, abs=1e-5), (mode, line)
            terms = 0.7 * (own[line].sparse_score or 0) + 0.3 * (without[line].sparse_score or 0)
            assert (hit.sparse_score or 0) == pytest.approx(terms, abs=1e-5), (mode, line)
        gap = [hits[4].vector_score - hits[1].vector_score for hits in (own, read)]
        assert gap[0] < gap[1], (mode, gap)  # Tim's own turn gains on the one that names him
    assert _same(blind, told, "Which book did someone read?", 3)  # naming nobody: the query as asked


def test_mmr_diversifies(make: Factory) -> None:
    index = make()
    dup = "coffee beans roast espresso grinder"
    index.workspace.core_file.write_text(
        f"# A\n{dup}\n# B\n{dup}\n# C\n{dup} \n# D\ncoffee shop opening hours\n"
    )
    assert {h.start_line for h in index.search("coffee espresso", 2)} <= {1, 3, 5}
    assert 7 in {h.start_line for h in index.search("coffee espresso", 2, mmr_lambda=0.3)}


def test_integrity_check_finds_and_repairs_drift(make: Factory) -> None:
    index = make(files_only=True)  # a file edited since it was indexed: drift only where files are the truth
    ws = index.workspace
    ws.core_file.write_text("alpha\n\n# B\nbeta\n")
    index.sync()
    assert index.check().ok
    ws.core_file.write_text("alpha\n\n# B\nbeta\ngamma\n")
    report = index.check(repair=True)
    assert not report.ok and "changed since indexed" in "\n".join(report.problems)
    assert index.check().ok
    assert _paths(index, "gamma", mode="keyword") == [("MEMORY.md", 3, 5)]


def test_namespaces_never_see_each_other(make: Factory) -> None:
    rng = random.Random(11)
    vocabulary = [f"word{i}" for i in range(30)] + ["数据库", "迁移", "launch", "tea"]
    indexes = []
    for n in range(12):
        index = make(f"tenant{n}")
        shared = "\n\n".join(f"# Shared {i}\n" + " ".join(rng.sample(vocabulary, 6)) for i in range(4))
        index.workspace.core_file.write_text(
            shared + f"\n\n# Own\nsecret-of-tenant{n} " + " ".join(rng.sample(vocabulary, 4))
        )
        index.sync()
        indexes.append(index)
    results = 0
    for _ in range(600):
        index = rng.choice(indexes)
        query = " ".join(rng.sample(vocabulary, 3)) + f" secret-of-tenant{rng.randrange(12)}"
        mode = rng.choice(["hybrid", "keyword", "vector"])
        for hit in index.search(query, 10, mode=mode, sync=False):
            results += 1
            assert hit.namespace == index.namespace
            if "secret-of-tenant" in hit.snippet:
                assert f"secret-of-tenant{index.namespace[6:]} " in hit.snippet
    assert results > 600


class CountingSparseEmbedder(CountingEmbedder):
    """A :class:`CountingEmbedder` with HashEmbedder's sparse head, recording the texts it encodes."""

    sparse_dim = HashEmbedder.sparse_dim

    def __init__(self) -> None:
        super().__init__()
        self.sparse_texts: list[str] = []

    @property
    def sparse_name(self) -> str:
        return self.inner.sparse_name

    def sparse(self, texts: Sequence[str]) -> list[dict[int, float]]:
        self.sparse_texts.extend(texts)
        return self.inner.sparse(texts)


def test_a_namespace_encodes_the_texts_it_holds_itself_and_keeps_them_when_another_drops_them(
    make: Factory,
) -> None:
    """Whether another namespace holds a text never shows in a sync: not in what it encodes, not in its
    report, not in how long it takes. Deleting one namespace's copy leaves the other's whole."""
    text = "# Diagnosis\nthe biopsy came back benign"
    alice, bob = make("alice", CountingSparseEmbedder()), make("bob", CountingSparseEmbedder())
    alice.workspace.core_file.write_text(text + "\n")
    assert alice.sync().chunks_embedded == 1
    bob.workspace.core_file.write_text(text + "\n\n# Own\nbob's own note\n")
    assert bob.sync().chunks_embedded == 2
    embedder = bob.embedder
    assert isinstance(embedder, CountingSparseEmbedder)
    assert sorted(embedder.passages) == sorted(embedder.sparse_texts) == [text, "# Own\nbob's own note"]
    alice.workspace.core_file.unlink()
    assert alice.sync().removed == ["MEMORY.md"]
    assert bob.check().ok
    for mode in ("vector", "hybrid"):
        hits = bob.search("biopsy benign", 1, mode=mode, sync=False)
        assert [(h.path, h.start_line) for h in hits] == [("MEMORY.md", 1)] and hits[0].namespace == "bob"
        assert (hits[0].sparse_score or 0) > 0
    alice.workspace.core_file.write_text(text + "\n")
    assert alice.sync().chunks_embedded == 1  # its own copy went with its chunk


def test_postgres_vector_search_uses_hnsw_and_stays_in_the_namespace(pg_dsn: str, tmp_path: Path) -> None:  # noqa: F811
    """A large namespace's vector query runs on the HNSW index and agrees with an exact scan; a namespace
    holding 2% of the rows still gets a full candidate list, never another namespace's rows."""
    import numpy as np
    import psycopg

    from contextmem.memory.pg_index import PgMemoryIndex

    rng = random.Random(3)
    words = [f"w{i}" for i in range(300)]
    embedder = HashEmbedder(DIM)
    # chunk_chars below a line's length: every line is a chunk of its own, chunk i is line i + 1; each
    # chunk alone (neighbour_weight=0), so the ranking is the plain cosine an exact scan computes
    options: dict[str, Any] = {"chunk_chars": 10, "neighbour_weight": 0.0}
    big = PgMemoryIndex(Workspace(tmp_path, "big"), embedder, pg_dsn, **options)
    small = PgMemoryIndex(Workspace(tmp_path, "small"), embedder, pg_dsn, **options)
    texts: dict[str, list[str]] = {}
    for index, n in ((big, 2000), (small, 40)):
        index.workspace.ensure()
        texts[index.namespace] = [" ".join(rng.sample(words, 8)) for _ in range(n)]
        index.workspace.core_file.write_text("".join(f"{t}\n" for t in texts[index.namespace]))
        assert index.sync().chunks_total == n
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("ANALYZE cm_memory_chunks")
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(
            r[0]
            for r in conn.execute(
                "EXPLAIN SELECT id FROM cm_memory_chunks WHERE namespace = 'big' AND model = %s"
                " ORDER BY embedding <=> (SELECT embedding FROM cm_memory_chunks LIMIT 1) LIMIT 10",
                (embedder.name,),
            ).fetchall()
        )
    assert "cm_memory_chunks_embedding" in plan  # the HNSW index
    matrix = embedder.embed(texts["big"], "passage")
    overlap = []
    for _ in range(20):
        query = " ".join(rng.sample(words, 3))
        exact = np.argsort(-(matrix @ embedder.embed([query], "query")[0]), kind="stable")[:10]
        hits = big.search(query, 10, mode="vector", sync=False)
        assert len(hits) == 10 and {h.namespace for h in hits} == {"big"}
        overlap.append(len({h.start_line for h in hits} & {int(i) + 1 for i in exact}) / 10)
        small_hits = small.search(query, 10, mode="vector", sync=False)
        assert len(small_hits) == 10 and {h.namespace for h in small_hits} == {"small"}
    assert sum(overlap) / len(overlap) >= 0.8  # HNSW is approximate; ef_search=100 keeps recall high
    big.close()
    small.close()


def test_agent_tools_work_on_either_index(make: Factory) -> None:
    import json

    from contextmem.memory import MemoryTools

    index = make()
    tools = MemoryTools(index)  # type: ignore[arg-type]
    assert tools.call("memory_write", {"text": "The staging database moved to host db-7.", "target": "core"})
    hits = json.loads(tools.call("memory_search", {"query": "where is the staging database?", "k": 3}))
    assert hits and hits[0]["path"] == "MEMORY.md"
    got = tools.call("memory_get", {"path": hits[0]["path"], "from_line": hits[0]["start_line"], "lines": 5})
    assert "db-7" in got


def test_postgres_memory_migrations_share_the_runner_table_with_the_session_store(
    pg_dsn: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    import asyncio

    import psycopg

    from contextmem.errors import StoreError
    from contextmem.memory.pg_index import PgMemoryIndex
    from contextmem.messages import user
    from contextmem.store.postgres import PostgresSessionStore

    async def sessions() -> None:
        async with PostgresSessionStore(pg_dsn) as store:
            await store.append("ns", "s1", [user("hello")])

    asyncio.run(sessions())
    index = PgMemoryIndex(Workspace(tmp_path), HashEmbedder(DIM), pg_dsn)
    index.close()
    PgMemoryIndex(Workspace(tmp_path), HashEmbedder(DIM), pg_dsn).close()  # a second open migrates nothing
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT component, version, name FROM cm_schema_migrations ORDER BY component, version"
        ).fetchall()
        assert ("memory", 1, "initial") in rows and ("sessions", 1, "initial") in rows
        assert [r for r in rows if r[0] == "memory"] == [
            ("memory", 1, "initial"),
            ("memory", 2, "sparse_terms"),
            ("memory", 3, "chunks_by_line"),
            ("memory", 4, "heading_day_speakers"),
            ("memory", 5, "says_when"),
            ("memory", 6, "documents"),
        ]
        conn.execute("INSERT INTO cm_schema_migrations VALUES ('memory', 99, 'future', 0)")
    with pytest.raises(StoreError, match="schema version 99"):
        PgMemoryIndex(Workspace(tmp_path), HashEmbedder(DIM), pg_dsn)
    with pytest.raises(Exception, match="vector\\(384\\)"):
        PgMemoryIndex(Workspace(tmp_path), HashEmbedder(64), pg_dsn)


def test_concurrent_syncs_of_one_namespace_never_duplicate_chunks(make: Factory) -> None:
    """Two indexes (two connections: as two processes would) sync the same namespace at the same time
    while the files change; afterwards every chunk exists exactly once."""
    import threading

    first, second = make(), make()
    ws = first.workspace
    errors: list[BaseException] = []

    def hammer(index: Index) -> None:
        try:
            for _ in range(15):
                index.sync()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    for round_ in range(4):
        for i in range(5):
            (ws.daily_dir / f"2026-01-0{i + 1}.md").write_text(
                "\n\n".join(f"# {j}\nround {round_} note {i}.{j}" for j in range(6)) + "\n"
            )
            _bump_mtime(ws.daily_dir / f"2026-01-0{i + 1}.md")
        threads = [threading.Thread(target=hammer, args=(ix,)) for ix in (first, second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        for index in (first, second):
            index.sync()
            assert index.stats() == {"files": 5, "chunks": 30}
            hits = index.search(f"round {round_} note", 50, mode="keyword")
            assert len(hits) == 30 and len({(h.path, h.start_line) for h in hits}) == 30
            assert index.check().ok


# --- where the two backends used to disagree: one behaviour, asserted on both --------------------------


def _three_files(ws: Workspace) -> None:
    ws.core_file.write_text("# A\nalpha fact\n\n# B\nbeta fact\n")
    (ws.daily_dir / "2026-01-05.md").write_text("# C\ngamma fact\n")
    (ws.daily_dir / "2026-01-06.md").write_text("# A\nalpha fact\n")  # the same text as a MEMORY.md chunk


def test_an_embedder_change_rebuilds_the_namespace_and_embeds_every_chunk_text_once(make: Factory) -> None:
    first = make()
    _three_files(first.workspace)
    assert first.sync().chunks_embedded == 3  # three distinct texts in four chunks
    first.close()
    embedder = CountingEmbedder()
    index = make(embedder=embedder)
    report = index.sync()
    assert report.updated == ["MEMORY.md", "memory/2026-01-05.md", "memory/2026-01-06.md"]
    assert report.added == [] and report.removed == []
    assert report.chunks_embedded == 3 and sorted(embedder.passages) == [
        "# A\nalpha fact",
        "# B\nbeta fact",
        "# C\ngamma fact",
    ]
    assert report.chunks_total == 4 and index.stats() == {"files": 3, "chunks": 4}
    assert index.check().ok
    assert index.search("gamma fact", 1, mode="vector")[0].path == "memory/2026-01-05.md"
    assert not index.sync().changed  # recorded: the next sync has nothing to do


def test_a_keyword_scheme_change_re_derives_every_chunk_and_embeds_nothing(make: Factory) -> None:
    embedder = CountingEmbedder()
    old = make(embedder=embedder)
    old._keywords += "-previous"  # type: ignore[attr-defined]  # what an older contextmem recorded
    _three_files(old.workspace)
    old.sync()
    old.close()
    embedder.passages.clear()
    index = make(embedder=embedder)
    report = index.sync()
    assert report.updated == ["MEMORY.md", "memory/2026-01-05.md", "memory/2026-01-06.md"]
    assert report.chunks_embedded == 0 and embedder.passages == []
    assert index.stats() == {"files": 3, "chunks": 4} and index.check().ok
    assert _paths(index, "beta", mode="keyword") == [("MEMORY.md", 4, 5)]
    assert not index.sync().changed


def test_a_repair_rebuilds_the_namespace_and_embeds_only_what_changed(make: Factory) -> None:
    embedder = CountingEmbedder()
    index = make(embedder=embedder, files_only=True)
    _three_files(index.workspace)
    index.sync()
    embedder.passages.clear()
    (index.workspace.daily_dir / "2026-01-05.md").write_text("# C\ngamma fact, revised\n")
    report = index.check(repair=True)
    assert report.problems == ("memory/2026-01-05.md: changed since indexed",)
    assert embedder.passages == ["# C\ngamma fact, revised"]
    assert index.check().ok and index.stats() == {"files": 3, "chunks": 4}


def test_a_file_that_becomes_a_symlink_leaves_the_index(make: Factory, tmp_path: Path) -> None:
    # Where files are the truth. With shared documents a link in one host's copy is never followed and
    # the shared document stays: tests/test_shared_memory.py.
    index = make(files_only=True)
    ws = index.workspace
    ws.core_file.write_text("# Plans\nquokka expedition in May\n")
    daily = ws.daily_dir / "2026-01-05.md"
    daily.write_text("# Lunch\nnoodles with the team\n")
    index.sync()
    outside = tmp_path / "outside.md"
    outside.write_text("# Secret\nplatypus passwords live here\n")
    ws.core_file.unlink()
    ws.core_file.symlink_to(outside)  # MEMORY.md -> a file outside the workspace
    (ws.daily_dir / "link.md").symlink_to(daily)  # a link inside the namespace: never followed either
    report = index.sync()
    assert report.removed == ["MEMORY.md"] and report.skipped == ["MEMORY.md", "memory/link.md"]
    assert report.added == [] and report.updated == []
    assert _paths(index, "quokka expedition", mode="keyword") == []
    assert _paths(index, "platypus passwords", mode="keyword") == []
    assert {h.path for h in index.search("quokka platypus", 10)} == {"memory/2026-01-05.md"}
    assert _paths(index, "noodles team", mode="keyword") == [("memory/2026-01-05.md", 1, 2)]
    assert index.stats() == {"files": 1, "chunks": 1} and index.check().ok
