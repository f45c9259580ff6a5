"""The SQLite index's in-memory vectors: one contiguous float32 matrix per namespace, scanned exactly.

Vector search is an exact numpy scan over the namespace's matrix (on this hardware ~10x faster than
sqlite-vec's ``vec0``), top-k by ``argpartition``. The matrix is refreshed incrementally when the
namespace's ``generation`` moves: chunk ids are never reused, so new chunks are appended into spare rows
and deleted ones masked (an append to today's file at 100k chunks costs ~0.3 s including re-indexing
that file, instead of reloading 150 MB); masked rows are compacted away once they are a quarter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["VectorCache", "dot_rows"]

_BLAS_THREADS_FROM = 50_000  # rows; see dot_rows
_BLOCK_ROWS = 256


@dataclass(slots=True)
class VectorCache:
    """Rows ``0..len(ids)`` of ``buffer`` hold chunk ``ids[i]``'s vector; ``dead`` rows were deleted.

    ``buffer`` has spare rows, so an append writes into it without copying the matrix; deleted rows are
    masked (``dead``) and compacted away once they make up a quarter of the rows.
    """

    generation: int
    ids: NDArray[np.int64]  # ascending chunk ids (AUTOINCREMENT: new ids are always larger)
    buffer: NDArray[np.float32]  # C-contiguous, capacity >= len(ids)
    dead: NDArray[np.intp]  # row positions whose chunk no longer exists

    @classmethod
    def load(cls, generation: int, ids: Sequence[int], blobs: Sequence[bytes], dim: int) -> VectorCache:
        """A cache of the vectors ``blobs`` (float32 bytes) of chunks ``ids`` (ascending)."""
        dim = len(blobs[0]) // 4 if blobs else dim
        buffer = np.empty((max(len(blobs) + len(blobs) // 4, 64), dim), dtype=np.float32)
        buffer[: len(blobs)] = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dim)
        return cls(generation, np.asarray(ids, dtype=np.int64), buffer, np.zeros(0, dtype=np.intp))

    @property
    def matrix(self) -> NDArray[np.float32]:
        return self.buffer[: self.ids.size]

    @property
    def last_id(self) -> int:
        """The largest cached chunk id (-1 when empty): newer chunks have larger ids."""
        return int(self.ids[-1]) if self.ids.size else -1

    def scores(self, query: NDArray[np.float32]) -> NDArray[np.float32]:
        """Cosine of every row with ``query`` (rows and query are unit length); masked rows get -inf."""
        sims = dot_rows(self.matrix, query)
        if self.dead.size:
            sims[self.dead] = -np.inf
        return sims

    def rows_of(self, chunk_ids: NDArray[np.int64]) -> tuple[NDArray[np.intp], NDArray[np.bool_]]:
        """Row positions of ``chunk_ids`` and which of them are live rows of this cache."""
        if not self.ids.size:
            return np.zeros(len(chunk_ids), dtype=np.intp), np.zeros(len(chunk_ids), dtype=bool)
        rows = np.minimum(np.searchsorted(self.ids, chunk_ids), self.ids.size - 1)
        found = self.ids[rows] == chunk_ids
        if self.dead.size:
            found &= ~np.isin(rows, self.dead)
        return rows, found

    def refreshed(
        self, generation: int, live: NDArray[np.int64], new_ids: Sequence[int], blobs: Sequence[bytes]
    ) -> VectorCache:
        """This cache after chunks ``new_ids`` (ids above :attr:`last_id`) were added and only ``live``
        of the cached ids are left. Appends in place when there is room (searches hold the index's lock,
        so nobody reads meanwhile); compacts into a new buffer when a quarter of the rows are dead."""
        if not self.ids.size:
            return VectorCache.load(generation, new_ids, blobs, self.buffer.shape[1])
        dead = np.flatnonzero(~np.isin(self.ids, live, assume_unique=True))
        n, dim = self.ids.size, self.buffer.shape[1]
        fresh = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dim)
        added = np.asarray(new_ids, dtype=np.int64)
        if 4 * dead.size > n or n + len(new_ids) > self.buffer.shape[0]:
            keep = np.ones(n, dtype=bool)
            keep[dead] = False
            kept = int(keep.sum())
            total = kept + len(new_ids)
            buffer = np.empty((max(total + total // 4, 64), dim), dtype=np.float32)
            np.compress(keep, self.matrix, axis=0, out=buffer[:kept])
            buffer[kept:total] = fresh
            return VectorCache(
                generation, np.concatenate([self.ids[keep], added]), buffer, np.zeros(0, np.intp)
            )
        self.buffer[n : n + len(new_ids)] = fresh
        ids = np.concatenate([self.ids, added]) if len(new_ids) else self.ids
        return VectorCache(generation, ids, self.buffer, dead.astype(np.intp))


def dot_rows(matrix: NDArray[np.float32], query: NDArray[np.float32]) -> NDArray[np.float32]:
    """``matrix @ query``, single-threaded in small blocks below ``_BLAS_THREADS_FROM`` rows.

    OpenBLAS runs a large matrix-vector product on all cores. On a busy 2-core machine, waking its threads
    cost ~12 ms at 10k rows (13 ms vs 0.6 ms for 256-row blocks, which it runs on the calling thread);
    from ~50k rows the second core pays off again (100k: 21 ms threaded vs 34 ms in blocks).
    """
    rows = matrix.shape[0]
    if rows >= _BLAS_THREADS_FROM:
        out: NDArray[np.float32] = matrix @ query
        return out
    out = np.empty(rows, dtype=np.float32)
    for start in range(0, rows, _BLOCK_ROWS):
        np.dot(matrix[start : start + _BLOCK_ROWS], query, out=out[start : start + _BLOCK_ROWS])
    return out
