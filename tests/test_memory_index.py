"""The index follows the files exactly (SPEC M3), ranks as specified (M4), never crosses namespaces (M6)."""

from __future__ import annotations

import os
import random
import sqlite3
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from contextmem.errors import ConfigError
from contextmem.memory import HashEmbedder, SqliteMemoryIndex
from contextmem.memory.embedders import EmbedKind, Vectors
from contextmem.workspace import Workspace


class CountingEmbedder:
    """HashEmbedder that records every passage it embeds."""

    def __init__(self) -> None:
        self.inner = HashEmbedder(128)
        self.passages: list[str] = []

    name = "counting-hash-128"
    dim = 128

    def embed(self, texts: Sequence[str], kind: EmbedKind) -> Vectors:
        if kind == "passage":
            self.passages.extend(texts)
        return self.inner.embed(texts, kind)


def _index(root: Path, namespace: str = "default", **options: object) -> SqliteMemoryIndex:
    return SqliteMemoryIndex(Workspace(root, namespace), HashEmbedder(128), **options)  # type: ignore[arg-type]


def _paths(index: SqliteMemoryIndex, query: str, **options: object) -> list[tuple[str, int, int]]:
    return [(h.path, h.start_line, h.end_line) for h in index.search(query, 10, **options)]  # type: ignore[arg-type]


def _bump_mtime(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


def test_edit_delete_and_rename_show_up_in_the_next_search(tmp_path: Path) -> None:
    index = _index(tmp_path)
    ws = index.workspace
    ws.ensure()
    daily = ws.daily_dir / "2026-01-05.md"
    daily.write_text("## 10:00\n\nThe launch moved to March 3.\n")
    assert _paths(index, "launch March", mode="keyword") == [("memory/2026-01-05.md", 1, 3)]

    daily.write_text("## 10:00\n\nThe launch moved to April 9.\n\n## 11:00\n\nBudget approved.\n")
    assert _paths(index, "March", mode="keyword") == []
    assert _paths(index, "April", mode="keyword") == [("memory/2026-01-05.md", 1, 3)]
    assert _paths(index, "budget", mode="keyword") == [("memory/2026-01-05.md", 5, 7)]

    renamed = ws.daily_dir / "2026-01-06.md"
    daily.rename(renamed)
    assert _paths(index, "April", mode="keyword") == [("memory/2026-01-06.md", 1, 3)]
    assert _paths(index, "April") == [("memory/2026-01-06.md", 1, 3), ("memory/2026-01-06.md", 5, 7)]

    renamed.unlink()
    assert index.search("April", 10) == []
    assert index.stats() == {"files": 0, "chunks": 0}
    assert index.check().ok


def test_same_size_edit_in_the_same_second_is_caught(tmp_path: Path) -> None:
    index = _index(tmp_path)
    index.workspace.ensure()
    core = index.workspace.core_file
    core.write_text("color: red\n")
    index.sync()
    before = core.stat()
    core.write_text("color: tan\n")  # same size
    os.utime(core, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the same mtime
    assert _paths(index, "tan", mode="keyword") == [("MEMORY.md", 1, 1)]
    assert _paths(index, "red", mode="keyword") == []


def test_only_changed_chunks_are_re_embedded_and_renames_embed_nothing(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    ws = Workspace(tmp_path)
    ws.ensure()
    index = SqliteMemoryIndex(ws, embedder)
    note = ws.daily_dir / "notes.md"
    note.write_text("# A\nalpha fact\n# B\nbeta fact\n# C\ngamma fact\n")
    report = index.sync()
    assert report.added == ["memory/notes.md"] and report.chunks_embedded == 3
    assert index.sync().changed is False  # nothing changed: nothing read, nothing embedded

    embedder.passages.clear()
    note.write_text("# A\nalpha fact\n# B\nbeta fact, revised\n# C\ngamma fact\n")
    _bump_mtime(note)
    report = index.sync()
    assert report.updated == ["memory/notes.md"]
    assert embedder.passages == ["# B\nbeta fact, revised"]

    embedder.passages.clear()
    note.rename(ws.daily_dir / "renamed.md")
    report = index.sync()
    assert report.added == ["memory/renamed.md"] and report.removed == ["memory/notes.md"]
    assert embedder.passages == []
    assert index.check().ok


def test_touching_a_file_without_changing_it_re_embeds_nothing(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    ws = Workspace(tmp_path)
    ws.ensure()
    ws.core_file.write_text("fact one\n")
    index = SqliteMemoryIndex(ws, embedder)
    index.sync()
    embedder.passages.clear()
    _bump_mtime(ws.core_file)
    report = index.sync()
    assert not report.changed and embedder.passages == []


def test_changing_the_embedder_re_embeds_everything(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    ws.ensure()
    ws.core_file.write_text("fact one\n\n# Two\nfact two\n")
    SqliteMemoryIndex(ws, HashEmbedder(64)).sync()
    embedder = CountingEmbedder()
    index = SqliteMemoryIndex(ws, embedder)
    assert index.sync().chunks_embedded == 2
    assert index.check().ok
    assert index.search("fact two", 1, mode="vector")[0].start_line == 3


def test_integrity_check_finds_and_repairs_damage(tmp_path: Path) -> None:
    index = _index(tmp_path)
    ws = index.workspace
    ws.ensure()
    ws.core_file.write_text("alpha\n\n# B\nbeta\n")
    index.sync()
    assert index.check().ok
    db = sqlite3.connect(index.db_path)
    db.execute(f'DELETE FROM "{index._fts}"')
    db.execute("UPDATE chunks SET text='tampered' WHERE start_line=1")
    db.commit()
    db.close()
    ws.core_file.write_text("alpha\n\n# B\nbeta\ngamma\n")
    report = index.check(repair=True)
    assert not report.ok
    text = "\n".join(report.problems)
    assert "missing from the keyword index" in text and "changed since indexed" in text
    assert index.check().ok
    assert _paths(index, "gamma", mode="keyword") == [("MEMORY.md", 3, 5)]


def test_chinese_and_english_keyword_search(tmp_path: Path) -> None:
    index = _index(tmp_path)
    index.workspace.ensure()
    index.workspace.core_file.write_text(
        "我们决定把数据库迁移到PostgreSQL。\n\n# Travel\nThe user is flying to Tokyo on Friday.\n"
    )
    assert _paths(index, "数据库", mode="keyword") == [("MEMORY.md", 1, 1)]
    assert _paths(index, "迁移方案", mode="keyword") == [("MEMORY.md", 1, 1)]
    assert _paths(index, "flights to tokyo", mode="keyword") == [("MEMORY.md", 3, 4)]  # porter stemming


def test_daily_memory_decays_and_core_does_not(tmp_path: Path) -> None:
    index = _index(tmp_path, today=lambda: date(2026, 3, 1))
    ws = index.workspace
    ws.ensure()
    text = "project falcon deadline\n"
    ws.core_file.write_text(text)
    (ws.daily_dir / "2026-03-01.md").write_text(text)
    (ws.daily_dir / "2026-01-30.md").write_text(text)  # 30 days old: its decaying fifth halved
    hits = {h.path: h.score for h in index.search("project falcon deadline", 5)}
    assert hits["MEMORY.md"] == pytest.approx(1.0)
    assert hits["memory/2026-03-01.md"] == pytest.approx(1.0)
    assert hits["memory/2026-01-30.md"] == pytest.approx(0.8 + 0.2 * 0.5)  # the default floor is 0.8
    later = index.search("project falcon deadline", 5, today=date(2026, 5, 30))
    assert later[0].path == "MEMORY.md"


def test_min_score_keeps_keyword_only_hits(tmp_path: Path) -> None:
    index = _index(tmp_path)
    ws = index.workspace
    ws.ensure()
    ws.core_file.write_text(
        "\n\n".join(
            f"# Note {i}\nthe weather today was mild and the team met for lunch {i}" for i in range(8)
        )
        + "\n\n# Error\nbuild failed with ERR_XQ7734 in the linker\n"
    )
    hits = index.search("what happened with ERR_XQ7734", 3, min_score=0.9)
    assert hits and hits[0].snippet.endswith("ERR_XQ7734 in the linker")
    assert index.search("what happened with ERR_XQ7734", 3, mode="vector", min_score=1.01) == []


def test_modes_validate_and_mmr_diversifies(tmp_path: Path) -> None:
    index = _index(tmp_path)
    ws = index.workspace
    ws.ensure()
    dup = "coffee beans roast espresso grinder"
    ws.core_file.write_text(f"# A\n{dup}\n# B\n{dup}\n# C\n{dup} \n# D\ncoffee shop opening hours\n")
    plain = index.search("coffee espresso", 2)
    diverse = index.search("coffee espresso", 2, mmr_lambda=0.3)
    assert {h.start_line for h in plain} <= {1, 3, 5}
    assert 7 in {h.start_line for h in diverse}
    with pytest.raises(ConfigError):
        index.search("x", mode="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        _index(tmp_path, vector_weight=0.0, keyword_weight=0.0)
    assert index.search("   ", 5) == []


async def test_async_search_syncs_first(tmp_path: Path) -> None:
    index = _index(tmp_path)
    index.workspace.ensure()
    index.workspace.core_file.write_text("async works\n")
    hits = await index.asearch("async", 1)  # the file was never synced: asearch does it, off the loop
    assert hits[0].path == "MEMORY.md" and hits[0].namespace == "default"
    assert not index.sync().changed


def test_progress_reports_embedding(tmp_path: Path) -> None:
    index = _index(tmp_path)
    index.workspace.ensure()
    index.workspace.core_file.write_text("\n\n".join(f"# {i}\nfact {i}" for i in range(150)))
    calls: list[tuple[int, int]] = []
    index.sync(progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (150, 150) and len(calls) == 3


def test_fifty_namespaces_never_see_each_other(tmp_path: Path) -> None:
    rng = random.Random(7)
    vocabulary = [f"word{i}" for i in range(40)] + ["数据库", "迁移", "launch", "tea"]
    indexes = []
    for n in range(50):
        index = _index(tmp_path, f"tenant{n}")
        ws = index.workspace
        ws.ensure()
        shared = "\n\n".join(f"# Shared {i}\n" + " ".join(rng.sample(vocabulary, 6)) for i in range(6))
        ws.core_file.write_text(
            shared + f"\n\n# Own\nsecret-of-tenant{n} " + " ".join(rng.sample(vocabulary, 4))
        )
        (ws.daily_dir / "2026-01-01.md").write_text(" ".join(rng.sample(vocabulary, 8)) + "\n")
        indexes.append(index)
    for index in indexes:
        index.sync()
    contents = {
        index.namespace: {index.workspace.relative(p): p.read_text() for p in index.workspace.memory_files()}
        for index in indexes
    }
    queries = 0
    for _ in range(3000):
        index = rng.choice(indexes)
        other = rng.randrange(50)
        query = " ".join(rng.sample(vocabulary, 3)) + (
            f" secret-of-tenant{other}" if rng.random() < 0.3 else ""
        )
        mode = rng.choice(["hybrid", "keyword", "vector"])
        for hit in index.search(query, 10, mode=mode, sync=False):  # type: ignore[arg-type]
            queries += 1
            assert hit.namespace == index.namespace
            lines = contents[index.namespace][hit.path].splitlines()
            assert "\n".join(lines[hit.start_line - 1 : hit.end_line]).startswith(hit.snippet.rstrip("…"))
            if "secret-of-tenant" in hit.snippet:
                assert f"secret-of-tenant{index.namespace[6:]} " in hit.snippet
    assert queries > 3000  # the searches returned results, so the assertions above ran


def test_vectors_are_normalised_float32(tmp_path: Path) -> None:
    vectors = HashEmbedder(32).embed(["a b c", "数据库", ""], "passage")
    assert vectors.dtype == np.float32 and vectors.shape == (3, 32)
    assert np.allclose(np.linalg.norm(vectors[:2], axis=1), 1.0)
    assert not vectors[2].any()


def test_from_settings_uses_workspace_namespace_and_weights(tmp_path: Path) -> None:
    from contextmem.settings import Settings

    settings = Settings(
        workspace=tmp_path,
        namespace="agent-7",
        vector_weight=0.5,
        daily_half_life_days=10,
        daily_decay_floor=0.5,
    )
    index = SqliteMemoryIndex.from_settings(settings, HashEmbedder(16))
    assert index.workspace.dir == tmp_path.resolve() / "namespaces" / "agent-7"
    assert (index.vector_weight, index.keyword_weight, index.half_life_days) == (0.5, 0.3, 10)
    assert index.decay_floor == 0.5
    with pytest.raises(ConfigError, match="decay_floor"):
        SqliteMemoryIndex(index.workspace, HashEmbedder(16), decay_floor=1.0)
    weights = (
        "sparse_weight",
        "neighbour_weight",
        "speaker_weight",
        "time_weight",
        "file_weight",
        "unnamed_weight",
        "vector_weight",
    )
    for weight in weights:
        with pytest.raises(ConfigError, match=f"{weight}=-0.1 .*Fix:"):
            SqliteMemoryIndex(index.workspace, HashEmbedder(16), **{weight: -0.1})
    for weight in ("file_weight", "unnamed_weight"):
        with pytest.raises(ConfigError, match=rf"{weight}=1.5 must be in \[0, 1\]. Fix:"):
            SqliteMemoryIndex(index.workspace, HashEmbedder(16), **{weight: 1.5})
    with pytest.raises(ConfigError, match="not both 0"):
        SqliteMemoryIndex(index.workspace, HashEmbedder(16), vector_weight=0.0, keyword_weight=0.0)
    assert index.db_path == tmp_path.resolve() / "memory-index.sqlite"


def _legacy_index(db_path: Path, user_version: int) -> sqlite3.Connection:
    """An index file as the ``PRAGMA user_version`` scheme wrote it: its scripts were m0001 and m0002."""
    from contextmem.store.migrations import discover

    old = sqlite3.connect(db_path)
    for migration in discover("contextmem.store.migrations.memory_sqlite")[:user_version]:
        for statement in migration.statements:
            old.execute(statement)
    old.execute(f"PRAGMA user_version={user_version}")
    old.commit()
    return old


def _memory_migrations(db_path: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(db_path) as db:
        sql = "SELECT version, name FROM cm_schema_migrations WHERE component='memory' ORDER BY version"
        return db.execute(sql).fetchall()


def test_an_index_of_schema_1_migrates_and_keeps_its_vectors(tmp_path: Path) -> None:
    """An index file written by the first schema (one shared FTS table, WITHOUT ROWID vectors) opens,
    migrates, re-derives its chunks from the files and reuses the stored vectors: nothing is re-embedded."""
    from contextmem.memory.text import content_hash

    ws = Workspace(tmp_path)
    ws.ensure()
    ws.core_file.write_text("# A\nalpha fact\n")
    db_path = tmp_path / "old.sqlite"
    old = _legacy_index(db_path, 1)
    embedder = CountingEmbedder()
    vector = embedder.inner.embed(["# A\nalpha fact"], "passage")[0]
    old.execute(
        "INSERT INTO vectors(model, hash, vector) VALUES (?,?,?)",
        (embedder.name, content_hash("# A\nalpha fact"), vector.tobytes()),
    )
    old.execute(
        "INSERT INTO namespaces(namespace, generation, embedder) VALUES ('default', 1, ?)", (embedder.name,)
    )
    old.commit()
    old.close()
    index = SqliteMemoryIndex(ws, embedder, db_path=db_path)
    assert index.sync().added == ["MEMORY.md"] and embedder.passages == []
    assert _paths(index, "alpha", mode="keyword") == [("MEMORY.md", 1, 2)]
    assert index.check().ok
    assert _memory_migrations(db_path) == [
        (1, "initial (adopted)"),
        (2, "fts_per_namespace"),
        (3, "sparse_terms"),
        (4, "chunks_by_line"),
        (5, "heading_day_speakers"),
        (6, "says_when"),
        (7, "encodings_per_namespace"),
    ]


def test_an_index_of_the_last_user_version_schema_is_adopted_in_place(tmp_path: Path) -> None:
    """A file of ``user_version`` 2 (the schema the numbered migrations start from) is adopted without
    running anything: its chunks, vectors and files stay, and the next sync has nothing to do."""
    ws = Workspace(tmp_path)
    ws.ensure()
    ws.core_file.write_text("# A\nalpha fact\n\n# B\nbeta fact\n")
    db_path = tmp_path / "v2.sqlite"
    _legacy_index(db_path, 2).close()
    embedder = CountingEmbedder()
    first = SqliteMemoryIndex(ws, embedder, db_path=db_path)  # adopts 1 and 2, then indexes
    assert first.sync().chunks_embedded == 2
    first.close()
    with sqlite3.connect(db_path) as db:  # back to what the old scheme left: no migration table
        db.execute("DROP TABLE cm_schema_migrations")
        db.execute("DROP TABLE sparse_terms")
        db.execute("DROP INDEX chunks_by_line")
        db.execute("CREATE INDEX chunks_by_path ON chunks(namespace, path)")
        db.execute("DROP INDEX chunks_by_heading_day")
        db.execute("ALTER TABLE chunks DROP COLUMN heading_day")
        db.execute("ALTER TABLE chunks DROP COLUMN speakers")
        db.execute("ALTER TABLE chunks DROP COLUMN says_when")
    embedder.passages.clear()
    index = SqliteMemoryIndex(ws, embedder, db_path=db_path)
    assert _memory_migrations(db_path) == [
        (1, "initial (adopted)"),
        (2, "fts_per_namespace (adopted)"),
        (3, "sparse_terms"),
        (4, "chunks_by_line"),
        (5, "heading_day_speakers"),
        (6, "says_when"),
        (7, "encodings_per_namespace"),
    ]
    assert not index.sync().changed and embedder.passages == []
    assert _paths(index, "beta", mode="keyword") == [("MEMORY.md", 4, 5)]
    assert index.check().ok


def test_encodings_shared_across_namespaces_are_copied_to_each_and_none_encoded_again(tmp_path: Path) -> None:
    """m0007: a file whose namespaces shared vectors and sparse terms by text (m0006) gives each namespace
    its own copy of what its chunks use, drops what no chunk uses, and the next syncs encode nothing."""
    db_path = tmp_path / "index.sqlite"
    for namespace in ("alice", "bob"):
        ws = Workspace(tmp_path, namespace)
        ws.ensure()
        ws.core_file.write_text(f"# Shared\nthe launch moved to May\n\n# Own\n{namespace}'s tea\n")
        with SqliteMemoryIndex(ws, HashEmbedder(128), db_path=db_path) as index:
            assert index.sync().chunks_embedded == 2
    with sqlite3.connect(db_path) as db:  # back to m0006: one row a (model, text), and one no chunk uses
        old_keys = (("embeddings", "vector", "model, hash"), ("sparse_terms", "terms", "hash, model"))
        for table, payload, key in old_keys:
            db.execute(
                f"CREATE TABLE old(id INTEGER PRIMARY KEY, model TEXT NOT NULL, hash TEXT NOT NULL,"
                f" {payload} BLOB NOT NULL)"
            )
            db.execute(
                f"INSERT INTO old(model, hash, {payload}) SELECT model, hash, min({payload}) FROM {table}"
                " GROUP BY model, hash"
            )
            db.execute(f"INSERT INTO old(model, hash, {payload}) VALUES ('hash-128', 'unused', x'00')")
            db.execute(f"DROP TABLE {table}")
            db.execute(f"ALTER TABLE old RENAME TO {table}")
            db.execute(f"CREATE UNIQUE INDEX {table}_key ON {table}({key})")
        db.execute("DELETE FROM cm_schema_migrations WHERE component='memory' AND version=7")
    for namespace in ("alice", "bob"):
        with SqliteMemoryIndex(Workspace(tmp_path, namespace), HashEmbedder(128), db_path=db_path) as index:
            assert not index.sync().changed and index.check().ok
            hits = index.search("launch May", 1, mode="vector", sync=False)
            assert [(h.namespace, h.start_line) for h in hits] == [(namespace, 1)]
    assert _memory_migrations(db_path)[-1] == (7, "encodings_per_namespace")
    with sqlite3.connect(db_path) as db:
        for table in ("embeddings", "sparse_terms"):
            sql = f"SELECT namespace, count(*) FROM {table} GROUP BY namespace ORDER BY namespace"
            assert db.execute(sql).fetchall() == [("alice", 2), ("bob", 2)]


def test_an_index_from_a_newer_contextmem_is_refused(tmp_path: Path) -> None:
    from contextmem.errors import StoreSchemaError

    db_path = tmp_path / "future.sqlite"
    SqliteMemoryIndex(Workspace(tmp_path), HashEmbedder(16), db_path=db_path).close()
    with sqlite3.connect(db_path) as db:
        db.execute("INSERT INTO cm_schema_migrations VALUES ('memory', 99, 'future', 0)")
    with pytest.raises(StoreSchemaError, match="memory schema version 99"):
        SqliteMemoryIndex(Workspace(tmp_path), HashEmbedder(16), db_path=db_path)


def test_vector_cache_reloads_only_new_rows_and_follows_edits(tmp_path: Path) -> None:
    index = _index(tmp_path, today=lambda: date(2026, 1, 5))
    ws = index.workspace
    ws.ensure()
    ws.core_file.write_text("\n\n".join(f"# {i}\nfact number {i}" for i in range(50)) + "\n")
    index.sync()
    before = index._caches.vectors()
    daily = ws.daily_dir / "2026-01-05.md"
    daily.write_text("# new\nquokka sighting at the lake\n")
    index.sync()
    after = index._caches.vectors()
    assert after is not before and after.ids.size == before.ids.size + 1
    assert after.matrix.flags.c_contiguous and after.matrix.dtype == np.float16

    def live(cache: Any) -> tuple[Any, Any]:
        keep = np.ones(cache.ids.size, dtype=bool)
        keep[cache.dead] = False
        return cache.ids[keep], cache.matrix[keep]

    def same_as_cold_load() -> bool:
        cold_cache = SqliteMemoryIndex(ws, HashEmbedder(128))._caches.vectors()
        cold, warm = live(cold_cache), live(index._caches.vectors())
        coarse = [
            (c.coarse.rows[: c.ids.size][keep], c.coarse.scales[: c.ids.size][keep])
            for c in (cold_cache, index._caches.vectors())
            for keep in [np.isin(np.arange(c.ids.size), c.dead, invert=True)]
        ]
        return (
            np.array_equal(cold[0], warm[0])
            and np.array_equal(cold[1], warm[1])
            and all(np.array_equal(a, b) for a, b in zip(*coarse, strict=True))
        )

    assert same_as_cold_load()
    assert index.search("quokka lake", 1, mode="vector")[0].path == "memory/2026-01-05.md"
    for round_ in range(30):  # edits delete and re-insert chunks: masked, appended, now and then compacted
        daily.write_text(f"# new\nplatypus sighting {round_} at the river\n")
        _bump_mtime(daily)
        hits = index.search(f"platypus sighting {round_} river", 3, mode="vector")
        assert hits[0].snippet == f"# new\nplatypus sighting {round_} at the river"
        assert len({(h.path, h.start_line) for h in hits}) == len(hits)
    assert same_as_cold_load()
    ws.core_file.unlink()
    assert [h.path for h in index.search("fact number", 10, mode="vector")] == ["memory/2026-01-05.md"]
    assert same_as_cold_load()


def test_a_repeated_query_is_embedded_once(tmp_path: Path) -> None:
    class QueryCounting(CountingEmbedder):
        queries = 0

        def embed(self, texts: Sequence[str], kind: EmbedKind) -> Vectors:
            if kind == "query":
                QueryCounting.queries += len(texts)
            return super().embed(texts, kind)

    index = SqliteMemoryIndex(Workspace(tmp_path), QueryCounting())
    index.workspace.ensure()
    index.workspace.core_file.write_text("cached query vectors\n")
    for _ in range(3):
        assert index.search("cached vectors", 1)[0].path == "MEMORY.md"
    index.search("another query", 1)
    assert QueryCounting.queries == 2


def test_the_int8_scan_reads_each_cosine_within_its_rounding() -> None:
    from contextmem.memory.embedders import normalise
    from contextmem.memory.vector_cache import _THREADS_FROM, Coarse

    rng = np.random.default_rng(6)
    for rows in (0, 1, 257, _THREADS_FROM + 3):
        vectors = normalise(rng.standard_normal((rows, 384))) if rows else np.zeros((0, 384), np.float32)
        vectors[:1] = 0.0  # a zero vector stays zero
        coarse = Coarse.empty(rows + 10, 384)
        coarse.put(0, vectors)
        query = normalise(rng.standard_normal(384))[0]
        got = coarse.scores(rows, query)
        assert got.shape == (rows,) and got.dtype == np.float32
        assert np.abs(got - vectors @ query).max(initial=0.0) < 3e-3  # 1/254 of each row's largest


def test_vector_candidates_are_the_nearest_by_the_float16_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The int8 scan picks twice the candidates; the float16 rows keep the nearest ``limit``: the same
    candidates as a float16 scan would give. With no margin the scan's rounding changes some."""
    from contextmem.memory import sqlite_index
    from contextmem.memory.embedders import normalise

    index = _index(tmp_path)
    index.workspace.ensure()
    rng = random.Random(7)
    words = [f"w{i}" for i in range(500)]
    notes = (f"# {i}\n" + " ".join(rng.sample(words, 8)) for i in range(3000))  # no two cosines tie
    index.workspace.core_file.write_text("\n\n".join(notes) + "\n")
    index.sync()
    cache = index._caches.vectors()
    everything = cache.rows(np.arange(cache.ids.size))
    queries = normalise(np.random.default_rng(7).standard_normal((40, 128)))

    def differing() -> int:
        return sum(
            set(index._vector_scores(q, 20, ()))
            != set(cache.ids[np.argsort(-(everything @ q))[:20]].tolist())
            for q in queries
        )

    assert differing() == 0
    monkeypatch.setattr(sqlite_index, "_SCAN_MARGIN", 1)
    assert differing() > 0


def test_the_file_state_read_before_a_sync_follows_every_writer(tmp_path: Path) -> None:
    # Each index keeps the files it last read, until the database changes: by its own write or another
    # connection's. A stale copy would report the same file added twice, or removed twice.
    ws = Workspace(tmp_path)
    ws.ensure()
    first = SqliteMemoryIndex(ws, HashEmbedder(64))
    second = SqliteMemoryIndex(ws, HashEmbedder(64))
    note = ws.daily_dir / "2026-01-05.md"
    note.write_text("## 09:00\n\nwe chose PostgreSQL 16\n")
    assert first.sync().added == ["memory/2026-01-05.md"]
    assert first.sync().added == [] and second.sync().added == []  # its own write, the other's
    note.unlink()
    assert first.sync().removed == ["memory/2026-01-05.md"]
    assert second.sync().removed == []  # the other connection's delete was read
    assert second.search("PostgreSQL", 3) == []
    first.close()
    second.close()
