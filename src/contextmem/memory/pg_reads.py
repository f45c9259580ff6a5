"""What a search asks PostgreSQL: the memory index's read hooks, each a coroutine over one connection.

:class:`~contextmem.memory.pg_index.PgMemoryIndex` runs them two ways. A hook called alone (a SQLite-style
call from the base's algorithm) is one job on the index's loop thread. A whole search's reads run as one job
(:meth:`~contextmem.memory.indexing.BaseMemoryIndex._drive`): the search's flow names each read it needs
and these methods answer it on the same connection, one thread hop a search instead of one a read (under
load, each hop was a wait for a core).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Collection, Iterable
from datetime import date
from typing import TYPE_CHECKING, Any

import numpy as np

from .index_options import StoredChunk, Vector
from .ranking import Neighbours
from .speakers import split_speakers
from .text import MAX_QUERY_TERMS, CjkMode, query_terms

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["ID_VECTORS", "PgReads", "tsquery_text"]

ID_VECTORS = "SELECT id, embedding FROM cm_memory_chunks WHERE namespace = %s AND model = %s AND id = ANY(%s)"

# The chunks just before and after each of a set of chunks, in the same file (by start line).
_NEIGHBOURS = (
    "SELECT c.id,"
    " (SELECT p.id FROM cm_memory_chunks p WHERE p.namespace = c.namespace AND p.path = c.path"
    "  AND p.start_line < c.start_line ORDER BY p.start_line DESC LIMIT 1),"
    " (SELECT n.id FROM cm_memory_chunks n WHERE n.namespace = c.namespace AND n.path = c.path"
    "  AND n.start_line > c.start_line ORDER BY n.start_line LIMIT 1)"
    " FROM cm_memory_chunks c WHERE c.namespace = %s AND c.id = ANY(%s)"
)


def tsquery_text(query: str, cjk: CjkMode = "bigram", *, max_terms: int = MAX_QUERY_TERMS) -> str | None:
    """A ``to_tsquery`` input ORing the query's distinct tokens, each quoted (no operator injection)."""
    terms = query_terms(query, cjk, max_terms=max_terms)
    if not terms:
        return None
    return " | ".join("'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in terms)


async def _fetch(conn: AsyncConnection[Any], sql: str, params: Any, *, binary: bool = False) -> list[Any]:
    cur = await conn.execute(sql, params, binary=binary)
    return await cur.fetchall()


class PgReads:
    """The search reads of one namespace; each method is the storage hook of the same name (see
    :class:`~contextmem.memory.index_storage.IndexStorage`), with the connection first."""

    def __init__(
        self,
        namespace: str,
        *,
        model: str,
        sparse_name: str | None,
        text_search_config: str,
        cjk: CjkMode,
        ef_search: int,
        dim: int,
    ) -> None:
        self.namespace = namespace
        self.model = model
        self.sparse_name = sparse_name
        self.text_search_config = text_search_config
        self.cjk: CjkMode = cjk
        self.ef_search = ef_search
        self.dim = dim
        # hnsw.ef_search each connection is set to (a session setting: one round trip less per search)
        self._ef_search: weakref.WeakKeyDictionary[AsyncConnection[Any], int] = weakref.WeakKeyDictionary()

    async def keyword_scores(self, conn: AsyncConnection[Any], query: str, limit: int) -> dict[int, float]:
        expression = tsquery_text(query, self.cjk)
        if expression is None:
            return {}
        found = await _fetch(
            conn,
            "SELECT c.id, ts_rank(c.keywords, q) AS score"
            " FROM cm_memory_chunks c, to_tsquery(%s::regconfig, %s) q"
            " WHERE c.namespace = %s AND c.keywords @@ q ORDER BY score DESC, c.id LIMIT %s",
            (self.text_search_config, expression, self.namespace, limit),
        )
        return {int(r[0]): float(r[1]) for r in found}

    async def vector_scores(
        self, conn: AsyncConnection[Any], query: Vector, limit: int, also: Collection[int]
    ) -> dict[int, float]:
        ns, model, ef_search = self.namespace, self.model, max(self.ef_search, min(limit, 1000))
        if self._ef_search.get(conn) != ef_search:  # the pool is this index's own: set once per value
            await conn.execute(f"SET hnsw.ef_search = {ef_search}; SET hnsw.iterative_scan = relaxed_order")
            self._ef_search[conn] = ef_search
        found = await _fetch(
            conn,
            "SELECT id, 1 - (embedding <=> %b) FROM cm_memory_chunks"
            " WHERE namespace = %s AND model = %s ORDER BY embedding <=> %b LIMIT %s",
            (query, ns, model, query, limit),
        )
        extra_ids = list(set(also) - {int(r[0]) for r in found})  # keyword-only candidates
        extra = await _fetch(conn, ID_VECTORS, (ns, model, extra_ids), binary=True) if extra_ids else []
        # pgvector's cosine distance from a zero vector (a text with no word the embedder hashes, '- ' or
        # '0') is NaN: similar to nothing, as the SQLite backend's dot product says; a NaN broke the ranking.
        scores = {int(r[0]): 0.0 if math.isnan(r[1]) else float(r[1]) for r in found}
        for cid, vector in extra:
            scores[int(cid)] = float(np.dot(vector, query))
        return scores

    async def chunks_of_days(
        self, conn: AsyncConnection[Any], paths: list[str], days: list[date], limit: int
    ) -> set[int]:
        found = await _fetch(
            conn,
            "SELECT id FROM cm_memory_chunks WHERE namespace = %s"
            " AND (path = ANY(%s) OR heading_day = ANY(%s)) ORDER BY path, start_line LIMIT %s",
            (self.namespace, paths, days, limit),
        )
        return {int(r[0]) for r in found}

    async def chunk_rows(self, conn: AsyncConnection[Any], ids: Iterable[int]) -> dict[int, StoredChunk]:
        wanted = list(ids)
        if not wanted:
            return {}
        return {
            int(r[0]): StoredChunk(int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6], split_speakers(r[7]), r[8])
            for r in await _fetch(
                conn,
                "SELECT id, path, start_line, end_line, text, day, heading_day, speakers, says_when"
                " FROM cm_memory_chunks WHERE namespace = %s AND id = ANY(%s)",
                (self.namespace, wanted),
            )
        }

    async def chunk_neighbours(self, conn: AsyncConnection[Any], ids: list[int]) -> Neighbours:
        return {int(r[0]): (r[1], r[2]) for r in await _fetch(conn, _NEIGHBOURS, (self.namespace, ids))}

    async def chunk_terms(self, conn: AsyncConnection[Any], ids: list[int]) -> dict[int, bytes]:
        return {
            int(r[0]): bytes(r[1])
            for r in await _fetch(
                conn,
                "SELECT id, sparse FROM cm_memory_chunks WHERE namespace = %s AND sparse_model = %s"
                " AND id = ANY(%s)",
                (self.namespace, self.sparse_name, ids),
            )
        }

    async def chunk_vectors(self, conn: AsyncConnection[Any], ids: list[int]) -> Vector:
        rows = await _fetch(conn, ID_VECTORS, (self.namespace, self.model, ids), binary=True)
        found = {int(r[0]): r[1] for r in rows}
        missing = np.zeros(self.dim, dtype=np.float32)  # deleted by another process since the search read it
        return np.vstack([found.get(cid, missing) for cid in ids])
