"""The in-memory keyword postings score exactly what FTS5's ``bm25()`` scores, through appends and deletes."""

from __future__ import annotations

import os
import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from contextmem.memory import HashEmbedder, keyword_cache
from contextmem.memory.keyword_cache import FtsTokenizer, KeywordCache
from contextmem.memory.sqlite_index import _TOKENIZER, SqliteMemoryIndex
from contextmem.memory.text import MAX_QUERY_TERMS, fts_document, query_terms
from contextmem.workspace import Workspace

# Stems that meet ("run", "running"), possessives and contractions (two-token phrases: "ingrid's" is
# "ingrid" "s"), diacritics, Chinese bigrams, and plain words.
WORDS = [
    "run", "running", "runs", "ingrid's", "ingrid", "s", "don't", "t", "what", "did", "café", "cafe",
    "naïve", "数据库迁移", "迁移", "the", "tomas", "painted", "paint", "harbour", "x1",
    *(f"w{i}" for i in range(40)),
]  # fmt: skip


def _fts5_scores(db: sqlite3.Connection, terms: list[str]) -> dict[int, float]:
    expression = " OR ".join(f'"{t}"' for t in terms)
    return dict(db.execute("SELECT rowid, -bm25(f) FROM f WHERE f MATCH ?", (expression,)).fetchall())


def _rounds(seed: int) -> Iterator[tuple[sqlite3.Connection, KeywordCache, FtsTokenizer, list[str]]]:
    """A corpus grown and pruned over 30 rounds in FTS5 and in a cache refreshed alongside; each round
    yields both and some queries."""
    rng = random.Random(seed)
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE f USING fts5(body, tokenize='{_TOKENIZER}')")
    tokenizer = FtsTokenizer(_TOKENIZER)
    ids: list[int] = []
    cache: KeywordCache | None = None
    for generation in range(30):
        new_ids, documents = [], []
        for _ in range(rng.choice([0, 3, 20, 80])):
            document = fts_document(" ".join(rng.choices(WORDS, k=rng.randint(1, 25))))
            new_ids.append(db.execute("INSERT INTO f(body) VALUES (?)", (document,)).lastrowid)
            documents.append(document)
        gone = rng.sample(ids, min(len(ids), rng.randint(1, 60))) if ids and rng.random() < 0.4 else []
        for cid in gone:
            db.execute("DELETE FROM f WHERE rowid=?", (cid,))
            ids.remove(cid)
        ids += new_ids
        if cache is None:
            cache = KeywordCache.load(generation, new_ids, documents, tokenizer)
        else:
            cache = cache.refreshed(generation, np.asarray(gone, dtype=np.int64), new_ids, documents)
        queries = [" ".join(rng.choices(WORDS, k=rng.randint(1, 6))) for _ in range(20)]
        yield db, cache, tokenizer, queries


def _mismatches(seed: int) -> tuple[int, set[int]]:
    """How many (round, query) pairs score differently from FTS5, and the segment counts seen."""
    wrong, segments = 0, set()
    for db, cache, tokenizer, queries in _rounds(seed):
        segments.add(len(cache.segments))
        for query in queries:
            terms = query_terms(query)
            wrong += cache.top(tokenizer.phrases(terms), 10**6) != _fts5_scores(db, terms)
    return wrong, segments


@pytest.mark.parametrize("seed", range(4))
def test_scores_equal_fts5_bm25_through_appends_and_deletes(seed: int) -> None:
    wrong, segments = _mismatches(seed)
    assert wrong == 0  # the same rows, and each score equal to the last bit
    assert segments == {1, 2}  # both the small segment and the rebuilt one were scored


@pytest.mark.parametrize("constant", ["K1", "B"])
def test_the_comparison_catches_another_bm25(monkeypatch: pytest.MonkeyPatch, constant: str) -> None:
    monkeypatch.setattr(keyword_cache, constant, getattr(keyword_cache, constant) + 0.05)
    assert _mismatches(0)[0] > 0


def test_the_top_rows_are_the_best_scored() -> None:
    checked = 0
    for db, cache, tokenizer, queries in _rounds(7):
        for query in queries:
            terms = query_terms(query)
            every = sorted(_fts5_scores(db, terms).values(), reverse=True)
            top = cache.top(tokenizer.phrases(terms), 5)
            assert len(top) == min(5, len(every))
            if len(every) > 5:
                assert min(top.values()) == every[4]
                checked += 1
    assert checked > 100


def test_a_warm_index_scores_as_a_cold_one_and_as_fts5_through_edits(tmp_path: Path) -> None:
    """Through the index: the postings follow edits and deletions (refreshed by chunk id, compacted now
    and then), and score what a fresh index and FTS5's own query on the index's table score."""
    ws = Workspace(tmp_path)
    ws.ensure()
    rng = random.Random(3)
    files = [ws.daily_dir / f"2026-01-{day:02d}.md" for day in range(1, 6)]
    with SqliteMemoryIndex(ws, HashEmbedder()) as index:
        for round_ in range(25):
            path = rng.choice(files)
            if path.exists() and rng.random() < 0.3:
                path.unlink()
            else:
                sections = [
                    " ".join(rng.choices(WORDS, k=rng.randint(1, 12))) for _ in range(rng.randint(1, 8))
                ]
                path.write_text("".join(f"## {i}\n{text}\n\n" for i, text in enumerate(sections)))
                os.utime(path, ns=(round_ * 10**9, round_ * 10**9))  # an edit in the same second shows
            index.sync()
            terms = query_terms(" ".join(rng.choices(WORDS, k=3)))
            warm = index._keyword_scores(" ".join(terms), 1000)
            with SqliteMemoryIndex(ws, HashEmbedder()) as cold:
                assert cold._keyword_scores(" ".join(terms), 1000) == warm
            expression = " OR ".join(f'"{t}"' for t in terms)
            table = index._fts
            assert warm == dict(
                index._db.execute(
                    f'SELECT rowid, -bm25("{table}") FROM "{table}" WHERE "{table}" MATCH ?', (expression,)
                )
            )


def test_a_word_never_indexed_matches_nothing_and_is_not_remembered() -> None:
    tokenizer = FtsTokenizer(_TOKENIZER)
    cache = KeywordCache.load(
        1, [1, 2], [fts_document("the launch"), fts_document("launches today")], tokenizer
    )
    known = tokenizer.known_words
    phrases = tokenizer.phrases([f"zz{i}" for i in range(MAX_QUERY_TERMS)] + ["launched"])
    assert phrases[:-1] == [None] * MAX_QUERY_TERMS
    assert tokenizer.known_words == known  # a query's words are tokenized, not kept
    assert set(cache.top(phrases, 10)) == {1, 2}  # "launched" is the stem of both
    assert tokenizer.phrases(["\x01"]) == [None]  # the documents' separator is no word of theirs


def test_query_words_are_text_never_fts5_syntax(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    ws.ensure()
    ws.core_file.write_text("The launch is NEAR the date: March*\n")
    with SqliteMemoryIndex(ws, HashEmbedder()) as index:
        for hostile in ["NEAR(a b)", "body: x", '"unterminated', "a* OR ^b", "AND OR NOT", "launch)", "\x01"]:
            index.search(hostile, 3, mode="keyword")
        assert [h.path for h in index.search("launches", 3, mode="keyword")] == ["MEMORY.md"]


def _searched(index: SqliteMemoryIndex, ws: Workspace, query: str) -> int:
    """How many times a hybrid search read the namespace's live chunk ids. Its caches must then score as a
    fresh index's do: a deleted chunk left in them would move every BM25 score, and be a vector hit."""
    statements: list[str] = []
    index._db.set_trace_callback(statements.append)
    index.search(query, 3, sync=False)
    index._db.set_trace_callback(None)
    vector = index.embedder.embed([query], "query")[0]
    with SqliteMemoryIndex(ws, HashEmbedder()) as cold:
        assert index._keyword_scores(query, 100) == cold._keyword_scores(query, 100)
        assert index._vector_scores(vector, 100, ()) == cold._vector_scores(vector, 100, ())
    reads = [s for s in statements if s.startswith("SELECT id FROM chunks WHERE namespace=") and "id <=" in s]
    return len(reads)


def _rewrite(ws: Workspace, last: str, mtime: int) -> None:
    ws.core_file.write_text(f"## a\nthe launch moved\n\n## b\nthe budget grew\n\n## c\nthe {last}\n")
    os.utime(ws.core_file, ns=(mtime, mtime))


def test_the_caches_mask_what_a_write_deleted_and_read_the_live_ids_only_after_anothers(
    tmp_path: Path,
) -> None:
    ws = Workspace(tmp_path)
    ws.ensure()
    _rewrite(ws, "budget held", 10**9)
    with SqliteMemoryIndex(ws, HashEmbedder()) as index, SqliteMemoryIndex(ws, HashEmbedder()) as other:
        index.search("launch", 2)  # both caches built
        # This index's own write tells its caches which chunk went: no live ids read.
        _rewrite(ws, "budget shrank", 2 * 10**9)
        index.sync()
        assert _searched(index, ws, "budget grew shrank held") == 0
        # A write another handle (another process) made: the live ids are read, once for both caches.
        _rewrite(ws, "budget doubled", 3 * 10**9)
        other.sync()
        assert _searched(index, ws, "budget grew shrank held doubled") == 1
