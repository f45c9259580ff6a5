"""What the SQLite memory index keeps of one namespace in memory, and how it keeps it current.

Three caches, each read from the namespace's chunk rows and refreshed when the namespace's
``generation`` (bumped by every sync that writes) moves:

* the vectors as one contiguous float16 matrix and its int8 copy (:class:`.vector_cache.VectorCache`);
* the keyword postings of its FTS5 documents (:class:`.keyword_cache.KeywordCache`);
* the speaker names its chunks carry (:func:`.speakers.speakers`).

Refreshes are *incremental*: chunk ids are never reused (AUTOINCREMENT) and SQLite commits one writer at
a time, so only the rows of chunks above a cache's largest id are read; the matrix and the postings mask
the chunks deleted since, the names keep them (a name whose chunks were all deleted stays known until
the index is reopened; it only steers how a query that says it is encoded). Not thread-safe on its own:
the index calls it with its lock held.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, Protocol, Self, TypeVar

import numpy as np
from numpy.typing import NDArray

from .keyword_cache import FtsTokenizer, KeywordCache
from .speakers import split_speakers
from .vector_cache import VectorCache

__all__ = ["NamespaceCaches"]


class _Refreshable(Protocol):
    """What :meth:`NamespaceCaches._fresh` keeps current: a per-namespace cache of chunk rows by id."""

    @property
    def generation(self) -> int: ...

    @property
    def last_id(self) -> int: ...

    def refreshed(
        self, generation: int, live: NDArray[np.int64], new_ids: Sequence[int], payload: Sequence[Any]
    ) -> Self: ...


_Cache = TypeVar("_Cache", bound=_Refreshable)


class NamespaceCaches:
    """One namespace's in-memory caches over the index's connection ``db``: its FTS5 table ``fts``,
    tokenized by ``tokenizer``, and its vectors of ``model`` (``dim`` wide)."""

    def __init__(
        self,
        db: sqlite3.Connection,
        namespace: str,
        *,
        model: str,
        dim: int,
        fts: str,
        tokenizer: FtsTokenizer,
    ) -> None:
        self._db, self.namespace, self.model, self.dim = db, namespace, model, dim
        self.fts, self.tokenizer = fts, tokenizer
        self._vectors: VectorCache | None = None
        self._postings: KeywordCache | None = None
        self._live: tuple[int, int, NDArray[np.int64]] | None = None  # (generation, up to id, live ids)
        self._names: tuple[int, int, frozenset[str]] = (-1, -1, frozenset())  # (generation, up to id, names)

    def generation(self) -> int:
        found = self._db.execute(
            "SELECT generation FROM namespaces WHERE namespace=?", (self.namespace,)
        ).fetchone()
        return int(found[0]) if found else 0

    def vectors(self) -> VectorCache:
        """The namespace's vectors, rows in ascending chunk-id order: an append to today's file at 100k
        chunks reads that file's chunks, not the whole matrix, and copies nothing."""

        def read(since: int) -> list[Any]:
            return self._db.execute(
                "SELECT c.id, e.vector FROM chunks c JOIN embeddings e ON e.model=? AND e.hash=c.hash"
                " WHERE c.namespace=? AND c.id > ? ORDER BY c.id",
                (self.model, self.namespace, since),
            ).fetchall()

        self._vectors = self._fresh(
            self._vectors, read, lambda g, ids, blobs: VectorCache.load(g, ids, blobs, self.dim)
        )
        return self._vectors

    def keywords(self) -> KeywordCache:
        """The namespace's keyword postings, built from its FTS5 documents."""

        def read(since: int) -> list[Any]:
            try:
                return self._db.execute(
                    f'SELECT f.rowid, f.body FROM "{self.fts}" f JOIN chunks c ON c.id = f.rowid'
                    " AND +c.namespace = ? WHERE f.rowid > ? ORDER BY f.rowid",
                    (self.namespace, since),
                ).fetchall()
            except sqlite3.OperationalError as exc:
                if "no such table" not in str(exc):  # nothing indexed in this namespace yet
                    raise
                return []

        self._postings = self._fresh(
            self._postings, read, lambda g, ids, docs: KeywordCache.load(g, ids, docs, self.tokenizer)
        )
        return self._postings

    def speaker_names(self) -> frozenset[str]:
        """Every speaker name the namespace's chunks carry (and those of chunks deleted since they were
        read; see the module docstring)."""
        read_at, since, names = self._names
        generation = self.generation()
        if generation != read_at:
            # Up to the largest id given so far, in any namespace; a range of ids, not the namespace's
            # index (after an append at 100k chunks: 0.1 ms, not 7; the first read 22 ms).
            found = self._db.execute("SELECT seq FROM sqlite_sequence WHERE name='chunks'").fetchone()
            upto = int(found[0]) if found else since
            rows = self._db.execute(
                "SELECT DISTINCT speakers FROM chunks WHERE id > ? AND id <= ? AND +namespace = ?"
                " AND speakers != ''",
                (since, upto, self.namespace),
            )
            names = names.union(*(split_speakers(speakers) for (speakers,) in rows))
            self._names = (generation, upto, names)
        return names

    def _fresh(
        self,
        old: _Cache | None,
        read: Callable[[int], list[Any]],
        load: Callable[[int, list[int], list[Any]], _Cache],
    ) -> _Cache:
        """``old`` if the namespace's ``generation`` has not moved since it was built, else refreshed: only
        the rows of chunks above its largest id are read (``read(since)``: ``(id, payload)`` pairs) and
        the chunks deleted since are masked; ``load`` builds the first one. The ids still live are read
        once per generation for every cache that needs them (a 100k-chunk namespace: ~70 ms)."""
        generation = self.generation()
        if old is not None and old.generation == generation:
            return old
        since = old.last_id if old is not None else -1
        rows = read(since)
        new_ids, payload = [r[0] for r in rows], [r[1] for r in rows]
        if old is None:
            return load(generation, new_ids, payload)
        if self._live is None or self._live[:2] != (generation, since):
            ids = self._db.execute(
                "SELECT id FROM chunks WHERE namespace=? AND id <= ?", (self.namespace, since)
            ).fetchall()
            self._live = (generation, since, np.asarray(ids, dtype=np.int64).reshape(-1))
        return old.refreshed(generation, self._live[2], new_ids, payload)
