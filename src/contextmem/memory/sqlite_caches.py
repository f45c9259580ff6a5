"""What the SQLite memory index keeps of one namespace in memory, and how it keeps it current.

Three caches, each read from the namespace's chunk rows and refreshed when the namespace's
``generation`` (bumped by every sync that writes) moves:

* the vectors as one contiguous float16 matrix and its int8 copy (:class:`.vector_cache.VectorCache`);
* the keyword postings of its FTS5 documents (:class:`.keyword_cache.KeywordCache`);
* the speaker names its chunks carry (:func:`.speakers.speakers`).

Refreshes are *incremental*: chunk ids are never reused (AUTOINCREMENT) and SQLite commits one writer at
a time, so only the rows of chunks above a cache's largest id are read. The matrix and the postings mask
the chunks deleted since: those the index's own writes report (:meth:`NamespaceCaches.deleted`), or,
after a write that did not report (another process's, a rebuild), every id no longer live. The names keep
them (a name whose chunks were all deleted stays known until the index is reopened; it only steers how a
query that says it is encoded). Not thread-safe on its own: the index calls it with its lock held.
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

_DELETIONS_KEPT = 64  # writes whose deleted ids are remembered (a cache further behind reads the live ids)


class _Refreshable(Protocol):
    """What :meth:`NamespaceCaches._fresh` keeps current: a per-namespace cache of chunk rows by id."""

    @property
    def generation(self) -> int: ...

    @property
    def last_id(self) -> int: ...

    @property
    def ids(self) -> NDArray[np.int64]: ...

    def refreshed(
        self, generation: int, gone: NDArray[np.int64], new_ids: Sequence[int], payload: Sequence[Any]
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
        self._deleted: dict[int, list[int]] = {}  # generation -> the chunk ids the write that made it deleted
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
            # Chunks first (CROSS JOIN), and after the first read by a range of ids (``+`` keeps SQLite off
            # the namespace's index): at 100k chunks 0.01 ms for the chunk an append adds, where SQLite
            # left to choose walks the namespace's index (7 ms) or every vector of the model (35 ms).
            namespace = "c.namespace" if since < 0 else "+c.namespace"
            return self._db.execute(
                "SELECT c.id, e.vector FROM chunks c CROSS JOIN embeddings e"
                " ON e.namespace=c.namespace AND e.model=? AND e.hash=c.hash"
                f" WHERE {namespace}=? AND c.id > ? ORDER BY c.id",
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

    def deleted(self, generation: int, ids: Sequence[int]) -> None:
        """Record that the write which moved the namespace to ``generation`` deleted chunks ``ids`` (and no
        other): a cache a few writes behind then masks them without reading the ids still live."""
        self._deleted[generation] = list(ids)
        while len(self._deleted) > _DELETIONS_KEPT:
            del self._deleted[min(self._deleted)]

    def _fresh(
        self,
        old: _Cache | None,
        read: Callable[[int], list[Any]],
        load: Callable[[int, list[int], list[Any]], _Cache],
    ) -> _Cache:
        """``old`` if the namespace's ``generation`` has not moved since it was built, else refreshed: only
        the rows of chunks above its largest id are read (``read(since)``: ``(id, payload)`` pairs) and
        the chunks deleted since are masked; ``load`` builds the first one."""
        generation = self.generation()
        if old is not None and old.generation == generation:
            return old
        rows = read(old.last_id if old is not None else -1)
        new_ids, payload = [r[0] for r in rows], [r[1] for r in rows]
        if old is None:
            return load(generation, new_ids, payload)
        return old.refreshed(generation, self._gone(old, generation), new_ids, payload)

    def _gone(self, old: _Refreshable, generation: int) -> NDArray[np.int64]:
        """The chunk ids deleted between ``old``'s generation and ``generation``: those the writes in
        between recorded, when every one of them did; else ``old``'s ids no longer live, read once per
        generation for every cache that needs them (a 100k-chunk namespace: ~30 ms)."""
        between = range(old.generation + 1, generation + 1)
        if between and all(g in self._deleted for g in between):
            return np.asarray([cid for g in between for cid in self._deleted[g]], dtype=np.int64)
        since = old.last_id
        if self._live is None or self._live[:2] != (generation, since):
            ids = self._db.execute(
                "SELECT id FROM chunks WHERE namespace=? AND id <= ?", (self.namespace, since)
            ).fetchall()
            self._live = (generation, since, np.asarray(ids, dtype=np.int64).reshape(-1))
        return np.setdiff1d(old.ids, self._live[2], assume_unique=True)
