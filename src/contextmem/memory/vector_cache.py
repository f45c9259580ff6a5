"""The SQLite index's in-memory vectors: one contiguous float16 matrix per namespace, scanned exactly.

Vector search is an exact scan over the namespace's matrix, top-k by ``argpartition``. The matrix is held
in float16 and scanned by simsimd's half-precision dot-product kernels on every core: the scan streams the
matrix through memory, so half the bytes is half the time (100k x 384: 4.6 ms against 8.5 ms for numpy's
float32 product, and 77 MB of memory instead of 153 MB). The rounding moves a cosine of unit vectors by
under 0.002: two cells of LoCoMo dev retrieval moved (vector R@25 66.8 -> 66.7, its category 5 58.4 ->
58.1), no MADial recall@5. SQLite keeps the float32 vectors. The scan only picks candidates: their scores
come from their rows read back as unit-length float32 (:meth:`VectorCache.rows`).

The matrix is refreshed incrementally when the namespace's ``generation`` moves: chunk ids are never
reused, so new chunks are appended into spare rows and deleted ones masked (an append to today's file at
100k chunks costs ~0.3 s including re-indexing that file, instead of reloading the matrix); masked rows are
compacted away once they are a quarter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ..errors import MissingExtraError
from .embedders import normalise

__all__ = ["VectorCache", "dot_rows"]

_THREADS_FROM = 50_000  # rows; see dot_rows
_DTYPE = np.float16


@dataclass(slots=True)
class VectorCache:
    """Rows ``0..len(ids)`` of ``buffer`` hold chunk ``ids[i]``'s vector; ``dead`` rows were deleted.

    ``buffer`` has spare rows, so an append writes into it without copying the matrix; deleted rows are
    masked (``dead``) and compacted away once they make up a quarter of the rows.
    """

    generation: int
    ids: NDArray[np.int64]  # ascending chunk ids (AUTOINCREMENT: new ids are always larger)
    buffer: NDArray[np.float16]  # C-contiguous, capacity >= len(ids)
    dead: NDArray[np.intp]  # row positions whose chunk no longer exists

    @classmethod
    def load(cls, generation: int, ids: Sequence[int], blobs: Sequence[bytes], dim: int) -> VectorCache:
        """A cache of the vectors ``blobs`` (float32 bytes) of chunks ``ids`` (ascending)."""
        dim = len(blobs[0]) // 4 if blobs else dim
        buffer = np.empty((max(len(blobs) + len(blobs) // 4, 64), dim), dtype=_DTYPE)
        buffer[: len(blobs)] = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dim)
        return cls(generation, np.asarray(ids, dtype=np.int64), buffer, np.zeros(0, dtype=np.intp))

    @property
    def matrix(self) -> NDArray[np.float16]:
        return self.buffer[: self.ids.size]

    def rows(self, positions: NDArray[np.intp]) -> NDArray[np.float32]:
        """The vectors at row ``positions`` as unit-length float32 rows: the few candidates a search scores
        after the scan (renormalised, so the float16 rounding leaves a vector's cosine with itself 1)."""
        return normalise(self.matrix[positions].reshape(-1, self.buffer.shape[1]))

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
            buffer = np.empty((max(total + total // 4, 64), dim), dtype=_DTYPE)
            np.compress(keep, self.matrix, axis=0, out=buffer[:kept])
            buffer[kept:total] = fresh
            return VectorCache(
                generation, np.concatenate([self.ids[keep], added]), buffer, np.zeros(0, np.intp)
            )
        self.buffer[n : n + len(new_ids)] = fresh
        ids = np.concatenate([self.ids, added]) if len(new_ids) else self.ids
        return VectorCache(generation, ids, self.buffer, dead.astype(np.intp))


def dot_rows(matrix: NDArray[np.float16], query: NDArray[np.float32]) -> NDArray[np.float32]:
    """``matrix @ query`` in float32, from simsimd's float16 kernels (the query is rounded to float16).

    Below ``_THREADS_FROM`` rows the scan stays on the calling thread: waking a pool costs more than it
    saves (10k rows: 0.8 ms on one thread); from ~50k rows the second core halves it (100k: 4.6 ms on
    two cores against 8.0 ms on one).
    """
    if not matrix.shape[0]:
        return np.zeros(0, dtype=np.float32)
    try:
        import simsimd
    except ImportError:
        raise MissingExtraError("simsimd", "memory") from None
    threads = 0 if matrix.shape[0] >= _THREADS_FROM else 1  # 0: every core
    sims = simsimd.cdist(query.astype(_DTYPE)[None], matrix, metric="dot", threads=threads)
    return np.asarray(sims, dtype=np.float32).reshape(-1)
